"""The command a hint tells a user to run again, with the same overrides (no heavy import: the CLI's
start-up reads it)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable


def command(verb: str, spec, overrides: Iterable = (), *more: str) -> str:
    """``runner VERB SPEC --set ... MORE``, quoted to paste; ``overrides`` as given on the command line
    (text) or parsed (:class:`runner.spec.overrides.Override`, its ``text``)."""
    sets = [arg for o in overrides for arg in ("--set", getattr(o, "text", o))]
    return shlex.join(["runner", verb, str(spec), *sets, *more])
