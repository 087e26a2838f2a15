"""Every measure runs on a small example of its study and writes what it declares (as scikit-learn's
``check_estimator`` fits an estimator): built-in measures, each study that offers a kit measure, and
a plugin measure; a measure that breaks its declaration is named with what it broke."""

from __future__ import annotations

import numpy as np
import pytest

import runner.plugin.measures
from runner.plugin.checks import ConformanceError
from runner.plugin.measures import measures
from runner.run.conformance import check_runs
from tests.runner.plugin.test_checks import registered_plugin  # noqa: F401  (a fixture)

#: Measures no study's example can run offline, and why (data or a model the user brings).
NOT_OFFLINE = {
    "mlm_readout": "a pre-trained ALBERT with its MLM head (the built-in tiny ALBERT has none)",
    "sts_readout": "scored sentence pairs (STS-B)",
    "sts_finetune": "scored sentence pairs (STS-B)",
    "handwriting_readout": "scored sentence pairs",
    "syntax_interdependence": "a UD treebank",
}


def _built_in() -> dict[str, type]:
    """Each built-in measure class once (a kit measure under its own kind, not as each study takes it)."""
    out = {}
    for study in ("depth", "training", "transject"):
        for kind, cls in measures(study).items():
            base = next(c for c in cls.__mro__ if "Params" in c.__dict__ and c.__module__.startswith("runner."))
            out.setdefault(kind, base)
    return out


@pytest.fixture
def offline(shared_cache, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRANSIENT_CACHE", str(shared_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", sorted(_built_in()))
def test_a_built_in_measure_writes_what_it_declares(kind, offline):
    measure = _built_in()[kind]
    if kind in NOT_OFFLINE:
        with pytest.raises(ConformanceError, match="no study could run it"):
            check_runs(measure, offline)
        return
    skipped = check_runs(measure, offline)
    # a kit measure runs in every study that takes it, but where a study has no default for a role
    assert all("no example plans with it" in why for why in skipped.values()), skipped


@pytest.mark.timeout(120)
def test_a_plugin_measure_writes_what_it_declares(registered_plugin, offline):  # noqa: F811
    found, _ = registered_plugin("tests.plugins.toy_measure")
    (measure,) = found.values()
    assert check_runs(measure, offline) == {}


def _replacing(monkeypatch, kind: str, **methods) -> type:
    """The depth study's ``kind`` replaced, for this test, by a subclass with ``methods``."""
    registry = runner.plugin.measures._REGISTRY["depth"]
    broken = type(f"Broken_{kind}", (registry[kind],), {"__module__": __name__, **methods})
    monkeypatch.setitem(registry, kind, broken)
    return broken


@pytest.mark.timeout(120)
def test_a_measure_that_writes_nothing_is_named(offline, monkeypatch):
    """A trajectory that keeps nothing: its declared variable stays all NaN on the network."""
    silent = _replacing(monkeypatch, "trajectory", write=lambda self, ctx, bufs, seg: None)
    with pytest.raises(ConformanceError, match=r"network tanh: none of \['trace'\] was written"):
        check_runs(silent, offline)


@pytest.mark.timeout(120)
def test_a_flag_outside_its_values_is_named(offline, monkeypatch):
    orbit = measures("depth")["orbit"]

    class Rows:  # what the pass's store writer sees, with the orbit classes replaced by an undeclared 99
        def __init__(self, store):
            self.store = store

        def write(self, name, region, values):
            self.store.write(name, region, np.full_like(values, 99) if name == "orbit_class" else values)

    def write(self, ctx, bufs, seg):
        real = ctx.store
        ctx.store = Rows(real)
        try:
            orbit.write(self, ctx, bufs, seg)
        finally:
            ctx.store = real

    wrong = _replacing(monkeypatch, "orbit", write=write)
    with pytest.raises(ConformanceError, match=r"orbit_class: values \[99\] are none of its flag_values"):
        check_runs(wrong, offline)
