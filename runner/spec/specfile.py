"""TOML spec files -> validated pydantic specs, every problem as ``FILE:LINE: [table] key: message``.

Shared by every study: :class:`Table` is the base of every spec table (frozen, strict types, no
unknown keys, no inf/NaN), :func:`read_toml` reads a file, and :func:`validate` runs pydantic and
the spec's own cross-table rules (:meth:`Located.problems`), reporting all problems at once with
the line each one is about.
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import json
import os
import re
import stat
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from models.registry_base import did_you_mean
from runner.core import toml
from runner.core.errors import EXIT_UNAVAILABLE, SpecInvalid
from runner.storage.location import local_path, location, location_problem

MAX_SPEC_BYTES = 1 << 20

#: A label used in paths and coordinates: letters, digits, ``_ . -``, and not only dots.
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]*[A-Za-z0-9_-][A-Za-z0-9_.-]*$", max_length=128)]

#: ``(table, [index,] key, ...)``: where in a spec a problem is, as pydantic writes error locations.
Loc = tuple


class SpecError(SpecInvalid):
    """A spec that cannot be run; ``problems`` holds one line per problem."""

    def __init__(self, path: Path | str, problems: list[str]):
        self.path = str(path)
        self.problems = problems
        super().__init__("\n".join(problems))


class SpecMissing(SpecError):
    """The spec file does not exist (an input that is missing: exit 66, not 65)."""

    exit_code = EXIT_UNAVAILABLE


class SpecProblem(Exception):
    """A problem found after validation (e.g. once a model's size is known), at a spec location."""

    def __init__(self, loc: Loc, message: str, also: tuple[Loc, ...] = ()):
        self.loc, self.message, self.also = loc, message, also
        """``also``: other locations the problem depends on (a size: the samples and the steps); an
        override of one of them is blamed where the file's line at ``loc`` did not change."""
        super().__init__(message)


class Table(BaseModel):
    """Base of every spec table: strict types (``steps = "20"`` or ``true`` is an error, not 20 or 1),
    no unknown keys, no inf or NaN, frozen, and attribute docstrings as field descriptions."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)


class Located(Table):
    """A whole spec: pydantic validates each table; :meth:`problems` adds the rules that span tables."""

    def problems(self) -> list[tuple[Loc, str]]:
        """Cross-table problems as ``(location, message)``; the location picks the line reported."""
        return []


@dataclass(frozen=True)
class SpecFile:
    """A spec's path, text and parsed tables: everything needed to point at a line."""

    path: Path
    text: str
    data: dict
    overrides: tuple = ()
    """The ``--set`` overrides applied to ``data`` (:mod:`runner.spec.overrides`)."""
    located: bool = True
    """Whether ``text`` is what ``data`` was read from, so that a problem has a line (not for a
    spec given as a dict)."""

    def problem(self, loc: Loc, message: str, root: type[BaseModel] | None = None, also: tuple[Loc, ...] = ()) -> str:
        """``FILE:LINE: [table] key: message`` for a problem at ``loc``; ``FILE: --set KEY=VALUE:
        [table] key: message`` where an override set it, or set one of the locations in ``also`` that
        the problem depends on as well (then the problem is told at that location)."""
        if self._override_at(list(loc)) is None:
            loc = next((o.path for a in also for o in reversed(self.overrides) if o.path[:len(a)] == tuple(a)), loc)
        loc = _strip_tags(list(loc), self.data)
        array = _is_array(loc, self.data)
        key = ".".join(str(p) for p in loc[2 if array else 1:])
        where = f"{self._where(loc, array, root)}{' ' + key if key else ''}: {message}"
        return f"{self.origin(loc)}: {where}"

    def origin(self, loc: Loc) -> str:
        """Where a problem at ``loc`` comes from: ``FILE: --set KEY=VALUE`` where an override set it
        (or made the table it is in), else ``FILE:LINE`` (``FILE`` for a spec given as a dict)."""
        by = self._override_at(list(loc))
        if by is not None:
            return f"{self.path}: --set {by.text}"
        if not self.located:
            return f"{self.path}"
        return f"{self.path}:{locate(self.text, tuple(loc))}"

    def _override_at(self, loc: list):
        """The last override that set ``loc`` (or the table it is in, or made that table), or None."""
        return next((o for o in reversed(self.overrides) if tuple(loc[:len(o.path)]) == o.path
                     or (len(loc) < len(o.path) and tuple(o.path[:len(loc)]) == tuple(loc)
                         and not self._in_file(loc))), None)  # a table only an override made

    def _in_file(self, loc: list) -> bool:
        """Whether the spec's own text has ``loc`` (not only an override)."""
        if not self.located:
            return True
        node: Any = toml.loads(self.text)
        for part in loc:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                return False
        return True

    def _where(self, loc: list, array: bool, root: type[BaseModel] | None) -> str:
        if not loc:
            return "(top level)"
        if array:
            entries = self.data.get(loc[0])
            entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else {}
            label = (entry.get("name") or entry.get("kind")) if isinstance(entry, dict) else None
            return f"[[{loc[0]}]] #{loc[1] + 1}" + (f" ({label})" if isinstance(label, str) else "")
        if isinstance(self.data.get(loc[0]), list):
            return f"[[{loc[0]}]]"
        known = root.model_fields if root is not None else self.data
        return f"[{loc[0]}]" if len(loc) > 1 or loc[0] in known else "(top level)"


def _not_a_file(path: Path) -> str | None:
    """What is at ``path`` when it is there but no regular file: a link that leads nowhere or in a loop,
    a pipe, a device, a socket."""
    if path.is_symlink():
        try:
            path.resolve(strict=True)
        except RuntimeError:  # Python before 3.13
            return "a symbolic link in a loop"
        except OSError as err:
            if err.errno == errno.ELOOP:
                return "a symbolic link in a loop"
            return f"a symbolic link to {os.readlink(path)!r}, which does not exist"
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    for test, name in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None


def read_toml(path: Path | str) -> SpecFile:
    """The text and tables of a spec file; :class:`SpecError` if it is missing, huge, not UTF-8 or not TOML."""
    path = Path(path)
    if path.is_dir():
        specs = sorted(str(p) for p in path.glob("**/*.toml"))[:5]
        raise SpecMissing(path, [f"{path}: a folder, not a spec file; give one of its specs"
                                 + (f" ({', '.join(specs)}{', ...' if len(specs) == 5 else ''})" if specs else "")])
    if not path.is_file():
        what = _not_a_file(path)
        if what:
            raise SpecMissing(path, [f"{path}: {what}, not a spec file"])
        near = _near_spec(path)
        hint = f" (did you mean {str(near)!r}?)" if near else ""
        raise SpecMissing(path, [f"{path}: no such spec file{hint}"])
    raw = path.read_bytes()
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(path, [f"{path}: larger than {MAX_SPEC_BYTES} bytes; is this a spec?"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise SpecError(path, [f"{path}:{line}: not UTF-8 text (byte {err.start}); save the spec as UTF-8"]) from None
    try:
        return SpecFile(path, text, toml.loads(text))
    except toml.TOMLDecodeError as err:
        raise SpecError(path, [f"{path}:{err.lineno}:{err.colno}: invalid TOML: {err.msg}"]) from None


def _near_spec(path: Path, depth: int = 2) -> Path | None:
    """The spec ``path`` likely meant: a file of that name in a subfolder of its folder (``specs/tiny/x.toml``
    for ``specs/x.toml``), else the closest name beside it, else the closest name in its subfolders."""
    parent = path.parent
    if not parent.is_dir():
        return None
    beside, below, folders = [], [], [parent]
    for level in range(depth + 1):
        found = []
        for folder in folders:
            try:
                entries = sorted(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or entry.suffix in (".zarr", ".history"):
                    continue
                if entry.is_dir():
                    found.append(entry)
                elif entry.suffix == ".toml" and entry != path:
                    (beside if level == 0 else below).append(entry)
        folders = found[:200]  # a bound on a large tree (a home folder)
    exact = [p for p in below if p.name == path.name]
    if exact:
        return min(exact, key=lambda p: len(p.parts))
    for candidates in (beside, below):
        near = closest(path.name, [p.name for p in candidates])
        if near:
            return next(p for p in candidates if p.name == near)
    return None


def validate(root: type[Located], spec_file: SpecFile) -> Any:
    """Validate ``spec_file`` as ``root``; raise :class:`SpecError` listing every problem."""
    try:
        spec = root.model_validate(spec_file.data)
    except ValidationError as err:
        raise SpecError(spec_file.path, [describe(root, spec_file, e) for e in err.errors()]) from None
    problems = [spec_file.problem(loc, msg, root) for loc, msg in spec.problems()]
    if problems:
        raise SpecError(spec_file.path, problems)
    return spec


def describe(root: type[BaseModel], sf: SpecFile, error: dict) -> str:
    """One pydantic error as ``FILE:LINE: [table] key: message`` (unknown keys get a suggestion)."""
    loc = _strip_tags(list(error["loc"]), sf.data)
    msg = error["msg"].removeprefix("Value error, ")
    named = re.match(r"^\[(\w+)\] (\w+): ", msg)  # a rule that names its own table and key
    if len(loc) <= 1 and named and named[1] in root.model_fields:
        return f"{sf.origin((named[1], named[2]))}: {msg}"
    if len(loc) == 1 and error["type"] in ("extra_forbidden", "missing"):
        what = ("unknown table" + _suggest(root, loc, sf.data)) if error["type"] == "extra_forbidden" \
            else "required table is missing"
        return f"{sf.origin(loc)}: [{loc[0]}]: {what}"
    if error["type"] == "extra_forbidden":
        msg = "unknown key" + _suggest(root, loc, sf.data)
    elif error["type"] == "missing":
        msg = "required key is missing"
    elif error["type"] == "union_tag_invalid":  # kind = "lyapunuv"
        ctx = error.get("ctx", {})
        tags = re.findall(r"'([^']+)'", str(ctx.get("expected_tags", "")))
        tag = ctx.get("tag")
        msg = (f"unknown kind {tag!r}{did_you_mean(tag, tags)}; known: {', '.join(tags)}; if a plugin provides it, "
               "set TRANSIENT_PLUGINS=MODULE (its module) to load it")
        return sf.problem((*loc, "kind"), msg, root)
    return sf.problem(tuple(loc), msg, root)


def _strip_tags(loc: list, data: dict) -> list:
    """Drop the tag pydantic adds after an array index for discriminated unions (measure.1.<kind>.<key>)."""
    if len(loc) >= 3 and isinstance(loc[1], int) and isinstance(loc[2], str):
        entries = data.get(loc[0])
        if isinstance(entries, list) and loc[1] < len(entries) and isinstance(entries[loc[1]], dict) \
                and entries[loc[1]].get("kind") == loc[2]:
            del loc[2]
    return loc


def _is_array(loc: list, data: dict) -> bool:
    return len(loc) >= 2 and isinstance(loc[1], int) and isinstance(data.get(loc[0]), list)


def closest(word: str, choices) -> str | None:
    """The one of ``choices`` most like ``word`` (a typo of it), or None."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return close[0] if close else None




def _suggest(root: type[BaseModel], loc: list, data: dict) -> str:
    fields = _fields_at(root, loc[:-1], data)
    close = difflib.get_close_matches(str(loc[-1]), list(fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else (f" (known keys: {', '.join(fields)})" if fields else "")


def _fields_at(model: type[BaseModel], loc: list, data: Any) -> dict:
    """The fields of the table at ``loc`` (following arrays and ``kind``-tagged unions)."""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return {}
        data = data.get(part, {}) if isinstance(data, dict) else {}
        if isinstance(data, list):  # an array of tables: the entry the next index names
            index = loc[i + 1] if i + 1 < len(loc) and isinstance(loc[i + 1], int) else 0
            data = data[index] if index < len(data) else {}
        model = _model_of(field.annotation, data)
        if model is None:
            return {}
    return model.model_fields


def _model_of(annotation: Any, data: Any) -> type[BaseModel] | None:
    """The table model an annotation holds: ``X``, ``X | None``, ``list[X]``, or a union tagged by ``kind``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is Annotated:
        return _model_of(args[0], data)
    models = [m for a in args if (m := _model_of(a, data)) is not None]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(models) > 1:
        kind = data.get("kind") if isinstance(data, dict) else None
        tagged = [m for m in models if "kind" in m.model_fields
                  and kind in typing.get_args(m.model_fields["kind"].annotation)]
        return tagged[0] if tagged else None
    return models[0] if models else None


def locate(text: str, loc: tuple) -> int:
    """Line of the TOML text where ``loc`` (table, [index,] key) is set; the table header if the key is absent."""
    table = loc[0] if loc else None
    index = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
    key = next((p for p in loc[1:] if isinstance(p, str)), None)
    if len(loc) > 2 and isinstance(loc[1], str) and re.search(rf"^\[\s*{re.escape(f'{table}.{loc[1]}')}\s*\]", text, re.M):
        table, key = f"{table}.{loc[1]}", loc[2]  # a key of a sub-table ([table.sub] key)
    header_line, seen, inside = 1, -1, False
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = re.match(r"^\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?", stripped)
        if m:
            inside = False
            if m.group(1) == table:
                seen += 1 if stripped.startswith("[[") else 0
                if not stripped.startswith("[[") or seen == index:
                    inside, header_line = True, n
            continue
        if inside and key and re.match(rf"^{re.escape(key)}\s*=", stripped):
            return n
    return header_line


def repeated(entries: list, table: str, what: str = "names") -> list[tuple[Loc, str]]:
    """A problem for each ``[[table]]`` entry whose ``name`` an earlier entry has."""
    names = [e.name for e in entries]
    return [((table, i, "name"), f"{table} {what} must be unique; {n!r} is repeated")
            for i, n in enumerate(names) if n in names[:i]]


#: Bytes a file name may have on common file systems (ext4, XFS, APFS, NTFS: 255).
NAME_MAX = 255


class Experiment(Table):
    name: Name
    """Experiment name; the store defaults to ``store/<name>.zarr``."""
    study: str | None = None
    """The study the spec belongs to (``depth``, ``training``, ...); inferred from the tables when absent."""
    description: str = ""
    """One line saying what the experiment reproduces."""
    seed: int = 0
    """Master seed: every random draw of the experiment derives from it."""
    store: str | None = Field(None, min_length=1)
    """Path of the zarr store (default ``store/<name>.zarr``, relative to the working directory)."""

    @field_validator("store")
    @classmethod
    def _store_place(cls, value: str | None) -> str | None:
        """A local path, ``file:///path`` (read as that path) or an ``s3://BUCKET/KEY`` URL, checked
        by :func:`runner.storage.location.location_problem` before anything is written: never a string
        that would become a local folder named after a scheme (``s3:/x``, ``file:x``, ``gs://x``), a
        malformed bucket or key, ``~`` or a Windows path."""
        if value is None:
            return value
        problem = location_problem(value)  # the rules every store location meets (its URL parsed once)
        if problem:
            raise ValueError(problem)
        value = local_path(value) if value.lower().startswith("file://") else value
        too_long = [part for part in re.split(r"[/\\]", value) if len(part.encode()) > NAME_MAX]
        stem = Path(value).stem
        if too_long or len((stem + ".history").encode()) > NAME_MAX:  # the folders made beside a store
            raise ValueError(f"a file name in {value[:40]!r}... is longer than file systems allow ({NAME_MAX} bytes"
                             f"{', with .history' if not too_long else ''}); use a shorter store name")
        return value
    replace: bool = False
    """Let ``apply`` replace finished results whose parameters changed (as ``apply --replace``): the
    store as it was stays readable in ``store/<name>.history/``. Off: ``apply`` refuses and says what
    changed."""
    threads: int | None = Field(None, ge=1, le=4096)
    """CPU threads for torch (as ``apply --threads``); default: the runner's thread policy chooses
    (:mod:`runner.run.threads`)."""


class StudySpec(Located):
    """What every spec has: an ``[experiment]``, a store, and a hash of its resolved content."""

    experiment: Experiment

    def store_path(self):
        """A ``Path``, or a :class:`runner.storage.location.Remote` for a URL (``s3://bucket/path/name.zarr``)."""
        return location(self.experiment.store or f"store/{self.experiment.name}.zarr")

    def canonical_json(self) -> str:
        # what the results depend on: not whether apply may replace older ones, nor the thread count
        return json.dumps(self.model_dump(mode="json", exclude={"experiment": {"replace", "threads"}}), sort_keys=True,
                          separators=(",", ":"))

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()
