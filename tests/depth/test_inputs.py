"""Tests for runner.studies.depth.samples and sources: drawing fixed-length token samples from text corpora (offline)."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pyarrow.parquet as pq
from pathlib import Path

import pytest
import torch

from runner.studies.depth.samples import Samples, draw_samples, split_sentences
from runner.data.pydoc_text import builtin_documents
from runner.data.registry import DOCUMENTS, InputError, check_data

TOKENS = 16


def check_source(source, field="text", **options):
    """The depth study's check of its input source: :class:`InputError` with the problem."""
    problem = check_data(source, Path("."), DOCUMENTS, field=field, **options)
    if problem:
        raise InputError(problem)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tokenizer():
    """A tiny BERT-style WordPiece tokenizer ([CLS] ... [SEP]) trained on the builtin corpus."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(
        [text for _, text in builtin_documents("pydoc-topics")],
        trainers.WordPieceTrainer(vocab_size=1000, special_tokens=specials, show_progress=False),
    )
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


@pytest.fixture(scope="module")
def documents():
    """Forty single-line documents (pydoc topics), some empty rows in between."""
    docs = [text.replace("\n", " ") for _, text in builtin_documents("pydoc-topics")[:40]]
    docs[3] = ""  # an empty document must not shift the row numbering
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, documents):
    """The same documents as .txt, .jsonl, .json and .parquet files."""
    d = tmp_path_factory.mktemp("corpus")
    paths = {}
    paths["txt"] = d / "docs.txt"
    paths["txt"].write_text("\n".join(documents) + "\n", encoding="utf-8")
    records = [{"id": i, "body": doc, "n": len(doc)} for i, doc in enumerate(documents)]
    paths["jsonl"] = d / "docs.jsonl"
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    paths["json"] = d / "docs.json"
    paths["json"].write_text(json.dumps(records), encoding="utf-8")
    paths["parquet"] = d / "docs.parquet"
    pq.write_table(pa.Table.from_pylist(records), paths["parquet"])
    return paths


def _doc_of(origin: str, documents: list[str]) -> tuple[str, int]:
    """(document, sentence index) named by a local-file origin '<path>: row i, sentence j'."""
    _, _, rest = origin.rpartition(": row ")
    row, _, sentence = rest.partition(", sentence ")
    return documents[int(row)], int(sentence)


def _check_shape(s: Samples, tokenizer, samples: int, tokens: int) -> None:
    assert isinstance(s, Samples)
    assert len(s) == len(s.texts) == len(s.origins) == samples
    assert s.input_ids.shape == (samples, tokens) and s.input_ids.dtype == torch.int64
    assert s.attention_mask.shape == (samples, tokens) and s.attention_mask.dtype == torch.int64
    assert bool((s.attention_mask == 1).all())
    assert not bool((s.input_ids == tokenizer.pad_token_id).any())
    assert bool((s.input_ids[:, 0] == tokenizer.cls_token_id).all())
    assert bool((s.input_ids[:, -1] == tokenizer.sep_token_id).all())
    for text, ids in zip(s.texts, s.input_ids.tolist()):
        assert tokenizer(text, truncation=True, max_length=tokens)["input_ids"] == ids


# --------------------------------------------------------------------------- splitting


def test_split_sentences_is_simple_and_deterministic():
    doc = '  First one. Second!  Third? "Quoted." (Bracketed.) Next\nNew line\n\n  last. '
    assert split_sentences(doc) == [
        "First one.",
        "Second!",
        "Third?",
        '"Quoted."',
        "(Bracketed.)",
        "Next",
        "New line",
        "last.",
    ]
    assert split_sentences("version 3.12 is out") == ["version 3.12 is out"]
    assert split_sentences("") == [] and split_sentences(" \n \n") == []


def test_builtin_documents_are_prose():
    docs = builtin_documents("pydoc-topics")
    assert len(docs) > 50
    labels = [label for label, _ in docs]
    assert labels == sorted(labels) and "assert" in labels
    text = dict(docs)["assert"]
    assert "********" not in text  # heading underline dropped
    assert "assert_stmt ::=" not in text  # indented grammar block dropped
    assert "Assert statements are a convenient way to insert debugging assertions into a program:" in text


# --------------------------------------------------------------------------- sources


@pytest.mark.parametrize("kind", ["txt", "jsonl", "json", "parquet"])
def test_local_files(kind, corpus, documents, tokenizer):
    field = "text" if kind == "txt" else "body"
    source = str(corpus[kind]) if kind != "json" else f"path:{corpus[kind]}"
    check_source(source, field=field)
    s = draw_samples(source, tokenizer=tokenizer, samples=12, tokens=TOKENS, seed=1, field=field)
    _check_shape(s, tokenizer, 12, TOKENS)
    for text, origin in zip(s.texts, s.origins):
        assert origin.startswith(f"{corpus[kind]}: row ")
        doc, j = _doc_of(origin, documents)
        assert text in doc
        assert split_sentences(doc)[j] == text
    # the .txt row number is the line number in the file
    if kind == "txt":
        lines = corpus["txt"].read_text(encoding="utf-8").split("\n")
        for text, origin in zip(s.texts, s.origins):
            assert text in lines[int(origin.rpartition(": row ")[2].split(",")[0])]


def test_all_file_formats_agree(corpus, tokenizer):
    draws = [
        draw_samples(str(corpus[k]), tokenizer=tokenizer, samples=8, tokens=TOKENS, seed=3,
                     field="text" if k == "txt" else "body")
        for k in ("txt", "jsonl", "json", "parquet")
    ]
    for d in draws[1:]:
        assert d.texts == draws[0].texts
        assert torch.equal(d.input_ids, draws[0].input_ids)


def test_builtin_source(tokenizer):
    source = "builtin:pydoc-topics"
    check_source(source)
    s = draw_samples(source, tokenizer=tokenizer, samples=20, tokens=32, seed=0)
    _check_shape(s, tokenizer, 20, 32)
    docs = dict(builtin_documents("pydoc-topics"))
    for text, origin in zip(s.texts, s.origins):
        assert origin.startswith("builtin:pydoc-topics: topic '")
        topic = origin.split("topic '", 1)[1].split("'", 1)[0]
        j = int(origin.rpartition(", sentence ")[2])
        assert split_sentences(docs[topic])[j] == text


def test_only_sentences_that_fill_the_window(tmp_path, tokenizer):
    path = tmp_path / "mix.txt"
    long = "the class statement defines a new class object with the given name and bases."
    path.write_text(f"Short one. {long} Tiny.\nAlso short!\n", encoding="utf-8")
    n = len(tokenizer(long)["input_ids"])
    assert n > 8
    # a sentence exactly as long as the window qualifies, and is not truncated
    s = draw_samples(str(path), tokenizer=tokenizer, samples=1, tokens=n, seed=0)
    assert s.texts == [long] and s.input_ids.shape == (1, n)
    assert s.origins == [f"{path}: row 0, sentence 1"]
    # shorter windows truncate it, keeping [SEP] last
    s = draw_samples(str(path), tokenizer=tokenizer, samples=1, tokens=8, seed=0)
    assert s.texts == [long] and s.input_ids[0, -1].item() == tokenizer.sep_token_id
    # one token more and nothing qualifies
    with pytest.raises(InputError, match=r"only 0 sentences"):
        draw_samples(str(path), tokenizer=tokenizer, samples=1, tokens=n + 1, seed=0)


# --------------------------------------------------------------------------- seeds


def test_same_arguments_same_samples(corpus, tokenizer):
    kw = dict(tokenizer=tokenizer, samples=10, tokens=TOKENS, field="body")
    a = draw_samples(str(corpus["jsonl"]), seed=7, **kw)
    b = draw_samples(str(corpus["jsonl"]), seed=7, **kw)
    assert a.texts == b.texts and a.origins == b.origins
    assert torch.equal(a.input_ids, b.input_ids)
    c = draw_samples(str(corpus["jsonl"]), seed=8, **kw)
    assert c.origins != a.origins


def test_builtin_draws_are_seeded(tokenizer):
    kw = dict(tokenizer=tokenizer, samples=5, tokens=24)
    a = draw_samples("builtin:pydoc-topics", seed=0, **kw)
    assert a.origins == draw_samples("builtin:pydoc-topics", seed=0, **kw).origins
    assert a.origins != draw_samples("builtin:pydoc-topics", seed=1, **kw).origins


def test_draw_is_a_seeded_sample_of_all_candidates(corpus, tokenizer):
    """Asking for every candidate returns each exactly once, in an order set by the seed."""
    kw = dict(tokenizer=tokenizer, tokens=TOKENS, seed=0)
    with pytest.raises(InputError, match=r"has only (\d+) sentences") as err:
        draw_samples(str(corpus["txt"]), samples=10**6, **kw)
    total = int(err.value.args[0].split("has only ")[1].split()[0])
    s = draw_samples(str(corpus["txt"]), samples=total, **kw)
    assert len(set(s.origins)) == total
    s2 = draw_samples(str(corpus["txt"]), samples=total, tokenizer=tokenizer, tokens=TOKENS, seed=1)
    assert sorted(s2.origins) == sorted(s.origins) and s2.origins != s.origins


# --------------------------------------------------------------------------- errors


def test_argument_errors(corpus, tokenizer):
    for tokens in (1, 0, -3, 2.5, True):
        with pytest.raises(ValueError, match="tokens"):
            draw_samples("builtin:pydoc-topics", tokenizer=tokenizer, samples=1, tokens=tokens, seed=0)
    for samples in (0, -1, 1.0):
        with pytest.raises(ValueError, match="samples"):
            draw_samples("builtin:pydoc-topics", tokenizer=tokenizer, samples=samples, tokens=8, seed=0)
    with pytest.raises(ValueError, match="shuffle_buffer"):
        draw_samples("hf:a/b", tokenizer=tokenizer, samples=1, tokens=8, seed=0, shuffle_buffer=0)


def test_missing_file(tmp_path, tokenizer):
    missing = tmp_path / "nope.txt"
    for source in (str(missing), f"path:{missing}"):
        with pytest.raises(InputError, match="not found") as err:
            check_source(source)
        assert str(missing) in str(err.value)
        with pytest.raises(InputError, match="not found"):
            draw_samples(source, tokenizer=tokenizer, samples=1, tokens=8, seed=0)


def test_hub_like_path_gets_a_hint():
    with pytest.raises(InputError, match=r"hf:wikimedia/wikipedia"):
        check_source("wikimedia/wikipedia")


def test_directory_and_unknown_extension(tmp_path, tokenizer):
    with pytest.raises(InputError, match="not a file"):
        check_source(str(tmp_path))
    csv = tmp_path / "docs.xml"  # (.csv and .tsv are read: sentence pairs)
    csv.write_text("text\nhello.\n")
    with pytest.raises(InputError, match=r"unsupported extension '\.xml'") as err:
        draw_samples(str(csv), tokenizer=tokenizer, samples=1, tokens=8, seed=0)
    assert str(csv) in str(err.value) and ".parquet" in str(err.value)


@pytest.mark.parametrize("kind", ["jsonl", "json", "parquet"])
def test_missing_field(kind, corpus, tokenizer):
    with pytest.raises(InputError, match="no field 'content'") as err:
        check_source(str(corpus[kind]), field="content")
    msg = str(err.value)
    assert str(corpus[kind]) in msg and "'body'" in msg  # names the file and the fields it has
    with pytest.raises(InputError, match="no field 'content'"):
        draw_samples(str(corpus[kind]), tokenizer=tokenizer, samples=1, tokens=8, seed=0, field="content")


def test_txt_ignores_field(corpus, tokenizer):
    check_source(str(corpus["txt"]), field="body")
    s = draw_samples(str(corpus["txt"]), tokenizer=tokenizer, samples=2, tokens=8, seed=0, field="body")
    assert len(s) == 2


def test_non_text_field_and_bad_json(corpus, tmp_path, tokenizer):
    with pytest.raises(InputError, match="field 'n' holds int"):
        draw_samples(str(corpus["jsonl"]), tokenizer=tokenizer, samples=1, tokens=8, seed=0, field="n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine."}\n{not json\n')
    with pytest.raises(InputError, match="bad.jsonl"):
        draw_samples(str(bad), tokenizer=tokenizer, samples=1, tokens=4, seed=0)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match="empty.jsonl"):
        check_source(str(empty))


def test_not_enough_sentences(corpus, tokenizer):
    with pytest.raises(InputError) as err:
        draw_samples(str(corpus["txt"]), tokenizer=tokenizer, samples=100_000, tokens=TOKENS, seed=0)
    msg = str(err.value)
    assert str(corpus["txt"]) in msg and "has only" in msg and "100000 samples" in msg
    assert "fewer samples or fewer tokens" in msg
    with pytest.raises(InputError, match="builtin:pydoc-topics' has only"):
        draw_samples("builtin:pydoc-topics", tokenizer=tokenizer, samples=10_000, tokens=32, seed=0)


def test_source_syntax_errors():
    for bad in ("", "   ", "hf:", "hf:not a/valid id", "hf:a/b/c", "path:"):
        with pytest.raises(InputError):
            check_source(bad)
    with pytest.raises(InputError, match=r"unknown builtin .*'builtin:pydoc-topics'"):
        check_source("builtin:wikipedia")
    with pytest.raises(InputError, match="unknown builtin"):
        builtin_documents("nope")


def test_check_source_on_hub_ids_is_offline(monkeypatch):
    import datasets

    def boom(*a, **k):  # pragma: no cover - would mean a network attempt
        raise AssertionError("check_source must not load hub datasets")

    monkeypatch.setattr(datasets, "load_dataset", boom)
    check_source("hf:wikimedia/wikipedia", subset="20231101.en")
    check_source("hf:imdb", split="test")


# --------------------------------------------------------------------------- hub


def test_hub_offline_fails_fast(monkeypatch, tokenizer):
    import datasets.config
    import huggingface_hub.constants as hub_constants

    before = (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    t0 = time.monotonic()
    with pytest.raises(InputError) as err:
        draw_samples("hf:wikimedia/wikipedia", subset="20231101.en", tokenizer=tokenizer,
                     samples=2, tokens=8, seed=0)
    assert time.monotonic() - t0 < 15
    msg = str(err.value)
    assert "hf:wikimedia/wikipedia/20231101.en[train]" in msg
    assert "offline" in msg and "no network" in msg and "give its path as the input source" in msg
    assert (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE) == before  # restored


@pytest.fixture
def fake_hub(monkeypatch, corpus):
    """Route datasets.load_dataset for hub ids to the local JSON corpus; record the calls."""
    import datasets

    real = datasets.load_dataset
    calls = []

    def load(path, name=None, *, split=None, streaming=False, **kw):
        if path in ("json", "text", "parquet"):
            return real(path, name, split=split, streaming=streaming, **kw)
        calls.append((path, name, split, streaming))
        if path != "fake/wiki":
            raise FileNotFoundError(f"Dataset '{path}' doesn't exist on the Hub")
        rows = [json.loads(line) for line in corpus["jsonl"].read_text().splitlines()]
        rows = [{"id": str(r["id"]), "title": f"Doc {r['id']}", "text": r["body"]} for r in rows]
        ds = datasets.Dataset.from_list(rows)
        return ds.to_iterable_dataset(num_shards=4) if streaming else ds

    monkeypatch.setattr(datasets, "load_dataset", load)
    return calls


@pytest.mark.parametrize("streaming", [True, False])
def test_hub_draw_one_sentence_per_document(fake_hub, documents, tokenizer, streaming):
    kw = dict(tokenizer=tokenizer, samples=10, tokens=TOKENS, subset="x", split="train",
              streaming=streaming, shuffle_buffer=16)
    s = draw_samples("hf:fake/wiki", seed=5, **kw)
    assert fake_hub[0] == ("fake/wiki", "x", "train", streaming)
    _check_shape(s, tokenizer, 10, TOKENS)
    ids = []
    for text, origin in zip(s.texts, s.origins):
        assert origin.startswith("hf:fake/wiki/x[train]: shuffled row ")
        doc_id = int(origin.split("id='")[1].split("'")[0])
        ids.append(doc_id)
        assert f"title='Doc {doc_id}'" in origin
        j = int(origin.rpartition(", sentence ")[2])
        assert split_sentences(documents[doc_id])[j] == text
    assert len(set(ids)) == len(ids)  # different documents
    again = draw_samples("hf:fake/wiki", seed=5, **kw)
    assert again.origins == s.origins and torch.equal(again.input_ids, s.input_ids)
    other = draw_samples("hf:fake/wiki", seed=6, **kw)
    assert other.origins != s.origins


def test_hub_not_enough_documents(fake_hub, documents, tokenizer):
    with pytest.raises(InputError, match=rf"only \d+ documents \(of {len(documents)}\)"):
        draw_samples("hf:fake/wiki", tokenizer=tokenizer, samples=len(documents) + 1, tokens=TOKENS, seed=0)


def test_hub_errors_are_wrapped(fake_hub, tokenizer):
    with pytest.raises(InputError, match=r"could not read hub dataset hf:no/such\[train\].*doesn't exist") as err:
        draw_samples("hf:no/such", tokenizer=tokenizer, samples=1, tokens=8, seed=0)
    assert "network" in str(err.value)
    with pytest.raises(InputError, match="no field 'body'"):
        draw_samples("hf:fake/wiki", tokenizer=tokenizer, samples=1, tokens=8, seed=0, field="body")


@pytest.fixture(autouse=True)
def _private_datasets_cache(tmp_path_factory, monkeypatch):
    """Keep the lock files that `datasets` leaves behind out of the user's cache."""
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.getbasetemp() / "hf-datasets")
