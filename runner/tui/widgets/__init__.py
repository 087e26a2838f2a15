"""The monitor's widgets, one per module."""

from runner.tui.widgets.curve_plot import CurvePlot
from runner.tui.widgets.run_header import RunHeader
from runner.tui.widgets.store_details import StoreDetails
from runner.tui.widgets.summary_plot import SummaryPlot
from runner.tui.widgets.task_detail import TaskDetail
from runner.tui.widgets.task_table import TaskTable

__all__ = ["CurvePlot", "RunHeader", "StoreDetails", "SummaryPlot", "TaskDetail", "TaskTable"]
