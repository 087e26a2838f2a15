"""A corpus of bad TransJect inputs through the CLI's entry point (issue 22): every key of the spec
refused at validation with one message naming the file, line, table and key (exit 65); local files
(saved checkpoints, csv, parquet, jsonl) opened and checked at ``plan``, an unreadable one an unmet
requirement that ``apply`` refuses (66); sizes that cannot fit refused with the size. Never a
traceback, nothing created or deleted. Cases accepted on purpose are tested as accepted."""

from __future__ import annotations

import json

import pytest

from runner.cli import main

BASE = """
[experiment]
name = "badtj"
study = "transject"

[data]
source = "listops:"
listops = { train = 16, test = 8, max_depth = 2, max_args = 3, min_length = 2, max_length = 20 }
max_length = 20
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

[[model]]
name = "tf"
variant = "transformer"
d_model = 8
n_layers = 1
n_heads = 2
d_ff = 16

[[measure]]
kind = "distances"

[[measure]]
kind = "entropy"

[[measure]]
kind = "experts"
"""

LISTOPS = 'source = "listops:"\nlistops = { train = 16, test = 8, max_depth = 2, max_args = 3, min_length = 2, max_length = 20 }'
#: The same spec on a local csv file (word tokens, the paper's IMDb sentence for the distances).
LOCAL = BASE.replace(LISTOPS, 'source = "data.csv"')


def edit(base: str, old: str, new: str) -> str:
    assert old in base, old
    return base.replace(old, new, 1)


def data(extra: str, base: str = BASE) -> str:
    return edit(base, "analysis_examples = 4", f"analysis_examples = 4\n{extra}")


def training(extra: str) -> str:
    return edit(BASE, "batch_size = 8", f"batch_size = 8\n{extra}")


def model(extra: str, which: str = 'name = "tj"') -> str:
    return edit(BASE, which, f"{which}\n{extra}")


def measure(kind: str, extra: str, base: str = BASE) -> str:
    return edit(base, f'kind = "{kind}"', f'kind = "{kind}"\n{extra}')


def source(path: str) -> str:
    return edit(BASE, LISTOPS, f'source = "{path}"')


