"""Each depth recipe on a tiny store: what it draws is the store's data (checked on matplotlib's objects)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from matplotlib.colors import to_rgb

from runner.plugin.recipes import NotDrawable, recipes
from runner.read.figures import figures
from runner.core.layout import internal


@pytest.fixture(scope="module")
def ds(depth_store):
    return xr.open_zarr(depth_store, consolidated=False)


def draw(fig_id: str, ds):
    return recipes("depth")[fig_id].draw(ds)


def of(ds, model):
    return np.flatnonzero(ds["model"].values == model)


def test_fig2a_trajectories_attention_and_deviation(ds):
    fig = draw("fig2a", ds)
    text_models = ["pretrained", "initial"]  # the reservoir has one vector: nothing synchronises
    assert [s._suptitle.get_text() for s in fig.subfigs] == text_models
    for sub, model in zip(fig.subfigs, text_models, strict=True):
        net = str(ds["network"].values[of(ds, model)[0]])
        trace_ax, *maps, dev_ax = [a for s in sub.subfigs for a in s.axes]
        trace = ds["trace"].sel(network=net).isel(trace_sample=0, trace_element=0)
        assert len(trace_ax.lines) == trace.sizes["trace_token"] == 4
        for line, tok in zip(trace_ax.lines, trace["trace_token"].values, strict=True):
            np.testing.assert_array_equal(line.get_ydata(), trace.sel(trace_token=tok).values)
        steps = ds["attention_step"].values
        assert [a.get_title() for a in maps] == [f"t={s}" for s in steps]
        att = ds["attention"].sel(network=net, attention_sample=0).mean("head")
        np.testing.assert_allclose(maps[-1].images[0].get_array(), att.isel(attention_step=-1).values)
        np.testing.assert_array_equal(dev_ax.lines[0].get_ydata(), ds["deviation"].sel(network=net, sample=0).values)
        assert dev_ax.lines[1].get_ydata()[0] == ds["deviation"].attrs["threshold"]


def test_fig2b_boxes_are_the_offsets_of_each_model(ds):
    ax = draw("fig2b", ds).axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    labels = [t.split(" (")[0] for t in texts]
    # the one-token reservoir is left out, and the figure says so; the median and mean marks are in the
    # legend; a model none of whose samples synchronised (here the initial network, in 80 steps) has no box,
    # so no legend entry ("initial (n=0, ...)" was one): a note names it instead
    synced = [m for m in ("pretrained", "initial") if np.isfinite(ds["sync_offset"].values[of(ds, m)]).any()]
    assert synced == ["pretrained"], "the tiny store no longer has a model that never synchronised"
    assert labels == [*synced, "median", "mean"]
    assert not any("n=0" in t for t in texts), texts
    assert [t.get_text() for t in ax.texts if t.get_gid() == "never_synchronised"] == \
        ["no sample synchronised: initial (16 never)"]
    labels = labels[:len(synced)]
    marks = ax.get_legend().legend_handles[len(synced):]
    boxes = [p.get_facecolor()[:3] for p in ax.patches]
    for line in [line for line in ax.lines if str(line.get_gid()).startswith(("median:", "mean:"))] + marks:
        # drawn in black and white: no model's colour (the median took the second model's, the mean the third's)
        assert {tuple(to_rgb(c)) for c in (line.get_color(), line.get_markerfacecolor(), line.get_markeredgecolor())
                if c != "none"} <= {(0.0, 0.0, 0.0), (1.0, 1.0, 1.0)}, line.get_gid()
    assert len(boxes) >= 2
    assert [t.get_text() for t in ax.texts if t.get_gid() == "not_applicable"] == \
        ["not applicable (one token per sample): reservoir"]
    lines = {line.get_gid(): line for line in ax.lines}
    for model in labels:
        off = ds["sync_offset"].values[of(ds, model)].ravel()
        kept = off[np.isfinite(off)]
        if kept.size:
            assert lines[f"median:{model}"].get_ydata()[0] == np.median(kept)
            assert lines[f"mean:{model}"].get_ydata()[0] == pytest.approx(kept.mean())


def test_fig2c_mean_over_replicates_and_samples_with_a_band(ds):
    top, bottom = draw("fig2c", ds).axes
    # n: what the band is over: one network's 8 samples, or (only "initial" has two) the networks, each
    # averaged over its samples first (samples of one network are no replicates of the model); a band
    # over fewer than 5 is their range
    assert [line.get_label() for line in top.lines if not line.get_label().startswith("_")] == \
        ["pretrained (n=8)", "initial (n=2 networks, band: range)", "reservoir (n=8)"]
    assert [t.get_text() for t in bottom.get_legend().get_texts()] == \
        ["pretrained (n=1)", "initial (n=2, band: range)", "reservoir (n=1)"]
    assert "band: 95% bootstrap CI" in top.get_legend().get_title().get_text()
    for line, model in zip(top.lines, ["pretrained", "initial", "reservoir"], strict=False):
        lam = ds["lyapunov_per_step"].values[of(ds, model)].astype(np.float64)
        lam[~np.isfinite(lam)] = np.nan
        # the mean of equal-sized networks' means is the pooled mean (to float32 rounding)
        np.testing.assert_allclose(line.get_ydata(), np.nanmean(lam.reshape(-1, lam.shape[-1]), axis=0), rtol=1e-6)
    assert len(top.collections) == 3  # every model has several samples: each gets its band
    neff = ds["effective_dimension"].values[of(ds, "initial")]
    np.testing.assert_allclose(bottom.lines[1].get_ydata(), neff.mean(axis=0))
    assert len(bottom.collections) == 1  # only "initial" has replicates to resample


def test_fig4b_fig4c_fig4d(ds):
    fig = draw("fig4b", ds)
    net = str(ds["network"].values[0])
    x = ds["trace"].sel(network=net).isel(trace_sample=0, trace_token=0, trace_element=0).values
    np.testing.assert_array_equal(fig.axes[3].lines[0].get_ydata(), x)  # row 2 (whole run), first column
    lam = ds["lyapunov_per_step"].sel(network=net, sample=0).values
    np.testing.assert_array_equal(fig.axes[6].lines[0].get_ydata(), lam)

    fig = draw("fig4c", ds)
    p = ds["pca_projection"].sel(network=net).isel(pca_sample=0)
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_xdata(), p.isel(component=0).values)
    assert len(fig.axes[0].lines[0].get_xdata()) == ds.sizes["pca_step"]

    ax = draw("fig4d", ds).axes[0]
    bars = {c.get_label(): sum(r.get_height() for r in c) for c in ax.containers}
    # the models' bars side by side, opaque: no two overlap to mix their colours (translucent ones did)
    spans = [(c.get_label().split(" (")[0].split(":")[0], r.get_x(), r.get_x() + r.get_width())
             for c in ax.containers for r in c if r.get_height() > 0]
    assert all(a[0] == b[0] or a[2] <= b[1] + 1e-9 or b[2] <= a[1] + 1e-9 for a in spans for b in spans)
    assert all(p.get_alpha() in (None, 1.0) for p in ax.patches)
    for model in ["pretrained", "initial", "reservoir"]:
        length = ds["chaos_length"].values[of(ds, model)].ravel()
        censored = ds["chaos_censored"].values[of(ds, model)].ravel().astype(bool)
        ok = np.isfinite(length)
        plain = next(v for k, v in bars.items() if k.startswith(f"{model} ("))
        assert plain == np.sum(ok & ~censored)
        assert bars.get(f"{model}: censored (lower bounds)", 0) == np.sum(ok & censored)
        label = next(k for k in bars if k.startswith(f"{model} ({int(np.sum(ok & (length == 0)))} never chaotic; orbits: "))
        counts = [int(part.split()[0]) for part in label.split("orbits: ")[1].rstrip(")").split(", ")]
        assert sum(counts) == length.size  # every sample's orbit class, beside the sign criterion


def test_figures_writes_files_and_manifest(ds, depth_store, tmp_path):
    drawn = figures(depth_store, out=tmp_path)
    manifest = __import__("json").loads((tmp_path / "figures.json").read_text())
    assert manifest["study"] == "depth" and manifest["spec_sha256"] == internal(ds.attrs)["spec_sha256"]
    assert {d.id for d in drawn if d.status == "drawn"} == {"fig2a", "fig2b", "fig2c", "fig4b", "fig4c", "fig4d"}
    for d in (d for d in manifest["figures"] if d["status"] == "drawn"):
        assert d["reads"] and all((tmp_path / f).stat().st_size > 0 for f in d["files"])
        assert {f.rsplit(".", 1)[1] for f in d["files"]} == {"png", "svg"}


def test_a_store_without_a_measure_skips_its_figures_and_says_why(ds, tmp_path):
    drawn = {d.id: d for d in figures(ds.drop_vars(["trace", "pca_projection"]), out=tmp_path)}
    assert drawn["fig2a"].status == "skipped" and "trace" in drawn["fig2a"].reason
    assert drawn["fig4c"].status == "skipped" and "add the measure" in drawn["fig4c"].reason
    assert drawn["fig2c"].status == "drawn"


def test_an_empty_partial_store_is_not_drawable(ds):
    empty = ds.copy()
    empty["trace"] = ds["trace"] * np.nan
    with pytest.raises(NotDrawable, match="no trajectory"):
        draw("fig2a", empty)


def test_only_and_unknown_ids(depth_store, tmp_path):
    assert [d.id for d in figures(depth_store, out=tmp_path, only=["fig2b"])] == ["fig2b"]
    with pytest.raises(KeyError, match="fig9z"):
        figures(depth_store, out=tmp_path, only=["fig9z"])


def test_fig2b_from_a_sweep_over_the_number_of_tokens(swept_store, tmp_path):
    from runner.spec.sweep import open_sweep

    ds = open_sweep(swept_store)
    ax = draw("fig2b", ds).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "8"] and ax.get_xlabel() == "$N_w$"
    lines = {line.get_gid(): line for line in ax.lines if line.get_gid()}
    checked = 0
    for model in ("pretrained", "initial"):
        for n in (4, 8):
            point = xr.open_zarr(swept_store / f"tokens={n}", consolidated=False)
            off = point["sync_offset"].sel(network=model).values
            if (off >= 0).any():
                assert lines[f"median:{model}@{n}"].get_ydata()[0] == np.median(off[off >= 0])
                checked += 1
    assert checked >= 2, "too few networks synchronised to check the boxes"
    drawn = {d.id: d.status for d in figures(swept_store, out=tmp_path)}
    assert drawn["fig2b"] == "drawn"
    assert {k for k in drawn if k.startswith("fig2c")} == {"fig2c@tokens=4", "fig2c@tokens=8"}  # per point
