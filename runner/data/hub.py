"""``hf:<dataset id>``: a Hugging Face hub dataset, read with ``datasets``.

``subset``, ``split`` and ``field`` name the part and the column. Documents and rows are streamed
(or read through the cache with ``streaming = False``) in a seeded shuffled order; training corpora
and labelled splits are read through the ``datasets`` cache. With the hub switched off or out of
reach (:func:`models.hub.hub_off`), only the local cache is used (:func:`offline_hub`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from models.hub import hub_off, why_hub_off
from models.source import Source
from runner.data.forms import Documents, Labelled, TaggedSentence, numbered
from runner.data.registry import DOCUMENTS, LABELLED, ROWS, TAGGED, DataSource, InputError, register_data_source
from runner.data.text import document_text, split_sentences

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?$")


#: The libraries' offline switches, read once when each is imported: module -> its switches.
_SWITCHES = {"datasets.config": ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"), "huggingface_hub.constants": ("HF_HUB_OFFLINE",)}


@contextlib.contextmanager
def offline_hub() -> Iterator[bool]:
    """With the hub switched off or out of reach (:func:`models.hub.hub_off`), make ``datasets``
    use its local cache only, now: the switches of the libraries imported already are set, and the
    environment's for one imported inside (a builtin corpus imports neither: ``datasets`` alone
    takes a second to import)."""
    if not hub_off():
        yield False
        return
    saved = {(name, attr): getattr(sys.modules[name], attr) for name, attrs in _SWITCHES.items()
             if name in sys.modules for attr in attrs}
    for name, attr in saved:
        setattr(sys.modules[name], attr, True)
    env = {var: os.environ.get(var) for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    os.environ.update(dict.fromkeys(env, "1"))
    try:
        yield True
    finally:
        for (name, attr), value in saved.items():
            setattr(sys.modules[name], attr, value)
        for var, value in env.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def hub_error(label: str, src: Source, subset, split, streaming, exc: BaseException, offline: bool) -> InputError:
    args = ", ".join(repr(a) for a in (src.name, subset) if a is not None)
    mode = " (offline mode is on: HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)" if offline else ""
    return InputError(
        f"could not read hub dataset {label}{mode}: {type(exc).__name__}: {exc}. "
        "Check the dataset id, subset and split. If this machine has no network, save a part of "
        "the dataset to a file on a machine that has, e.g. datasets.Dataset.from_list(list("
        f"datasets.load_dataset({args}, split={split!r}, streaming=True).take(100_000)))"
        ".to_parquet('corpus.parquet'), copy it here and give its path as the input source"
        + (" (or use 'builtin:pydoc-topics' for a demo)." if streaming else
           ", or fill the datasets cache there and run with streaming=False.")
    )


def hub_message(name: str, subset: str | None, exc: BaseException, offline: bool) -> str:
    args = ", ".join(repr(a) for a in (name, subset) if a is not None)
    mode = " (the hub is off or out of reach: only the local cache is read)" if offline else ""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return (f"hub dataset {name!r}{f' ({subset})' if subset else ''} cannot be loaded{mode}: "
            f"{type(exc).__name__}: {first}. On a machine with network, datasets.load_dataset({args}) fills "
            "the cache (HF_HOME); or save its splits as parquet files and give their path with {split}")


def hub_cached(name: str, subset: str | None) -> str | None:
    """None when the hub dataset can be loaded now (online, or in the cache); else why not. Cheap:
    no data is read."""
    if not hub_off():
        return None
    import datasets  # lazy: datasets

    with offline_hub():
        try:
            datasets.load_dataset_builder(name, subset)
        except Exception as exc:  # noqa: BLE001
            return hub_message(name, subset, exc, True)
    return None


def load_hf_text(dataset_id: str = "wikitext", subset: str | None = "wikitext-2-raw-v1", split: str = "train",
                 field: str = "text") -> list[list[str]]:
    """Whitespace-tokenized non-empty records of a Hugging Face dataset, via ``datasets``.

    Wikitext records are lines of articles (paragraphs and `` = Heading = `` lines), not
    sentences; ``wikitext_articles`` groups them by article for topic tags. Needs network access
    or a populated Hugging Face cache.
    """
    ds = _load_cached(dataset_id, subset, split)
    if field not in ds.column_names:
        raise KeyError(f"dataset {dataset_id!r} has no field {field!r}; fields: {ds.column_names}")
    return [tokens for text in ds[field] if (tokens := str(text).split())]


def load_hf_documents(dataset_id: str, subset: str | None, split: str, field: str,
                      doc_field: str) -> list[tuple[str, str]]:
    """``(document id, text)`` of a hub dataset with one document per record (e.g.
    ``wikimedia/wikipedia``: ``doc_field = "title"``, ``field = "text"``), via ``datasets``."""
    ds = _load_cached(dataset_id, subset, split)
    missing = [c for c in (field, doc_field) if c not in ds.column_names]
    if missing:
        raise KeyError(f"dataset {dataset_id!r} has no fields {missing}; fields: {ds.column_names}")
    return [(str(d), str(t)) for d, t in zip(ds[doc_field], ds[field])]


def _load_cached(dataset_id: str, subset: str | None, split: str):
    import datasets  # lazy: datasets

    try:
        return datasets.load_dataset(dataset_id, subset, split=split)
    except Exception as e:
        what = f"Hugging Face dataset {dataset_id!r} (subset {subset!r}, split {split!r})"
        detail = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        args = ", ".join(repr(a) for a in (dataset_id, subset) if a is not None)
        fix = (f"on a machine with network, `runner apply` (or datasets.load_dataset({args})) fills the cache "
               "(HF_HOME / HF_DATASETS_CACHE)")
        reason = (f"{what} is not in the datasets cache and {why_hub_off()}" if hub_off() else
                  f"could not load {what}: {detail}")
        raise HubDataUnavailable(f"{reason}; {fix}", reason=reason, fix=fix, detail=detail) from e


class HubDataUnavailable(RuntimeError):
    """A hub dataset that cannot be loaded: ``reason`` and ``fix`` (one line), ``detail`` (the
    library's message: with the hub off, shown by ``plan --verbose`` only)."""

    def __init__(self, message: str, *, reason: str, fix: str, detail: str):
        super().__init__(message)
        self.reason, self.fix, self.detail = reason, fix, detail


def wikitext_articles(records: Sequence[Sequence[str]]) -> list[tuple[str, list[list[str]]]]:
    """Group tokenized wikitext records into ``(title, records)`` articles.

    A record ``= Title =`` (single equals signs) starts an article; section headings
    (``= = Section = =``) are dropped. Records before the first title are skipped.
    """
    articles: list[tuple[str, list[list[str]]]] = []
    for rec in records:
        if len(rec) >= 3 and rec[0] == "=" and rec[-1] == "=" and "=" not in rec[1:-1]:
            articles.append((" ".join(rec[1:-1]), []))
        elif rec and rec[0] == "=" and rec[-1] == "=":
            continue  # section heading
        elif articles:
            articles[-1][1].append(list(rec))
    return articles


class HubSource(DataSource):
    name = "hub dataset"
    scheme = "hf"
    written = "'hf:<dataset id>'"
    gives = frozenset({DOCUMENTS, ROWS, TAGGED, LABELLED})
    remote = True

    def check(self, source: Source, base: Path, form: str, **options: Any) -> str | None:
        if not HUB_ID.match(source.name):
            return (f"{source.name!r} (source {str(source)!r}) is not a Hugging Face dataset id; write it as "
                    "'hf:<owner>/<name>' "
                    "(e.g. 'hf:wikimedia/wikipedia')")
        return None

    def annotations(self, source: Source) -> frozenset[str]:
        return frozenset({"documents"})

    def documents(self, source, base, *, field="text", subset=None, split="train", seed=0, streaming=True,
                  shuffle_buffer=10_000) -> Documents:
        label = _label(source, subset, split)

        def items():
            for i, row in self._shuffled(source, label, subset, split, seed, streaming, shuffle_buffer):
                tags = ", ".join(f"{k}={row[k]!r}" for k in ("id", "title") if k in row and k != field)
                yield f"{label}: shuffled row {i}" + (f" ({tags})" if tags else ""), document_text(row, field, label)

        return Documents(label, items(), shuffled=True)

    def rows(self, source, base, *, fields, subset=None, split="train", seed=0, streaming=True,
             shuffle_buffer=10_000) -> Documents:
        label = _label(source, subset, split)
        rows = self._shuffled(source, label, subset, split, seed, streaming, shuffle_buffer)
        return Documents(label, ((f"{label}: shuffled row {i}", row) for i, row in rows), shuffled=True)

    def _shuffled(self, src, label, subset, split, seed, streaming, shuffle_buffer) -> Iterator[tuple[int, dict]]:
        import datasets  # lazy: datasets

        with offline_hub() as offline:
            try:
                ds = datasets.load_dataset(src.name, subset, split=split, streaming=streaming)
                if isinstance(ds, datasets.IterableDataset):
                    ds = ds.shuffle(seed=seed, buffer_size=shuffle_buffer)
                else:
                    ds = ds.shuffle(seed=seed)
                rows = iter(ds)
            except Exception as exc:  # noqa: BLE001 - network, auth, unknown id, offline ...
                raise hub_error(label, src, subset, split, streaming, exc, offline) from exc
            i = 0
            while True:
                try:
                    row = next(rows)
                except StopIteration:
                    return
                except Exception as exc:  # noqa: BLE001 - streaming errors surface while iterating
                    raise hub_error(label, src, subset, split, streaming, exc, offline) from exc
                yield i, row
                i += 1

    def tagged(self, source, base, *, subset=None, field="text", doc_field=None) -> list[TaggedSentence]:
        try:
            if doc_field:
                docs = load_hf_documents(source.hub_id, subset, "train", field, doc_field)
                return [TaggedSentence.untagged(w, doc) for doc, text in docs for sentence in split_sentences(text)
                        if (w := tuple(sentence.split()))]
            records = load_hf_text(source.hub_id, subset, "train", field)
        except (RuntimeError, KeyError) as err:
            raise InputError(str(err), reason=getattr(err, "reason", None), fix=getattr(err, "fix", None),
                             detail=getattr(err, "detail", None)) from None
        return [TaggedSentence.untagged(tuple(r), title)
                for title, recs in wikitext_articles(records) or [("0", records)] for r in recs]

    def labelled(self, source, base, *, splits, text, label, subset, test_fraction, seed,
                 options: Mapping[str, Any]) -> tuple[Labelled, Labelled]:
        import datasets  # lazy: datasets

        out = []
        with offline_hub() as offline:
            for split in splits:
                try:
                    rows = datasets.load_dataset(source.hub_id, subset, split=split)
                except Exception as exc:  # noqa: BLE001 -- every failure becomes one clear message
                    raise InputError(hub_message(source.hub_id, subset, exc, offline)) from exc
                out.append(labelled_rows(rows, text, label, f"hub dataset {source.hub_id!r} split {split!r}"))
        return numbered(out[0], out[1])

    def unavailable(self, source: Source, *, subset: str | None = None, streaming: bool = True) -> str | None:
        if streaming:
            return "a hub dataset, streamed, and the hub is switched off or out of reach here" if hub_off() else None
        return hub_cached(source.hub_id, subset)


def labelled_rows(rows, text: str, label: str, where: str) -> Labelled:
    """The texts and labels of a ``datasets`` table."""
    if text not in rows.column_names or label not in rows.column_names:
        raise InputError(f"{where} has no column {text if text not in rows.column_names else label!r}; "
                         f"its columns: {', '.join(rows.column_names)}")
    return Labelled([str(t or "") for t in rows[text]], list(rows[label]))


def _label(source: Source, subset: str | None, split: str) -> str:
    return f"hf:{source.name}" + (f"/{subset}" if subset else "") + f"[{split}]"


register_data_source(HubSource())
