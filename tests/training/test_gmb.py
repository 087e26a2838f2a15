"""The thesis' Ch. 4 data options of the training study: GMB-style tagged files (PTB POS, SEM tags fine and
coarse), the N longest documents for topic and silver tags, a vocabulary cap, measures on the test split."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import xarray as xr

from runner.run.apply import apply
from runner.run.prepare import prepare
from runner.run.prepare import validate_spec
from runner.studies.training.data.corpus import CorpusError, load_corpus, longest_documents
from runner.data.forms import TaggedSentence
from runner.studies.training.data.gmb import SEM_CATEGORIES, SEM_COARSE, GmbSentence, parse_gmb, read_gmb, sem_coarse
from runner.studies.training.data.tokens import EOS, UNK, build_vocabulary
from runner.spec.specfile import SpecError
from runner.studies.training.spec import CorpusSpec
from training_helpers import ROOT, tiny_spec

# the thesis' Table 1 sentence, with its PTB POS and fine SEM tags
GMB = """\
# a comment line
These\tDT\tPRX
cats\tNNS\tCON
live\tVBP\tENS
in\tIN\tREL
that\tDT\tDST
house\tNN\tCON
.\t.\tNIL

The   DT   DEF
cat   NN   CON
slept VBD  EPS
.     .    NIL
"""


def test_parse_gmb_columns_sentences_and_the_thesis_coarse_tags(tmp_path):
    path = tmp_path / "gmb.txt"
    path.write_text(GMB, encoding="utf-8")  # no blank line at the end: the last sentence is still read
    first, second = read_gmb(path)
    assert first.words == ("These", "cats", "live", "in", "that", "house", ".")
    assert first.pos == ("DT", "NNS", "VBP", "IN", "DT", "NN", ".")
    assert first.sem == ("PRX", "CON", "ENS", "REL", "DST", "CON", "NIL")
    # thesis Ch. 4 Table 1: SEM (coarse) DEM ENT EVE ATT DEM ENT LOG
    assert first.sem_coarse == ("DEM", "ENT", "EVE", "ATT", "DEM", "ENT", "LOG")
    assert second == GmbSentence(("The", "cat", "slept", "."), ("DT", "NN", "VBD", "."), ("DEF", "CON", "EPS", "NIL"))
    assert second.sem_coarse == ("ANA", "ENT", "EVE", "LOG")


def test_sem_tag_set_has_13_categories_and_unknown():
    assert len(SEM_CATEGORIES) == 14 and "UNK" in SEM_CATEGORIES
    fines = [f for fs in SEM_CATEGORIES.values() for f in fs]
    assert len(fines) == len(set(fines)), "a fine tag belongs to one category"
    assert len(SEM_COARSE) >= 66  # the thesis' 66 fine tags (and the later PMB names)
    assert sem_coarse("DIS") == "LOG" and sem_coarse("COO") == "DIS"  # the tag DIS vs the category DIS
    with pytest.raises(ValueError, match="unknown semantic tag 'XYZ'"):
        sem_coarse("XYZ")


def test_parse_gmb_errors_name_the_line():
    with pytest.raises(ValueError, match="GMB line 2: expected 3 columns"):
        parse_gmb("a DT DEF\nb DT\n")
    with pytest.raises(ValueError, match="GMB line 1: unknown semantic tag 'FOO'"):
        parse_gmb("a DT FOO\n")
    assert parse_gmb("\n\n# only comments\n") == []


def test_vocabulary_cap_keeps_the_most_frequent_types():
    sents = [["a", "a", "a", "b", "b", "c", "d"]]
    vocab = build_vocabulary(sents, max_size=4)
    assert vocab.itos == (UNK, EOS, "a", "b")
    assert vocab.counts[UNK] == 2 and vocab.encode(["c", "d"]) == [0, 0]
    assert build_vocabulary(sents, max_size=100).itos == build_vocabulary(sents).itos
    with pytest.raises(ValueError, match="max_size needs an unk"):
        build_vocabulary(sents, unk=None, max_size=4)


def test_longest_documents_by_tokens_in_corpus_order():
    def s(n, doc):
        return TaggedSentence(("w",) * n, ("_",) * n, ("_",) * n, doc)

    sents = [s(3, "a"), s(5, "b"), s(1, "c"), s(2, "a"), s(4, "c")]  # a: 5, b: 5, c: 5 tokens; a first
    assert longest_documents(sents, 1) == [s(3, "a"), s(2, "a")]
    assert [x.doc_id for x in longest_documents(sents, 2)] == ["a", "b", "a"]
    with pytest.raises(CorpusError, match="document ids"):
        longest_documents([TaggedSentence(("w",), ("_",), ("_",))], 1)


def _gmb_file(tmp_path, name="gmb.txt", sentences=40):
    rows = []
    for k in range(sentences):  # words the tiny corpus knows (a, big, fish, ...) and one it does not
        rows += ["A DT DEF", ("big" if k % 2 else "small") + " JJ IST", "fish NN CON", "saw VBD EPS",
                 f"zebra{k % 3} NN CON", ". . NIL", ""]
    path = tmp_path / name
    path.write_text("\n".join(rows), encoding="utf-8")
    return path


def test_corpus_with_gmb_tags_longest_documents_and_a_test_analysis_split(tmp_path):
    gmb = _gmb_file(tmp_path)
    spec = CorpusSpec(source=str(ROOT / "tests/data/tiny_tagged.conllu"), min_count=2, drop_rare_sentences=False,
                      max_vocab=30, tag_articles=1, gmb_pos=str(gmb), gmb_sem=str(gmb), analysis_split="test")
    corpus = load_corpus(spec, ["topic", "gmb_pos", "sem_coarse", "sem_fine", "upos"], seed=0)
    assert len(corpus.vocab) == 30
    # GMB tag sets: their own words (read with the LM's vocabulary, lowercased), split 70/10/20 (28/4/8 sentences)
    pos = corpus.tags["gmb_pos"]
    words = pos.words
    assert [w.numel() for w in words] == [28 * 7, 4 * 7, 8 * 7]
    assert pos.train.numel() == words[0].numel() and pos.test.numel() == words[2].numel()
    assert corpus.vocab.itos[int(words[0][0])] in ("a", "<unk>")
    assert corpus.vocab.stoi["a"] in words[0].tolist() and corpus.vocab.stoi[UNK] in words[0].tolist()  # zebra
    assert set(corpus.tags["sem_coarse"].vocab.itos) == {"ANA", "ATT", "ENT", "EVE", "LOG", EOS}
    assert corpus.tags["sem_fine"].words is corpus.tags["sem_coarse"].words  # one file, one split
    # the corpus' tag sets: the longest document only, its own split
    topic = corpus.tags["topic"]
    assert topic.words is corpus.document_words and len(topic.vocab) == 2  # one document and <eos>
    assert corpus.tags["upos"].words is corpus.document_words
    assert corpus.tags["upos"].train.numel() == corpus.document_words[0].numel() < corpus.train.numel()
    words, tags = corpus.analysis_streams("test")
    assert words is corpus.document_words[2] and set(tags) == {"topic", "upos"}
    assert tags["topic"].numel() == tags["upos"].numel() == words.numel()
    words, tags = corpus.analysis_streams("valid")
    assert words is corpus.document_words[1]
    plain = load_corpus(CorpusSpec(source=spec.source, min_count=2, drop_rare_sentences=False), ["upos"], seed=0)
    words, tags = plain.analysis_streams("test")
    assert words is plain.test and tags["upos"].numel() == plain.test.numel()


def _gmb_spec(tmp_path, gmb_path, name="gmb"):
    return tiny_spec(tmp_path, name, replace={
        "analysis_tokens = 300": f'analysis_tokens = 300\nanalysis_split = "test"\ntag_articles = 2\n'
                                 f'gmb_pos = "{gmb_path}"\ngmb_sem = "{gmb_path}"\nmax_vocab = 40',
        "epochs = 3\nlr": "epochs = 1\nlr",
        'name = "tagger_upos_shuffled"\nkind = "tagger"\ntagset = "upos"\nshuffled = true':
            'name = "tagger_sem"\nkind = "tagger"\ntagset = "sem_coarse"\nmode = "input_tagger"',
        'reference = ["tagger_upos", "tagger_upos_shuffled"]': 'reference = ["tagger_upos", "tagger_sem"]',
        "frequent_words = 10": "frequent_words = 10\n",
        "steps = [5]\nlog_spaced = { start = 1, stop = 20, count = 4 }": "",
    })


def test_gmb_taggers_train_and_every_measure_reads_the_test_split(tmp_path):
    spec = _gmb_spec(tmp_path, _gmb_file(tmp_path))
    p = prepare(spec)
    assert not p.unmet
    out = apply(p, quiet=True)
    assert not out.failed and out.ran
    steps = p.state.stats.tagger_steps_per_epoch
    assert steps["sem_coarse"] < steps["upos"] < p.state.steps_per_epoch
    with xr.open_zarr(tmp_path / "gmb.zarr") as store:
        # each tagger's checkpoint 1 is the end of its own epoch, however many steps its corpus gives
        paths = store.checkpoint_path.sel(network=["tagger_upos", "tagger_sem"]).values[:, 1]
        assert [str(x).endswith(f"step_{n:08d}.safetensors") for x, n in zip(paths, (steps["upos"], steps["sem_coarse"]))] == [True, True]
        cca = store.svcca_tagger.sel(network="lm", layer=["embedding", "lstm1", "lstm2"]).values
        assert cca.shape == (2, 2, 3) and ((cca > 0) & (cca <= 1 + 1e-6)).all()


def test_a_missing_gmb_file_is_an_unmet_requirement_and_a_missing_key_a_spec_error(tmp_path):
    spec = _gmb_spec(tmp_path, tmp_path / "absent.txt")
    env = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "TRANSIENT_CACHE": str(tmp_path / "cache")}
    run = [sys.executable, "-m", "runner.cli"]
    plan = subprocess.run([*run, "plan", "--json", str(spec)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    unmet = json.loads(plan.stdout)["unmet"]
    (only,) = unmet  # gmb_pos is set but no tag set reads it
    assert only["kind"] == "file" and only["where"] == "[corpus] gmb_sem" and only["reason"].startswith("no file")
    assert only["name"].endswith("absent.txt") and "GMB-style" in only["fix"]
    applied = subprocess.run([*run, "apply", str(spec)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert applied.returncode == 66 and "absent.txt" in applied.stderr
    assert not (tmp_path / "gmb.zarr").exists()
    bad = tiny_spec(tmp_path, "nokey", replace={'tagset = "upos"\nshuffled = true': 'tagset = "sem_fine"'})
    with pytest.raises(SpecError) as err:
        validate_spec(bad)
    assert any("[corpus] gmb_sem" in p and "needs a GMB-style tagged file" in p for p in err.value.problems)
    probe = _gmb_spec(tmp_path, tmp_path / "absent.txt", "probe")
    probe.write_text(probe.read_text().replace('tagsets = ["upos", "topic"]', 'tagsets = ["upos", "sem_fine"]'))
    with pytest.raises(SpecError) as err:
        validate_spec(probe)
    assert any("GMB tag sets ['sem_fine'] are another corpus" in p for p in err.value.problems)


def test_the_thesis_spec_names_the_chapter_4_data():
    path = ROOT / "specs" / "lstm_svcca_thesis.toml"
    from runner.core import toml

    corpus = toml.loads(path.read_text())["corpus"]
    assert corpus["source"] == "hf:wikimedia/wikipedia" and corpus["subset"] == "20231101.en"
    assert (corpus["split"], corpus["max_vocab"], corpus["tag_articles"], corpus["analysis_split"]) == \
        ([0.7, 0.1, 0.2], 20000, 100, "test")
    assert corpus["lowercase"] and corpus["min_count"] == 100


def test_hub_records_as_documents_split_into_sentences(monkeypatch):
    """doc_field: one article per record (wikimedia/wikipedia's title and text), read without the hub here."""
    import runner.data.hub as hub_module

    articles = [("Short", "A cat sat. It slept."), ("Long", "The dog ran far. The dog ran back!\nThe end."),
                ("Mid", "Birds fly high. Birds sing.")]
    seen = {}

    def fake(dataset_id, subset, split, field, doc_field):
        seen.update(dataset_id=dataset_id, subset=subset, field=field, doc_field=doc_field)
        return articles

    monkeypatch.setattr(hub_module, "load_hf_documents", fake)
    spec = CorpusSpec(source="hf:wikimedia/wikipedia", subset="20231101.en", doc_field="title", min_count=1,
                      drop_rare_sentences=False, tag_articles=1, split=[0.34, 0.33, 0.33])
    corpus = load_corpus(spec, ["topic"], seed=0)
    assert seen == {"dataset_id": "wikimedia/wikipedia", "subset": "20231101.en", "field": "text", "doc_field": "title"}
    # 7 sentences in all; the longest article ("Long", 3 sentences) alone carries the topic tags
    assert sum(w.numel() for w in (corpus.train, corpus.valid, corpus.test)) == 4 + 3 + 5 + 5 + 3 + 4 + 3  # words + <eos>
    assert corpus.tags["topic"].vocab.itos == ("<eos>", "Long")
    assert sum(w.numel() for w in corpus.document_words) == 5 + 5 + 3