#: (id, spec text, fragment of the one message expected); exit 65 from plan and apply.
INVALID = [
    # --- [data]
    ("data-missing", BASE.replace("[data]\n" + LISTOPS + "\nmax_length = 20\nanalysis_examples = 4\n", ""),
     "[data]: required table is missing"),
    ("data-source-empty", edit(BASE, 'source = "listops:"', 'source = ""'), "[data] source: String should have at least 1"),
    ("data-source-int", edit(BASE, 'source = "listops:"', "source = 3"), "[data] source: Input should be a valid string"),
    ("data-source-listops-suffix", edit(BASE, 'source = "listops:"', 'source = "listops:big"'),
     "[data] source: write 'listops:' and set the generator in [data.listops]"),
    ("data-source-missing-file", source("no/such.csv"), "[data] source: no such file"),
    ("data-source-bad-extension", source("spec.toml"), "local data are .parquet, .csv, .jsonl, .json files"),
    ("data-source-split-file-missing", source("part_{split}.csv"), "part_test.csv"),
    ("data-unknown-key", data('labels = "y"'), "[data] labels: unknown key (did you mean 'label'?)"),
    ("data-subset-int", data("subset = 1"), "[data] subset: Input should be a valid string"),
    ("data-text-int", data("text = 1"), "[data] text: Input should be a valid string"),
    ("data-tokenize-bpe", data('tokenize = "bpe"'), "[data] tokenize: Input should be 'word' or 'char'"),
    ("data-lowercase-string", data('lowercase = "yes"'), "[data] lowercase: Input should be a valid boolean"),
    ("data-max-length-one", edit(BASE, "max_length = 20\nanalysis", "max_length = 1\nanalysis"),
     "[data] max_length: Input should be greater than or equal to 2"),
    ("data-max-length-float", edit(BASE, "max_length = 20\nanalysis", "max_length = 20.0\nanalysis"),
     "[data] max_length: Input should be a valid integer"),
    ("data-vocab-size-two", data("vocab_size = 2"), "[data] vocab_size: Input should be greater than or equal to 3"),
    ("data-vocab-size-string", data('vocab_size = "3"'), "[data] vocab_size: Input should be a valid integer"),
    ("data-max-train-zero", data("max_train = 0"), "[data] max_train: Input should be greater than or equal to 1"),
    ("data-max-test-negative", data("max_test = -1"), "[data] max_test: Input should be greater than or equal to 1"),
    ("data-n-classes-one", data("n_classes = 1"), "[data] n_classes: Input should be greater than or equal to 2"),
    ("data-n-classes-below-listops", data("n_classes = 5"), "[data] n_classes: 5 is fewer than ListOps' 10 classes"),
    ("data-n-classes-float", data("n_classes = 10.0"), "[data] n_classes: Input should be a valid integer"),
    ("data-analysis-examples-zero", edit(BASE, "analysis_examples = 4", "analysis_examples = 0"),
     "[data] analysis_examples: Input should be greater than or equal to 1"),
    ("data-test-fraction-zero", data("test_fraction = 0.0"), "[data] test_fraction: Input should be greater than 0"),
    ("data-test-fraction-one", data("test_fraction = 1.0"), "[data] test_fraction: Input should be less than 1"),
    ("data-test-fraction-nan", data("test_fraction = nan"), "[data] test_fraction: Input should be a finite number"),
    ("listops-train-zero", edit(BASE, "train = 16", "train = 0"), "listops.train: Input should be greater than or equal to 1"),
    ("listops-max-args-one", edit(BASE, "max_args = 3", "max_args = 1"),
     "listops.max_args: Input should be greater than or equal to 2"),
    ("listops-max-depth-zero", edit(BASE, "max_depth = 2", "max_depth = 0"),
     "listops.max_depth: Input should be greater than or equal to 1"),
    ("listops-lengths-crossed", edit(BASE, "min_length = 2, max_length = 20", "min_length = 20, max_length = 20"),
     "listops.max_length: must exceed min_length + 1"),
    ("listops-unknown-key", edit(BASE, "max_depth = 2", "depth = 2"), "listops.depth: unknown key"),
    # --- [training]
    ("training-unknown-key", training("epoch = 2"), "[training] epoch: unknown key (did you mean 'epochs'?)"),
    ("training-epochs-zero", edit(BASE, "epochs = 1", "epochs = 0"), "[training] epochs: Input should be greater than or equal to 1"),
    ("training-epochs-float", edit(BASE, "epochs = 1", "epochs = 1.0"), "[training] epochs: Input should be a valid integer"),
    ("training-epochs-huge", edit(BASE, "epochs = 1", "epochs = 1_000_000_000_000"),
     "[training] epochs: 1000000000000 epochs make 8,000,000,000,008 tasks and checkpoints"),
    ("training-epochs-over-the-task-bound", edit(BASE, "epochs = 1", "epochs = 12_500"),
     "[training] epochs: 12500 epochs make 100,008 tasks and checkpoints (networks x (1 + measures) x (epochs + 1)); "
     "a plan holds at most 100,000"),
    ("training-patience-zero", training("patience = 0"), "[training] patience: Input should be greater than or equal to 1"),
    ("training-lr-zero", training("lr = 0.0"), "[training] lr: Input should be greater than 0"),
    ("training-lr-negative", training("lr = -1e-3"), "[training] lr: Input should be greater than 0"),
    ("training-lr-inf", training("lr = inf"), "[training] lr: Input should be a finite number"),
    ("training-lr-string", training('lr = "5e-4"'), "[training] lr: Input should be a valid number"),
    ("training-beta1-above-one", training("betas = [1.5, 0.98]"), "[training] betas.0: Input should be less than 1"),
    ("training-beta2-one", training("betas = [0.9, 1.0]"), "[training] betas.1: Input should be less than 1"),
    ("training-beta-negative", training("betas = [-0.1, 0.98]"), "[training] betas.0: Input should be greater than or equal to 0"),
    ("training-betas-three", training("betas = [0.9, 0.98, 0.99]"), "[training] betas: List should have at most 2"),
    ("training-betas-one", training("betas = [0.9]"), "[training] betas: List should have at least 2"),
    ("training-betas-strings", training('betas = ["0.9", "0.98"]'), "[training] betas.0: Input should be a valid number"),
    ("training-eps-zero", training("eps = 0.0"), "[training] eps: Input should be greater than 0"),
    ("training-batch-zero", edit(BASE, "batch_size = 8", "batch_size = 0"),
     "[training] batch_size: Input should be greater than or equal to 1"),
    ("training-batch-beyond-memory", edit(BASE, "batch_size = 8", "batch_size = 1_000_000_000_000"),
     "[training] batch_size: training [[model]] 'tj' needs at least"),
    ("training-reconstruction-negative", training("reconstruction_weight = -1.0"),
     "[training] reconstruction_weight: Input should be greater than or equal to 0"),
    ("training-device-gpu", training('device = "gpu"'), "[training] device: unknown device 'gpu'"),
    # --- [[model]]
    ("model-missing", BASE.split("[[model]]")[0] + "[[measure]]\nkind = \"entropy\"\n", "[model]: required table is missing"),
    ("model-no-name", edit(BASE, 'name = "tj"\n', ""), "name: required key is missing"),
    ("model-name-dotdot", edit(BASE, 'name = "tj"', 'name = ".."'), "name: String should match pattern"),
    ("model-names-repeat", edit(BASE, 'name = "tf"', 'name = "tj"'), "model names must be unique; 'tj' is repeated"),
    ("model-label-clash", edit(BASE, 'name = "tf"', 'name = "tj-s0"\ncheckpoint = "ckpt-good"'),
     "network labels ['tj-s0'] occur twice"),
    ("model-unknown-key", model("layers = 2"), "layers: unknown key"),
    ("model-variant-unknown", edit(BASE, 'variant = "transject"', 'variant = "bert"'), "variant: Input should be"),
    ("model-seeds-empty", model("seeds = []"), "seeds: List should have at least 1"),
    ("model-seeds-repeated", model("seeds = [0, 0]"), "seeds: seeds must be distinct, not [0, 0]"),
    ("model-seeds-float", model("seeds = [0.5]"), "seeds.0: Input should be a valid integer"),
    ("model-seeds-and-replicates", model("seeds = [0, 1]\nreplicates = 2"), "give seeds or replicates, not both"),
    ("model-replicates-zero", model("replicates = 0"), "replicates: Input should be greater than or equal to 1"),
    ("model-d-model-odd", edit(BASE, "d_model = 8\nn_layers = 1\nn_experts", "d_model = 9\nn_layers = 1\nn_experts"),
     "d_model must be even"),
    ("model-d-model-zero", edit(BASE, "d_model = 8\nn_layers = 1\nn_experts", "d_model = 0\nn_layers = 1\nn_experts"),
     "d_model: Input should be greater than or equal to 2"),
    ("model-d-model-beyond-memory", edit(BASE, "d_model = 8\nn_layers = 1\nn_experts",
                                         "d_model = 10_000_000\nn_layers = 1\nn_experts"),
     "(tj) d_model: training [[model]] 'tj' needs at least"),
    ("model-n-layers-zero", edit(BASE, "n_layers = 1\nn_experts", "n_layers = 0\nn_experts"),
     "n_layers: Input should be greater than or equal to 1"),
    ("model-n-experts-zero", edit(BASE, "n_experts = 2", "n_experts = 0"), "n_experts: Input should be greater than or equal to 1"),
    ("model-alpha-init-zero", model("alpha_init = 0.0"), "alpha_init: Input should be greater than 0"),
    ("model-alpha-init-one", model("alpha_init = 1.0"), "alpha_init: Input should be less than 1"),
    ("model-gate-unknown", model('gate = "random"'), "gate: Input should be 'learned' or 'input'"),
    ("model-gate-on-baseline", model('gate = "input"', 'name = "tf"'), "gate applies to TransJect's experts"),
    ("model-heads-not-dividing", edit(BASE, "n_heads = 2", "n_heads = 3"), "d_model (8) must be divisible by n_heads (3)"),
    ("model-d-ff-zero", edit(BASE, "d_ff = 16", "d_ff = 0"), "d_ff: Input should be greater than or equal to 1"),
    ("model-dropout-one", model("dropout = 1.0", 'name = "tf"'), "dropout: Input should be less than 1"),
    ("model-pooling-sum", model('pooling = "sum"'), "pooling: Input should be 'mean' or 'max'"),
    ("model-checkpoint-int", model("checkpoint = 1"), "checkpoint: Input should be a valid string"),
    # --- [[measure]]
    ("measure-unknown-kind", BASE + '\n[[measure]]\nkind = "attention"\n', "[[measure]] #4 (attention)"),
    ("measure-repeated", BASE + '\n[[measure]]\nkind = "entropy"\n', "each measure may appear once; entropy is repeated"),
    ("measure-unknown-key", measure("entropy", "kk = 3"), "(entropy) kk: unknown key"),
    ("distances-pair-of-one", measure("distances", 'pairs = [["characters"]]'),
     "(distances) pairs.0: List should have at least 2 items"),
    ("distances-pair-of-three", measure("distances", 'pairs = [["a", "b", "c"]]'),
     "(distances) pairs.0: List should have at most 2 items"),
    ("distances-pairs-flat", measure("distances", 'pairs = ["characters", "script"]'),
     "(distances) pairs.0: Input should be a valid list"),
    ("distances-pair-one-word-twice", measure("distances", 'pairs = [["script", "Script"]]'),
     "(distances) pairs: the pair ['script', 'Script'] names one word twice"),
    ("distances-pair-not-listops", measure("distances", 'pairs = [["[MAX", "characters"]]'),
     "(distances) pairs: 'characters' cannot be in a ListOps sequence"),
    ("distances-pair-not-in-analysis-text", measure("distances", 'pairs = [["[MAX", "7"]]',
                                                    data('analysis_text = "[MIN 1 2 ]"')),
     "(distances) pairs: the analysis sentence has no '[MAX', '7'; its tokens: [MIN 1 2 ]"),
    ("distances-pair-not-in-paper-sentence", measure("distances", 'pairs = [["characters", "plot"]]', LOCAL),
     "(distances) pairs: the analysis sentence has no 'plot'"),
    ("distances-pair-cut-by-max-length", measure("distances", 'pairs = [["deneuve", "auteuil"]]', LOCAL.replace(
        "data.csv", "labelled.csv")), "(distances) pairs: the analysis sentence has no 'auteuil'"),
    ("distances-max-tokens-one", measure("distances", "max_tokens = 1"), "max_tokens: Input should be greater than or equal to 2"),
    ("entropy-k-beyond-sample", measure("entropy", "k = 8"),
     "(entropy) k: k = 8 needs more than 8 samples, but a token of [[model]] 'tj' (its d_model components) gives 8"),
    ("entropy-k-zero", measure("entropy", "k = 0"), "(entropy) k: Input should be greater than or equal to 1"),
    ("entropy-method-unknown", measure("entropy", 'method = "kde"'), "(entropy) method: Input should be 'knn' or 'gaussian'"),
    ("experts-k-beyond-a-head", measure("experts", "k = 4"),
     "(experts) k: k = 4 needs more than 4 samples, but a head's output of [[model]] 'tf' (d_model / n_heads "
     "components) gives 4"),
    ("experts-gaussian-one-sample-head", edit(measure("experts", 'method = "gaussian"'), "n_heads = 2\nd_ff",
                                              "n_heads = 8\nd_ff"),
     "(experts) method: the Gaussian estimate needs 2 samples or more, but a head's output of [[model]] 'tf'"),
    ("activation-bound-pairs-zero", BASE + '\n[[measure]]\nkind = "activation_bound"\nmax_pairs = 0\n',
     "(activation_bound) max_pairs: Input should be greater than or equal to 1"),
    ("isomap-neighbors-zero", BASE + '\n[[measure]]\nkind = "isomap"\nn_neighbors = 0\n',
     "(isomap) n_neighbors: Input should be greater than or equal to 1"),
    # --- local data opened at plan: what the spec says does not fit the file
    ("csv-without-label-column", LOCAL, "[data] label: data.csv has no column 'label'; its columns: text, y"),
    ("csv-without-text-column", data('text = "review"', LOCAL), "[data] text: data.csv has no column 'review'"),
    ("csv-n-classes-below-labels", data("n_classes = 2", LOCAL.replace("data.csv", "five.csv")),
     "[data] n_classes: 2 classes, but the labels of five.csv hold 5"),
    ("csv-negative-label", LOCAL.replace("data.csv", "negative.csv"), "[data] label: integer labels are classes 0, 1, ...; negative.csv holds -1"),
    ("csv-row-without-label", LOCAL.replace("data.csv", "holes.csv"), "[data] label: holes.csv: row 2 has no label"),
    ("parquet-n-classes-below-labels", data("n_classes = 2", LOCAL.replace("data.csv", "three.parquet")),
     "[data] n_classes: 2 classes, but the labels of three.parquet hold 3"),
]

