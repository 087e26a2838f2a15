"""The Lyapunov spectrum's figure (issue 54): no paper figure of the depth study; the spectrum by
Benettin's method (Benettin et al., Meccanica 15 (1980)) as Engelken, Wolf & Abbott (Phys. Rev.
Research 5, 043044 (2023), Fig. 1) draw a random network's, and the Kaplan-Yorke dimension over time
beside N_eff(t) (Inoue et al. 2021, Eq. 6)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from runner.plugin.plotting import mean_band, mean_legend, new_figure
from runner.plugin.recipes import NotDrawable, recipe

STUDY = "depth"


@recipe(study=STUDY, id="spectrum", reproduces="beyond the papers: Benettin et al. 1980; Kaplan & Yorke 1979",
        needs=("lyapunov_spectrum", "kaplan_yorke_running"), title="Lyapunov spectrum and Kaplan-Yorke dimension")
def spectrum(ds: xr.Dataset) -> Figure:
    """Left: per network, lambda_i per step against i, the mean over the measured samples with +-1 s.d.
    (bars). Right: the Kaplan-Yorke dimension of the running spectrum against t (mean over samples, 95%
    band), and N_eff(t) on the same axis where the store has it (dashed)."""
    lam = ds["lyapunov_spectrum"]
    if not np.isfinite(lam.values).any():
        raise NotDrawable("no Lyapunov spectrum has been computed yet")
    fig = new_figure(9.6, 4.0)
    left, right = fig.subplots(1, 2)
    i = ds["exponent"].values
    space = {int(c): m for c, m in zip(ds["lyapunov_spectrum_space"].attrs.get("flag_values", []),
                                       str(ds["lyapunov_spectrum_space"].attrs.get("flag_meanings", "")).split())}
    for n, net in enumerate(ds["network"].values):
        values = lam.isel(network=n).values
        finite = np.isfinite(values).any(1)
        if not finite.any():
            continue
        kept = values[finite]
        where = space.get(int(np.nan_to_num(ds["lyapunov_spectrum_space"].values[n], nan=-1)), "")
        left.errorbar(i, np.nanmean(kept, 0), yerr=np.nanstd(kept, 0), marker="o", capsize=2,
                      label=f"{net} ({where}, n={int(finite.sum())})")
        dky = ds["kaplan_yorke_running"].isel(network=[n])
        if np.isfinite(dky.values).any():
            bound = "kaplan_yorke_bound" in ds and bool((ds["kaplan_yorke_bound"].isel(network=n) == 1).any())
            said = f" (some >= {lam.sizes['exponent']}: lower bound)" if bound else ""
            line = mean_band(right, dky, ("network", "sample"), "spectrum_step", label=f"{net} D_KY{said}")
            color = right.lines[-1].get_color() if line else None
            if "effective_dimension" in ds:
                right.plot(ds["neff_step"].values, ds["effective_dimension"].isel(network=n).values, linestyle="--",
                           color=color, label=f"{net} N_eff")
    left.axhline(0, color="grey", linewidth=0.5)
    left.set(xlabel="exponent index i", ylabel=r"$\lambda_i$ per step", xticks=i)
    left.legend(fontsize="small", title="mean ± s.d. over samples", title_fontsize="small")
    right.set(xlabel="t", ylabel=r"$D_\mathrm{KY}$ (solid), $N_\mathrm{eff}(t)$ (dashed)")
    mean_legend(right, "samples")
    return fig
