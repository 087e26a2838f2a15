"""What a training or suite spec asks of this machine, known before anything is allocated: the
checkpoint schedule against the run's length, the memory of each model with its training buffers,
of the scaffold generator and of a suite checkpoint, and the disk its checkpoints and curves take.

The sizes are declared as :class:`runner.spec.footprint.Need` s, which the engine checks as it checks every
study's (a size that cannot fit is refused at its key, naming the size and what this machine has); every
figure is an estimate ("about") from the tensors' shapes, not a measurement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.filesize import decimal

from runner.spec import footprint
from runner.spec.footprint import Need
from runner.spec.specfile import SpecProblem

if TYPE_CHECKING:
    from runner.studies.training.state import CorpusStats

FLOAT = 4  # bytes of an fp32 value: the thesis' LSTMs and the suites' checkpoints are read in fp32
INDEX = 8  # bytes of an int64 token id


def _decimal(n: float) -> str:
    return decimal(int(n))


def total_steps(study, steps_per_epoch: int) -> int:
    return steps_per_epoch * study.training.epochs


def schedule_problems(study, steps_per_epoch: int) -> list[tuple[tuple, str]]:
    """Checkpoint steps the run never reaches (they would be dropped silently), and a log-spaced count
    that more than fills its range."""
    total = total_steps(study, steps_per_epoch)
    run = f"the run's last step is {total} ({study.training.epochs} epochs x {steps_per_epoch} steps)"
    out = []
    beyond = sorted(s for s in study.checkpoints.steps if s > total)
    if beyond:
        out.append((("checkpoints", "steps"), f"steps {beyond[:5]}{' ...' if len(beyond) > 5 else ''} are beyond the "
                    f"run: {run}"))
    ls = study.checkpoints.log_spaced
    if ls is not None:
        stop = ls.stop if ls.stop is not None else total
        if ls.stop is not None and ls.stop > total:
            out.append((("checkpoints", "log_spaced"), f"stop = {ls.stop} is beyond the run: {run}"))
        elif ls.start > stop:
            out.append((("checkpoints", "log_spaced"), f"start = {ls.start} is beyond the run: {run}"))
        elif ls.count > stop - ls.start + 1:
            out.append((("checkpoints", "log_spaced"), f"count = {ls.count} steps cannot be told apart between start "
                        f"= {ls.start} and stop = {stop} ({stop - ls.start + 1} steps; {run})"))
    return out


def checkpoint_count(study, steps_per_epoch: int) -> int:
    """At most this many checkpoints per network (counted, not listed: epochs may be huge)."""
    c = study.checkpoints
    return (int(c.initial) + (study.training.epochs if c.every_epoch else 0) + len(c.steps)
            + (c.log_spaced.count if c.log_spaced else 0) + 1)


def lstm_parameters(vocab: int, n_out: int, embedding: int, hidden: int, layers: int) -> dict[str, int]:
    """Parameters of :class:`models.lstm._LSTMStack` by the key that sizes them: the embedding
    (vocab x embedding), the LSTM layers (4 gates: 4H(d_in + H) weights, 8H biases) and the decoder
    (H x n_out + n_out)."""
    lstm = sum(4 * hidden * ((embedding if i == 0 else hidden) + hidden) + 8 * hidden for i in range(layers))
    return {"embedding_dim": vocab * embedding, "hidden_dim": lstm + hidden * n_out + n_out}


def _lstm_memory(vocab: int, layers: int, bptt: int, momentum: bool, embedding_dim: int, hidden_dim: int,
                 batch_size: int, analysis_tokens: int) -> int:
    """Bytes of one LSTM's training: weights, gradients and the clipped update (and a momentum buffer), the
    activations one batch keeps for backward (per token the embedding, each layer's 4 gates, c and h and
    dropout masks, 3 copies of the logits), and the analysis states and gradients the measures read."""
    params = sum(lstm_parameters(vocab, vocab, embedding_dim, hidden_dim, layers).values())  # a tagger's n_out <= vocab
    weights = params * (3 + momentum) * FLOAT
    activations = batch_size * bptt * (2 * embedding_dim + layers * 8 * hidden_dim + 3 * vocab) * FLOAT
    analysis = analysis_tokens * (embedding_dim + layers * hidden_dim + vocab) * FLOAT * 2
    return weights + activations + analysis


def training_needs(study, stats: CorpusStats) -> list[Need]:
    """Each network's weights, gradients and buffers, one batch's activations and the analysis states
    in memory; every network's checkpoints and curves on the store's disk."""
    t = study.training
    vocab, steps_per_epoch = stats.vocab, stats.steps_per_epoch
    corpus = sum(stats.tokens) * INDEX
    analysed = min(study.corpus.analysis_tokens, stats.split_tokens(study.corpus.analysis_split))  # at most the split
    per_net, out = 0, []
    for net in study.model:
        layers = t.num_layers if net.kind == "lm" else 1
        sizes = {"embedding_dim": t.embedding_dim, "hidden_dim": t.hidden_dim, "batch_size": t.batch_size,
                 "analysis_tokens": analysed}
        params = sum(lstm_parameters(vocab, vocab, t.embedding_dim, t.hidden_dim, layers).values())
        need = _lstm_memory(vocab, layers, t.bptt, t.momentum > 0, **sizes) + corpus
        # the size to name: the one whose reduction to 1 saves the most
        key = max(sizes, key=lambda k: need - _lstm_memory(vocab, layers, t.bptt, t.momentum > 0, **{**sizes, k: 1}))
        out.append(Need(("corpus" if key == "analysis_tokens" else "training", key), need,
                        f"training {net.name} ({params:,} parameters: embedding_dim = {t.embedding_dim}, hidden_dim = "
                        f"{t.hidden_dim}; batch_size x bptt = {t.batch_size * t.bptt} tokens of activations) needs"))
        per_net = max(per_net, params * FLOAT)
    total = total_steps(study, steps_per_epoch)
    n = len(study.model)
    checkpoints = checkpoint_count(study, steps_per_epoch) * per_net * n
    curves = n * (total // t.log_every * 2 + t.epochs * 4) * FLOAT
    return out + [Need(("training", "epochs"), checkpoints + curves, "the run would write", on="disk",
                       detail=f" (up to {checkpoint_count(study, steps_per_epoch):,} checkpoints of {_decimal(per_net)} "
                       f"per network, training curves over {total:,} steps)",
                       fix="; fewer epochs or checkpoints, a larger log_every")]


def check_scaffold(scaffold) -> None:
    """The generator's arrays before it draws: each stream (int64 tokens, the background, the placed
    mask, the k-gram hashes), the phrase set, the test sets and the vocabulary's strings (checked here,
    before the corpus is generated, not after prepare)."""
    parts = {
        "tokens": (scaffold.tokens + scaffold.valid_tokens) * INDEX * (4 + 2 * len(scaffold.settings) * len(scaffold.lengths)),
        "phrases": scaffold.phrases * max(scaffold.lengths) * INDEX * 16,
        "test_cases": 2 * scaffold.test_cases * (scaffold.context + max(scaffold.lengths) + 2) * INDEX * 2,
        "vocab_size": scaffold.vocab_size * 64,
    }
    need = sum(parts.values())
    key = max(parts, key=parts.get)
    if key == "test_cases" and scaffold.context > scaffold.test_cases:
        key = "context"  # long test cases rather than many
    footprint.check([Need(("corpus", "scaffold", key), need,
                          f"generating the scaffold corpora ({key} = {getattr(scaffold, key):,}) needs")])


def analysis_words(study, stats: CorpusStats) -> int:
    """Words a suite checkpoint reads: ``analysis_tokens`` of the analysis split, less the last (no target)."""
    return min(study.corpus.analysis_tokens, stats.split_tokens(study.corpus.analysis_split) - 1)


def suite_needs(study, stats: CorpusStats, configs: list) -> list[Need]:
    """A window no longer than the analysis text (refused here); each checkpoint's memory (fp32 weights,
    built on the meta device to count them) with one batch of windows' hidden states of every layer."""
    words = analysis_words(study, stats)
    for i, net in enumerate(study.model):
        where = ("model", study.entry(i))
        if net.window_words > words:
            raise SpecProblem(where + ("window_words",), f"{net.window_words} words per window, but the analysis "
                              f"text holds {words} words ([corpus] analysis_tokens = {study.corpus.analysis_tokens})")
    out = []
    for i, (net, config) in enumerate(zip(study.model, configs)):
        if config is None:
            continue
        params = _config_parameters(config)
        hidden = getattr(config, "hidden_size", 0) or 0
        layers = getattr(config, "num_hidden_layers", 0) or 0
        # a window's subwords: a few per word; every layer's states, twice when gradients are read
        states = net.batch_size * net.window_words * 4 * hidden * (layers + 1) * FLOAT * 2
        kept = words * hidden * (layers + 1) * FLOAT * 2
        if params is not None:
            out.append(Need(("model", study.entry(i), "source"), params * FLOAT + states + kept,
                            f"a checkpoint of {net.name} ({params:,} parameters, hidden_size = {hidden}, {layers} "
                            "layers) needs"))
    return out


def _config_parameters(config) -> int | None:
    """Parameters of the model a configuration describes, counted on the meta device (nothing allocated);
    None when transformers cannot build it without its own code."""
    import torch  # lazy: torch
    from transformers import AutoModel  # lazy: transformers

    try:
        with torch.device("meta"):
            model = AutoModel.from_config(config)
    except Exception:  # noqa: BLE001 -- a model type only its repository's code builds: no estimate
        return None
    return sum(p.numel() for p in model.parameters())
