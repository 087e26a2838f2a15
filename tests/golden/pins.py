"""Golden pins of what the runner plans and stores, taken before the engine was restructured.

- plans (``plans.json``): for every shipped spec, ``runner plan --json`` offline: each task's id,
  kind, measure, network and dependencies, and the unmet requirements.
  ``python -m tests.golden.pins --plans NAME...`` pins the plans of new or deliberately changed specs.
- values: small real runs (``quickstart``, ``reference_maps``, the tiny LSTM study, which has
  every training measure kind) through ``runner apply`` with one thread, checked in two tiers
  from one apply per run:

  1. the tolerance tier (``tolerant.json``), on every machine: per variable and coordinate its
     dims, shape and dtype, and by its tier (``tier``): *exact* (integers, strings, booleans:
     the values, or a SHA-256 over 64 elements); *close* (non-chaotic floats: the NaN/Inf pattern
     exactly, and mean, sd, min, max, 5/25/50/75/95% quantiles, 16 sampled elements and each
     network's mean within ``RELATIVE`` = 1e-3 of the variable's largest magnitude); *statistical*
     (``CHAOTIC``: what chaos amplifies, per network its mean and spread within ``SPREAD_SD``
     standard deviations of the variable, and its NaN, Inf and flag fractions within
     ``FRACTION``). A failure names the variable, what moved, by how much and the tolerance.
     The tolerances are set from ``--sensitivity`` (this machine's runs under MKL's compatible
     code path, ATen's, MKL's and oneDNN's AVX2 kernels, 2 threads) with a margin; the comments
     at each say what was measured.
  2. the bitwise tier (``values.json``), where a pin names this machine exactly: a SHA-256 per
     variable. Floating-point bits depend on the machine (BLAS and MKL pick kernels by CPU model,
     and a chaotic run amplifies the last bit), so each pin names the fingerprint (Python, torch
     build, CPU capability, machine, CPU model) it was taken on and matches only that one; elsewhere
     the bitwise tier skips, saying so, and the tolerance tier still checks every variable.

Taking pins (``python -m tests.golden.pins ...``, a few minutes):

- ``--values``: add this machine's bitwise pin. Take it from a commit whose values the tolerance
  tier (and, where one exists, another pin) verified, then check the newer commit against it. It
  refuses, naming what differs, where this machine's pin exists with other values (``--replace``
  replaces it), and drops pins that name no CPU model (no machine matches them).
- ``--retake``: re-take the tolerance tier and this machine's bitwise pin from one set of runs,
  and drop from other machines' pins the variables whose bits changed here. Allowed only for a
  deliberate change of stored values (a new measure, a fixed bug, a rewritten classifier: say
  which variables and why in the commit, and bump ``store_format`` where the layout changed),
  never to make a failing test pass: first read the failure's variable and amount, and a
  restructure must change neither tier.
- ``--tolerant``: re-take the tolerance tier only (after a tolerance or ``CHAOTIC`` changed).
- no arguments: all the plans and ``--retake``.
- ``--sensitivity``: how far the values move under other kernel paths of this machine, per tier as
  a fraction of its tolerance (changes nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RUNS = {"quickstart": "specs/quickstart.toml", "reference_maps": "specs/reference_maps.toml",
        "lstm_tiny": "specs/tiny/lstm_tiny.toml"}


def shipped_specs() -> list[Path]:
    return sorted(ROOT.glob("specs/**/*.toml"))


def env(cache: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "RUNNER_TEST_STALL"}
    e.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
             TRANSIENT_CACHE=str(cache), PYTHONPATH=str(ROOT))
    return e


def fingerprint() -> dict[str, str]:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
            "cpu_model": cpu_model()}


def cpu_model() -> str:
    """Vendor, family and model of this CPU (``GenuineIntel 6/207``): what BLAS chooses its kernels by."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or "unknown"
    return f"{fields.get('vendor_id', '?')} {fields.get('cpu family', '?')}/{fields.get('model', '?')}"


def pin_for(pins: list[dict], here: dict[str, str]) -> dict | None:
    """The pin taken on this machine: its fingerprint is this one, every key (Python, torch build,
    CPU capability, machine and CPU model); a pin that names fewer keys matches no machine."""
    return next((p for p in pins if p["fingerprint"] == here), None)


