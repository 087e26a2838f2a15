"""Training throughput of a training spec run by the runner (checkpoints + measures at checkpoints)
against the same networks trained by a plain PyTorch loop, in the same process.

Usage: python benchmarks/training.py [--spec specs/tiny/lstm_tiny.toml] [--device cpu|cuda] [--epochs N] [--json F]

The plain loop is pytorch/examples word_language_model: same model class, batches, TBPTT,
clipping and torch.optim.SGD, no checkpoints, no measures. Reported: tokens/s of each and the
runner's overhead, (t_runner - t_plain) / t_plain (target: < 10% with measures at checkpoints).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import torch

from runner.run.apply import apply
from runner.run.prepare import prepare
from runner.studies.training.data.tokens import batchify, get_batch
from runner.core.device import make_deterministic, set_precision
from runner.storage.store import read_tasks
from runner.studies.training.spec import read_corpus
from runner.studies.training.train import build_model, steps_per_epoch


def corpus_of(p):
    return p.state.corpus or read_corpus(p.spec, list(p.state.tagsets), p.spec_file.path.parent)


def plain_loop(p, corpus, device: torch.device) -> tuple[float, int]:
    study, tr = p.spec, p.spec.training
    tokens, t0 = 0, time.perf_counter()
    for i, net in enumerate(study.model):
        model = build_model(net, tr, corpus, study.network_seed(i), device)
        opt = torch.optim.SGD(model.parameters(), lr=tr.lr)
        words = batchify(corpus.train, tr.batch_size).to(device)
        tags = batchify(corpus.tags[net.tagset].train, tr.batch_size).to(device) if net.kind == "tagger" else None
        for _ in range(tr.epochs):
            model.train()
            hidden = model.init_hidden(tr.batch_size)
            for b in range(steps_per_epoch(corpus.train.numel(), tr)):
                x, y = get_batch(words, b * tr.bptt, tr.bptt)
                if tags is not None:
                    y = model.targets(*get_batch(tags, b * tr.bptt, tr.bptt))
                hidden = model.detach_hidden(hidden)
                opt.zero_grad()
                logits, hidden = model(x, hidden)
                loss = model.loss(logits, y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), tr.clip)
                opt.step()
                tokens += x.numel()
            loss.item()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default="specs/tiny/lstm_tiny.toml")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--epochs", type=int, help="override [training] epochs")
    ap.add_argument("--json", type=Path, help="also write the times here")
    args = ap.parse_args()
    src = Path(args.spec).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        text = src.read_text()
        text = re.sub(r'(source = ")(\.\./[^"]+)"', lambda m: f'{m.group(1)}{(src.parent / m.group(2)).resolve()}"', text)
        text = text.replace("[experiment]\n", f'[experiment]\nstore = "{tmp}/bench.zarr"\n', 1)
        if args.epochs:
            text = re.sub(r"(?m)^epochs = \d+", f"epochs = {args.epochs}", text, count=1)
        spec = Path(tmp) / "bench.toml"
        spec.write_text(text)
        p = prepare(spec)
        device = torch.device(args.device)
        corpus = corpus_of(p)
        plain_loop(p, corpus, device)  # warm-up (imports, kernels)
        t_default = plain_loop(p, corpus, device)[0] if device.type == "cuda" else None
        # the plain loop under the runner's settings: IEEE fp32 (no TF32 in cuDNN's LSTM) and
        # deterministic kernels, so the overhead below is the runner's own
        set_precision("fp32")
        make_deterministic(device)
        t_plain, tokens = plain_loop(p, corpus, device)
        t0 = time.perf_counter()
        out = apply(p, device=args.device, quiet=True)
        t_runner = time.perf_counter() - t0
        assert not out.failed, out.failed
        records = read_tasks(p.store_path)
    t_measures = sum(r.get("seconds") or 0 for r in records.values() if r.get("kind") != "train")
    steps = p.state.steps
    n_measures = sum(t.kind != "train" for t in p.tasks)
    n_checkpoints = len(steps) * len(p.spec.model)
    print(f"spec {args.spec}: {len(p.spec.model)} networks, {p.spec.training.epochs} epochs, "
          f"{len(steps)} checkpoints each, {n_measures} measure tasks, device {device}")
    if t_default is not None:
        print(f"plain loop, PyTorch's default flags (TF32 cuDNN RNN, nondeterministic): {t_default:8.2f} s "
              f"({100 * (t_plain - t_default) / t_default:+.1f}% for IEEE fp32 + determinism)")
    print(f"plain PyTorch loop : {t_plain:8.2f} s  {tokens / t_plain:12.0f} tokens/s")
    print(f"runner (with all)  : {t_runner:8.2f} s  {tokens / t_runner:12.0f} tokens/s")
    print(f"overhead           : {100 * (t_runner - t_plain) / t_plain:+.1f}% (checkpoints, validation, measures, store)")
    t_train = t_runner - t_measures
    if args.json:
        args.json.write_text(json.dumps({
            "spec": args.spec, "device": str(device), "tokens": tokens, "plain_s": t_plain, "runner_s": t_runner,
            "plain_default_flags_s": t_default, "measures_s": t_measures, "overhead": (t_runner - t_plain) / t_plain,
            "training_overhead": (t_train - t_plain) / t_plain}, indent=2))
    print(f"  of which measures: {t_measures:8.2f} s ({t_measures / max(n_checkpoints, 1):.2f} s per checkpoint)")
    print(f"  training alone   : {100 * (t_train - t_plain) / t_plain:+.1f}% (validation each epoch, checkpoint files, curves)")
    for label, epoch_tokens in (("this corpus", corpus.train.numel()), ("thesis (227M tokens/epoch)", 227e6)):
        per_epoch = epoch_tokens * len(p.spec.model) / (tokens / t_plain)
        share = t_measures / p.spec.training.epochs / per_epoch
        print(f"  measures at one checkpoint per epoch, {label}: {100 * share:.2f}% of training time")


if __name__ == "__main__":
    main()
