"""Published checkpoint series as training time: Pythia, MultiBERTs, or any local series.

A *series* is one model saved at several training steps: revisions of a hub repository (Pythia's
``step0`` ... ``step143000``) or subfolders of a local directory laid out the same way
(``<dir>/step1000/config.json``). :func:`parse_revisions` reads the spec's revision pattern
(``"step{0..143000:1000}"`` or an explicit list), :func:`local_series` lists a directory's
checkpoints, and :func:`load_checkpoint` loads one through transformers' Auto classes (the hub's
cache, safetensors only, remote code only when asked for).

An :class:`Adapter` names the layers of a transformers family (GPT-NeoX, BERT, GPT-2, Llama, ...):
adding a family is one entry in :data:`ADAPTERS`. :class:`SuiteActivations` is the family's
activation adapter (:mod:`models.activations`): its hook points are those layers, read with forward
hooks in one batched forward pass (:func:`capture_layers`, :func:`word_activations`).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from models.hub import ModelLoadError, hf_load, why_hub_off

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn
    from models.activations import Loss
    from models.base import MapInputs

#: ``step{0..143000:1000}``: a prefix, first..last (inclusive) and the stride, and a suffix.
_RANGE = re.compile(r"^(?P<pre>[^{}]*)\{(?P<lo>\d+)\.\.(?P<hi>\d+)(?::(?P<by>\d+))?\}(?P<post>[^{}]*)$")
_STEP = re.compile(r"(\d+)([kKM]?)(?!.*\d)")
_SCALE = {"": 1, "k": 1000, "K": 1000, "M": 1_000_000}


#: The most revisions a suite names (Pythia publishes 154; each is looked up and fetched on its own).
MAX_REVISIONS = 10_000


def parse_revisions(revisions: str | list[str]) -> list[str]:
    """The revisions a spec names: an explicit list, one revision, or a range pattern
    ``"step{0..143000:1000}"`` (first and last included, stride 1 when omitted)."""
    if isinstance(revisions, list):
        if not revisions or len(set(revisions)) != len(revisions):
            raise ValueError("revisions: give a non-empty list without repeats")
        return list(revisions)
    m = _RANGE.match(revisions)
    if m is None:
        if "{" in revisions or "}" in revisions:
            raise ValueError(f"revisions {revisions!r}: write a range as 'step{{FIRST..LAST:STRIDE}}'")
        return [revisions]
    lo, hi, by = int(m["lo"]), int(m["hi"]), int(m["by"] or 1)
    if hi < lo or by < 1:
        raise ValueError(f"revisions {revisions!r}: the range must run upwards with a positive stride")
    if (hi - lo) // by + 1 > MAX_REVISIONS:
        raise ValueError(f"revisions {revisions!r} names {(hi - lo) // by + 1:,} revisions; a suite holds at most "
                         f"{MAX_REVISIONS:,} (each is a checkpoint to find and fetch): use a larger stride")
    return [f"{m['pre']}{n}{m['post']}" for n in range(lo, hi + 1, by)]


def step_of(revision: str) -> int:
    """The training step a revision names: its last number, times 1000 with a ``k`` after it (``step1000`` ->
    1000; MultiBERTs' ``step_20k`` -> 20000)."""
    m = _STEP.search(revision)
    if m is None:
        raise ValueError(f"revision {revision!r} names no step (expected e.g. 'step1000')")
    return int(m.group(1)) * _SCALE[m.group(2)]


@dataclass(frozen=True)
class Checkpoint:
    source: str
    """Hub id or local directory of the series."""
    revision: str
    step: int
    local: bool

    @property
    def location(self) -> str:
        """What transformers loads: a subfolder of a local series, else the hub id (with :attr:`hub_revision`);
        a hub source holding ``{revision}`` is one repository per checkpoint (MultiBERTs)."""
        if self.local:
            return str(Path(self.source) / self.revision)
        return self.source.replace("{revision}", self.revision)

    @property
    def hub_revision(self) -> str | None:
        """The hub revision to load (None: a local folder, or the default branch of a repository per checkpoint)."""
        return None if self.local or "{revision}" in self.source else self.revision


def local_series(directory: str | Path, revisions: str | list[str] | None = None) -> list[Checkpoint]:
    """The checkpoints of a local series, by step: every subfolder with a ``config.json`` whose
    name carries a step, or the named ``revisions``; raises :class:`ModelLoadError` naming a
    missing one."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelLoadError(f"{directory}: no such checkpoint directory")
    if revisions is None:
        names = [p.name for p in directory.iterdir() if (p / "config.json").is_file() and _STEP.search(p.name)]
        if not names:
            raise ModelLoadError(f"{directory}: no checkpoint folders (e.g. step1000/config.json)")
    else:
        names = parse_revisions(revisions)
        missing = [n for n in names if not (directory / n / "config.json").is_file()]
        if missing:
            raise ModelLoadError(f"{directory}: no checkpoint for revision(s) {', '.join(missing[:5])}"
                                 + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
    return sorted((Checkpoint(str(directory), n, step_of(n), True) for n in names), key=lambda c: c.step)


def hub_series(repo: str, revisions: str | list[str]) -> list[Checkpoint]:
    """The checkpoints of a hub repository at the named revisions (nothing is fetched here)."""
    return sorted((Checkpoint(repo, n, step_of(n), False) for n in parse_revisions(revisions)), key=lambda c: c.step)


def load_checkpoint(ckpt: Checkpoint, *, trust_remote_code: bool = False, pickled_weights: bool = False,
                    head: bool = False, dtype: torch.dtype | None = None,
                    device: str | torch.device = "cpu") -> nn.Module:
    """The model at one checkpoint, in eval mode: ``AutoModel`` (the encoder or decoder without a head), or
    with ``head`` its language-modelling head too (``AutoModelForCausalLM`` / ``AutoModelForMaskedLM``, by the
    family's :attr:`Adapter.head`; a checkpoint without the head's weights is refused, never completed with
    random ones). Safetensors weights only, unless ``pickled_weights``: then a checkpoint published as
    ``pytorch_model.bin`` only loads too (transformers reads it with ``torch.load(weights_only=True)``)."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM  # lazy: transformers

    cls = AutoModel
    if head:
        kind = adapter_for(load_config(ckpt, trust_remote_code=trust_remote_code)).head
        cls = {"causal": AutoModelForCausalLM, "masked": AutoModelForMaskedLM}[kind]
    model, info = hf_load(cls.from_pretrained, ckpt.location, f"checkpoint {ckpt.revision}",
                          revision=ckpt.hub_revision, trust_remote_code=trust_remote_code,
                          use_safetensors=None if pickled_weights else True, output_loading_info=True,
                          **({"dtype": dtype} if dtype is not None else {}))
    if head and info.get("missing_keys"):
        raise ModelLoadError(f"checkpoint {ckpt.revision} of {ckpt.location} has no weights for "
                             f"{sorted(info['missing_keys'])[:3]}: its language-modelling head is not published")
    return model.to(device).eval()


def load_config(ckpt: Checkpoint, *, trust_remote_code: bool = False) -> Any:
    """The checkpoint's configuration (``config.json`` only: no weights are fetched)."""
    from transformers import AutoConfig  # lazy: transformers

    return hf_load(AutoConfig.from_pretrained, ckpt.location, f"configuration of checkpoint {ckpt.revision}",
                   revision=ckpt.hub_revision, trust_remote_code=trust_remote_code)


def load_tokenizer(ckpt: Checkpoint, *, trust_remote_code: bool = False) -> Any:
    """The checkpoint's (fast) tokenizer."""
    from transformers import AutoTokenizer  # lazy: transformers

    return hf_load(AutoTokenizer.from_pretrained, ckpt.location, f"tokenizer of checkpoint {ckpt.revision}",
                   revision=ckpt.hub_revision, trust_remote_code=trust_remote_code, use_fast=True)


_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
_PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class Fetch:
    """What loading one checkpoint will download: nothing (local, cached), ``bytes`` (None: unknown), or
    ``missing``: why it cannot be had."""

    checkpoint: Checkpoint
    cached: bool
    bytes: int | None = None
    missing: str | None = None
    reason: str | None = None
    """``missing`` without the checkpoint's name (alike for every revision of a repository)."""


def fetch_plan(ckpt: Checkpoint, online: bool, pickled_weights: bool = False) -> Fetch:
    """Whether a checkpoint's weights are here (a local series, the hub cache) and, when they are not, their
    size on the hub (``HfApi.model_info`` with file metadata: the safetensors files of that revision, or with
    ``pickled_weights`` the ``.bin`` files where it has no safetensors)."""
    if ckpt.local:
        problem = local_weights_problem(Path(ckpt.location), pickled_weights)
        return Fetch(ckpt, problem is None, missing=problem and f"{ckpt.location}: {problem}", reason=problem)
    from huggingface_hub import HfApi, try_to_load_from_cache  # lazy: huggingface_hub

    repo, revision = ckpt.location, ckpt.hub_revision
    names = _WEIGHTS + (_PICKLED if pickled_weights else ())
    if any(isinstance(try_to_load_from_cache(repo, f, revision=revision), str) for f in names):
        return Fetch(ckpt, True)
    if not online:
        why = f"not in the Hugging Face cache and {why_hub_off()}"
        return Fetch(ckpt, False, missing=f"{repo} revision {ckpt.revision}: {why}", reason=why)
    try:
        info = HfApi().model_info(repo, revision=revision, files_metadata=True)
    except Exception as exc:  # noqa: BLE001 -- a missing repository or revision, or the network: one line
        why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        return Fetch(ckpt, False, missing=f"{repo} revision {ckpt.revision}: {why}", reason=why)
    files = [f for f in info.siblings or [] if f.rfilename.endswith(".safetensors")]
    if not files and pickled_weights:
        files = [f for f in info.siblings or [] if f.rfilename.startswith("pytorch_model") and
                 f.rfilename.endswith(".bin")]
    if not files:
        why = "no safetensors weights (pickled weights load only with pickled_weights = true)"
        return Fetch(ckpt, False, missing=f"{repo} revision {ckpt.revision}: {why}", reason=why)
    return Fetch(ckpt, False, bytes=sum(f.size or 0 for f in files))


def local_weights_problem(folder: Path, pickled_weights: bool = False) -> str | None:
    """Why a local checkpoint folder's weights cannot be loaded (none there; a safetensors file whose header
    does not read), checked without loading them; None when they look loadable."""
    found = [folder / n for n in _WEIGHTS + (_PICKLED if pickled_weights else ()) if (folder / n).is_file()]
    if not found:
        return (f"no weights ({', '.join(_WEIGHTS)}" + (f", {', '.join(_PICKLED)}" if pickled_weights else "")
                + (")" if pickled_weights else "; pickled .bin weights load only with pickled_weights = true)"))
    if found[0].name != "model.safetensors":
        return None
    try:
        with found[0].open("rb") as f:
            head = f.read(8)
            (n,) = struct.unpack("<Q", head) if len(head) == 8 else (None,)
            if n is None or n > found[0].stat().st_size - 8:
                return f"{found[0].name} is not a safetensors file (its header is cut short)"
            json.loads(f.read(n))
    except (OSError, ValueError) as err:
        return f"{found[0].name} cannot be read as safetensors ({type(err).__name__})"
    return None


_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model", "spiece.model",
                    "sentencepiece.bpe.model")


