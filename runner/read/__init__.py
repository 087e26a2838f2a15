"""Reading what a run wrote: status, figures and their fallback plots, plotting helpers, the tracker export."""
