"""What a command refuses, and the exit code it refuses with (after sysexits.h).

Every error the CLI turns into a message and an exit code (rather than a traceback) is a
:class:`RunnerError`: the engine's and the studies' errors subclass one of the categories below,
and ``runner.cli`` reads ``exit_code`` from the class, so a study or plugin chooses its exit code by
the category it subclasses, and the CLI names none of them. Each existing error keeps its own class
(``except StoreLocked`` still catches only that); the categories are caught only by the CLI.
"""

from __future__ import annotations

from typing import ClassVar

(EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SPEC, EXIT_UNAVAILABLE, EXIT_IOERR, EXIT_LOCKED, EXIT_REPLACE,
 EXIT_INTERRUPTED) = 0, 1, 2, 65, 66, 74, 75, 77, 130


class RunnerError(Exception):
    """An error a command reports in one line, exiting with ``exit_code``."""

    exit_code: ClassVar[int] = EXIT_FAILED


class UsageError(RunnerError):
    """A command-line argument that cannot be used: an unknown name, a bad --set or --device (2)."""

    exit_code = EXIT_USAGE


class SpecInvalid(RunnerError):
    """The spec (or the store path it names) cannot be run as written (65)."""

    exit_code = EXIT_SPEC


class Unavailable(RunnerError):
    """An input is missing or unreadable: a spec file, a store, a model or data set, a requirement
    this machine does not meet (66)."""

    exit_code = EXIT_UNAVAILABLE


class StorageError(RunnerError):
    """The store (or a file a command writes) cannot be written, or the store is damaged (74)."""

    exit_code = EXIT_IOERR


class Locked(RunnerError):
    """Another process holds the store (75)."""

    exit_code = EXIT_LOCKED


class ConsentNeeded(RunnerError):
    """The command would replace finished results and was not told it may (77)."""

    exit_code = EXIT_REPLACE


def exit_code(err: BaseException) -> int | None:
    """The exit code of an error the CLI reports in one line, or None (let it raise)."""
    return err.exit_code if isinstance(err, RunnerError) else None