def local_tokenizer_problem(folder: Path) -> str | None:
    """Why a local checkpoint folder has no tokenizer to load (transformers would otherwise build an empty one
    from the configuration); None when one of its files is there."""
    if any((folder / n).is_file() for n in _TOKENIZER_FILES):
        return None
    return f"no tokenizer ({', '.join(_TOKENIZER_FILES)})"


# --------------------------------------------------------------------------- layers


@dataclass(frozen=True)
class Adapter:
    """Where a family keeps its layers: the embedding module and the list of blocks (attribute paths)."""

    model_types: tuple[str, ...]
    embeddings: str
    blocks: str
    head: str = "causal"
    """The language-modelling objective of its checkpoints: ``causal`` (next token) or ``masked`` (BERT)."""

    def layers(self, model: nn.Module) -> dict[str, nn.Module]:
        """``{"embedding": ..., "layer1": ..., ...}``: modules whose outputs are the layer activations (of the
        model, or of the base model under a language-modelling head)."""
        model = getattr(model, "base_model", model)
        blocks = _attr(model, self.blocks)
        return {"embedding": _attr(model, self.embeddings), **{f"layer{i + 1}": b for i, b in enumerate(blocks)}}


#: One entry per family (``config.model_type``); the paths are those of ``AutoModel`` (no head).
ADAPTERS: list[Adapter] = [
    Adapter(("gpt_neox",), "embed_in", "layers"),                # Pythia
    Adapter(("bert",), "embeddings", "encoder.layer", "masked"),  # BERT, MultiBERTs
    Adapter(("gpt2",), "wte", "h"),                              # GPT-2 (token embeddings; positions are added after)
    Adapter(("llama", "mistral", "qwen2"), "embed_tokens", "layers"),
]


