"""Every error the CLI reports in one line carries its exit code (runner.core.errors); the codes are
those the CLI documents (tests/runner/test_cli.py drives each one through the real CLI)."""

from __future__ import annotations

import pytest

from runner.core import errors
from runner.run.apply import ReplaceRefused, Unmet
from runner.cli import CannotWrite, NoStore, _known_error
from runner.studies.training.data.corpus import CorpusError
from runner.spec.overrides import OverrideError
from runner.spec.specfile import SpecError, SpecMissing
from runner.storage.store_errors import StoreFormatError, StoreLocked, StorePathError, StoreWriteError
from runner.plugin.study import ShardError, SourceUnavailable
from runner.storage.verify import StoreDamaged, StoreUnreadable

CODES = {SpecMissing: 66, StoreUnreadable: 66, NoStore: 66, SourceUnavailable: 66, CorpusError: 66, Unmet: 66,
         SpecError: 65, StorePathError: 65, StoreFormatError: 65,
         ShardError: 2, OverrideError: 2, errors.UsageError: 2,
         StoreDamaged: 74, StoreWriteError: 74, CannotWrite: 74, StoreLocked: 75, ReplaceRefused: 77}


@pytest.mark.parametrize("cls, code", CODES.items(), ids=[c.__name__ for c in CODES])
def test_each_error_has_its_documented_exit_code(cls, code):
    assert _known_error(cls.__new__(cls)) == code


def test_a_plugin_chooses_its_code_by_the_category_it_subclasses():
    class NoLicence(errors.Unavailable):
        """A plugin's own error: a data set whose licence is not accepted here."""

    assert _known_error(NoLicence("accept the licence first")) == 66
    assert _known_error(ValueError("a bug")) is None  # not a RunnerError: a traceback, as before