#: Local files the spec names but that cannot be read: plan lists them, apply refuses (66).
UNREADABLE = [
    ("csv-empty-file", LOCAL.replace("data.csv", "empty.csv"), "empty.csv cannot be read as csv"),
    ("csv-header-only", LOCAL.replace("data.csv", "header.csv"), "header.csv holds 0 row(s)"),
    ("csv-one-row", LOCAL.replace("data.csv", "one.csv"), "one.csv holds 1 row(s); a train and a test split need 2"),
    ("parquet-garbage", LOCAL.replace("data.csv", "garbage.parquet"), "garbage.parquet cannot be read as parquet"),
    ("parquet-truncated", LOCAL.replace("data.csv", "truncated.parquet"), "truncated.parquet cannot be read as parquet"),
    ("jsonl-garbage", LOCAL.replace("data.csv", "garbage.jsonl"), "garbage.jsonl cannot be read as json"),
    ("json-not-records", LOCAL.replace("data.csv", "scalar.json"), "scalar.json cannot be read as json"),
    ("checkpoint-missing-dir", model('checkpoint = "no/such/dir"'), "checkpoint 'no/such/dir': no such directory"),
    ("checkpoint-without-weights", model('checkpoint = "ckpt-noweights"'), "lacks config.json or model.safetensors"),
    ("checkpoint-config-garbage", model('checkpoint = "ckpt-badconfig"'), "ckpt-badconfig/config.json is not JSON"),
    ("checkpoint-config-binary", model('checkpoint = "ckpt-binconfig"'), "ckpt-binconfig/config.json is not JSON"),
    ("checkpoint-config-foreign", model('checkpoint = "ckpt-foreign"'), "ckpt-foreign/config.json is not a TransJect export"),
    ("checkpoint-config-bad-params", model('checkpoint = "ckpt-badparams"'), "params do not describe a transject"),
    ("checkpoint-weights-garbage", model('checkpoint = "ckpt-garbage"'),
     "ckpt-garbage/model.safetensors is not a readable safetensors file"),
    ("checkpoint-weights-truncated", model('checkpoint = "ckpt-truncated"'),
     "ckpt-truncated/model.safetensors is not a readable safetensors file"),
    ("checkpoint-weights-empty", model('checkpoint = "ckpt-emptyweights"'),
     "ckpt-emptyweights/model.safetensors is not a readable safetensors file"),
    ("checkpoint-vocab-not-a-list", model('checkpoint = "ckpt-badvocab"'), "ckpt-badvocab/vocab.json is not a list of tokens"),
]

