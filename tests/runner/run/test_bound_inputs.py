"""Every input is bound to the results it feeds (issue 48): a local input file edited after an apply is a
change ``plan`` names and ``apply`` refuses without ``--replace``, in each study and for a plug-in source;
a plug-in source whose ``identity()`` breaks is one line naming it, before any compute."""

from __future__ import annotations

import shutil

from tests.runner.helpers import run_cli, write_spec
from tests.training.training_helpers import CORPUS, ROOT

PLUGIN = {"TRANSIENT_PLUGINS": "tests.plugins.toy_source", "PYTHONPATH": str(ROOT)}

DEPTH = """
[experiment]
name = "bound"
store = "store/bound.zarr"

[[model]]
name = "albert"
source = "builtin:tiny-albert"

[input]
source = "{source}"
samples = 4
tokens = 8

[dynamics]
steps = 5

[[measure]]
kind = "token_deviation"
"""

TRAINING = """
[experiment]
name = "bound"
store = "store/bound.zarr"

[corpus]
source = "corpus.conllu"
min_count = 2
drop_rare_sentences = false
analysis_tokens = 100

[training]
epochs = 1
batch_size = 8
bptt = 10
eval_batch_size = 4
embedding_dim = 8
hidden_dim = 8

[checkpoints]
every_epoch = true

[[model]]
name = "lm"
kind = "lm"

[[measure]]
kind = "sparsity"
frequent_words = 5
"""

TRANSJECT = """
[experiment]
name = "bound"
study = "transject"
store = "store/bound.zarr"

[data]
source = "data.csv"
max_length = 12
analysis_examples = 4

[training]
epochs = 1
batch_size = 8

[[model]]
name = "tj"
variant = "transject"
d_model = 8
n_layers = 1
n_experts = 2

[[measure]]
kind = "entropy"
"""

PROSE = ("the cat sat on the mat while the dog slept by the door and the bird sang in the tree "
         "a man walked down the road to the town where the market was full of people and fruit ")


def _labelled(n: int, extra: str = "") -> str:
    words = PROSE.split()
    rows = [f"{' '.join(words[i % 20:i % 20 + 8])}{extra},{i % 2}" for i in range(n)]
    return "text,label\n" + "\n".join(rows) + "\n"


def _edited_then_planned(tmp_path, spec, edit, **env):
    applied = run_cli("apply", spec, "-q", cwd=tmp_path, **env)
    assert applied.returncode == 0, applied.stderr
    assert run_cli("plan", spec, "--detailed-exitcode", cwd=tmp_path, **env).returncode == 0  # done: nothing to do
    edit()
    plan = run_cli("plan", spec, "--detailed-exitcode", cwd=tmp_path, **env)
    refused = run_cli("apply", spec, "-q", cwd=tmp_path, **env)
    assert refused.returncode == 77 and "--replace" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    return plan


def test_an_edited_depth_input_file_is_a_change_plan_names(tmp_path):
    text = tmp_path / "input.txt"
    text.write_text((PROSE * 3).replace("and ", "and. "))
    spec = write_spec(tmp_path, DEPTH.format(source="input.txt"))
    plan = _edited_then_planned(tmp_path, spec, lambda: text.write_text(text.read_text().replace("cat", "cow")))
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert "replace" in plan.stdout and "input.identity:" in plan.stdout and "sha256" in plan.stdout, plan.stdout


def test_an_edited_plugin_source_is_a_change_plan_names(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    for i in range(3):
        (folder / f"doc{i}.txt").write_text(PROSE.replace("and ", "and. ") * (i + 1))
    spec = write_spec(tmp_path, DEPTH.format(source="folder:texts"))
    plan = _edited_then_planned(tmp_path, spec, lambda: (folder / "doc1.txt").write_text(PROSE.upper()), **PLUGIN)
    assert plan.returncode == 2 and "input.identity: '...sha256" in plan.stdout, plan.stdout + plan.stderr


def test_an_edited_training_corpus_is_a_change_plan_names(tmp_path):
    corpus = tmp_path / "corpus.conllu"
    shutil.copy(CORPUS, corpus)
    spec = write_spec(tmp_path, TRAINING)
    sentences = corpus.read_text().split("\n\n")
    plan = _edited_then_planned(tmp_path, spec, lambda: corpus.write_text("\n\n".join(sentences[:-3]) + "\n\n"))
    assert plan.returncode == 2 and "replace" in plan.stdout and "corpus:" in plan.stdout, plan.stdout + plan.stderr


def test_an_edited_transject_data_file_is_a_change_plan_names(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text(_labelled(40))
    spec = write_spec(tmp_path, TRANSJECT)
    plan = _edited_then_planned(tmp_path, spec, lambda: data.write_text(_labelled(40, " again")))
    assert plan.returncode == 2 and "replace" in plan.stdout and "data.identity: 'local" in plan.stdout, plan.stdout + plan.stderr


BROKEN = '''
from runner.data.registry import register_data_source
from tests.plugins.toy_source import Folder


class Broken(Folder):
    name, scheme, written = "broken folder", "broken", "'broken:<dir>'"

    def identity(self, source, base, form="", **options):
        {body}


register_data_source(Broken())
'''


def test_a_plugin_identity_that_breaks_is_one_line_naming_it(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "doc.txt").write_text(PROSE * 2)
    spec = write_spec(tmp_path, DEPTH.format(source="broken:texts"))
    for body, said in (("raise OSError('the disk went away')", "raised OSError: the disk went away"),
                       ("return None", "returned None; it returns a non-empty string")):
        (tmp_path / "broken_source.py").write_text(BROKEN.format(body=body))
        env = {"TRANSIENT_PLUGINS": "broken_source", "PYTHONPATH": f"{tmp_path}:{ROOT}"}
        out = run_cli("plan", spec, cwd=tmp_path, **env)
        assert out.returncode == 66 and "Traceback" not in out.stderr, out.stderr
        assert f"broken_source.Broken.identity() {said}" in out.stderr, out.stderr
        assert not (tmp_path / "store").exists()
