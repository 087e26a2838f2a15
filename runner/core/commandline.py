"""The command a hint tells a user to run again, with the same overrides (no heavy import: the CLI's
start-up reads it)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import textwrap
from collections.abc import Iterable


def command(verb: str, spec, overrides: Iterable = (), *more: str) -> str:
    """``runner VERB SPEC --set ... MORE``, quoted to paste; ``overrides`` as given on the command line
    (text) or parsed (:class:`runner.spec.overrides.Override`, its ``text``)."""
    sets = [arg for o in overrides for arg in ("--set", getattr(o, "text", o))]
    return shlex.join([program(), verb, str(spec), *sets, *more])


def program() -> str:
    """The program as invoked, to paste: ``runner`` when that is what PATH finds (or under ``python -m``),
    else the path typed (``.venv/bin/runner``)."""
    invoked = sys.argv[0] if sys.argv else ""
    if os.path.basename(invoked) != "runner" or os.sep not in invoked:
        return "runner"
    on_path = shutil.which("runner")
    if on_path and os.path.realpath(on_path) == os.path.realpath(invoked):
        return "runner"
    return invoked


def hint(lead: str, cmd: str, width: int | None = None) -> str:
    """``lead`` wrapped at words to ``width`` (default: the terminal's, at least 80), then ``cmd`` on a
    line of its own, indented: neither a path of the lead nor the command to paste breaks mid-word."""
    width = width or max(80, shutil.get_terminal_size((80, 24)).columns)
    return "\n".join(textwrap.wrap(lead, width, break_on_hyphens=False, break_long_words=False) + [f"  {cmd}"])
