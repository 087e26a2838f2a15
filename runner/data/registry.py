"""Data sources: one registry of what a spec's ``source = ...`` for data can name.

As a model family adapts a ``[[model]] source`` (:mod:`models.registry`), a :class:`DataSource`
adapts a data source string: it says whether it ``matches`` the string, what it ``gives`` (the
forms below), what is wrong with it before any compute (``check``), what its bytes are for the
plan's identity (``identity``), and it reads the data in each form it gives. A study asks
:func:`data_source` for the source of a string and a form and never compares the string itself.

Forms (a study may define more for its own generated data, e.g. the training study's scaffold
corpora):

``documents``
    Texts with an origin each (:class:`runner.data.forms.Documents`): drawn into token samples by
    the depth study. Documents marked ``shuffled`` (the hub's) are read in a seeded shuffled order.
``rows``
    Records with named fields (sentence pairs with a score), as ``documents``.
``tagged``
    Sentences with UPOS / XPOS tags and document ids (:class:`runner.data.forms.TaggedSentence`),
    for a training corpus; :meth:`DataSource.annotations` says which of them are real.
``labelled``
    The train and test split of labelled texts (:class:`runner.data.forms.Labelled`), for a
    classifier.

The built-in sources (``hf:``, local files, ``builtin:pydoc-topics``) register in
:mod:`runner.data`; a study registers its generated ones; a package adds one with
:func:`register_data_source` (entry point group ``transient.data``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from models.registry_base import Registry
from models.source import Source
from runner.data.forms import Documents, Labelled, TaggedSentence
from runner.plugin.loader import PluginError, hook, hook_name, plugin_failure

DOCUMENTS = "documents"
ROWS = "rows"
TAGGED = "tagged"
LABELLED = "labelled"
FORMS = (DOCUMENTS, ROWS, TAGGED, LABELLED)


class InputError(Exception):
    """The input source cannot give the requested data; the message says why and what to do.
    ``reason``, ``fix`` and ``detail`` (the library's own message) are its parts, when known (a plan
    lists them as a requirement, the library's message only with --verbose)."""

    def __init__(self, message: str, *, reason: str | None = None, fix: str | None = None,
                 detail: str | None = None):
        super().__init__(message)
        self.reason, self.fix, self.detail = reason, fix, detail


class DataSource:
    """Adapter of one kind of data source (subclass and :func:`register_data_source`)."""

    name: ClassVar[str]
    """Short name, shown in messages (``hub dataset``, ``local file``, ``ListOps generator``)."""
    scheme: ClassVar[str]
    """The scheme it is written with (``hf``, ``path``, ``builtin``, ``listops``)."""
    written: ClassVar[str]
    """How a spec writes it, for messages (``'hf:<dataset id>'``)."""
    gives: ClassVar[frozenset[str]] = frozenset()
    """The forms it gives (module docstring)."""
    remote: ClassVar[bool] = False
    """Read over the network: where it cannot be read, this machine lacks something (a requirement),
    the spec is not wrong."""
    pretokenized: ClassVar[bool] = False
    """Its texts are tokens separated by blanks: a study splits them and applies no tokenizer."""
    defaults: ClassVar[Mapping[str, Any]] = {}
    """Settings this source implies for a study that reads it (ListOps: ``n_classes = 10``, max
    pooling); a study reads the keys it knows and the spec's own value wins."""
    replaces: ClassVar[bool] = False
    """Registered under a name already taken: replace it (else the registration is refused)."""

    def matches(self, source: Source) -> bool:
        """Whether this source reads ``source`` (match on ``source.scheme`` and ``source.name``)."""
        return source.scheme == self.scheme

    def check(self, source: Source, base: Path, form: str, **options: Any) -> str | None:
        """What is wrong with reading ``source`` in ``form`` (``base``: the spec's folder), without
        reading the data; None when nothing is."""
        return None

    def identity(self, source: Source, base: Path, form: str = "", **options: Any) -> str:
        """What the data read in ``form`` are, for the plan's task keys: a generator's version and
        seed, a file's digest (``options`` as for :meth:`check`)."""
        return str(source)

    def unavailable(self, source: Source, *, subset: str | None = None, streaming: bool = True) -> str | None:
        """Why ``source`` cannot be read on this machine now (the hub switched off and the data not in
        its cache), or None. Cheap: no data are read."""
        return None

    def annotations(self, source: Source) -> frozenset[str]:
        """Which annotations its ``tagged`` sentences carry: ``upos``, ``xpos``, ``documents``."""
        return frozenset()

    # the forms: each source implements those it gives

    def documents(self, source: Source, base: Path, *, field: str = "text", subset: str | None = None,
                  split: str = "train", seed: int = 0, streaming: bool = True, shuffle_buffer: int = 10_000):
        raise NotImplementedError

    def rows(self, source: Source, base: Path, *, fields: tuple[str, ...], subset: str | None = None,
             split: str = "train", seed: int = 0, streaming: bool = True, shuffle_buffer: int = 10_000):
        raise NotImplementedError

    def tagged(self, source: Source, base: Path, *, subset: str | None = None, field: str = "text",
               doc_field: str | None = None):
        raise NotImplementedError

    def labelled(self, source: Source, base: Path, *, splits: tuple[str, str], text: str, label: str,
                 subset: str | None, test_fraction: float, seed: int, options: Mapping[str, Any]):
        raise NotImplementedError


#: data sources by name, the newest asked first
_SOURCES: Registry[DataSource] = Registry("data source")


#: Where the project's own sources live: they may share a scheme (``builtin:`` names several).
BUILT_IN = ("runner.", "models.")


def register_data_source(source: DataSource) -> DataSource:
    """Add a data source; it is asked before those registered earlier, and only for inputs of its own
    ``scheme``. A second source of the same ``name`` is refused unless it says ``replaces = True`` (then
    the old one goes); so is a plug-in's source whose scheme another source reads already (a scheme is a
    name too): with ``replaces = True`` it is asked first for inputs of that scheme."""
    if isinstance(source, type):
        raise TypeError(f"register_data_source takes an instance: register_data_source({source.__name__}()), "
                        f"not the class {source.__module__}.{source.__qualname__}")
    problem = _registration_problem(source)
    if problem:
        raise TypeError(f"data source {type(source).__module__}.{type(source).__qualname__}: {problem}")
    module = type(source).__module__
    scheme = [s for s in _SOURCES.newest_first() if s.scheme == source.scheme and s.name != source.name]
    if scheme and not source.replaces and not module.startswith(BUILT_IN):
        other = scheme[0]
        raise ValueError(f"data source {source.name!r} ({module}) claims the scheme {source.scheme + ':'!r}, which "
                         f"{other.name!r} ({type(other).__module__}) reads already; give it a scheme of its own, or set "
                         "replaces = True to be asked first for inputs of that scheme")
    return _SOURCES.add(source.name, source, replaces=source.replaces)


def _registration_problem(source: Any) -> str | None:
    if not isinstance(source, DataSource):
        return f"is a {type(source).__name__}, not a runner.data.registry.DataSource"
    for attr in ("name", "scheme", "written"):
        value = getattr(source, attr, None)
        if not isinstance(value, str) or not value.strip():
            return f"{attr} = {value!r}; it is a non-empty string"
    gives = getattr(source, "gives", None)
    if not isinstance(gives, set | frozenset) or not all(isinstance(g, str) and g for g in gives):
        return f"gives = {gives!r}; it is a frozenset of the forms it reads ({DOCUMENTS!r}, {ROWS!r}, {TAGGED!r}, {LABELLED!r})"
    missing = [g for g in gives if g in FORMS and getattr(type(source), g) is getattr(DataSource, g)]
    if missing:
        return f"gives {', '.join(sorted(missing))} but has no {missing[0]}() method of its own"
    return None


def read(found: DataSource, form: str, *args: Any, **kwargs: Any) -> Any:
    """``found``'s reader of ``form`` (``found.documents(*args, **kwargs)``, ...). A plug-in's (not one of
    the project's own sources) is guarded at the boundary: what it raises, but an :class:`InputError` (its
    way to say the data cannot be read), or returns outside the form's records, also while its documents
    are read, is one :class:`runner.plugin.loader.PluginError` naming it."""
    method = getattr(found, form)
    if type(found).__module__.startswith(BUILT_IN):
        return method(*args, **kwargs)
    out = hook(found, form, lambda: method(*args, **kwargs), lambda r: _form_problem(form, r), passes=(InputError,))
    if isinstance(out, Documents):
        return Documents(out.label, _checked_items(found, form, out.items), out.shuffled)
    return out


def _form_problem(form: str, out: Any) -> str | None:
    if form in (DOCUMENTS, ROWS):
        return None if isinstance(out, Documents) else f"returned {_short(out)}; it returns a runner.data.forms.Documents"
    if form == TAGGED:
        if not isinstance(out, list | tuple):
            return f"returned {_short(out)}; it returns a list of runner.data.forms.TaggedSentence"
        bad = [s for s in out if not isinstance(s, TaggedSentence)][:1]
        return f"returned {_short(bad[0])} among its sentences; each is a TaggedSentence" if bad else None
    if form == LABELLED:
        ok = isinstance(out, list | tuple) and len(out) == 2 and all(isinstance(s, Labelled) for s in out)
        return None if ok else f"returned {_short(out)}; it returns (train, test), two runner.data.forms.Labelled"
    return None


def _checked_items(found: DataSource, form: str, items: Iterable) -> Iterator[tuple[str, object]]:
    """A plug-in's documents (or rows) as they are read, each checked: an ``(origin, text)`` pair of strings
    (``rows``: ``(origin, mapping)``)."""
    try:
        for item in items:
            problem = _item_problem(form, item)
            if problem:
                raise PluginError(f"{hook_name(found, form)} gave {problem}")
            yield item
    except (PluginError, InputError):
        raise
    except Exception as err:  # raised while its documents were read
        raise plugin_failure(found, form, err) from None


def _item_problem(form: str, item: Any) -> str | None:
    if not (isinstance(item, tuple) and len(item) == 2):
        return f"{_short(item)}; each item is an (origin, {'text' if form == DOCUMENTS else 'record'}) pair"
    origin, value = item
    if not isinstance(origin, str):
        return f"the origin {_short(origin)}; an origin is a string"
    if form == DOCUMENTS and isinstance(value, bytes | bytearray):
        return f"the text of {origin!r} as bytes; decode it to a str"
    if form == DOCUMENTS and not isinstance(value, str):
        return f"the text of {origin!r} as {type(value).__name__}; a text is a str"
    if form == ROWS and not isinstance(value, Mapping):
        return f"the record of {origin!r} as {type(value).__name__}; a record is a mapping of fields"
    return None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def data_sources() -> list[DataSource]:
    """The registered sources, the newest first (the order they are asked in)."""
    return _SOURCES.newest_first()


def data_source_for(source: str) -> DataSource | None:
    """The registered source that reads ``source``, or None."""
    source = Source(source)
    return next((s for s in _SOURCES.newest_first() if s.scheme == source.scheme and s.matches(source)), None)


def data_source(source: str, form: str, what: str = "input source") -> DataSource:
    """The source that reads ``source`` in ``form``; :class:`InputError` naming what to write
    instead (``what`` names the spec field in the message)."""
    if not isinstance(source, str) or not source.strip():
        raise InputError(f"{what} {source!r} is empty; give {_choices(form)}")
    src = Source(source.strip())
    found = data_source_for(src)
    if found is None:
        same = [s for s in _SOURCES.newest_first() if s.scheme == src.scheme and form in s.gives]
        if same:
            raise InputError(f"unknown {src.scheme} {what} {str(src)!r}; known: "
                             + ", ".join(s.written for s in reversed(same)))
        raise InputError(f"{what} {str(src)!r}: unknown scheme {src.scheme + ':'!r}; give {_choices(form)}")
    if form not in found.gives:
        raise InputError(f"{what} {str(src)!r} ({found.name}) gives {', '.join(sorted(found.gives)) or 'nothing'}, "
                         f"not {form}; give {_choices(form)}")
    return found


def check_data(source: str, base: Path, form: str, what: str = "input source", **options: Any) -> str | None:
    """What is wrong with reading ``source`` in ``form`` before any compute, or None: an unknown
    source, one that does not give ``form``, or the source's own :meth:`DataSource.check`."""
    try:
        found = data_source(source, form, what)
    except InputError as err:
        return str(err)
    return hook(found, "check", lambda: found.check(Source(source.strip()), base, form, **options),
                lambda r: None if r is None or isinstance(r, str) else f"returned {r!r}; it returns None or a message")


def data_identity(source: str, base: Path, form: str, **options: Any) -> str:
    """What the data of ``source`` read in ``form`` are (:meth:`DataSource.identity`), for the task keys of
    every study: a local file's digest, a generator's version and parameters. A source that raises or
    returns something else than a non-empty string is one :class:`runner.plugin.loader.PluginError`."""
    found = data_source_for(source) or data_source(source, form)  # the latter says why there is none
    return hook(found, "identity", lambda: found.identity(Source(source.strip()), base, form, **options),
                lambda r: None if isinstance(r, str) and r.strip() else f"returned {r!r}; it returns a non-empty string")


def _choices(form: str) -> str:
    written = [s.written for s in _SOURCES.entries.values() if form in s.gives]
    return ", ".join(written[:-1]) + (" or " if len(written) > 1 else "") + (written[-1] if written else "nothing")


__all__ = ["DOCUMENTS", "LABELLED", "ROWS", "TAGGED", "DataSource", "InputError", "check_data", "data_identity", "data_source", "read", "data_source_for",
           "data_sources", "register_data_source"]
