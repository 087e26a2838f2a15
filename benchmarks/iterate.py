"""Steps/s of the runner's iterate path against plain transformers loops, in the same run.

Three ways to advance the same ALBERT layer over the same inputs (S sentences and their
perturbed twins, 2S sequences of N_w tokens):

- ``hf_per_sentence``: the transformers layer called once per sequence per step, with the
  Lyapunov distance read back to the host every step (how a notebook loop usually looks);
- ``hf_batched``: the transformers layer called once per step on the whole batch, host sync per step;
- ``runner``: ``runner apply`` itself (fused layer, batched, no host sync per step), measuring
  token deviation and the Lyapunov exponent along the way.

Weights are random (a config of the chosen width; no hub access needed). Prints a table and, on
CUDA, the achieved FLOP/s of the runner path against the device's fp32 peak (pass ``--peak-tflops``).

    python benchmarks/iterate.py --preset tiny
    python benchmarks/iterate.py --preset base --samples 8 --steps 20
    python benchmarks/iterate.py --preset large --samples 1000 --steps 200 --device cuda --peak-tflops 66.9
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

PRESETS = {
    "tiny": dict(embedding_size=32, hidden_size=64, num_attention_heads=4, intermediate_size=256),
    "base": dict(embedding_size=128, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
    "large": dict(embedding_size=128, hidden_size=1024, num_attention_heads=16, intermediate_size=4096),
}


def flops_per_token_step(h: int, i: int, n_tokens: int) -> float:
    """QKV + output projection + FFN + attention products (performance notes, Sec. 1.1)."""
    return 8 * h * h + 4 * h * i + 4 * n_tokens * h


#: Standard-library modules whose docstrings join the Python help topics in :func:`english_text`.
DOCUMENTED = ("argparse", "ast", "asyncio", "base64", "bisect", "calendar", "cmd", "codecs", "collections",
              "configparser", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "dis",
              "doctest", "email", "enum", "fractions", "functools", "gettext", "glob", "gzip", "hashlib", "heapq",
              "hmac", "html", "http.client", "imaplib", "inspect", "io", "ipaddress", "itertools", "json", "locale",
              "logging", "lzma", "mmap", "multiprocessing", "numbers", "operator", "optparse", "os", "pathlib", "pdb",
              "pickle", "platform", "poplib", "pprint", "queue", "random", "re", "reprlib", "sched", "secrets",
              "selectors", "shlex", "shutil", "signal", "smtplib", "socket", "sqlite3", "ssl", "statistics",
              "string", "struct", "subprocess", "sysconfig", "tarfile", "tempfile", "textwrap", "threading",
              "timeit", "tokenize", "trace", "tracemalloc", "types", "typing", "unittest", "urllib.request", "uuid",
              "weakref", "xml.etree.ElementTree", "zipfile", "zlib")


def english_text(directory: Path) -> Path:
    """A ``.txt`` source of English text, offline: the Python help topics (``builtin:pydoc-topics``)
    and the docstrings of :data:`DOCUMENTED`, one document per line. It holds well over the paper's
    1000 sentences of 32 tokens (the help topics alone hold 753)."""
    import importlib
    import inspect

    from runner.data.pydoc_text import builtin_documents

    docs = [text for _, text in builtin_documents("pydoc-topics")]
    for name in DOCUMENTED:
        module = importlib.import_module(name)
        docs += [inspect.getdoc(module) or ""] + [inspect.getdoc(getattr(module, attr)) or ""
                                                  for attr in sorted(getattr(module, "__all__", []))
                                                  if hasattr(module, attr)]
    path = directory / "english.txt"
    path.write_text("\n".join(" ".join(d.split()) for d in docs if d.strip()) + "\n")
    return path


def make_model(directory: Path, preset: str) -> Path:
    from transformers import AlbertConfig, AlbertModel, AutoTokenizer

    from models.tiny import build_tiny_albert

    tiny = build_tiny_albert(directory / "tiny", mlm_steps=10)
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    config = AlbertConfig(vocab_size=len(tokenizer), num_hidden_layers=24, max_position_embeddings=512,
                          hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                          **PRESETS[preset])
    torch.manual_seed(0)
    out = directory / preset
    AlbertModel(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def spec_text(model: Path, samples: int, tokens: int, steps: int, device: str, name: str = "bench",
              store: Path | None = None) -> str:
    """The benchmark's spec: ``model`` iterated with D(t) and lambda(t) measured along the way."""
    return f"""
[experiment]
name = "{name}"
{f'store = "{store}"' if store else ""}
[[model]]
name = "m"
source = "path:{model}"
[input]
source = "builtin:pydoc-topics"
samples = {samples}
tokens = {tokens}
[dynamics]
steps = {steps}
device = "{device}"
[[measure]]
kind = "token_deviation"
[[measure]]
kind = "lyapunov"
k = 1.0
tau = 10
"""