def runner(*args: str, cwd: Path, cache: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    from tests.runner import launcher

    return launcher.run(args, cwd=cwd, env={**env(cache), **(extra_env or {})}, timeout=1800)


def plan_of(spec: Path, work: Path) -> dict:
    result = runner("plan", str(spec), "--json", cwd=work, cache=work / "cache")
    assert result.returncode == 0, result.stderr
    return summarise(json.loads(result.stdout))


def summarise(plan: dict) -> dict:
    """What is pinned of a ``plan --json``: each task's id, kind, measure, network and dependencies."""
    keys = ("id", "kind", "measure", "network", "deps")
    if "points" in plan:  # a sweep: the tasks of each point
        return {"points": {p["name"]: _listed([{k: t.get(k) for k in keys} for t in p["tasks"]]) for p in plan["points"]},
                "unmet": len(plan["unmet"])}
    return {"tasks": _listed([{k: t.get(k) for k in keys} for t in plan["tasks"]]), "unmet": len(plan["unmet"])}


#: Plans with more tasks are pinned by their count and a SHA-256 of the list (plans.json stays small).
LISTED = 300


def _listed(tasks: list[dict]) -> list[dict] | dict:
    if len(tasks) <= LISTED:
        return tasks
    return {"count": len(tasks), "sha256": hashlib.sha256(json.dumps(tasks, sort_keys=True).encode()).hexdigest()}


def digest(values: np.ndarray) -> str:
    if values.dtype == object or values.dtype.kind in "UT":
        data = "\x00".join(map(str, values.ravel())).encode()
    else:
        data = np.ascontiguousarray(values).tobytes()
    return hashlib.sha256(data).hexdigest()


def load(store: Path):
    """The stored run in memory, without the run's absolute location (``checkpoint_path``)."""
    import xarray as xr

    ds = xr.open_zarr(store, consolidated=False).load()
    return ds.drop_vars([n for n in ("checkpoint_path",) if n in ds.variables])


def _variables(ds) -> dict:
    return {str(name): var for name, var in {**ds.coords, **ds.data_vars}.items()}


def values_of(ds) -> dict:
    """The bitwise tier of a loaded run: per variable its dims, shape, dtype and a SHA-256 of its bits."""
    return {name: {"dims": list(var.dims), "shape": list(var.shape), "dtype": str(var.dtype),
                   "sha256": digest(var.values)} for name, var in _variables(ds).items()}


def comparable_dtype(dtype: str) -> str:
    """Strings compare as ``str``: zarr reads them back as ``object``, ``<U..`` or ``StringDType()``."""
    return "str" if dtype in ("object", "StringDType()") or dtype.startswith("<U") else dtype


# ---------------------------------------------------------------------------------------------
# The tolerance tier (tolerant.json): checked on every machine.

#: Variables whose values chaos amplifies: one last bit of difference (another BLAS kernel, MKL's
#: code path, a thread count) grows exponentially along a chaotic trajectory, so these are compared
#: by their sample statistics (per network: mean, spread, NaN/Inf fractions, each flag value's
#: fraction), never element by element. Measured (``--sensitivity``: this machine's runs under
#: ``MKL_CBWR=COMPATIBLE``): quickstart's lambda(t) moved by 0.51 of its largest magnitude, its
#: trace by 0.19, the closest return by 0.18, N_eff by 1e-2, and 2.7% of the chaos flags flipped.
CHAOTIC = {
    # every quantity of the depth dynamics: each is read off the trajectory x_t of a network that is
    # chaotic for some samples (the initial ALBERTs, the g = 1.5 reservoir, the logistic, Henon, g = 2
    # tanh and Lorenz-96 maps), at late steps or through a threshold or a sign along it
    "quickstart": {"lyapunov", "lyapunov_per_step",                       # lambda(t) itself
                   "chaos_length", "chaos_mean_exponent", "chaos_censored", "chaos_outcome",
                   "mean_chaotic_exponent", "fraction_never_chaotic",   # the sign of lambda(t)
                   "deviation", "diverged_step", "sync_offset", "sync_outcome",  # twin distances D(t)
                   "orbit_class", "orbit_period", "orbit_closest_return",  # recurrence at the end
                   "trace", "pca_projection", "pca_explained_variance",  # the trajectory itself
                   "effective_dimension", "attention"},                  # and what is read off it
    "reference_maps": {"lyapunov", "lyapunov_per_step", "chaos_length", "chaos_mean_exponent",
                       "chaos_censored", "chaos_outcome", "mean_chaotic_exponent",
                       "fraction_never_chaotic", "diverged_step", "effective_dimension"},
    # the taggers train at lr = 20: a last-bit difference in one step grows over the epochs (measured:
    # tagger_upos' last validation loss 0.41 under one kernel path, 1.35 under another), and so does
    # everything compared with a tagger; the diagnostic probes' rho moved by 7% of its scale under a
    # perturbation that moved no language-model value by more than 4e-6
    "lstm_tiny": {"train_loss", "epoch_train_loss", "val_loss", "val_perplexity",
                  "cka_tagger", "pwcca_tagger", "svcca_tagger", "rho_input", "rho_target"},
}

#: Non-chaotic float variables: every stored statistic and sampled element within this change,
#: relative to the variable's largest magnitude (|got - pinned| / max |pinned|). Measured: at most
#: 4e-6 (pwcca_seed) under AVX2 kernels, MKL_CBWR=COMPATIBLE or 2 threads (``--sensitivity``); the margin
#: allows for other CPUs' kernels, and any change of what is computed moves a value by far more.
RELATIVE = 1e-3
#: Chaotic variables: each network's mean and its spread (standard deviation) may move by this
#: many standard deviations of the whole variable (pooled over networks), per run. For 64
#: decorrelated samples the difference of two means has a standard error of sqrt(2)/8 = 0.18 sd at
#: most, so 0.5 is 2.8 standard errors in the worst case; measured: at most 0.04 sd (quickstart's
#: closest return under MKL_CBWR=COMPATIBLE, which decorrelated the chaotic trajectories). The tiny
#: LSTM study's chaotic values are few (3 epochs, 8 checkpoints) and bimodal (a tagger's run
#: converges or not): measured at most 0.28 sd (tagger_upos' validation loss), so 1 sd.
SPREAD_SD = {"quickstart": 0.5, "reference_maps": 0.5, "lstm_tiny": 1.0}
#: Chaotic variables: each network's fraction of NaN, of Inf and of every flag value may move by
#: this much (16 of 64 samples; measured: at most 4 of 64 flags flipped in one network, 0.0625).
FRACTION = 0.25
#: Floats are stored with this many significant digits (enough for RELATIVE).
DIGITS = 8
#: Sampled elements per close variable (evenly spaced over the flattened array).
SAMPLED = 16
#: Exact variables with at most this many elements are stored whole (else a SHA-256).
LISTED_VALUES = 64


def tolerances() -> dict:
    return {"relative": RELATIVE, "statistical_sd": SPREAD_SD, "fraction": FRACTION}


def _round(x) -> float | None:
    x = float(x)
    if not np.isfinite(x):
        return None if np.isnan(x) else x
    return float(f"{x:.{DIGITS}g}")


def tier(run: str, name: str, var) -> str:
    if name in CHAOTIC.get(run, ()):
        return "statistical"
    return "close" if var.dtype.kind in "fc" else "exact"


def _groups(var) -> dict[str, np.ndarray]:
    """The values per network (``network`` is each run's ensemble axis), or all of them."""
    if "network" in var.dims:
        return {str(label): np.asarray(var.isel(network=i).values).ravel()
                for i, label in enumerate(var["network"].values)}
    return {"all": np.asarray(var.values).ravel()}


def _flag_names(var) -> dict:
    if var.dtype == bool:
        return {False: "false", True: "true"}
    raw = var.attrs["flag_values"]
    values = json.loads(raw) if isinstance(raw, str) else list(np.ravel(raw))
    names = str(var.attrs.get("flag_meanings", "")).split()
    return {float(v): (names[i] if i < len(names) else str(v)) for i, v in enumerate(values)}


def _is_flag(var) -> bool:
    return var.dtype == bool or "flag_values" in var.attrs


def _fractions(x: np.ndarray) -> dict:
    if x.dtype.kind not in "fc" or not x.size:
        return {}
    return {k: _round(f(x).mean()) for k, f in (("nan", np.isnan), ("inf", np.isinf)) if f(x).any()}


def _statistical(var) -> dict:
    values = np.asarray(var.values)
    finite = values[np.isfinite(values)] if values.dtype.kind in "fc" else values.astype(float)
    out = {"unit": _round(finite.std()) if finite.size else None, "groups": {}}
    for label, x in _groups(var).items():
        group = {"n": int(x.size), **_fractions(x)}
        if _is_flag(var):
            names = _flag_names(var)
            group["flags"] = {name: _round((x == v).mean()) for v, name in names.items() if (x == v).any()}
        else:
            f = x[np.isfinite(x)] if x.dtype.kind in "fc" else x.astype(float)
            group.update(mean=_round(f.mean()) if f.size else None, spread=_round(f.std()) if f.size else None)
        out["groups"][label] = group
    return out


def _close(var) -> dict:
    x = np.asarray(var.values)
    flat = x.ravel()
    finite = np.isfinite(flat)
    code = np.where(np.isnan(flat), 1, np.where(np.isposinf(flat), 2, np.where(np.isneginf(flat), 3, 0)))
    f = flat[finite].astype(float)
    stats = {}
    if f.size:
        q = np.quantile(f, [0.05, 0.25, 0.5, 0.75, 0.95])
        stats = {"mean": f.mean(), "sd": f.std(), "min": f.min(), "max": f.max(),
                 **{f"q{int(round(p * 100)):02d}": v for p, v in zip((0.05, 0.25, 0.5, 0.75, 0.95), q)}}
    index = np.flatnonzero(finite)
    picked = index[np.unique(np.linspace(0, index.size - 1, min(SAMPLED, index.size)).round().astype(int))] \
        if index.size else []
    out = {"scale": _round(np.abs(f).max()) if f.size else None,
           "stats": {k: _round(v) for k, v in stats.items()},
           "sampled": {str(int(i)): _round(flat[i]) for i in picked},
           "nonfinite": {"nan": int((code == 1).sum()), "inf": int((code == 2).sum()), "-inf": int((code == 3).sum()),
                         "sha256": hashlib.sha256(np.packbits(code.astype(np.uint8) & 1).tobytes()
                                                  + np.packbits(code.astype(np.uint8) >> 1).tobytes()).hexdigest()}}
    if "network" in var.dims and var.ndim > 1:
        out["by_network"] = {}
        for label, g in _groups(var).items():
            g = g[np.isfinite(g)]
            out["by_network"][label] = _round(g.mean()) if g.size else None
    return out


def _exact(var) -> dict:
    x = np.asarray(var.values)
    if x.size <= LISTED_VALUES:
        listed = [str(v) if x.dtype == object or x.dtype.kind in "UT" else v.item() for v in x.ravel()]
        return {"values": listed}
    return {"sha256": digest(x)}


def tolerant_of(run: str, ds) -> dict:
    """The tolerance tier of a loaded run: per variable its dims, shape, dtype, tier and summary."""
    out = {}
    for name, var in _variables(ds).items():
        t = tier(run, name, var)
        summary = {"statistical": _statistical, "close": _close, "exact": _exact}[t](var)
        if t == "statistical":
            summary["tolerance_sd"] = SPREAD_SD[run]
        out[name] = {"dims": list(var.dims), "shape": list(var.shape), "dtype": comparable_dtype(str(var.dtype)),
                     "tier": t, **summary}
    return out


def _change(got, pinned, unit: float) -> float:
    if got is None or pinned is None:
        return 0.0 if got is None and pinned is None else float("inf")
    if got == pinned:
        return 0.0
    return abs(got - pinned) / unit


def _compare_close(g: dict, p: dict) -> list[str]:
    out = []
    if g["nonfinite"] != p["nonfinite"]:
        counts = lambda d: ", ".join(f"{d[k]} {k}" for k in ("nan", "inf", "-inf"))  # noqa: E731
        out.append(f"NaN/Inf pattern changed: {counts(g['nonfinite'])} (pinned {counts(p['nonfinite'])})")
    unit = p["scale"] or 1.0  # relative to the variable's largest magnitude (absolute where it is all 0)
    pairs = [(f"its {k}", g["stats"].get(k), v) for k, v in p["stats"].items()]
    pairs += [(f"element {i}", g["sampled"].get(i), v) for i, v in p["sampled"].items()]
    pairs += [(f"the mean of network {k}", g.get("by_network", {}).get(k), v)
              for k, v in p.get("by_network", {}).items()]
    if set(g["sampled"]) != set(p["sampled"]) or set(g.get("by_network", {})) != set(p.get("by_network", {})):
        out.append("its finite elements or networks moved")
    if pairs:
        change, where, gv, pv = max(((_change(gv, pv, unit), where, gv, pv) for where, gv, pv in pairs),
                                    key=lambda t: t[0])
        if change > RELATIVE:
            out.append(f"max relative change {change:.3g} (tolerance {RELATIVE:g}) at {where}: {gv} (pinned {pv})")
    return out


def _compare_statistical(g: dict, p: dict) -> list[str]:
    out = []
    unit = p["unit"] or 1.0  # the variable's pooled standard deviation (absolute where it is constant)
    if set(g["groups"]) != set(p["groups"]):
        return [f"networks {sorted(g['groups'])} (pinned {sorted(p['groups'])})"]
    for label, pg in p["groups"].items():
        gg = g["groups"][label]
        who = f"network {label}" if label != "all" else "all"
        tol = p["tolerance_sd"]
        for key in ("mean", "spread"):
            if key in pg and (c := _change(gg.get(key), pg[key], unit)) > tol:
                out.append(f"{who}: {key} moved {c:.3g} sd (tolerance {tol:g} sd): {gg.get(key)} (pinned {pg[key]})")
        fractions = {**{f"{k} fraction": v for k, v in pg.get("flags", {}).items()},
                     **{f"{k} fraction": pg.get(k, 0.0) for k in ("nan", "inf")}}
        got = {**{f"{k} fraction": v for k, v in gg.get("flags", {}).items()},
               **{f"{k} fraction": gg.get(k, 0.0) for k in ("nan", "inf")}}
        for key in sorted(set(fractions) | set(got)):
            if (c := abs(got.get(key, 0.0) - fractions.get(key, 0.0))) > FRACTION:
                out.append(f"{who}: {key} moved {c:.3g} (tolerance {FRACTION:g}): {got.get(key, 0.0)} "
                           f"(pinned {fractions.get(key, 0.0)})")
    return out


def compare_tolerant(got: dict, pinned: dict) -> tuple[int, list[str]]:
    """``(variables checked, failures)``: each failure names the variable, what moved, by how much
    and the tolerance."""
    failures = [f"{k}: missing (pinned)" for k in sorted(set(pinned) - set(got))]
    failures += [f"{k}: not pinned (new)" for k in sorted(set(got) - set(pinned))]
    checked = 0
    for name in sorted(set(got) & set(pinned)):
        g, p = got[name], pinned[name]
        checked += 1
        head = {k: p[k] for k in ("dims", "shape", "dtype", "tier")}
        if {k: g[k] for k in head} != head:
            failures.append(f"{name}: {({k: g[k] for k in head})} (pinned {head})")
            continue
        if p["tier"] == "exact":
            if g != p:
                n = (f"{sum(a != b for a, b in zip(g['values'], p['values']))} of {len(p['values'])} elements"
                     if "values" in p and "values" in g else "its SHA-256")
                failures.append(f"{name}: exact values changed ({n})")
            continue
        problems = (_compare_close if p["tier"] == "close" else _compare_statistical)(g, p)
        failures += [f"{name} ({p['tier']}): {m}" for m in problems]
    return checked, failures


# ---------------------------------------------------------------------------------------------


def shipped(name: str) -> Path:
    """A shipped spec by its short name: a pinned run's (RUNS) or a tiny spec's stem."""
    return ROOT / RUNS[name] if name in RUNS else ROOT / "specs" / "tiny" / f"{name}.toml"


def apply_run(name: str, work: Path, extra_env: dict[str, str] | None = None, planned: bool = False) -> Path:
    """Apply a shipped spec (``shipped(name)``) from a copy whose store is in ``work``; the store's
    path. ``planned``: ``runner plan`` first, as a user does, so the plan's calibration (made just
    before the run, on the same thread count) is the estimate the run records."""
    src = shipped(name)
    text = src.read_text().replace("../../tests/data/", f"{ROOT}/tests/data/")
    work.mkdir(parents=True, exist_ok=True)
    store = work / f"{name}.zarr"
    spec = work / f"{name}.toml"
    spec.write_text(text.replace("[experiment]\n", f'[experiment]\nstore = "{store}"\n', 1))
    if planned:
        result = runner("plan", str(spec), "--calibrate", cwd=work, cache=work / "cache", extra_env=extra_env)
        assert result.returncode == 0, result.stderr
        built_by_apply = re.findall(r"(builtin:\S+) is built by the first", result.stdout)
        if built_by_apply:  # build it first, as apply would, so that plan can time it
            build = "; ".join(f"family_for({s!r}).location({s!r}, build=True)" for s in built_by_apply)
            made = subprocess.run([sys.executable, "-c", f"from models.registry import family_for; {build}"],
                                  cwd=work, env={**env(work / "cache"), **(extra_env or {})}, capture_output=True,
                                  text=True, timeout=600)
            assert made.returncode == 0, made.stderr
            result = runner("plan", str(spec), "--calibrate", cwd=work, cache=work / "cache", extra_env=extra_env)
            assert result.returncode == 0 and "is built by the first" not in result.stdout, result.stdout
    result = runner("apply", str(spec), "-q", cwd=work, cache=work / "cache", extra_env=extra_env)
    assert result.returncode == 0, result.stderr
    return store


def run_values(name: str, work: Path) -> dict:
    """Apply a shipped spec from a copy whose store is in ``work`` and pin its values (bitwise)."""
    return values_of(load(apply_run(name, work)))


def bitwise_differences(got: dict, pinned: dict) -> list[str]:
    """The variables of a pin whose dims, shape, dtype or bits differ."""
    def comparable(entry):
        return {**entry, "dtype": comparable_dtype(entry["dtype"])}
    missing = [k for k in pinned if k not in got]
    return missing + [k for k in pinned if k in got and comparable(got[k]) != comparable(pinned[k])]


def _write(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def store_tolerant(loaded: dict) -> None:
    _write(HERE / "tolerant.json", {"taken_on": fingerprint(), "tolerances": tolerances(),
                                    "runs": {name: tolerant_of(name, ds) for name, ds in loaded.items()}})


def store_pin(loaded: dict, *, replace: bool, prune_others: bool = False) -> None:
    """Add this machine's bitwise pin. A pin of the same fingerprint that differs is replaced only
    with ``replace`` (it says what differs); pins that name no CPU model (or lack any key of this
    fingerprint) can match no machine and are dropped. ``prune_others``: the variables whose bits
    changed here are dropped from the other machines' pins (a deliberate change changed them there too)."""
    here = fingerprint()
    pins = json.loads((HERE / "values.json").read_text())["pins"]
    runs = {name: values_of(ds) for name, ds in loaded.items()}
    kept = []
    for p in pins:
        if set(p["fingerprint"]) != set(here):
            print(f"dropped a pin that names only {p['fingerprint']} (no machine matches it)")
            continue
        kept.append(p)
    old = next((p for p in kept if p["fingerprint"] == here), None)
    changed = {name: bitwise_differences(runs[name], old["runs"].get(name, {})) for name in runs} if old else {}
    changed = {k: v for k, v in changed.items() if v}
    if old is not None and (changed or set(old["runs"]) != set(runs)):
        what = "; ".join(f"{name}: {', '.join(v)}" for name, v in changed.items()) or "the runs pinned"
        if not replace:
            raise SystemExit(f"values.json already pins {here} with other values ({what}); "
                             "--replace replaces it")
        print(f"replaced the pin of {here}: {what}")
    if prune_others and changed:
        for p in kept:
            if p is old:
                continue
            for name, names in changed.items():
                dropped = [k for k in names if k in p["runs"].get(name, {})]
                for k in dropped:
                    del p["runs"][name][k]
                if dropped:
                    print(f"dropped {name}: {', '.join(dropped)} from the pin of {p['fingerprint']}")
    pins = [p for p in kept if p["fingerprint"] != here] + [{"fingerprint": here, "runs": runs}]
    _write(HERE / "values.json", {"pins": pins})


#: The kernel paths ``--sensitivity`` applies each run under (on top of ``env``).
SENSITIVITY = {"mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},
               "avx2-kernels": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                                "DNNL_MAX_CPU_ISA": "AVX2"},
               "two-threads": {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}}


def sensitivity(work: Path) -> None:
    """Apply each run under other kernel paths of this machine and print, per tier, how far its
    values moved, in units of the tolerances: the measurement the tolerances are set from."""
    pinned = json.loads((HERE / "tolerant.json").read_text())["runs"]
    for label, extra in SENSITIVITY.items():
        for name in RUNS:
            got = tolerant_of(name, load(apply_run(name, work / label, extra)))
            worst = _worst(got, pinned[name])
            print(f"{label:15s} {name:15s} " + "  ".join(f"{t}: {v:.3g}" + (f" ({where})" if v else "")
                                                        for t, (v, where) in worst.items()))
            print("".join(f"    {failure}\n" for failure in compare_tolerant(got, pinned[name])[1]), end="", flush=True)


def _worst(got: dict, pinned: dict) -> dict:
    """Per tier, the largest change as a fraction of its tolerance and where."""
    out = {"close": (0.0, "-"), "statistical": (0.0, "-"), "exact": (0.0, "-")}
    for name, p in pinned.items():
        g = got[name]
        if p["tier"] == "exact":
            out["exact"] = max(out["exact"], (float(g != p), name))
        elif p["tier"] == "close":
            unit = p["scale"] or 1.0
            c = max([_change(g["stats"].get(k), v, unit) for k, v in p["stats"].items()]
                    + [_change(g["sampled"].get(k), v, unit) for k, v in p["sampled"].items()] + [0.0])
            out["close"] = max(out["close"], (c / RELATIVE, name))
        else:
            unit = p["unit"] or 1.0
            for label, pg in p["groups"].items():
                gg = g["groups"][label]
                c = max([_change(gg.get(k), pg[k], unit) / p["tolerance_sd"] for k in ("mean", "spread") if k in pg]
                        + [abs(gg.get("flags", {}).get(k, 0.0) - v) / FRACTION for k, v in pg.get("flags", {}).items()]
                        + [abs(gg.get(k, 0.0) - pg.get(k, 0.0)) / FRACTION for k in ("nan", "inf")])
                out["statistical"] = max(out["statistical"], (c, f"{name}/{label}"))
    return out


def main(argv: list[str]) -> None:
    """No arguments: pin every plan, re-take the tolerance tier and this machine's bitwise pin
    (``--retake``). ``--plans SPEC...``: pin (or re-pin) the plans of these specs only (paths
    relative to specs/), for a new spec or one changed on purpose. ``--values [--replace]``: add
    the bitwise pin of this machine (refused where it differs from this machine's pin, unless
    ``--replace``). ``--tolerant``: re-take the tolerance tier. ``--retake``: both from one set of
    runs, replacing this machine's pin and dropping the changed variables from other machines'
    pins. ``--sensitivity``: how far the values move under other kernel paths of this machine."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if argv[:1] == ["--plans"]:
            plans = json.loads((HERE / "plans.json").read_text())
            plans.update({name: plan_of(ROOT / "specs" / name, work) for name in argv[1:]})
            plans = {k: v for k, v in plans.items() if (ROOT / "specs" / k).exists()}
            _write(HERE / "plans.json", plans)
            return
        if argv == ["--sensitivity"]:
            sensitivity(work)
            return
        flags = set(argv) or {"--retake"}
        if not flags <= {"--values", "--replace", "--tolerant", "--retake"}:
            raise SystemExit(f"unknown arguments {sorted(flags)}; see {__name__}.main")
        if not argv:
            _write(HERE / "plans.json", {str(p.relative_to(ROOT / "specs")): plan_of(p, work) for p in shipped_specs()})
        loaded = {name: load(apply_run(name, work)) for name in RUNS}
        retake = "--retake" in flags
        if retake or "--tolerant" in flags:
            store_tolerant(loaded)
        if retake or "--values" in flags:
            store_pin(loaded, replace=retake or "--replace" in flags, prune_others=retake)


if __name__ == "__main__":
    main(sys.argv[1:])