def layer_names(config: Any) -> list[str]:
    """``embedding``, ``layer1`` .. ``layerN`` of a configuration (raises for a family without an adapter)."""
    adapter_for(config)
    return ["embedding"] + [f"layer{i + 1}" for i in range(config.num_hidden_layers)]


def adapter_for(model: nn.Module | Any) -> Adapter:
    """The adapter of a model (or of a configuration)."""
    model_type = getattr(getattr(model, "config", model), "model_type", None)
    found = next((a for a in ADAPTERS if model_type in a.model_types), None)
    if found is None:
        known = sorted(t for a in ADAPTERS for t in a.model_types)
        raise ModelLoadError(f"no layer adapter for model type {model_type!r}; known: {', '.join(known)} "
                             "(add one to models.suites.ADAPTERS)")
    return found


def _attr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


class SuiteActivations:
    """Named hook points of a transformers model of a family in :data:`ADAPTERS` (:mod:`models.activations`):
    ``embedding`` and ``layer1`` .. ``layerN``, the outputs of the modules its :class:`Adapter` names, read
    by forward hooks."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.modules = adapter_for(model).layers(model)

    def layer_names(self) -> tuple[str, ...]:
        return tuple(self.modules)

    def hook_points(self, names=None) -> dict[str, nn.Module]:
        """The modules whose outputs are the named hook points."""
        from models.activations import chosen  # lazy: torch

        return {k: self.modules[k] for k in chosen(self.layer_names(), names)}

    def reset(self) -> None:
        pass

    def capture(self, inputs, names=None) -> dict[str, Tensor]:
        import torch  # lazy: torch
        from models.activations import hooked  # lazy: torch

        modules = self.hook_points(names)
        out: dict[str, Tensor] = {}
        with torch.no_grad(), hooked(modules, out):
            self.model(input_ids=inputs.input_ids, attention_mask=inputs.attention_mask)
        return {k: out[k] for k in modules}

    def capture_gradients(self, inputs, loss: Loss, names=None) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """``loss`` of the model's output (with its head: ``.logits``)."""
        import torch  # lazy: torch
        from models.activations import gradients, hooked  # lazy: torch

        modules = self.hook_points(names)
        out: dict[str, Tensor] = {}
        with torch.enable_grad(), hooked(modules, out):
            value = loss(self.model(input_ids=inputs.input_ids, attention_mask=inputs.attention_mask))
        kept = {k: out[k] for k in modules}
        return {k: v.detach() for k, v in kept.items()}, gradients(value, kept)


