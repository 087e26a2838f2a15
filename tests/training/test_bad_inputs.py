"""A corpus of bad inputs to the training-as-time studies (LSTMs and taggers, scaffold corpora,
checkpoint suites, their checkpoint schedules and sweeps), through the CLI's entry point: each
ends in one clear message with the exit code of the convention (65 an invalid spec, 66 a missing
or unreadable input), at ``plan``, before anything is trained or created; never a traceback, never
a hang (each case has a time limit), never a silent drop. Cases accepted on purpose are tested as
accepted. Everything here is plan-level: nothing trains."""

from __future__ import annotations

import json

import pytest

from runner.cli import main
from suite_helpers import build_suite

LSTM = """
[experiment]
name = "badtrain"

[corpus]
source = "builtin:tiny-tagged"
min_count = 2
drop_rare_sentences = false
analysis_tokens = 300

[training]
epochs = 2
batch_size = 8
bptt = 10
embedding_dim = 8
hidden_dim = 8

[[model]]
name = "lm"

[[measure]]
kind = "sparsity"
"""

TAGGER = LSTM.replace('[[measure]]', '[[model]]\nname = "tagger"\nkind = "tagger"\ntagset = "upos"\n\n[[measure]]')

SCAFFOLD = """
[experiment]
name = "badscaffold"

[corpus]
source = "scaffold:"
analysis_tokens = 100

[corpus.scaffold]
lengths = [2]
vocab_size = 20
tokens = 3000
rules = 40
phrases = 10
familiar_repeats = 20
valid_tokens = 500
test_cases = 20

[training]
epochs = 2
batch_size = 4
bptt = 10
embedding_dim = 8
hidden_dim = 8
num_layers = 1

[[model]]
name = "f"
corpus_variant = "familiar_k2"

[[measure]]
kind = "rule_probability"
"""

#: SUITE_DIR is replaced by the tiny local suite the module builds (step0 and step10 folders).
SUITE = """
[experiment]
name = "badsuite"

[corpus]
source = "builtin:tiny-tagged"
min_count = 1
drop_rare_sentences = false
analysis_tokens = 100

[[model]]
name = "p"
kind = "suite"
source = "path:SUITE_DIR"
window_words = 16

[[measure]]
kind = "svcca"
compare = "final"
layers = ["layer1"]
"""

#: A depth spec with sentence pairs (pairs.jsonl, written in the working directory) for the readouts.
PAIRS = """
[experiment]
name = "badpairs"

[[model]]
name = "m"
source = "builtin:tiny-albert"

[input]
source = "pairs.jsonl"
samples = 10
tokens = 8
pair = ["sentence1", "sentence2"]
score = "label"

[dynamics]
steps = 120

[[measure]]
kind = "lyapunov"
"""


def edit(base: str, old: str, new: str) -> str:
    assert old in base, old
    return base.replace(old, new, 1)


def training(old: str, new: str, base: str = LSTM) -> str:
    return edit(base, old, new)


def add(base: str, text: str) -> str:
    return base + "\n" + text + "\n"


def scaffold(old: str, new: str) -> str:
    return edit(SCAFFOLD, old, new)


def suite(old: str, new: str) -> str:
    return edit(SUITE, old, new)


def ckpt(text: str) -> str:
    return add(LSTM, "[checkpoints]\n" + text)


L = LSTM
TRAIN_KEY = "epochs = 2"

