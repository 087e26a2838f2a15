"""``--set KEY=VALUE``: one value of a spec changed from the command line, as Hydra's ``key=value``,
snakemake's ``--config`` and DVC's ``-S`` do.

``KEY`` is a dotted path into the spec's tables, with ``[i]`` for an entry of an array of tables
(``experiment.seed``, ``model[0].seed``, ``measure[2].every``); ``VALUE`` is a TOML value (``1000``,
``1e-3``, ``true``, ``[1, 2]``, ``"text"``), and a bare word is a string (``device=cpu``). The
changed spec is validated as the file would be; a problem at an overridden key names the override.
A sweep's axes cannot be overridden: the sweep sets them.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from runner.core import toml
from runner.core.errors import UsageError
from runner.spec.specfile import SpecFile

_PART = re.compile(r"([A-Za-z0-9_-]+)((?:\[\d+\])*)")


class OverrideError(UsageError):
    """A ``--set`` that cannot be read or applied (exit 2, a usage error)."""


@dataclass(frozen=True)
class Override:
    text: str
    """As given: ``experiment.seed=3``."""
    path: tuple
    """``("experiment", "seed")``; ``("model", 0, "seed")``."""
    value: Any


def parse(text: str) -> Override:
    key, eq, raw = text.partition("=")
    key = key.strip()
    if not eq or not key:
        raise OverrideError(f"--set {text}: expected KEY=VALUE, e.g. --set experiment.seed=3")
    path: list = []
    for part in key.split("."):
        m = _PART.fullmatch(part)
        if m is None:
            raise OverrideError(f"--set {text}: {part!r} is not a key; keys are dotted names, with [i] for an "
                                "entry of an array of tables (model[0].seed)")
        path.append(m.group(1))
        path += [int(i) for i in re.findall(r"\d+", m.group(2))]
    if not raw.strip():
        raise OverrideError(f"--set {text}: no value after '='; e.g. --set {key}=3, or --set {key}='\"text\"'")
    try:
        value = _value(raw.strip())
    except ValueError:
        raise OverrideError(f"--set {text}: {raw.strip()!r} is not a TOML value (quote a string with spaces: "
                            "'\"a b\"')") from None
    return Override(text, tuple(path), value)


def _value(raw: str) -> Any:
    try:
        return toml.loads(f"v = {raw}")["v"]
    except toml.TOMLDecodeError:
        if re.fullmatch(r"[^\s\"'\[\]{}=,#]+", raw):
            return raw  # a bare word: a string, as on most command lines
        raise ValueError(raw) from None


def apply(sf: SpecFile, overrides: list[Override]) -> SpecFile:
    """``sf`` with each override set (tables created as needed); :class:`OverrideError` for a path
    that goes through a value, an index past an array's end, a sweep axis, or a key set twice."""
    if not overrides:
        return sf
    data = copy.deepcopy(sf.data)
    sweep = data.get("sweep") if isinstance(data.get("sweep"), dict) else {}
    earlier: dict[tuple, Override] = {o.path: o for o in sf.overrides}
    for o in overrides:
        if o.path in earlier:  # the last one would win silently
            raise OverrideError(f"--set {o.text}: {key_text(o.path)} is set already by --set {earlier[o.path].text}; "
                                "give each key once")
        inside = next((e for path, e in earlier.items() if path[:len(o.path)] == o.path), None)
        if inside is not None:  # it would undo the earlier one silently
            raise OverrideError(f"--set {o.text}: replaces the whole of {key_text(o.path)}, which --set {inside.text} "
                                f"set a key of; give --set {inside.text} after it")
        earlier[o.path] = o
        *tables, key = o.path
        node = sweep
        for t in tables:  # [sweep.corpus.scaffold] rules = [...] is the axis corpus.scaffold.rules
            node = node.get(t) if isinstance(node, dict) and isinstance(t, str) else None
        if tables and isinstance(key, str) and isinstance(node, dict) and isinstance(node.get(key), list):
            table = ".".join(tables)
            raise OverrideError(f"--set {o.text}: {table}.{key} is an axis of the sweep ([sweep.{table}] {key} = "
                                f"{node[key]}); change the sweep's values in the spec, or drop --set")
        _set(data, o)
    return dataclasses.replace(sf, data=data, overrides=(*sf.overrides, *overrides))


def key_text(path: tuple) -> str:
    """``("model", 0, "seed")`` -> ``model[0].seed``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _set(data: dict, o: Override) -> None:
    node: Any = data
    for i, part in enumerate(o.path[:-1]):
        following = o.path[i + 1]
        where = key_text(o.path[:i + 1])
        if isinstance(part, int):
            if isinstance(node, dict) and i > 0:
                table = key_text(o.path[:i])
                plain = key_text(o.path[:i] + o.path[i + 1:])
                raise OverrideError(f"--set {o.text}: [{table}] is a table, not an array of tables; write "
                                    f"--set {plain}={o.text.partition('=')[2]}")
            if not isinstance(node, list) or part >= len(node):
                size = len(node) if isinstance(node, list) else 0
                raise OverrideError(f"--set {o.text}: {where}: the spec has {size} such entr{'y' if size == 1 else 'ies'}"
                                    f" (indices from 0)")
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise OverrideError(f"--set {o.text}: {where} is inside a value, not a table")
            node = node.setdefault(part, [] if isinstance(following, int) else {})
        if not isinstance(node, (dict, list)):
            raise OverrideError(f"--set {o.text}: {where} is a value, not a table")
    last = o.path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise OverrideError(f"--set {o.text}: no entry {last} to replace")
        node[last] = o.value
    elif isinstance(node, dict):
        node[last] = o.value
    else:
        raise OverrideError(f"--set {o.text}: {key_text(o.path[:-1])} is an array; give an index")