#: Specs that look unusual but are right: planned without a problem.
ACCEPTED = [
    ("betas-edges", training("betas = [0.0, 0.999]")),
    ("entropy-k-largest", measure("entropy", "k = 7")),
    ("experts-k-largest-for-a-head", measure("experts", "k = 3")),
    ("epochs-at-the-task-bound", edit(BASE, "epochs = 1", "epochs = 12_499")),
    ("pairs-in-the-paper-sentence", measure("distances", 'pairs = [["characters", "script"], ["Unlikeable", "awful"]]', LOCAL)
     .replace("data.csv", "labelled.csv")),
    ("pairs-of-listops-tokens", measure("distances", 'pairs = [["[MAX", "]"]]')),
    ("csv-string-labels", LOCAL.replace("data.csv", "words.csv")),
    ("csv-split-files", LOCAL.replace("data.csv", "part_{split}.csv").replace("analysis_examples = 4",
                                                                             "analysis_examples = 4\ntest_split = \"dev\"")),
    ("parquet-labels-fit", data("n_classes = 3", LOCAL.replace("data.csv", "three.parquet"))),
    ("jsonl-labels", LOCAL.replace("data.csv", "good.jsonl")),
    ("checkpoint-valid", model('checkpoint = "ckpt-good"')),
    ("n-classes-above-listops", data("n_classes = 12")),
]