#: (id, spec text, fragment of the one message expected) -- each refused with exit 65 at FILE:LINE
CASES = [
    # --- [training]: types, ranges, unknown keys
    ("epochs-zero", training(TRAIN_KEY, "epochs = 0"), "[training] epochs: Input should be greater than or equal to 1"),
    ("epochs-negative", training(TRAIN_KEY, "epochs = -3"), "[training] epochs: Input should be greater than or equal to 1"),
    ("epochs-float", training(TRAIN_KEY, "epochs = 2.0"), "[training] epochs: Input should be a valid integer"),
    ("epochs-string", training(TRAIN_KEY, 'epochs = "2"'), "[training] epochs: Input should be a valid integer"),
    ("epochs-1e12-float", training(TRAIN_KEY, "epochs = 1e12"), "[training] epochs: Input should be a valid integer"),
    ("epochs-huge", training(TRAIN_KEY, "epochs = 1_000_000_000_000"),
     "[training] epochs: the run would write about"),
    ("epochs-huge-no-epoch-checkpoints", add(training(TRAIN_KEY, "epochs = 1_000_000_000_000"),
                                             "[checkpoints]\nevery_epoch = false\nsteps = [5]"),
     "training curves over 20,000,000,000,000 steps"),
    ("lr-zero", training(TRAIN_KEY, "epochs = 2\nlr = 0"), "[training] lr: Input should be greater than 0"),
    ("lr-inf", training(TRAIN_KEY, "epochs = 2\nlr = inf"), "[training] lr: Input should be a finite number"),
    ("lr-nan", training(TRAIN_KEY, "epochs = 2\nlr = nan"), "[training] lr: Input should be a finite number"),
    ("lr-string", training(TRAIN_KEY, 'epochs = 2\nlr = "20"'), "[training] lr: Input should be a valid number"),
    ("lr-decay-below-one", training(TRAIN_KEY, "epochs = 2\nlr_decay = 0.5"),
     "[training] lr_decay: Input should be greater than or equal to 1"),
    ("momentum-one", training(TRAIN_KEY, "epochs = 2\nmomentum = 1.0"), "[training] momentum: Input should be less than 1"),
    ("momentum-negative", training(TRAIN_KEY, "epochs = 2\nmomentum = -0.1"),
     "[training] momentum: Input should be greater than or equal to 0"),
    ("clip-zero", training(TRAIN_KEY, "epochs = 2\nclip = 0"), "[training] clip: Input should be greater than 0"),
    ("batch-size-zero", training("batch_size = 8", "batch_size = 0"), "[training] batch_size: Input should be greater"),
    ("batch-size-bool", training("batch_size = 8", "batch_size = true"), "[training] batch_size: Input should be a valid integer"),
    ("batch-size-beyond-corpus", training("batch_size = 8", "batch_size = 1_000_000"),
     "[training] batch_size: batch_size x bptt (1000000 x 10) is larger than the training split"),
    ("bptt-one", training("bptt = 10", "bptt = 1"), "[training] bptt: Input should be greater than or equal to 2"),
    ("bptt-beyond-corpus", training("bptt = 10", "bptt = 100_000"), "[training] bptt: 100000 is longer than a training stream (198 tokens"),
    ("eval-batch-zero", training(TRAIN_KEY, "epochs = 2\neval_batch_size = 0"),
     "[training] eval_batch_size: Input should be greater than or equal to 1"),
    ("eval-batch-beyond-validation", training(TRAIN_KEY, "epochs = 2\neval_batch_size = 1000"),
     "the validation split holds 223 tokens, fewer than 2 x eval_batch_size = 2000"),
    ("dropout-one", training(TRAIN_KEY, "epochs = 2\ndropout = 1.0"), "[training] dropout: Input should be less than 1"),
    ("dropout-negative", training(TRAIN_KEY, "epochs = 2\ndropout = -0.2"), "[training] dropout: Input should be greater"),
    ("embedding-zero", training("embedding_dim = 8", "embedding_dim = 0"), "[training] embedding_dim: Input should be greater"),
    ("hidden-zero", training("hidden_dim = 8", "hidden_dim = 0"), "[training] hidden_dim: Input should be greater"),
    ("hidden-float", training("hidden_dim = 8", "hidden_dim = 8.0"), "[training] hidden_dim: Input should be a valid integer"),
    ("hidden-huge", training("hidden_dim = 8", "hidden_dim = 10_000_000"),
     "[training] hidden_dim: training lm (1,200,001,140,000,594 parameters: embedding_dim = 8, hidden_dim = 10000000"),
    ("embedding-huge", training("embedding_dim = 8", "embedding_dim = 100_000_000_000"),
     "[training] embedding_dim: training lm (9,800,000,001,490 parameters"),
    ("num-layers-five", training(TRAIN_KEY, "epochs = 2\nnum_layers = 5"),
     "[training] num_layers: Input should be less than or equal to 4"),
    ("num-layers-zero", training(TRAIN_KEY, "epochs = 2\nnum_layers = 0"),
     "[training] num_layers: Input should be greater than or equal to 1"),
    ("log-every-zero", training(TRAIN_KEY, "epochs = 2\nlog_every = 0"),
     "[training] log_every: Input should be greater than or equal to 1"),
    ("device-tpu", training(TRAIN_KEY, 'epochs = 2\ndevice = "tpu"'), "[training] device: unknown device 'tpu'"),
    ("training-unknown-key", training("hidden_dim = 8", "hiden_dim = 8"),
     "[training] hiden_dim: unknown key (did you mean 'hidden_dim'?)"),
    ("training-not-a-table", "training = 5\n" + L.replace("[training]\nepochs = 2\nbatch_size = 8\nbptt = 10\n"
                                                          "embedding_dim = 8\nhidden_dim = 8\n", ""),
     "[training]: Input should be a valid dictionary"),
    # --- [corpus] split and the rest
    ("split-negative", training("min_count = 2", "min_count = 2\nsplit = [1.1, -0.1, 0.0]"),
     "[corpus] split.0: Input should be less than or equal to 1"),
    ("split-negative-valid", training("min_count = 2", "min_count = 2\nsplit = [0.9, -0.1, 0.2]"),
     "[corpus] split.1: Input should be greater than or equal to 0"),
    ("split-zero-validation", training("min_count = 2", "min_count = 2\nsplit = [0.8, 0.0, 0.2]"),
     "[corpus] split: the validation fraction is 0"),
    ("split-zero-training", training("min_count = 2", "min_count = 2\nsplit = [0.0, 0.8, 0.2]"),
     "[corpus] split: the training fraction is 0"),
    ("split-sum", training("min_count = 2", "min_count = 2\nsplit = [0.5, 0.1, 0.1]"), "[corpus] split: must sum to 1, not 0.7"),
    ("split-four", training("min_count = 2", "min_count = 2\nsplit = [0.7, 0.1, 0.1, 0.1]"),
     "[corpus] split: List should have at most 3 items"),
    ("split-strings", training("min_count = 2", 'min_count = 2\nsplit = ["0.7", "0.1", "0.2"]'),
     "[corpus] split.0: Input should be a valid number"),
    ("split-inf", training("min_count = 2", "min_count = 2\nsplit = [inf, 0.1, 0.2]"),
     "[corpus] split.0: Input should be a finite number"),
    ("split-test-zero-analysed", training("min_count = 2", 'min_count = 2\nsplit = [0.8, 0.2, 0.0]\nanalysis_split = "test"'),
     "[corpus] analysis_split: the test fraction of [corpus] split is 0"),
    ("min-count-zero", training("min_count = 2", "min_count = 0"), "[corpus] min_count: Input should be greater"),
    ("max-vocab-two", training("min_count = 2", "min_count = 2\nmax_vocab = 2"), "[corpus] max_vocab: Input should be greater"),
    ("analysis-tokens-small", training("analysis_tokens = 300", "analysis_tokens = 4"),
     "[corpus] analysis_tokens: Input should be greater than or equal to 16"),
    ("analysis-split-train", training("min_count = 2", 'min_count = 2\nanalysis_split = "train"'),
     "[corpus] analysis_split: Input should be 'valid' or 'test'"),
    ("max-sentences-two", training("min_count = 2", "min_count = 2\nmax_sentences = 2"), "[corpus] max_sentences: Input should be greater"),
    ("lowercase-string", training("min_count = 2", 'min_count = 2\nlowercase = "yes"'), "[corpus] lowercase: Input should be a valid boolean"),
    ("corpus-unknown-key", training("min_count = 2", "min_cont = 2"), "[corpus] min_cont: unknown key (did you mean 'min_count'?)"),
    ("corpus-missing-file", training("builtin:tiny-tagged", "nope.conllu"), "[corpus] source: no such file nope.conllu"),
    ("corpus-unknown-builtin", training("builtin:tiny-tagged", "builtin:shakespeare"), "[corpus] source: unknown builtin"),
    ("corpus-csv", training("builtin:tiny-tagged", "notes.csv"), "local corpora are .conllu or .txt files, not '.csv'"),
    ("corpus-scaffold-table-elsewhere", add(L, "[corpus.scaffold]\ntokens = 1000"), "[corpus.scaffold] needs source = \"scaffold:\""),
    ("tag-articles-on-pydoc", training("builtin:tiny-tagged", "builtin:pydoc-topics").replace("min_count = 2", "min_count = 2\ntag_articles = 3"),
     "[corpus] tag_articles: needs documents"),
    # --- [checkpoints]: within the run, or refused
    ("ckpt-steps-negative", ckpt("steps = [-5]"), "[checkpoints] steps.0: Input should be greater than or equal to 0"),
    ("ckpt-steps-beyond-run", ckpt("steps = [5, 100000]"),
     "[checkpoints] steps: steps [100000] are beyond the run: the run's last step is 40 (2 epochs x 20 steps)"),
    ("ckpt-steps-just-beyond", ckpt("steps = [41]"), "steps [41] are beyond the run"),
    ("ckpt-steps-float", ckpt("steps = [5.0]"), "[checkpoints] steps.0: Input should be a valid integer"),
    ("ckpt-steps-not-list", ckpt("steps = 5"), "[checkpoints] steps: Input should be a valid list"),
    ("ckpt-every-epoch-string", ckpt('every_epoch = "yes"'), "[checkpoints] every_epoch: Input should be a valid boolean"),
    ("ckpt-none", ckpt("every_epoch = false"), "[checkpoints] every_epoch: the schedule keeps no checkpoint"),
    ("ckpt-unknown-key", ckpt("step = [5]"), "[checkpoints] step: unknown key (did you mean 'steps'?)"),
    ("log-spaced-huge-count", ckpt("log_spaced = { start = 1, count = 1_000_000_000_000 }"),
     "[checkpoints] log_spaced: count = 1000000000000 steps cannot be told apart between start = 1 and stop = 40"),
    ("log-spaced-count-over-range", ckpt("log_spaced = { start = 1, stop = 10, count = 11 }"),
     "log_spaced: count = 11 steps cannot be told apart between start = 1 and stop = 10 (10 steps)"),
    ("log-spaced-start-after-stop", ckpt("log_spaced = { start = 30, stop = 10, count = 4 }"),
     "[checkpoints] log_spaced: start = 30 is after stop = 10"),
    ("log-spaced-start-beyond-run", ckpt("log_spaced = { start = 3000, count = 4 }"),
     "[checkpoints] log_spaced: start = 3000 is beyond the run: the run's last step is 40"),
    ("log-spaced-stop-beyond-run", ckpt("log_spaced = { start = 1, stop = 3000, count = 4 }"),
     "[checkpoints] log_spaced: stop = 3000 is beyond the run"),
    ("log-spaced-start-zero", ckpt("log_spaced = { start = 0, count = 4 }"), "log_spaced.start: Input should be greater than or equal to 1"),
    ("log-spaced-count-one", ckpt("log_spaced = { start = 1, count = 1 }"), "log_spaced.count: Input should be greater than or equal to 2"),
    ("log-spaced-unknown-key", ckpt("log_spaced = { begin = 1, count = 4 }"), "log_spaced.begin: unknown key"),
    ("log-spaced-not-table", ckpt("log_spaced = 10"), "[checkpoints] log_spaced: Input should be a valid dictionary"),
    # --- [[model]]: LMs and taggers
    ("model-kind-unknown", training('name = "lm"', 'name = "lm"\nkind = "gru"'), "kind: Input should be 'lm', 'tagger' or 'suite'"),
    ("model-name-dup", L.replace("[[measure]]", '[[model]]\nname = "lm"\n\n[[measure]]'), "model names must be unique; 'lm' is repeated"),
    ("model-name-slash", training('name = "lm"', 'name = "a/b"'), "name: String should match pattern"),
    ("model-seed-string", training('name = "lm"', 'name = "lm"\nseed = "1"'), "seed: Input should be a valid integer"),
    ("lm-with-tagset", training('name = "lm"', 'name = "lm"\ntagset = "upos"'), "tagset and shuffled apply to taggers only"),
    ("lm-shuffled", training('name = "lm"', 'name = "lm"\nshuffled = true'), "tagset and shuffled apply to taggers only"),
    ("lm-window-words", training('name = "lm"', 'name = "lm"\nwindow_words = 8'), "window_words apply to kind = \"suite\" only"),
    ("lm-revisions", training('name = "lm"', 'name = "lm"\nrevisions = ["step1"]'), "revisions apply to kind = \"suite\" only"),
    ("lm-corpus-variant", training('name = "lm"', 'name = "lm"\ncorpus_variant = "familiar_k2"'),
     "corpus_variant needs [corpus] source = \"scaffold:\""),
    ("tagger-no-tagset", L.replace("[[measure]]", '[[model]]\nname = "t"\nkind = "tagger"\n\n[[measure]]'), "a tagger needs a tagset"),
    ("tagger-unknown-tagset", edit(TAGGER, 'tagset = "upos"', 'tagset = "ner"'), "tagset: Input should be 'upos'"),
    ("tagger-unknown-mode", edit(TAGGER, 'tagset = "upos"', 'tagset = "upos"\nmode = "both"'), "mode: Input should be 'tag_predictor' or 'input_tagger'"),
    ("tagger-upos-on-prose", edit(TAGGER, "builtin:tiny-tagged", "builtin:pydoc-topics"), "tag set 'upos' needs a .conllu corpus"),
    ("tagger-gmb-without-file", edit(TAGGER, 'tagset = "upos"', 'tagset = "gmb_pos"'), "tag set 'gmb_pos' needs a GMB-style tagged file"),
    ("tagger-hidden-huge", edit(TAGGER, "hidden_dim = 8", "hidden_dim = 10_000_000"), "[training] hidden_dim: training lm"),
    ("tagger-measured", add(TAGGER, '[[measure]]\nkind = "lca"\nnetworks = ["tagger"]'), "measures language models; tagger is a tagger"),
    ("tagger-shuffled-string", edit(TAGGER, 'tagset = "upos"', 'tagset = "upos"\nshuffled = "yes"'), "shuffled: Input should be a valid boolean"),
    ("network-table-renamed", L.replace("[[model]]", "[[network]]"), "[[network]] tables are now called [[model]]"),
    # --- [[measure]] against the trained networks
    ("measure-layer-beyond", training('kind = "sparsity"', 'kind = "sparsity"\nlayers = ["lstm3"]'),
     "(sparsity) layers: layer lstm3 but [training] num_layers = 2"),
    ("measure-suite-layer-on-lstm", training('kind = "sparsity"', 'kind = "sparsity"\nlayers = ["layer1"]'),
     "layer(s) ['layer1'] belong to checkpoint suites"),
    ("measure-unknown-network", training('kind = "sparsity"', 'kind = "sparsity"\nnetworks = ["nope"]'), "networks: no [[model]] named ['nope']"),
    ("measure-scaffold-on-english", add(L, '[[measure]]\nkind = "rule_probability"'), "rule_probability measures the scaffold test sets"),
    ("measure-twice", add(L, '[[measure]]\nkind = "sparsity"'), "each measure (and svcca compare mode) may appear once"),
    # --- scaffold corpora: bounded generator, sizes, shapes
    ("scaffold-tokens-huge", scaffold("tokens = 3000", "tokens = 1_000_000_000_000"),
     "[corpus] scaffold.tokens: generating the scaffold corpora (tokens = 1,000,000,000,000) needs about"),
    ("scaffold-tokens-small", scaffold("tokens = 3000", "tokens = 50"), "tokens: Input should be greater than or equal to 100"),
    ("scaffold-rules-huge", scaffold("rules = 40", "rules = 1_000_000_000_000"),
     "[corpus] scaffold.rules: the training stream of k = 2: 3000 tokens cannot hold 1000000000200 segments"),
    ("scaffold-rules-fill-tokens", scaffold("rules = 40", "rules = 1000"),
     "3000 tokens cannot hold 1200 segments of length 2 (4400 tokens) separated by background tokens"),
    ("scaffold-repeats-huge", scaffold("familiar_repeats = 20", "familiar_repeats = 1_000_000_000_000"),
     "[corpus] scaffold.familiar_repeats: the training stream of k = 2"),
    ("scaffold-repeats-negative", scaffold("familiar_repeats = 20", "familiar_repeats = -1"),
     "familiar_repeats: Input should be greater than or equal to 0"),
    ("scaffold-valid-tiny", scaffold("valid_tokens = 500", "valid_tokens = 10"),
     "[corpus] scaffold.valid_tokens: the validation stream of k = 2"),
    ("scaffold-valid-below-ten", scaffold("valid_tokens = 500", "valid_tokens = 5"), "valid_tokens: Input should be greater than or equal to 10"),
    ("scaffold-phrases-fill", scaffold("phrases = 10", "phrases = 400"),
     "[corpus] scaffold.phrases: 400 phrases of length 2 leave no other scaffold of the 400 over 20 types"),
    ("scaffold-phrases-over", scaffold("phrases = 10", "phrases = 401"), "401 phrases of length 2 leave no other scaffold"),
    ("scaffold-phrases-zero", scaffold("phrases = 10", "phrases = 0"), "phrases: Input should be greater than or equal to 1"),
    ("scaffold-background-loops-k1", scaffold("vocab_size = 20", "vocab_size = 2").replace("phrases = 10", "phrases = 2")
     .replace("lengths = [2]", "lengths = [1]").replace("familiar_k2", "familiar_k1"),
     "2 phrases of length 1 leave no other scaffold of the 2 over 2 types"),
    ("scaffold-background-loops-k2", scaffold("vocab_size = 20", "vocab_size = 2").replace("phrases = 10", "phrases = 3"),
     "[corpus] scaffold.phrases: the background cannot avoid the 3 phrases of length 2: after 100 rounds"),
    ("scaffold-vocab-one", scaffold("vocab_size = 20", "vocab_size = 1"), "vocab_size: Input should be greater than or equal to 2"),
    ("scaffold-vocab-huge", scaffold("vocab_size = 20", "vocab_size = 1_000_000_000_000"),
     "[corpus] scaffold.vocab_size: generating the scaffold corpora (vocab_size = 1,000,000,000,000)"),
    ("scaffold-test-cases-huge", scaffold("test_cases = 20", "test_cases = 1_000_000_000_000"),
     "[corpus] scaffold.test_cases: generating the scaffold corpora"),
    ("scaffold-context-huge", scaffold("test_cases = 20", "test_cases = 20\ncontext = 1_000_000_000_000"),
     "[corpus] scaffold.context: generating the scaffold corpora"),
    ("scaffold-test-cases-zero", scaffold("test_cases = 20", "test_cases = 0"), "test_cases: Input should be greater than or equal to 1"),
    ("scaffold-lengths-empty", scaffold("lengths = [2]", "lengths = []"), "lengths: List should have at least 1 item"),
    ("scaffold-lengths-repeat", scaffold("lengths = [2]", "lengths = [2, 2]"), "lengths must be distinct and >= 1"),
    ("scaffold-lengths-zero", scaffold("lengths = [2]", "lengths = [0, 2]"), "lengths must be distinct and >= 1"),
    ("scaffold-length-huge", scaffold("lengths = [2]", "lengths = [2, 1_000_000_000_000]"), "[corpus] scaffold.rules: the training stream of k = 1000000000000"),
    ("scaffold-setting-unknown", scaffold("lengths = [2]", 'lengths = [2]\nsettings = ["strange"]'), "settings.0: Input should be 'unfamiliar' or 'familiar'"),
    ("scaffold-settings-repeat", scaffold("lengths = [2]", 'lengths = [2]\nsettings = ["familiar", "familiar"]'), "settings must be distinct"),
    ("scaffold-unknown-key", scaffold("rules = 40", "rule = 40"), "scaffold.rule: unknown key (did you mean 'rules'?)"),
    ("scaffold-tokens-string", scaffold("tokens = 3000", 'tokens = "3000"'), "tokens: Input should be a valid integer"),
    ("scaffold-variant-missing", scaffold('corpus_variant = "familiar_k2"', ""), "a scaffold: corpus needs corpus_variant"),
    ("scaffold-variant-unknown", scaffold("familiar_k2", "familiar_k3"), "not 'familiar_k3'"),
    ("scaffold-tagger", scaffold('corpus_variant = "familiar_k2"', 'corpus_variant = "familiar_k2"\nkind = "tagger"\ntagset = "upos"'),
     "the scaffold corpus has no tags"),
    ("scaffold-english-measure", add(SCAFFOLD, '[[measure]]\nkind = "syntax_interdependence"\ntreebank = "ewt.conllu"'),
     "syntax_interdependence reads English"),
    ("scaffold-hidden-huge", scaffold("hidden_dim = 8", "hidden_dim = 10_000_000"), "[training] hidden_dim: training f"),
    ("scaffold-epochs-huge", scaffold("epochs = 2", "epochs = 1_000_000_000_000"), "[training] epochs: the run would write about"),
    # --- checkpoint suites
    ("suite-revisions-huge", suite("window_words = 16", 'window_words = 16\nrevisions = "step{0..1000000000000:1}"'),
     "names 1,000,000,000,001 revisions; a suite holds at most 10,000"),
    ("suite-revisions-downwards", suite("window_words = 16", 'window_words = 16\nrevisions = "step{10..0:1}"'),
     "the range must run upwards with a positive stride"),
    ("suite-revisions-stride-zero", suite("window_words = 16", 'window_words = 16\nrevisions = "step{0..10:0}"'),
     "the range must run upwards with a positive stride"),
    ("suite-revisions-bad-braces", suite("window_words = 16", 'window_words = 16\nrevisions = "step{0-10}"'),
     "write a range as 'step{FIRST..LAST:STRIDE}'"),
    ("suite-revisions-empty", suite("window_words = 16", "window_words = 16\nrevisions = []"), "give a non-empty list without repeats"),
    ("suite-revisions-repeat", suite("window_words = 16", 'window_words = 16\nrevisions = ["step0", "step0"]'),
     "give a non-empty list without repeats"),
    ("suite-revision-no-step", suite("window_words = 16", 'window_words = 16\nrevisions = ["main"]'), "revision 'main' names no step"),
    ("suite-window-beyond-text", suite("window_words = 16", "window_words = 5000"),
     "window_words: 5000 words per window, but the analysis text holds 100 words"),
    ("suite-window-one", suite("window_words = 16", "window_words = 1"), "window_words: Input should be greater than or equal to 2"),
    ("suite-batch-zero", suite("window_words = 16", "window_words = 16\nbatch_size = 0"), "batch_size: Input should be greater"),
    ("suite-pool-unknown", suite("window_words = 16", 'window_words = 16\npool = "max"'), "pool: Input should be 'mean', 'first' or 'last'"),
    ("suite-no-source", suite('source = "path:SUITE_DIR"\n', ""), "a suite needs source"),
    ("suite-missing-dir", suite("path:SUITE_DIR", "path:no/such/dir"), "no such checkpoint directory"),
    ("suite-seeds-without-pattern", suite("window_words = 16", "window_words = 16\nseeds = [0, 1]"),
     "seeds and a source holding {seed} go together"),
    ("suite-tagset", suite("window_words = 16", 'window_words = 16\ntagset = "upos"'), "apply to trained networks, not suites"),
    ("suite-beside-lstm", SUITE.replace("[[measure]]", '[[model]]\nname = "lm"\n\n[[measure]]'),
     "a spec either measures checkpoint suites or trains networks"),
    ("suite-trained-measure", add(SUITE, '[[measure]]\nkind = "lca"'), "lca needs networks this runner trains"),
    ("suite-layers-unset", suite('layers = ["layer1"]\n', ""), "name the suite's layers to measure"),
    ("suite-layer-beyond", suite('layers = ["layer1"]', 'layers = ["layer9"]'), "p has no layer ['layer9']"),
    ("suite-lstm-layer", suite('layers = ["layer1"]', 'layers = ["lstm1"]'), "a suite's layers are embedding, layer1 .. layerN"),
    # --- sweeps over training specs
    ("sweep-huge-grid", add(L, "[sweep.training]\nepochs = " + json.dumps(list(range(1, 2001))) + "\nbatch_size = "
                            + json.dumps(list(range(1, 2001)))), "the grid has 4,000,000 points (2000 x 2000); a sweep holds at most 1,000"),
    ("sweep-store-axis", add(L, '[sweep.experiment]\nstore = ["a.zarr", "b.zarr"]'), "[sweep] experiment.store: cannot be swept"),
    ("sweep-point-epochs-zero", add(L, "[sweep.training]\nepochs = [1, 0]"),
     "[training] epochs: Input should be greater than or equal to 1 (sweep point epochs=0)"),
    ("sweep-point-epochs-huge", add(L, "[sweep.training]\nepochs = [1, 1_000_000_000_000]"),
     "the run would write about"),
    ("sweep-point-ckpt-beyond", add(ckpt("steps = [30]"), "[sweep.training]\nepochs = [1, 2]"),
     "steps [30] are beyond the run: the run's last step is 20 (1 epochs x 20 steps) (sweep point epochs=1)"),
    ("sweep-model-list", add(L, "[sweep.model]\nname = ['a', 'b']"), "[[model]] is a list of tables"),
    ("sweep-empty", add(L, "[sweep.training]\nepochs = []"), "expected a non-empty list"),
    ("sweep-repeat", add(L, "[sweep.training]\nepochs = [1, 1]"), "a value is listed twice"),
    ("sweep-unknown-key", add(L, "[sweep.training]\nepoch = [1, 2]"), "epoch: unknown key (did you mean 'epochs'?)"),
    ("sweep-nested-scalar", add(L, "[sweep.checkpoints]\nlog_spaced = { start = 1 }"),
     "[sweep] checkpoints.log_spaced.start: expected a non-empty list of values"),
    ("sweep-nested-not-scaffold", add(L, "[sweep.corpus.scaffold]\nrules = [10, 20]"),
     "[corpus.scaffold] needs source = \"scaffold:\""),
    ("sweep-scaffold-hidden-huge", add(SCAFFOLD, "[sweep.training]\nhidden_dim = [8, 10_000_000]"),
     "[training] hidden_dim: training f (400,000,620,000,198 parameters"),
    # --- the depth readouts of this brief
    ("sts-finetune-beyond-steps", add(PAIRS, '[[measure]]\nkind = "sts_finetune"\nsteps = [1, 500]'),
     "(sts_finetune) steps: step 500 is beyond [dynamics] steps = 120"),
    ("handwriting-letters-nested", add(PAIRS, '[[measure]]\nkind = "handwriting_readout"\nletters = [["U"], ["S"]]'),
     "(handwriting_readout) letters.0: Input should be a valid string"),
    ("handwriting-letters-string", add(PAIRS, '[[measure]]\nkind = "handwriting_readout"\nletters = "US"'),
     "(handwriting_readout) letters: Input should be a valid list"),
    ("handwriting-letters-words", add(PAIRS, '[[measure]]\nkind = "handwriting_readout"\nletters = ["UU", "S"]'),
     "(handwriting_readout) letters: two different letters of one visible character each"),
    ("handwriting-letters-blank", add(PAIRS, '[[measure]]\nkind = "handwriting_readout"\nletters = [" ", "S"]'),
     "two different letters of one visible character each"),
    ("handwriting-letters-same", add(PAIRS, '[[measure]]\nkind = "handwriting_readout"\nletters = ["S", "S"]'),
     "two different letters of one visible character each"),
    ("handwriting-letters-three", add(PAIRS, '[[measure]]\nkind = "handwriting_readout"\nletters = ["U", "S", "X"]'),
     "letters: List should have at most 2 items"),
]

