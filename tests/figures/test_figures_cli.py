"""``runner figures`` through the real CLI: on a run in progress, without a store, with a bad id."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from tests.runner.helpers import maps_spec, popen_cli, run_cli, wait_for, write_spec


def test_a_run_in_progress_is_drawn_as_far_as_it_got(tmp_path):
    spec = write_spec(tmp_path, maps_spec("partial", steps=2000, samples=16, checkpoint_every=100))
    proc = popen_cli("apply", spec, cwd=tmp_path, RUNNER_TEST_STALL="tanh@1050")  # logistic done, tanh at 1000
    try:
        wait_for(lambda: (tmp_path / "store/partial.runner/stalled").exists(), proc)
        out = run_cli("figures", spec, cwd=tmp_path)
    finally:
        proc.kill()
        proc.communicate()
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "store/partial.figures"
    manifest = json.loads((folder / "figures.json").read_text())
    status = {f["id"]: f for f in manifest["figures"]}
    assert status["fig2c"]["status"] == "drawn" and (folder / "fig2c.png").stat().st_size > 0
    assert status["fig2a"]["status"] == "skipped" and "trace" in status["fig2a"]["reason"]
    assert "figure(s) in store/partial.figures" in out.stdout and "fig2a" in out.stdout

    from runner.plugin.recipes import recipes

    ds = xr.open_zarr(tmp_path / "store/partial.zarr", consolidated=False)
    top = recipes("depth")["fig2c"].draw(ds).axes[0]
    logistic, tanh = (line.get_ydata() for line in top.lines[:2])
    steps = top.lines[1].get_xdata()
    assert np.isfinite(logistic).all()
    assert np.isfinite(tanh[steps < 1000]).all() and np.isnan(tanh[steps >= 1000]).all()


def test_without_a_store_or_with_an_unknown_figure(tmp_path):
    spec = write_spec(tmp_path, maps_spec("small", steps=20, samples=4))
    missing = run_cli("figures", spec, cwd=tmp_path)
    assert missing.returncode == 66 and "no such store" in missing.stderr and "Traceback" not in missing.stderr
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    bad = run_cli("figures", spec, "--only", "fig9z", cwd=tmp_path)
    assert bad.returncode == 2 and "fig9z" in bad.stderr and "fig2c" in bad.stderr
    out = run_cli("figures", spec, "--only", "fig2c", "--out", tmp_path / "figs", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == ["fig2c.png", "fig2c.svg", "figures.json"]


def test_figures_of_unchanged_results_are_not_drawn_again(tmp_path):
    """A second `make demo` says there is nothing to do instead of redrawing (issue 37); new results,
    or --force, draw them again."""
    spec = write_spec(tmp_path, maps_spec("again", steps=60, samples=4))
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    first = run_cli("figures", spec, cwd=tmp_path)
    assert first.returncode == 0 and "figure(s) in" in first.stdout, first.stderr
    assert "not in this spec's measures:" in first.stdout  # the paper's figures of measures it lacks, in one line
    png = tmp_path / "store/again.figures/fig2c.png"
    drawn_at = png.stat().st_mtime_ns
    again = run_cli("figures", spec, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("nothing to do:"), again.stdout
    assert png.stat().st_mtime_ns == drawn_at
    assert json.loads(run_cli("figures", spec, "--json", cwd=tmp_path).stdout)["up_to_date"] is True
    forced = run_cli("figures", spec, "--force", cwd=tmp_path)
    assert forced.returncode == 0 and "figure(s) in" in forced.stdout and png.stat().st_mtime_ns != drawn_at
    changed = run_cli("apply", spec, "--set", "dynamics.steps=80", "--replace", cwd=tmp_path)
    assert changed.returncode == 0, changed.stderr
    assert "figure(s) in" in run_cli("figures", spec, cwd=tmp_path).stdout  # new results: drawn again


def test_figures_are_never_written_into_a_store_or_its_kept_folders(tmp_path, in_process):
    """--out into the store, a folder inside it, another store, its .runner or .history: refused (74),
    nothing written there."""
    spec = write_spec(tmp_path, maps_spec("kept", steps=20, samples=4))
    other = write_spec(tmp_path, maps_spec("other", steps=20, samples=4), "other.toml")
    assert in_process("apply", "-q", spec)[0] == 0 and in_process("apply", "-q", other)[0] == 0
    store = tmp_path / "store/kept.zarr"
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for out, said in ((store, "is a zarr store"), (store / "figs", "is inside the zarr store"),
                      (tmp_path / "store/other.zarr", "is a zarr store"),
                      (tmp_path / "store/kept.runner", "where the runner keeps kept.zarr's run state"),
                      (tmp_path / "store/kept.runner/figs", "is inside"),
                      (tmp_path / "store/kept.history", "where the runner keeps kept.zarr's earlier versions")):
        code, _, err = in_process("figures", spec, "--out", out)
        assert code == 74 and said in err and "Traceback" not in err, (out, err)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
