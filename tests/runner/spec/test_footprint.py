"""The one footprint check: each study declares what a run holds and writes; the engine refuses what
does not fit, at the key the study names, with the size and what this machine has."""

from __future__ import annotations

import pytest

from runner.core.layout import available_memory
from runner.spec import footprint
from runner.spec.footprint import Need
from runner.spec.specfile import SpecProblem


def test_what_fits_passes(tmp_path):
    footprint.check([Need(("input", "samples"), 1, "the run needs"),
                     Need(("dynamics", "steps"), 1, "the store would need", on="disk")], tmp_path / "s.zarr")


def test_memory_beyond_this_machine_is_refused_at_its_key():
    need = Need(("training", "batch_size"), 2 * available_memory(), "training x needs", detail=" (weights)",
                fix="; fewer")
    with pytest.raises(SpecProblem) as err:
        footprint.check([need])
    assert err.value.loc == ("training", "batch_size")
    assert err.value.message.startswith("training x needs about ") and " of memory (weights); this machine has " \
        in err.value.message and err.value.message.endswith(" available; fewer")


def test_disk_needs_add_up_and_the_one_that_overflows_is_named(tmp_path):
    free, folder = footprint.free_disk(tmp_path / "s.zarr")
    half = int(free * 0.6)
    needs = [Need(("model", 0, "d_model"), half, "the checkpoints need", on="disk", bound="at least", detail=" (a)"),
             Need(("training", "epochs"), half, "the checkpoints need", on="disk", bound="at least", detail=" (b)",
                  also=(("input", "samples"),))]
    with pytest.raises(SpecProblem) as err:
        footprint.check(needs, tmp_path / "s.zarr")
    assert err.value.loc == ("training", "epochs") and err.value.also == (("input", "samples"),)
    assert err.value.message.startswith("the checkpoints need at least ") and f" (b) but {folder} has " in \
        err.value.message
    footprint.check(needs[:1], tmp_path / "s.zarr")  # one alone fits


def test_a_bucket_has_no_free_disk_to_refuse():
    footprint.check([Need(("dynamics", "steps"), 10 ** 30, "the store would need", on="disk")], "s3://bucket/s.zarr")
