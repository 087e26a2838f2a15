"""A measure run on its study's small example, as scikit-learn's ``check_estimator`` fits an estimator.

:func:`run_problems` plans and applies, for each study that offers the measure, that study's minimal
spec (``HasExamples.examples``, the first that serves) with the measure alone (after its source, for a derived measure) in a
folder of its own, on the CPU, through the real engine; then reads the store back and says where what
the measure wrote breaks what it declared:

- a task of the measure that did not finish;
- no variable of its own in the store;
- nothing written: every variable of the measure still holds its missing value on a network it
  applies to (one that is "not applicable" is excused);
- a flag variable holding a value outside its ``flag_values``.

:func:`check_runs` is what a test calls, after the static checks of :func:`runner.plugin.checks.check_measure`
(which cannot run anything: the plugin layer sits below the engine that applies a spec)::

    check_measure(MyMeasure)
    check_runs(MyMeasure, tmp_path)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr

from runner.core.layout import internal
from runner.plugin.checks import ConformanceError
from runner.plugin.measures import Measure, measures
from runner.plugin.study import example_specs, studies
from runner.run.apply import apply
from runner.run.prepare import prepare_all
from runner.spec.specfile import SpecError, SpecFile
from runner.storage.store import read_tasks


def example_for(example: dict, study: str, measure: type[Measure], folder: Path) -> dict:
    """``example`` measuring ``measure`` alone (its source first, for a derived one), its store in ``folder``."""
    kind = measure.kind()
    listed = [{"kind": measure.tags.derived.source}] if measure.tags.derived is not None else []
    experiment = {**example.get("experiment", {}), "name": f"check-{kind}", "study": study,
                  "store": str(folder / f"{study}-{kind}.zarr")}
    return {**example, "experiment": experiment, "measure": [*listed, {"kind": kind, **measure.example}]}


def check_runs(measure: type[Measure], folder: Path) -> dict[str, str]:
    """Run ``measure`` on an example of each study that offers it, in ``folder``; raise
    :class:`~runner.plugin.checks.ConformanceError` listing everything :func:`run_problems` finds, or saying
    that no study's example could run it. Returns, for each study whose examples could not, why."""
    ran, problems, skipped = run_problems(measure, folder)
    if problems or not ran:
        found = problems or [f"no study could run it: {why}" for why in skipped.values()]
        raise ConformanceError(f"measure {measure.__module__}.{measure.__qualname__} run on its study's example:\n"
                               + "\n".join(f"  - {x}" for x in found))
    return skipped


def run_problems(measure: type[Measure], folder: Path) -> tuple[list[str], list[str], dict[str, str]]:
    """Run ``measure`` on the first example (``HasExamples.examples``) of each study that offers it on which it
    plans and applies to a network (see the module docstring): the studies it ran in, what breaks its
    declaration there, and for each other study why none of its examples served."""
    kind, ran, out, skipped = measure.kind(), [], [], {}
    for name, cls in studies().items():
        offered = measures(name).get(kind)
        if offered is None or not issubclass(offered, measure):
            continue
        why = "the study gives no example spec"
        for example in example_specs(cls()):
            data = example_for(example, name, measure, Path(folder))
            try:
                _, (p,) = prepare_all(SpecFile(Path(folder) / f"{name}-{kind}.toml", "", data, located=False))
            except SpecError as err:
                why = f"no example plans with it ({err})"
                continue
            if p.unmet:
                why = f"its example cannot run here: {p.unmet[0]}"
                continue
            if all(t.skip for t in p.tasks if t.measure == kind):
                why = "it applies to no network of the examples"
                continue
            apply(p, device="cpu", quiet=True)
            ran.append(name)
            out += [f"{name}: {x}" for x in _store_problems(p, kind)]
            break
        else:
            skipped[name] = f"{name}: {why}"
    return ran, out, skipped


def _store_problems(p, kind: str) -> list[str]:
    records = read_tasks(p.store_path)
    mine = [t for t in p.tasks if t.measure == kind]
    out = [f"task {t.label} ({t.id}) did not finish" for t in mine if t.id not in records]
    applies = sorted({t.network for t in mine if not t.skip})
    group = zarr.open_group(str(p.store_path), mode="r")
    arrays = {name: group[name] for name in group.array_keys() if internal(group[name].attrs).get("measure") == kind}
    if not arrays:
        return out + [f"it declares no variable of its own (none written by measure {kind!r} in the store)"]
    written: dict[str, tuple[np.ndarray, tuple, object]] = {}
    for name, arr in arrays.items():
        values, dims = np.asarray(arr[...]), tuple(arr.metadata.dimension_names or ())
        written[name] = values, dims, arr.fill_value
        flags = arr.attrs.get("flag_values")
        if flags is not None:
            bad = sorted(set(np.unique(values).tolist()) - set(flags) - {arr.fill_value})
            if bad:
                out.append(f"variable {name}: values {bad[:5]} are none of its flag_values {flags}")
    per_network = {n: w for n, w in written.items() if "network" in w[1]}
    for net in applies if per_network else []:
        if not any(_wrote(np.take(values, net, axis=dims.index("network")), fill)
                   for values, dims, fill in per_network.values()):
            out.append(f"network {p.labels[net]}: none of {sorted(per_network)} was written (all missing values)")
    if not per_network and applies and not any(_wrote(values, fill) for values, _, fill in written.values()):
        out.append(f"none of {sorted(written)} was written (all missing values)")
    return out


def _wrote(values: np.ndarray, fill) -> bool:
    """Whether ``values`` hold any value other than the missing value ``fill``."""
    if values.dtype.kind == "f":
        return bool((~np.isnan(values)).any() if fill is None or np.isnan(fill) else (values != fill).any())
    return bool((values != fill).any())
