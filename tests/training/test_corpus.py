"""Corpora, preprocessing, tags and batching for the LSTM studies (runner/data: sources, tokens, tagsets)."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
import torch

from runner.data.files import parse_conllu, read_conllu
from runner.data.forms import TaggedSentence
from runner.data.hub import load_hf_text, wikitext_articles
from runner.data.text import read_text
from runner.studies.training.data.tagsets import shuffled_tags, spacy_tags, topic_tags
from runner.studies.training.data.tokens import (EOS, UNK, batchify, build_vocabulary, encode_corpus, get_batch, preprocess,
                                preprocess_tagged, split_corpus)

CONLLU = """\
# newdoc id = doc-a
# sent_id = 1
# text = I can't go.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
2\tca\tcan\tAUX\tMD\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = 2
1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_

# newdoc id = doc-b
# sent_id = 3
1\tSue\tSue\tPROPN\tNNP\t_\t2\tnsubj\t_\t_
2\tlikes\tlike\tVERB\tVBZ\t_\t0\troot\t_\t_
2.1\tlikes\tlike\tVERB\tVBZ\t_\t_\t_\t4:conj\t_
3\ttea\ttea\tNOUN\tNN\t_\t2\tobj\t_\t_"""


def test_read_conllu(tmp_path):
    path = tmp_path / "mini.conllu"
    path.write_text(CONLLU, encoding="utf-8")  # no trailing blank line: last sentence still read
    sents = read_conllu(path)
    assert len(sents) == 3
    first = sents[0]
    assert first.words == ("I", "ca", "n't", "go", ".")  # range 2-3 skipped, syntactic words kept
    assert first.upos == ("PRON", "AUX", "PART", "VERB", "PUNCT")
    assert first.xpos == ("PRP", "MD", "RB", "VB", ".")
    assert [s.doc_id for s in sents] == ["doc-a", "doc-a", "doc-b"]
    assert sents[2].words == ("Sue", "likes", "tea")  # empty node 2.1 skipped
    assert sents[2].upos == ("PROPN", "VERB", "NOUN")
    assert topic_tags(sents) == [["doc-a"] * 5, ["doc-a"], ["doc-b"] * 3]


def test_parse_conllu_errors_and_bare_newdoc():
    with pytest.raises(ValueError, match="line 1"):
        parse_conllu("1 I I PRON PRP _ 0 root _ _\n")  # spaces, not tabs
    sents = parse_conllu("# newdoc\n1\tx\tx\tX\tX\t_\t0\troot\t_\t_\n")
    assert sents[0].doc_id == "0"
    assert parse_conllu("1\tx\tx\tX\tX\t_\t0\troot\t_\t_\n")[0].doc_id is None
    with pytest.raises(ValueError, match="no doc_id"):
        topic_tags(parse_conllu("1\tx\tx\tX\tX\t_\t0\troot\t_\t_\n"))


def test_read_text(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("The cat sat .\n\n  a  b\n", encoding="utf-8")
    assert read_text(path) == [["The", "cat", "sat", "."], ["a", "b"]]


def test_preprocess_options():
    sents = [["The", "cat"], ["the", "dog"], ["THE", "cat", "zebra"], ["a", "cat"]]
    # nothing requested: lowercase only
    lowered = [["the", "cat"], ["the", "dog"], ["the", "cat", "zebra"], ["a", "cat"]]
    assert preprocess(sents) == lowered
    assert preprocess(sents, lowercase=False)[0] == ["The", "cat"]
    # replace words under a count (counts after lowercasing: the 3, cat 3, dog 1, zebra 1, a 1)
    assert preprocess(sents, min_count=2) == [
        ["the", "cat"], ["the", UNK], ["the", "cat", UNK], [UNK, "cat"]
    ]
    # drop sentences with a rare word first, then replace by counts over what is left:
    # only "the cat" survives, and there each word occurs once
    assert preprocess(sents, min_count=2, drop_rare_sentences=True) == [[UNK, UNK]]
    only = preprocess(sents, min_count=1, drop_rare_sentences=True, drop_below=2)
    assert only == [["the", "cat"]]
    # drop below 2 (zebra, a: their sentences go), then recount what is left (the 3, dog 2,
    # cat 1) and replace below 2
    kept = preprocess(sents + [["the", "dog"]], min_count=2, drop_rare_sentences=True, drop_below=2)
    assert kept == [["the", UNK], ["the", "dog"], ["the", "dog"]]
    # counts from elsewhere (the training split) decide replacement
    assert preprocess([["dog", "zebra"]], min_count=1, counts={"dog": 5}) == [["dog", UNK]]
    with pytest.raises(ValueError):
        preprocess(sents, drop_rare_sentences=True)


def test_preprocess_tagged_keeps_tags_aligned():
    tagged = [
        TaggedSentence(("A", "b"), ("DET", "NOUN"), ("DT", "NN"), "d1"),
        TaggedSentence(("rare",), ("ADJ",), ("JJ",), "d1"),
        TaggedSentence(("a", "B"), ("DET", "NOUN"), ("DT", "NN"), "d2"),
    ]
    out = preprocess_tagged(tagged, min_count=2, drop_rare_sentences=True)
    assert [s.words for s in out] == [("a", "b"), ("a", "b")]
    assert [s.doc_id for s in out] == ["d1", "d2"] and out[0].upos == ("DET", "NOUN")


def test_vocabulary():
    sents = [["b", "a", "b"], ["c", "b", "a"], ["d"]]
    vocab = build_vocabulary(sents, min_count=2)
    assert vocab.itos == (UNK, EOS, "b", "a")
    assert vocab.counts == {UNK: 2, EOS: 3, "b": 3, "a": 2}
    assert vocab.stoi["a"] == 3 and len(vocab) == 4 and "c" not in vocab
    assert vocab.encode(["a", "zzz"]) == [3, 0]
    assert vocab.decode([2, 3]) == ["b", "a"]
    with pytest.raises(Exception):
        vocab.itos = ()  # frozen
    stream = encode_corpus(sents, vocab)
    assert stream.tolist() == [2, 3, 2, 1, 0, 2, 3, 1, 0, 1] and stream.dtype == torch.long
    tags = build_vocabulary([["X", "Y"]], unk=None)
    assert tags.itos == (EOS, "X", "Y") and tags.unk_id is None
    with pytest.raises(KeyError):
        tags.encode(["Z"])
    # a corpus that already contains <unk> (wikitext) folds it into the special entry
    assert build_vocabulary([[UNK, "x"]]).itos == (UNK, EOS, "x")


def test_split_fractions_and_determinism():
    items = list(range(1000))
    train, dev, test = split_corpus(items, seed=3)
    assert (len(train), len(dev), len(test)) == (700, 100, 200)
    assert sorted(train + dev + test) == items
    assert split_corpus(items, seed=3) == (train, dev, test)
    assert split_corpus(items, seed=4)[0] != train
    assert split_corpus(items, shuffle=False) == (items[:700], items[700:800], items[800:])
    parts = split_corpus(list(range(7)), (0.5, 0.5), seed=0)
    assert sum(map(len, parts)) == 7
    with pytest.raises(ValueError):
        split_corpus(items, (0.5, 0.2))


def test_shuffled_tags_per_token_keeps_distribution():
    tags = [["DET", "NOUN", "VERB"], ["NOUN"], ["DET", "NOUN", "NOUN", "PUNCT"]] * 20
    shuffled = shuffled_tags(tags, seed=1)
    assert [len(s) for s in shuffled] == [len(s) for s in tags]
    flat = lambda ts: [t for s in ts for t in s]  # noqa: E731
    assert Counter(flat(shuffled)) == Counter(flat(tags))
    assert shuffled != tags
    assert shuffled_tags(tags, seed=1) == shuffled and shuffled_tags(tags, seed=2) != shuffled


def test_shuffled_tags_per_type_consistent():
    torch.manual_seed(0)
    vocab = [f"w{i}" for i in range(300)]
    gen = torch.Generator().manual_seed(0)
    words = [
        [vocab[j] for j in torch.randint(0, 300, (12,), generator=gen).tolist()] for _ in range(400)
    ]
    tag_of = {w: ("NOUN" if i % 4 else "VERB") for i, w in enumerate(vocab)}  # 3:1 NOUN:VERB
    tags = [[tag_of[w] for w in s] for s in words]
    out = shuffled_tags(tags, seed=0, per="type", words=words)
    seen: dict[str, str] = {}
    for ws, ts in zip(words, out):
        for w, t in zip(ws, ts):
            assert seen.setdefault(w, t) == t  # one tag per word type
    assert set(seen.values()) <= {"NOUN", "VERB"}
    noun_share = sum(t == "NOUN" for t in seen.values()) / len(seen)
    assert 0.6 < noun_share < 0.9  # drawn from the tag distribution (0.75)
    assert sum(seen[w] != tag_of[w] for w in seen) > 30  # the association is broken
    with pytest.raises(ValueError):
        shuffled_tags(tags, per="type")


def test_batchify_and_get_batch():
    data = torch.arange(23)
    src = batchify(data, 4)
    assert src.shape == (5, 4)  # 23 // 4 = 5 steps; 3 tokens dropped
    assert src[:, 1].tolist() == [5, 6, 7, 8, 9]  # columns are contiguous slices
    x, y = get_batch(src, 0, bptt=3)
    assert x.shape == y.shape == (4, 3)
    assert x[1].tolist() == [5, 6, 7] and y[1].tolist() == [6, 7, 8]
    x, y = get_batch(src, 3, bptt=3)  # truncated at the end: 5 - 1 - 3 = 1 step
    assert x.shape == (4, 1) and y[:, 0].tolist() == [4, 9, 14, 19]
    xs, ys = get_batch(src, 0, bptt=3, batch_first=False)
    assert xs.shape == (3, 4) and torch.equal(xs.t(), get_batch(src, 0, bptt=3)[0])
    with pytest.raises(IndexError):
        get_batch(src, 4)
    assert batchify(torch.arange(40 * 35 * 2), 40).shape == (70, 40)


def test_load_hf_text_with_fake_datasets(monkeypatch):
    datasets = pytest.importorskip("datasets")
    lines = ["", " = Trains = \n", " A train .\n", " = = History = =\n", " It ran .\n",
             " = Cats = \n", " Meow .\n"]
    fake = datasets.Dataset.from_dict({"text": lines})
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append((a, k)) or fake)
    records = load_hf_text("wikitext", "wikitext-2-raw-v1", "train", "text")
    assert calls == [(("wikitext", "wikitext-2-raw-v1"), {"split": "train"})]
    assert records[0] == ["=", "Trains", "="] and len(records) == 6
    assert wikitext_articles(records) == [
        ("Trains", [["A", "train", "."], ["It", "ran", "."]]), ("Cats", [["Meow", "."]])
    ]
    with pytest.raises(KeyError):
        load_hf_text("wikitext", "x", "train", "nope")

    def offline(*a, **k):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(RuntimeError, match="network"):
        load_hf_text("wikitext", "wikitext-2-raw-v1", "train", "text")


def test_spacy_missing_gives_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "spacy", None)  # import spacy -> ImportError
    with pytest.raises(RuntimeError, match="pip install spacy"):
        spacy_tags([["a", "cat"]])


def test_spacy_tags():
    spacy = pytest.importorskip("spacy")
    try:
        spacy.load("en_core_web_sm")
    except OSError:
        pytest.skip("spaCy model en_core_web_sm not installed")
    out = spacy_tags([["The", "cats", "live", "in", "that", "house", "."]], doc_ids=["1"])
    assert out[0].words == ("The", "cats", "live", "in", "that", "house", ".")
    assert out[0].upos[1] == "NOUN" and out[0].xpos[1] == "NNS" and out[0].doc_id == "1"


def test_the_builtin_tagged_corpus_is_the_shipped_conllu_file():
    from pathlib import Path

    from runner.studies.training.data.tiny_tagged import sentences

    shipped = read_conllu(Path(__file__).resolve().parents[1] / "data" / "tiny_tagged.conllu")
    built = sentences()
    assert built == shipped and len(built) == 240
    assert {s.doc_id for s in built} == {"animals", "food", "city", "music"}


def test_a_copied_tiny_spec_plans_and_its_corpus_loads_anywhere(tmp_path):
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    shutil.copy(root / "specs/tiny/lstm_tiny.toml", tmp_path / "lstm_tiny.toml")
    out = subprocess.run([sys.executable, "-m", "runner.cli", "plan", "--no-estimate", "lstm_tiny.toml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1",
                              "TRANSIENT_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    assert "Plan:" in out.stdout and "builtin:tiny-tagged" in out.stdout
