"""A source string parsed once: where a model or a dataset comes from.

A spec names what to load as one string: ``hf:albert-base-v2`` (the Hugging Face hub),
``map:logistic`` (a reference map), ``builtin:tiny-albert`` (made offline), ``layers:hf:<id>``
(a scheme around another source), ``path:<dir>`` or a plain path (local). :class:`Source` is that
string, parsed when the spec is validated: families and data loaders match on its ``scheme`` and
read its ``rest``, ``hub_id`` or ``path``; nothing else splits the text. It stays a ``str`` (equal
to what the user wrote, so ids, stores and messages do not change).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

_SCHEME = re.compile(r"^([a-z][a-z0-9-]+):")
"""``scheme:`` at the start, two characters at least (``C:`` is a drive, not a scheme)."""

LOCAL = "path"
HUB = "hf"


class Source(str):
    """A source string with its ``scheme`` (``"path"`` for a plain path) and ``rest`` (after it)."""

    scheme: str
    rest: str

    def __new__(cls, text: str) -> Source:
        if isinstance(text, Source):
            return text
        self = super().__new__(cls, text)
        match = _SCHEME.match(text)
        self.scheme, self.rest = (match.group(1), text[match.end():]) if match else (LOCAL, text)
        return self

    def __reduce__(self):
        return Source, (str(self),)

    @property
    def on_hub(self) -> bool:
        return self.scheme == HUB

    @property
    def local(self) -> bool:
        """A local file or directory: ``path:<p>`` or a plain path."""
        return self.scheme == LOCAL

    @property
    def explicit_path(self) -> bool:
        """Written as ``path:<p>`` (so never taken for a hub id)."""
        return self.local and self != self.rest

    @property
    def inner(self) -> Source:
        """The source a wrapping scheme names: ``layers:hf:x`` -> ``hf:x``."""
        return Source(self.rest)

    @property
    def name(self) -> str:
        """The rest without surrounding blanks: the hub id, map name, builtin name or path."""
        return self.rest.strip()

    @property
    def hub_id(self) -> str:
        return self.name if self.on_hub else ""

    @property
    def path(self) -> Path:
        return Path(self.name)

    def location(self) -> str:
        """What a loader opens: the hub id, or the local path as written."""
        return self.hub_id if self.on_hub else self.name


SourceText = Annotated[str, AfterValidator(Source)]
"""A spec field holding a source: validated as a string, kept as a :class:`Source`."""

__all__ = ["HUB", "LOCAL", "Source", "SourceText"]