#: Local suites that are there but cannot be loaded: refused at ``plan`` as unmet requirements (exit 66 at
#: ``apply``), checked without loading the weights. (id, how the suite is damaged, fragment)
UNREADABLE_SUITES = [
    ("suite-weights-missing", "no-weights", "step10: no weights (model.safetensors"),
    ("suite-weights-garbage", "garbage-weights", "step10: model.safetensors is not a safetensors file"),
    ("suite-tokenizer-missing", "no-tokenizer", "step10: no tokenizer (tokenizer.json"),
    ("suite-revision-missing", "missing-revision", "step5"),
]

#: Edge values accepted on purpose: ``plan`` resolves them (exit 0).
ACCEPTED = [
    ("split-zero-test", training("min_count = 2", "min_count = 2\nsplit = [0.8, 0.2, 0.0]"), "the analysis split is valid"),
    ("ckpt-at-last-step", ckpt("steps = [0, 40]"), "the first and last steps are in the run"),
    ("log-spaced-fills-range", ckpt("log_spaced = { start = 1, stop = 10, count = 10 }"), "every step once"),
    ("log-spaced-to-the-end", ckpt("log_spaced = { start = 1, count = 40 }"), "stop defaults to the last step"),
    ("scaffold-one-scaffold-left", scaffold("phrases = 10", "phrases = 20").replace("vocab_size = 20", "vocab_size = 21")
     .replace("lengths = [2]", "lengths = [1]").replace("familiar_k2", "familiar_k1").replace("familiar_repeats = 20", "familiar_repeats = 2"),
     "21 types of which 20 are phrases: the background and the out-domain test use the last"),
    ("analysis-tokens-beyond-split", training("analysis_tokens = 300", "analysis_tokens = 1_000_000_000_000_000"),
     "measures read the whole analysis split (its first analysis_tokens tokens)"),
    ("sweep-small-grid", add(L, "[sweep.training]\nepochs = [1, 2]"), "two points"),
    ("suite-revision-list", suite("window_words = 16", 'window_words = 16\nrevisions = ["step0", "step10"]'), "both folders exist"),
    ("suite-window-equals-text", suite("window_words = 16", "window_words = 100"), "one window holds the whole text"),
]


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    """The tiny local suite, and copies damaged in one way each."""
    import shutil

    root = tmp_path_factory.mktemp("suites")
    good = build_suite(root / "good", "gpt_neox", steps=(0, 10))
    out = {"good": good}
    for damage in ("no-weights", "garbage-weights", "no-tokenizer", "missing-revision"):
        out[damage] = shutil.copytree(good, root / damage)
    (out["no-weights"] / "step10" / "model.safetensors").unlink()
    (out["garbage-weights"] / "step10" / "model.safetensors").write_bytes(b"garbage")
    for f in (out["no-tokenizer"] / "step10").iterdir():
        if f.name.startswith("tokenizer"):
            f.unlink()
    return out


