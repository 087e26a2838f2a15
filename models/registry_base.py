"""The project's one registry base: every registry (studies, measures, model families and maps, data
sources, executors, figures) keeps its entries in a :class:`Registry`, which owns the rules they share:

- a name taken is refused unless the newcomer ``replaces`` it (one message, :meth:`Registry.add`);
  the same thing registered again (a module imported twice) takes its place without a word;
- an unknown name is answered with the known ones and the closest of them (:meth:`Registry.unknown`);
- listing: by name (:meth:`Registry.names`), or newest first for registries asked in turn
  (:meth:`Registry.newest_first`: a plugin's family or data source is asked before the built-in ones).

It lives in ``models`` because the model families register here too, and ``models`` imports nothing
of the runner.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = ["Registry", "did_you_mean", "qualified"]


def qualified(entry: Any) -> str:
    """``module.Name`` of a class or function, of an instance's class, or the string itself."""
    if isinstance(entry, str):
        return entry
    owner = entry if hasattr(entry, "__qualname__") else type(entry)
    return f"{owner.__module__}.{owner.__qualname__}"


def did_you_mean(name: str, known: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to ``name``, or ``""``."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Registry(Generic[T]):
    """Entries by name. ``what`` names an entry in messages (``"model family"``, ``"depth measure"``);
    ``switch`` is how a newcomer says it replaces (a class attribute, or a keyword of the register
    function); ``label`` what an entry is called in messages and compared by (default
    :func:`qualified`). ``entries`` may be a dict kept elsewhere (the registry is then a view of it)."""

    def __init__(self, what: str, entries: dict[str, T] | None = None, *,
                 switch: str = "set `replaces = True`", label: Callable[[T], str] = qualified):
        self.what, self.switch, self.label = what, switch, label
        self.entries: dict[str, T] = {} if entries is None else entries

    def add(self, name: str, entry: T, *, replaces: bool = False) -> T:
        """Register ``entry`` as ``name`` (:meth:`check` first). The newest entry is listed last (first
        by :meth:`newest_first`)."""
        self.check(name, entry, replaces=replaces)
        self.entries.pop(name, None)
        self.entries[name] = entry
        return entry

    def check(self, name: str, entry: T, *, replaces: bool = False) -> None:
        """:class:`ValueError` when another entry holds ``name`` and ``replaces`` is false."""
        known = self.entries.get(name)
        if known is not None and self.label(known) != self.label(entry) and not replaces:
            raise ValueError(f"{self.what} {name!r} is {self.label(known)}'s; give {self.label(entry)} another "
                             f"name, or {self.switch} to replace it")

    def get(self, name: str) -> T:
        """The entry of ``name``; :class:`KeyError` with :meth:`unknown`'s message when there is none."""
        if name not in self.entries:
            raise KeyError(self.unknown(name))
        return self.entries[name]

    def unknown(self, name: str) -> str:
        """Why ``name`` names nothing: the known names, and the closest of them."""
        known = self.names()
        return (f"unknown {self.what} {name!r}; known: {', '.join(known) or 'none'}"
                + did_you_mean(name, known))

    def names(self) -> list[str]:
        return sorted(self.entries)

    def newest_first(self) -> list[T]:
        return list(reversed(self.entries.values()))

    def snapshot(self) -> dict[str, T]:
        """A copy of the entries, for :meth:`restore` (a test that registers and puts things back)."""
        return dict(self.entries)

    def restore(self, saved: dict[str, T]) -> None:
        self.entries.clear()
        self.entries.update(saved)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)