def run_runner(model: Path, work: Path, samples: int, tokens: int, steps: int, device: str) -> tuple[float, Path]:
    spec = work / "bench.toml"
    spec.write_text(spec_text(model, samples, tokens, steps, device, store=work / "bench.zarr"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "runner.cli", "apply", str(spec), "--quiet"], check=True, env=env)
    events = [json.loads(line) for line in (work / "bench.runner/events.jsonl").read_text().splitlines()]
    # the iteration loop's rate (model loading and input drawing excluded, segment writes included)
    return next(e["steps_per_s"] for e in events if e["event"] == "task_done"), work / "bench.zarr"


def hf_loops(model_dir: Path, store: Path, steps: int, device: str, per_sentence: bool) -> float:
    import xarray as xr
    from transformers import AlbertModel

    model = AlbertModel.from_pretrained(model_dir).to(device).eval()
    layer = model.encoder.albert_layer_groups[0].albert_layers[0]
    ids = torch.from_numpy(xr.open_zarr(store).input_ids.values).to(device)
    with torch.no_grad():
        x = model.encoder.embedding_hidden_mapping_in(model.embeddings(ids))
        eps = torch.randn_like(x)
        y = x + eps / eps.flatten(1).norm(dim=1)[:, None, None]
        z = torch.cat([x, y])
        S = len(x)

        def call(z):
            out = layer(z)  # a tensor in transformers 5, a tuple in 4.x
            return out[0] if isinstance(out, tuple) else out

        def step(z):
            if per_sentence:
                return torch.cat([call(z[i : i + 1]) for i in range(len(z))])
            return call(z)

        z = step(z)  # warm-up
        t0 = time.perf_counter()
        for _ in range(steps):
            z = step(z)
            (z[S:] - z[:S]).flatten(1).norm(dim=1).sum().item()  # the per-step host sync of a plain loop
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    return steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=PRESETS, default="tiny")
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=200, help="steps of the runner path")
    parser.add_argument("--baseline-steps", type=int, default=None, help="steps of the plain loops (default steps/10)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--peak-tflops", type=float, default=None, help="device fp32 peak for the FLOP/s ratio")
    args = parser.parse_args()
    base_steps = args.baseline_steps or max(2, args.steps // 10)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = make_model(work, args.preset)
        rate, store = run_runner(model, work, args.samples, args.tokens, args.steps, args.device)
        batched = hf_loops(model, store, base_steps, args.device, per_sentence=False)
        single = hf_loops(model, store, base_steps, args.device, per_sentence=True)
    cfg = PRESETS[args.preset]
    flops = flops_per_token_step(cfg["hidden_size"], cfg["intermediate_size"], args.tokens) * 2 * args.samples * args.tokens
    print(f"preset {args.preset}: {args.samples} sentences x 2 trajectories x {args.tokens} tokens, device {args.device}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'path':<18}{'steps/s':>10}{'runner speed-up':>18}")
    for name, r in [("hf_per_sentence", single), ("hf_batched", batched), ("runner", rate)]:
        print(f"{name:<18}{r:>10.2f}{rate / r:>17.1f}x")
    achieved = flops * rate
    line = f"runner achieved {achieved / 1e9:.1f} GFLOP/s"
    if args.peak_tflops:
        line += f" = {achieved / (args.peak_tflops * 1e12):.1%} of {args.peak_tflops} TFLOP/s fp32 peak"
    print(line)


if __name__ == "__main__":
    main()
