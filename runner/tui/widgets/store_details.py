"""The store: dimensions, variables with their labels, and the provenance a run records."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from runner.tui.reader import StoreData, provenance


def details_text(data: StoreData | None, path: str) -> Text:
    if data is None:
        return Text(f"{path}: no store yet (zarr.json missing)", "dim")
    t = Text()
    t.append("store ", "dim")
    t.append(data.path + "\n", "bold")
    t.append("dimensions\n", "bold underline")
    t.append("  " + ", ".join(f"{k}={v}" for k, v in data.dims.items()) + "\n")
    t.append("variables\n", "bold underline")
    for name, dims, dtype, long_name, units in data.variables:
        t.append(f"  {name:<23}", "bold")
        t.append(f" {long_name}" + (f" [{units}]" if units else "") + "\n")
        t.append(f"  {'':<23} ({', '.join(dims)}) {dtype}\n", "dim")
    p = provenance(data.attrs)
    t.append("provenance\n", "bold underline")
    t.append(f"  device   {p['device']}\n  git      {p['git']}\n  updated  {p['updated']}\n"
             f"  spec     sha256 {str(p['spec_sha256'])[:16]}\n")
    t.append("  versions " + ", ".join(f"{k} {v}" for k, v in p["versions"].items()) + "\n")
    t.append("spec\n", "bold underline")
    for line in str(p["spec"]).splitlines():
        t.append("  " + line + "\n", "italic" if line.lstrip().startswith("#") else "")
    return t


class StoreDetails(VerticalScroll):
    def compose(self):
        yield Static(Text("reading the store…", "dim"), id="details-text")

    def show(self, data: StoreData | None, path: str) -> None:
        self.query_one("#details-text", Static).update(details_text(data, path))
