"""Requirements this machine does not meet: what ``plan`` lists and ``apply`` refuses to start on
(exit 66) -- a model or data set neither cached nor reachable, a missing extra, a device.

A :class:`Requirement` reads as its one line (so a list of them prints, joins and compares as
text), and carries its parts for ``plan --json``: ``kind``, ``name``, ``reason``, ``fix`` and the
underlying library's message (``detail``, shown by ``plan --verbose``). Requirements that differ
only by name (twenty revisions of one model, none cached) are shown as one line. A spec's device is
one (:func:`device_requirement`), which a device given on the command line replaces
(:func:`without_device`).
"""

from __future__ import annotations

import textwrap
from typing import Any


class Requirement(str):
    where: str
    reason: str
    kind: str
    name: str | None
    fix: str | None
    detail: str | None

    scope: str
    """What requirements grouped with it share (``where`` without the name): ``[[model]] pythia``."""

    def __new__(cls, where: str, reason: str, *, kind: str, name: str | None = None, fix: str | None = None,
                detail: str | None = None, scope: str | None = None):
        text = f"{where}: {reason}" + (f" ({detail})" if detail else "") + (f"; {fix}" if fix else "")
        self = super().__new__(cls, text)
        self.where, self.reason, self.kind, self.name, self.fix, self.detail = where, reason, kind, name, fix, detail
        self.scope = scope or where
        return self

    @classmethod
    def from_error(cls, where: str, err: Exception, *, kind: str, name: str | None = None) -> Requirement:
        """From an exception that may carry ``reason``, ``fix`` and ``detail`` (:class:`models.hub.ModelLoadError`)."""
        return cls(where, getattr(err, "reason", None) or str(err), kind=kind, name=name,
                   fix=getattr(err, "fix", None), detail=getattr(err, "detail", None))

    def short(self) -> str:
        """The line without the library's message."""
        return f"{self.where}: {self.reason}" + (f"; {self.fix}" if self.fix else "")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": self.where, "name": self.name, "reason": self.reason, "fix": self.fix,
                "detail": self.detail}


#: The kind of the requirement of a spec's device.
DEVICE = "device"


def device_requirement(where: str, requested: str) -> list[Requirement]:
    """The requirement of the device a spec asks for at ``where`` (its table and key) when this
    machine lacks it; none when it has it."""
    from runner.core.device import device_unavailable  # lazy: pydantic

    problem = device_unavailable(requested)
    return [Requirement(where, problem, kind=DEVICE, name=requested)] if problem else []


def without_device(unmet: list[str]) -> list[str]:
    """``unmet`` less the spec's device requirement (a device given on the command line replaces it)."""
    return [u for u in unmet if not (isinstance(u, Requirement) and u.kind == DEVICE)]


def to_json(item: str) -> dict[str, Any]:
    """A requirement as an object (a plain line: its text as the reason)."""
    if isinstance(item, Requirement):
        return item.to_json()
    return {"kind": "other", "where": None, "name": None, "reason": str(item), "fix": None, "detail": None}


def lines(unmet: list[str], width: int = 80, verbose: bool = False, group_from: int = 3) -> list[str]:
    """``unmet`` as plan prints it: requirements alike but for their name grouped into one line
    (``group_from`` or more), library messages left out unless ``verbose``, wrapped to ``width``."""
    groups: dict[tuple, list[str]] = {}
    for item in unmet:
        key = (item.scope, item.kind, item.reason, item.fix) if isinstance(item, Requirement) and item.name \
            else (id(item),)
        groups.setdefault(key, []).append(item)
    out = []
    for items in groups.values():
        first = items[0]
        if len(items) >= group_from:
            names = [r.name for r in items]
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            text = f"{first.scope}: {len(items)} {first.kind}s ({shown}): {first.reason}" + (
                f"; {first.fix}" if first.fix else "")
            if verbose:
                text += "".join(f"\n{r.name}: {r.detail}" for r in items if r.detail)
        elif isinstance(first, Requirement) and not verbose:
            text = "\n".join(r.short() for r in items)
        else:
            text = "\n".join(str(r) for r in items)
        for part in text.split("\n"):
            out += textwrap.wrap(part, width=max(width, 40), initial_indent="  - ", subsequent_indent="    ",
                                 break_on_hyphens=False, break_long_words=False)
    return out