def capture_layers(model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None = None,
                   layers: list[str] | None = None) -> dict[str, Tensor]:
    """Each named layer's output ``(batch, seq, hidden)`` for one batch (:class:`SuiteActivations`: one
    forward pass, no gradients); ``layers`` picks some (default: all, ``embedding`` first)."""
    from models.activations import tokens  # lazy: torch

    return SuiteActivations(model).capture(tokens(input_ids, attention_mask), layers)


def _next_losses(output: Any, targets: Tensor) -> Tensor:
    """Cross-entropy (nats) of each token position of a model's output with a target (``targets`` >= 0; -1:
    none)."""
    import torch  # lazy: torch

    keep = targets >= 0
    return torch.nn.functional.cross_entropy(output.logits[keep].float(), targets[keep], reduction="none")


def _token_losses(model: nn.Module, ids: Tensor, mask: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy (nats) of each token position with a target (``targets`` >= 0; -1: none)."""
    return _next_losses(model(input_ids=ids, attention_mask=mask), targets)


def _targets(model: nn.Module, ids: Tensor, owner: Tensor, mask_id: int | None = None, fraction: float = 0.15,
             seed: int = 0) -> tuple[Tensor, Tensor]:
    """(the input, the target of each position): the next token for a causal LM (Radford et al. 2019); for a
    masked LM, ``fraction`` of the words' tokens replaced by the mask token and predicted (Devlin et al. 2019,
    Sec. 3.1: 15%, here all of them masked, without the 80/10/10 split), drawn per window from ``seed`` and
    the window's first word, so the batching does not change them."""
    import torch  # lazy: torch

    targets = torch.full_like(ids, -1)
    real = owner >= 0
    if adapter_for(model).head == "causal":
        targets[:, :-1] = torch.where(real[:, 1:] & real[:, :-1], ids[:, 1:], -1)
        return ids, targets
    if mask_id is None:
        raise ValueError("a masked LM's tokenizer needs a mask token")
    draws = torch.stack([torch.rand(ids.shape[1], generator=torch.Generator().manual_seed(
        seed * 1_000_003 + int(row[row >= 0].min()))) for row in owner.cpu()]).to(ids.device)
    chosen = real & (draws < fraction)
    targets[chosen] = ids[chosen]
    return torch.where(chosen, mask_id, ids), targets


