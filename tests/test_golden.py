"""The runner's plans and stored values, pinned before the engine was restructured (see
tests/golden/pins.py): a restructure must not change a task id or a bit of a result."""

from __future__ import annotations

import json

import pytest

from tests.golden.pins import HERE, ROOT, RUNS, fingerprint, pin_for, run_values, summarise

PLANS = json.loads((HERE / "plans.json").read_text())
VALUES = json.loads((HERE / "values.json").read_text())


def test_every_shipped_spec_is_pinned():
    assert sorted(PLANS) == sorted(str(p.relative_to(ROOT / "specs")) for p in ROOT.glob("specs/**/*.toml"))


@pytest.mark.parametrize("spec", sorted(PLANS))
def test_plan_is_unchanged(spec, in_process):
    # the pins are the tasks, not the cost: no calibration here (tests/runner/core/test_estimate.py tests it)
    code, out, err = in_process("plan", ROOT / "specs" / spec, "--json", "--no-estimate")
    assert code == 0, err
    assert summarise(json.loads(out)) == PLANS[spec]


#: Pins are retaken only with a new ``store_format`` and a note of what changed. store_format 3
#: (re-pinned): "never" step counts are float64 NaN instead of int64 -1 (``sync_offset``,
#: ``diverged_step``, ``word_frequency``), ``sync_outcome``/``chaos_outcome`` flags were added, and
#: the one-token reservoir's token deviation is NaN (not applicable) instead of 0; every other
#: array kept its bits.


def _comparable(entry: dict) -> dict:
    string = entry["dtype"] in ("object", "StringDType()") or entry["dtype"].startswith("<U")
    return {**entry, "dtype": "str" if string else entry["dtype"]}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_stored_values_are_bitwise_unchanged(name, tmp_path):
    pin = pin_for(VALUES["pins"], fingerprint())
    if pin is None:
        pytest.skip(f"values were pinned on {[p['fingerprint'] for p in VALUES['pins']]}; this is {fingerprint()} "
                    "(python -m tests.golden.pins --values adds its pin)")
    got, pinned = run_values(name, tmp_path), pin["runs"][name]
    assert sorted(got) == sorted(pinned)
    changed = [k for k in pinned if _comparable(got[k]) != _comparable(pinned[k])]
    assert not changed, f"changed: {[(k, got[k], pinned[k]) for k in changed]}"
