"""A dataset from ``runner.api.open`` reads one version whole (issue 48): held across a ``--replace`` or an
extension, a read made before the switch gives the old values and one after it raises
``VersionSwitched``, never the new values under the old attributes; a kept version removed while held
raises too, never reads as fill values."""

from __future__ import annotations

import numpy as np
import pytest

import runner.api as api
from runner.storage.pinned import VersionSwitched
from tests.runner.helpers import maps_spec, run_cli, write_spec

TEXT = maps_spec("v", steps=40, samples=8, n=8, checkpoint_every=20)
CHANGES = {"replace": (("g = 0.5", "g = 0.6"), "--replace"), "extension": (("steps = 40", "steps = 60"), None)}


@pytest.fixture
def applied(tmp_path):
    spec = write_spec(tmp_path, TEXT)
    assert run_cli("apply", spec, "-q", cwd=tmp_path).returncode == 0
    return spec, tmp_path / "store/v.zarr"


def _switch(spec, change: str) -> None:
    (old, new), flag = CHANGES[change]
    spec.write_text(TEXT.replace(old, new))
    done = run_cli("apply", spec, "-q", *([flag] if flag else []), cwd=spec.parent)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_read_before_the_switch_is_the_old_version_whole(applied, change):
    spec, store = applied
    expected = api.open(store).load()
    held = api.open(store)
    before = held["lyapunov"].values  # read now: the old version
    _switch(spec, change)
    np.testing.assert_array_equal(before, expected["lyapunov"].values)
    assert held.attrs == expected.attrs


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_read_after_the_switch_raises_and_names_it(applied, change):
    spec, store = applied
    held = api.open(store)
    _switch(spec, change)
    with pytest.raises(VersionSwitched, match="was switched to a newer version"):
        held["lyapunov"].values  # noqa: B018  (the read)
    fresh = api.open(store)  # opened again: the new version
    assert fresh.sizes["lyapunov_step"] == (60 if change == "extension" else 40)


def test_a_kept_version_removed_while_held_raises(applied):
    spec, store = applied
    _switch(spec, "replace")
    tree = api.open(store, history=True)
    (name,) = [n for n in tree["history"].children]
    version = tree[f"history/{name}"]
    assert run_cli("history", store, "--remove", name, cwd=spec.parent).returncode == 0
    with pytest.raises(VersionSwitched, match=f"kept version {name} this dataset was opened on was removed"):
        version["lyapunov"].values  # noqa: B018