def _word_owner(words: list[str]) -> tuple[str, np.ndarray]:
    """The words joined by spaces, and for each character the index of its word (-1 for a space)."""
    text = " ".join(words)
    owner = np.full(len(text), -1, dtype=np.int64)
    pos = 0
    for k, w in enumerate(words):
        owner[pos:pos + len(w)] = k
        pos += len(w) + 1
    return text, owner


def encode_words(tokenizer: Any, words: list[str]) -> tuple[list[int], list[int]]:
    """Token ids of the words joined by spaces (the tokenizer's special tokens added) and, per token, the word
    it belongs to (-1: a special token), from the fast tokenizer's character offsets."""
    text, owner = _word_owner(words)
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=True)
    word_of = []
    for s, e in enc["offset_mapping"]:
        o = owner[s:e]
        o = o[o >= 0]
        word_of.append(int(o[0]) if len(o) else -1)
    missing = sorted(set(range(len(words))) - set(word_of))
    if missing:
        raise ValueError(f"the tokenizer gives no token to the word(s) {[words[k] for k in missing[:5]]}")
    return list(enc["input_ids"]), word_of


def _batches(tokenizer: Any, words: list[str], window: int, batch_size: int,
             limit: int | None) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """(token ids, attention mask, word of each token: -1 for specials and padding), right-padded batches of
    ``batch_size`` windows of ``window`` words (no overlap)."""
    import torch  # lazy: torch

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    starts = list(range(0, len(words), window))
    for b in range(0, len(starts), batch_size):
        encoded = [encode_words(tokenizer, words[s:s + window]) for s in starts[b:b + batch_size]]
        width = max(len(ids) for ids, _ in encoded)
        if limit is not None and width > limit:
            raise ValueError(f"a window of {window} words is {width} tokens, more than the model's {limit} "
                             "positions; lower window_words")
        ids = torch.full((len(encoded), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        owner = torch.full((len(encoded), width), -1, dtype=torch.long)
        for r, ((tok, word_of), s) in enumerate(zip(encoded, starts[b:b + batch_size])):
            ids[r, :len(tok)], mask[r, :len(tok)] = torch.tensor(tok), 1
            owner[r, :len(tok)] = torch.tensor([w + s if w >= 0 else -1 for w in word_of])
        yield ids, mask, owner


def word_batches(model: nn.Module, tokenizer: Any, words: list[str], *, window: int, batch_size: int
                 ) -> list[tuple[MapInputs, Tensor]]:
    """The words in windows of ``window`` (no overlap), ``batch_size`` windows per batch on the model's device:
    each batch's inputs and the word each of its tokens belongs to (-1: a special token or padding)."""
    from models.activations import tokens  # lazy: torch

    device = next(model.parameters()).device
    limit = getattr(model.config, "max_position_embeddings", None)
    return [(tokens(ids.to(device), mask.to(device)), owner)
            for ids, mask, owner in _batches(tokenizer, words, window, batch_size, limit)]


def next_token_loss(model: nn.Module, inputs: MapInputs, owner: Tensor) -> Loss:
    """The summed next-token cross-entropy of a causal LM with its head on one batch of :func:`word_batches`."""
    _, targets = _targets(model, inputs.input_ids, owner.to(inputs.input_ids.device))
    return lambda output: _next_losses(output, targets).sum()


def pool_words(captures: list[dict[str, Tensor]], owners: list[Tensor], n_words: int, pool: str = "mean"
               ) -> dict[str, Tensor]:
    """Each layer's ``(n_words, hidden)``: the captures of :func:`word_batches`' batches, each word's subword
    tokens pooled (``mean``, ``first`` or ``last``)."""
    import torch  # lazy: torch

    out: dict[str, Tensor] = {}
    counts = None
    for captured, owner in zip(captures, owners, strict=True):
        device = next(iter(captured.values())).device
        keep = _pooled_tokens(owner, pool).to(device)
        index = owner.to(device).reshape(-1)[keep]
        found = torch.bincount(index, minlength=n_words)
        counts = found if counts is None else counts + found
        for name, h in captured.items():
            h = h.reshape(-1, h.shape[-1])[keep].float()
            if name not in out:
                out[name] = torch.zeros(n_words, h.shape[-1], device=device)
            out[name].index_add_(0, index, h)
    scale = counts.clamp(min=1).unsqueeze(1)
    return {k: v / scale for k, v in out.items()}


def word_activations(adapter: SuiteActivations, tokenizer: Any, words: list[str], layers: list[str] | None, *,
                     window: int, batch_size: int, pool: str = "mean", gradients: bool = False
                     ) -> dict[str, Tensor] | tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Each layer's activation of every word, ``(n_words, hidden)``, read through the model's ``adapter``
    (:meth:`SuiteActivations.capture`) on :func:`word_batches`, pooled by :func:`pool_words`. With
    ``gradients`` (a causal LM with its head): also the gradient of the summed next-token cross-entropy with
    respect to each layer's output (:meth:`SuiteActivations.capture_gradients`), pooled the same way."""
    batches = word_batches(adapter.model, tokenizer, words, window=window, batch_size=batch_size)
    owners = [owner for _, owner in batches]
    names = layers or None
    if not gradients:
        return pool_words([adapter.capture(inputs, names) for inputs, _ in batches], owners, len(words), pool)
    pairs = [adapter.capture_gradients(inputs, next_token_loss(adapter.model, inputs, owner), names)
             for inputs, owner in batches]
    return (pool_words([a for a, _ in pairs], owners, len(words), pool),
            pool_words([g for _, g in pairs], owners, len(words), pool))


def lm_loss(model: nn.Module, tokenizer: Any, words: list[str], *, window: int, batch_size: int,
            mask_fraction: float = 0.15, seed: int = 0) -> tuple[float, int]:
    """(summed cross-entropy in nats, number of predicted tokens) of a language model with its head on the
    words, read in windows as :func:`word_activations` reads them: every next token of a causal LM, a seeded
    ``mask_fraction`` of the tokens of a masked LM."""
    import torch  # lazy: torch

    device = next(model.parameters()).device
    total, n = torch.zeros((), device=device, dtype=torch.float64), 0
    with torch.no_grad():
        for ids, mask, owner in _batches(tokenizer, words, window, batch_size,
                                         getattr(model.config, "max_position_embeddings", None)):
            inputs, targets = _targets(model, ids, owner, tokenizer.mask_token_id, mask_fraction, seed)
            losses = _token_losses(model, inputs.to(device), mask.to(device), targets.to(device))
            total += losses.sum(dtype=torch.float64)
            n += losses.numel()
    return float(total), n


def _pooled_tokens(owner: Tensor, pool: str) -> Tensor:
    """Flat indices of the tokens that enter a word's activation: all of a word's (mean), its first, its last."""
    import torch  # lazy: torch

    flat = owner.reshape(-1)
    valid = flat >= 0
    if pool == "first":
        prev = torch.cat([torch.full((owner.shape[0], 1), -2), owner[:, :-1]], 1).reshape(-1)
        valid &= flat != prev
    elif pool == "last":
        nxt = torch.cat([owner[:, 1:], torch.full((owner.shape[0], 1), -2)], 1).reshape(-1)
        valid &= flat != nxt
    elif pool != "mean":
        raise ValueError(f"pool {pool!r}: mean, first or last")
    return valid.nonzero().squeeze(1)