@pytest.fixture
def workdir(tmp_path, tmp_path_factory, monkeypatch):
    (tmp_path / "notes.csv").write_text("a,b\n")
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps({"sentence1": f"the cat sat {i}", "sentence2": f"a dog {i}",
                                                                "label": float(i % 5)}) for i in range(12)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSIENT_CACHE", str(tmp_path_factory.getbasetemp() / "bad-inputs-cache"))
    return tmp_path


def _listing(root):
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size) for p in root.rglob("*") if p.name != "spec.toml")


def _run(capsys, *args):
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["plan", "apply"])
@pytest.mark.parametrize("case, text, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_message_and_nothing_is_touched(workdir, suites, capsys, command, case, text, fragment):
    spec = workdir / "spec.toml"
    spec.write_text(text.replace("SUITE_DIR", str(suites["good"])))
    before = _listing(workdir)
    code, out, err = _run(capsys, command, spec, *(["--quiet"] if command == "apply" else ["--no-estimate"]))
    assert code == 65, (code, out, err)
    assert err.startswith("error: ") and "Traceback" not in err
    assert fragment in err, err
    first = err.removeprefix("error: ").splitlines()[0]
    assert first.startswith(f"{spec}:"), first  # FILE:LINE: ...
    assert _listing(workdir) == before  # nothing created, nothing deleted


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case, damage, fragment", UNREADABLE_SUITES, ids=[c[0] for c in UNREADABLE_SUITES])
def test_unreadable_local_suite_is_named_at_plan_and_refused_by_apply(workdir, suites, capsys, case, damage, fragment):
    spec = workdir / "spec.toml"
    text = SUITE.replace("SUITE_DIR", str(suites[damage]))
    if damage == "missing-revision":
        text = edit(text, "window_words = 16", 'window_words = 16\nrevisions = ["step0", "step5"]')
    spec.write_text(text)
    before = _listing(workdir)
    code, out, err = _run(capsys, "plan", spec, "--no-estimate")
    unwrapped = lambda text: " ".join(text.split())  # noqa: E731  (plan wraps to the terminal)
    assert code == 0 and "requirements not met here" in out and unwrapped(fragment) in unwrapped(out), (code, out, err)
    code, out, err = _run(capsys, "apply", spec, "--quiet")
    assert code == 66, (code, out, err)
    assert err.startswith("error: this machine does not meet the spec's requirements") and \
        unwrapped(fragment) in unwrapped(err), err
    assert "Traceback" not in err
    assert _listing(workdir) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case, text, why", ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_edge_value_is_accepted_on_purpose(workdir, suites, capsys, case, text, why):
    spec = workdir / "spec.toml"
    spec.write_text(text.replace("SUITE_DIR", str(suites["good"])))
    code, out, err = _run(capsys, "plan", spec, "--no-estimate")
    assert code == 0, (why, out, err)
    assert "Plan: " in out and "requirements not met" not in out, out


def test_the_corpus_is_large():
    assert len(CASES) + len(UNREADABLE_SUITES) + len(ACCEPTED) >= 110


@pytest.mark.parametrize("kind, layers", [("lm", 1), ("lm", 3), ("tagger", 1)])
def test_parameter_count_of_the_estimate_is_the_models(kind, layers):
    """The memory estimate counts an LSTM's parameters as torch builds them (the huge cases above are
    counted by the same formula)."""
    from models.registry import family_for
    from runner.studies.training.sizes import lstm_parameters

    sizes = dict(vocab_size=37, embedding_dim=5, hidden_dim=7, dropout=0.0)
    source, params, n_out = ("builtin:lstm-lm", dict(sizes, num_layers=layers), 37) if kind == "lm" else \
        ("builtin:lstm-tagger", dict(sizes, n_tags=11, mode="tag_predictor"), 11)
    model = family_for(source).build(source, params=params, seed=0, device="cpu")
    assert sum(lstm_parameters(37, n_out, 5, 7, layers).values()) == sum(p.numel() for p in model.parameters())
