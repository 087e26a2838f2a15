"""The runner's plans and stored values, pinned before the engine was restructured (see
tests/golden/pins.py): a restructure must not change a task id or a bit of a result."""

from __future__ import annotations

import json

import pytest

from tests.golden.pins import HERE, ROOT, RUNS, fingerprint, run_values, summarise

PLANS = json.loads((HERE / "plans.json").read_text())
VALUES = json.loads((HERE / "values.json").read_text())


def test_every_shipped_spec_is_pinned():
    assert sorted(PLANS) == sorted(str(p.relative_to(ROOT / "specs")) for p in ROOT.glob("specs/**/*.toml"))


@pytest.mark.parametrize("spec", sorted(PLANS))
def test_plan_is_unchanged(spec, in_process):
    # the pins are the tasks, not the cost: no calibration here (tests/runner/test_estimate.py tests it)
    code, out, err = in_process("plan", ROOT / "specs" / spec, "--json", "--no-estimate")
    assert code == 0, err
    assert summarise(json.loads(out)) == PLANS[spec]


#: The one change of store vocabulary, store_format 2: ``network`` is the index of the labels the
#: stores kept in ``network_label`` (depth) or ``network_name`` (training); every study has
#: ``model`` and ``replicate``. Values are otherwise compared bit for bit.
RENAMED = {"network_label": "network", "network_name": "network"}
DROPPED = {"network"}  # the old integer index
ADDED = {"model", "replicate"}


def _comparable(entry: dict) -> dict:
    string = entry["dtype"] in ("object", "StringDType()") or entry["dtype"].startswith("<U")
    return {**entry, "dtype": "str" if string else entry["dtype"]}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_stored_values_are_bitwise_unchanged(name, tmp_path):
    if fingerprint() != VALUES["fingerprint"]:
        pytest.skip(f"values were pinned on {VALUES['fingerprint']}; this is {fingerprint()}")
    got, pinned = run_values(name, tmp_path), VALUES["runs"][name]
    pinned = {RENAMED.get(k, k): v for k, v in pinned.items() if k not in DROPPED}
    assert sorted(set(got) - ADDED) == sorted(set(pinned) - ADDED)
    changed = [k for k in pinned if _comparable(got[k]) != _comparable(pinned[k])]
    assert not changed, f"changed: {[(k, got[k], pinned[k]) for k in changed]}"