def _export(folder, config: bytes | None, weights: bytes | None, vocab: bytes | None = None) -> None:
    folder.mkdir()
    if config is not None:
        (folder / "config.json").write_bytes(config)
    if weights is not None:
        (folder / "model.safetensors").write_bytes(weights)
    if vocab is not None:
        (folder / "vocab.json").write_bytes(vocab)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The local files the cases name: good ones, and damaged copies of them."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch
    from safetensors.torch import save

    from runner.studies.transject.models import build

    root = tmp_path_factory.mktemp("inputs")
    rows = "\n".join(f"text number {i},{i % 2}" for i in range(6))
    (root / "data.csv").write_text("text,y\n" + rows + "\n")  # no 'label' column
    (root / "labelled.csv").write_text("text,label\n" + rows + "\n")
    (root / "five.csv").write_text("text,label\n" + "\n".join(f"t {i},{i}" for i in range(5)) + "\n")
    (root / "negative.csv").write_text("text,label\na,0\nb,-1\nc,1\n")
    (root / "holes.csv").write_text("text,label\na,0\nb,\nc,1\n")
    (root / "words.csv").write_text("text,label\ngood film,pos\nbad film,neg\nfine film,pos\n")
    (root / "part_train.csv").write_text("text,label\na,0\nb,1\n")
    (root / "part_dev.csv").write_text("text,label\nc,1\n")
    (root / "empty.csv").write_text("")
    (root / "header.csv").write_text("text,label\n")
    (root / "one.csv").write_text("text,label\nalone,1\n")
    pq.write_table(pa.table({"text": ["a", "b", "c", "d"], "label": [0, 1, 2, 1]}), root / "three.parquet")
    (root / "garbage.parquet").write_bytes(b"PAR1 this is not a parquet file")
    (root / "truncated.parquet").write_bytes((root / "three.parquet").read_bytes()[:60])
    (root / "good.jsonl").write_text('{"text": "a", "label": 0}\n{"text": "b", "label": 1}\n')
    (root / "garbage.jsonl").write_text("{not json\n")
    (root / "scalar.json").write_text("42")
    params = {"d_model": 8, "n_layers": 1, "n_experts": 2, "alpha_init": 0.01, "vocab_size": 17, "n_classes": 10,
              "pooling": "max", "variant": "transject"}
    weights = save({k: v.contiguous() for k, v in build("transject", params, 0).state_dict().items()})
    config = json.dumps({"variant": "transject", "params": params}).encode()
    _export(root / "ckpt-good", config, weights, json.dumps(["<pad>", "<unk>"]).encode())
    _export(root / "ckpt-noweights", config, None)
    _export(root / "ckpt-badconfig", b'{"variant": "transject", ', weights)
    _export(root / "ckpt-binconfig", b"\xff\xfe\x00garbage", weights)
    _export(root / "ckpt-foreign", json.dumps({"architectures": ["BertModel"]}).encode(), weights)
    _export(root / "ckpt-badparams", json.dumps({"variant": "transject", "params": {"d_model": 8}}).encode(), weights)
    _export(root / "ckpt-garbage", config, b"\x00" * 64)
    _export(root / "ckpt-truncated", config, weights[: len(weights) // 2])
    _export(root / "ckpt-emptyweights", config, b"")
    _export(root / "ckpt-badvocab", config, weights, b'{"a": 1}')
    torch.manual_seed(0)
    return root


@pytest.fixture
def workdir(files, tmp_path, monkeypatch):
    """A fresh working directory holding links to the module's files (read only by the cases)."""
    for p in files.iterdir():
        (tmp_path / p.name).symlink_to(p, target_is_directory=p.is_dir())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def _listing(root):
    return sorted((p.relative_to(root).as_posix(), p.lstat().st_size) for p in root.rglob("*") if p.name != "spec.toml")


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["plan", "apply"])
@pytest.mark.parametrize("case, text, fragment", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_input_is_one_clear_message_before_anything(workdir, capsys, command, case, text, fragment):
    spec = workdir / "spec.toml"
    spec.write_text(text)
    before = _listing(workdir)
    code, out, err = _run(capsys, command, spec, *(["--quiet"] if command == "apply" else []))
    assert code == 65, (code, out, err)
    assert err.startswith("error: ") and "Traceback" not in err
    assert fragment in err, err
    assert err.removeprefix("error: ").splitlines()[0].startswith(f"{spec}:")  # FILE:LINE: [table] key: ...
    assert _listing(workdir) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case, text, fragment", UNREADABLE, ids=[c[0] for c in UNREADABLE])
def test_unreadable_local_file_is_listed_by_plan_and_refused_by_apply(workdir, capsys, case, text, fragment):
    spec = workdir / "spec.toml"
    spec.write_text(text)
    before = _listing(workdir)
    code, out, err = _run(capsys, "plan", spec, "--no-estimate")
    assert code == 0, (code, out, err)
    unwrapped = lambda text: " ".join(text.split())  # noqa: E731  (plan wraps to the terminal)
    assert "requirements not met here" in out and unwrapped(fragment) in unwrapped(out), out
    code, out, err = _run(capsys, "apply", spec, "--quiet")
    assert code == 66, (code, out, err)
    assert err.startswith("error: ") and "Traceback" not in err and unwrapped(fragment) in unwrapped(err), err
    assert _listing(workdir) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case, text", ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_unusual_but_right_input_is_planned(workdir, capsys, case, text):
    spec = workdir / "spec.toml"
    spec.write_text(text)
    code, out, err = _run(capsys, "plan", spec, "--no-estimate")
    assert code == 0, (code, out, err)
    assert "requirements not met" not in out and "Plan: " in out, out


@pytest.mark.timeout(60)
def test_pairs_the_listops_sentence_lacks_are_refused_when_it_is_drawn(workdir, capsys):
    """ListOps' analysis sentence is its first test sequence, known only once the run draws the data:
    a pair of ListOps tokens it lacks is refused then (late, before any training), never replaced."""
    spec = workdir / "spec.toml"
    spec.write_text(measure("distances", 'pairs = [["[SM", "[MED"]]'))
    code, out, err = _run(capsys, "plan", spec, "--no-estimate")
    assert code == 0, err
    code, out, err = _run(capsys, "apply", spec, "--quiet")
    assert code == 65, (code, out, err)
    assert err.startswith(f"error: {spec}:") and "(distances) pairs: the analysis sentence has no" in err
    assert "Traceback" not in err
    assert not (workdir / "store" / "badtj.zarr" / "zarr.json").exists()  # refused before the store was laid out


def test_parameter_count_is_the_models(files):
    """The memory estimate's parameter count equals the real networks' (every variant and both gates)."""
    from runner.studies.transject.preflight import n_parameters
    from runner.studies.transject.models import build

    base = {"d_model": 8, "n_layers": 2, "vocab_size": 23, "n_classes": 3, "pooling": "mean"}
    cases = [(v, {**base, "n_experts": 3, "alpha_init": 0.01, "variant": v})
             for v in ("transject", "random-transject", "entropic-transject", "random-entropic-transject")]
    cases += [("transject", {**base, "n_experts": 3, "alpha_init": 0.01, "variant": "transject", "gate": "input"})]
    cases += [(v, {**base, "n_heads": 2, "d_ff": 12, "dropout": 0.1}) for v in ("transformer", "transformer-rezero")]
    for variant, params in cases:
        model = build(variant, params, 0)
        assert n_parameters(variant, params) == sum(p.numel() for p in model.parameters()), (variant, params)


def test_the_corpus_is_large():
    assert len(INVALID) + len(UNREADABLE) + len(ACCEPTED) >= 120
