"""runner.core.requirements: a spec's device as a requirement, built one way by every study and
dropped one way when ``--device`` replaces it."""

from __future__ import annotations

from runner.core.device import device_unavailable
from runner.core.requirements import DEVICE, Requirement, device_requirement, without_device


def test_a_device_this_machine_lacks_is_one_requirement_naming_it():
    assert device_requirement("[dynamics] device", "cpu") == []
    (missing,) = device_requirement("[training] device", "cuda:99")
    assert (missing.where, missing.kind, missing.name) == ("[training] device", DEVICE, "cuda:99")
    assert missing.reason == device_unavailable("cuda:99")


def test_a_device_on_the_command_line_drops_the_specs_device_requirement_only():
    data = Requirement("[input] source 'x'", "not cached", kind="data", name="x")
    unmet = ["a plain line", *device_requirement("[dynamics] device", "cuda:99"), data]
    assert without_device(unmet) == ["a plain line", data]
