"""Data sources are plugins like model families: the registry a study asks, its messages, and a
source written entirely in a test file (``tests/plugins/toy_source.py``) read by the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import xarray as xr

from runner.data import registry
from runner.data.forms import Documents
from runner.data.pydoc_text import builtin_documents
from runner.data.registry import DOCUMENTS, LABELLED, ROWS, TAGGED, DataSource, InputError, data_source
from runner.data.text import split_sentences
from runner.plugin.loader import load_plugins
from runner.studies.training.data.corpus import load_corpus
from runner.studies.training.spec import CorpusSpec
from tests.runner.helpers import run_cli, write_spec

ROOT = Path(__file__).resolve().parents[3]
FORMS = {DOCUMENTS: "documents", ROWS: "rows", TAGGED: "tagged", LABELLED: "labelled"}


@pytest.fixture(autouse=True)
def plugins():
    load_plugins()  # the studies' own sources (scaffold:, listops:, builtin:tiny-tagged)


@pytest.fixture
def fresh_registry():
    saved = registry._SOURCES.snapshot()
    yield
    registry._SOURCES.restore(saved)


class Echo(DataSource):
    name, scheme, written, gives = "echo", "echo", "'echo:<text>'", frozenset({DOCUMENTS})

    def documents(self, source, base, **options):
        return Documents(str(source), [("echo", source.name)])


def test_every_source_reads_each_form_it_gives():
    for source in registry.data_sources():
        for form in source.gives & FORMS.keys():
            method = getattr(type(source), FORMS[form])
            assert method is not getattr(DataSource, FORMS[form]), f"{source.name} gives {form} but does not read it"


def test_a_name_taken_is_refused_unless_replaced(fresh_registry):
    registry.register_data_source(Echo())
    registry.register_data_source(Echo())  # the same source again (its module imported twice)

    class Louder(Echo):
        pass

    with pytest.raises(ValueError, match="data source 'echo' is tests.runner.data.test_registry.Echo's; give "
                                         r"tests.runner.data.test_registry.*Louder another name"):
        registry.register_data_source(Louder())
    Louder.replaces = True

    registry.register_data_source(Louder())
    assert type(data_source("echo:hi", DOCUMENTS)) is Louder
    assert sum(s.name == "echo" for s in registry.data_sources()) == 1


@pytest.mark.parametrize("source, form, message", [
    ("ftp:host/x", DOCUMENTS, "unknown scheme 'ftp:'; give 'hf:<dataset id>'"),
    ("builtin:nope", DOCUMENTS, "unknown builtin input source 'builtin:nope'; known: 'builtin:pydoc-topics'"),
    ("builtin:nope", TAGGED, "known: 'builtin:pydoc-topics', 'builtin:tiny-tagged'"),
    ("scaffold:", DOCUMENTS, "'scaffold:' (scaffold generator) gives scaffold corpora, not documents"),
    ("listops:", TAGGED, "'listops:' (ListOps) gives labelled, not tagged"),
    ("builtin:tiny-tagged", LABELLED, "gives tagged, not labelled; give 'hf:<dataset id>', a file path"),
    ("  ", DOCUMENTS, "is empty; give"),
])
def test_a_source_that_cannot_give_the_form_says_what_would(source, form, message):
    with pytest.raises(InputError) as err:
        data_source(source, form)
    assert message in str(err.value)


def _texts(folder: Path) -> Path:
    folder.mkdir()
    prose = [s for _, doc in builtin_documents() for s in split_sentences(doc) if 12 <= len(s.split()) <= 30]
    for i in range(4):
        (folder / f"doc{i}.txt").write_text(" ".join(prose[i * 40:(i + 1) * 40]))
    (folder / "notes.md").write_text("not a .txt: not a document")
    return folder


def test_a_plugin_source_feeds_a_training_corpus(tmp_path, fresh_registry):
    import tests.plugins.toy_source as toy

    if registry.data_source_for("folder:x") is None:  # imported before, into another test's registry
        registry.register_data_source(toy.Folder())
    _texts(tmp_path / "texts")
    corpus = load_corpus(CorpusSpec(source="folder:texts", min_count=1, drop_rare_sentences=False), ["topic"],
                         seed=0, base=tmp_path)
    assert set(corpus.tags["topic"].vocab.itos) == {"<eos>", "doc0", "doc1", "doc2", "doc3"}


DEPTH = """
[experiment]
name = "folder"

[[model]]
name = "albert"
source = "builtin:tiny-albert"

[input]
source = "folder:{folder}"
samples = 6
tokens = 12

[dynamics]
steps = 10

[[measure]]
kind = "token_deviation"
"""


def test_a_plugin_source_is_checked_and_drawn_by_the_cli(tmp_path):
    _texts(tmp_path / "texts")
    env = {"TRANSIENT_PLUGINS": "tests.plugins.toy_source", "PYTHONPATH": str(ROOT)}
    missing = write_spec(tmp_path, DEPTH.format(folder="nothing-here"), "missing.toml")
    bad = run_cli("plan", missing, cwd=tmp_path, **env)
    assert bad.returncode == 65, bad.stderr
    assert "[input] source: no .txt file in the folder 'nothing-here'" in bad.stderr
    assert "Traceback" not in bad.stderr
    spec = write_spec(tmp_path, DEPTH.format(folder="texts"))
    done = run_cli("apply", spec, cwd=tmp_path, **env)
    assert done.returncode == 0, done.stderr
    with xr.open_zarr(tmp_path / "store" / "folder.zarr") as ds:
        origins = [str(o) for o in ds["origin"].values]
    assert len(origins) == 6 and all(o.split(",")[0] in {f"doc{i}.txt" for i in range(4)} for o in origins)
    unknown = run_cli("plan", spec, cwd=tmp_path)  # the same spec without the plugin: its scheme is unknown
    assert unknown.returncode == 65 and "unknown scheme 'folder:'" in unknown.stderr


def test_a_plugin_cannot_take_a_built_in_scheme_unless_it_says_so(fresh_registry):
    """A scheme is a name too: a plug-in source under a new name but the hf: scheme is refused at
    registration; with replaces = True it is asked first for hf: inputs only."""

    class Mirror(Echo):
        name, scheme = "mirror", "hf"

    with pytest.raises(ValueError, match=r"'mirror' \(tests.runner.data.test_registry\) claims the scheme 'hf:', "
                                         r"which 'hub dataset' \(runner.data.hub\) reads already"):
        registry.register_data_source(Mirror())

    class TakesOver(Mirror):
        replaces = True

    registry.register_data_source(TakesOver())
    assert type(data_source("hf:some/dataset", DOCUMENTS)) is TakesOver
    assert data_source("builtin:pydoc-topics", DOCUMENTS).name == "Python's help topics"


def test_matches_is_asked_only_for_a_sources_own_scheme(fresh_registry):
    class Greedy(Echo):
        name, scheme = "greedy", "greedy"

        def matches(self, source):
            return True  # would read every input

    registry.register_data_source(Greedy())
    assert data_source("hf:some/dataset", DOCUMENTS).name == "hub dataset"
    assert data_source("builtin:pydoc-topics", DOCUMENTS).name == "Python's help topics"
    assert data_source("greedy:x", DOCUMENTS).name == "greedy"


def test_a_class_is_not_a_registration(fresh_registry):
    with pytest.raises(TypeError, match=r"register_data_source\(Echo\(\)\), not the class"):
        registry.register_data_source(Echo)
