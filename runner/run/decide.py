"""What an ``apply`` does, decided from the plan and the store's state alone (no store is opened).

:func:`decide` is pure: given the planned task ids, what the records say is finished, how the spec
changed them (:class:`runner.run.changes.Changes`), whether the records are gone, whether the store
reads back whole, and the user's consent, it says whether there is nothing to do, whether the run
is refused, whether the store as it is is kept as a version first, which records are forgotten and
which finished results a longer run continues. ``apply`` asks it twice: before it takes the lock
(to refuse before anything is loaded) and under the lock, with the arrays a new layout cannot keep
(``remade``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from runner.run.changes import Changes


@dataclass(frozen=True)
class Decision:
    nothing_to_do: bool = False
    """Every planned task is finished and reads back whole: no lock, no models, no write."""
    refused: bool = False
    """Finished results would be replaced or dropped (or the records are gone) without consent."""
    keep_version: bool = False
    """The store as it is now is kept in its history before anything changes."""
    reason: str = ""
    """Why a version is kept: ``replace``, ``extend`` or ``records missing``."""
    forget: tuple[str, ...] = ()
    """Finished results whose records go (replaced, extended, dropped, or in arrays remade)."""
    extend: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Planned task id -> the finished ids it continues."""


def decide(planned: Iterable[str], done: Iterable[str], changes: Changes, *, records_lost: bool, whole: bool,
           consent: bool, remade: Iterable[str] = ()) -> Decision:
    """What ``apply`` does (see the module docstring). ``whole``: the store reads back without damage;
    ``remade``: finished results outside the plan whose arrays the new layout remakes (they go too)."""
    planned, done = list(planned), set(done)
    also = [tid for tid in remade if tid not in set(planned) and tid not in changes.lost()]
    if finished(planned, done, records_lost=records_lost, whole=whole) and not also:
        return Decision(nothing_to_do=True)
    if (changes.needs_consent or also or records_lost) and not consent:
        return Decision(refused=True, forget=tuple(also))
    keep = bool(changes.needs_consent or also or records_lost or changes.extend)
    reason = "" if not keep else "records missing" if records_lost else \
        "extend" if changes.extend and not (changes.replace or changes.drop or also) else "replace"
    return Decision(keep_version=keep, reason=reason, forget=tuple(changes.lost() + also) if keep else (),
                    extend=changes.sources())


def finished(planned: Iterable[str], done: Iterable[str], *, records_lost: bool, whole: bool) -> bool:
    """Every planned task is finished and the store reads back whole: nothing to do (the first thing
    ``apply`` asks, before the spec's changes are even compared)."""
    done = set(done)
    return all(t in done for t in planned) and not records_lost and whole
