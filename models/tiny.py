"""A tiny ALBERT built offline, for the demo and the tests.

Everything comes from the standard library and the real libraries: a lowercase WordPiece
tokenizer (``tokenizers``; its vocabulary learnt deterministically, see ``_wordpiece_vocab``) on
the English text of ``pydoc_data.topics`` (Python's own help topics), an ``AlbertConfig`` of hidden size 64, and a short run of masked-language modelling so that the
"pre-trained" tiny network differs from freshly drawn ones. It is saved with ``save_pretrained``
(safetensors) and loads back through :func:`models.albert.load_albert` and
:func:`models.albert.load_tokenizer` like any hub checkpoint.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from pydoc_data.topics import topics
from typing import TYPE_CHECKING

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from .hub import _quiet_transformers

if TYPE_CHECKING:
    import torch

#: Build progress (INFO): ``runner apply`` prints it and the monitor shows it.
log = logging.getLogger(__name__)

#: files whose presence marks a complete build (the marker is written last, before the rename)
MARKER = "transient_tiny.json"
_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", MARKER)

SPECIAL_TOKENS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                  "mask_token": "[MASK]"}

TINY_CONFIG = dict(
    embedding_size=32,
    hidden_size=64,
    num_attention_heads=4,
    intermediate_size=256,
    num_hidden_layers=4,
    num_hidden_groups=1,
    inner_group_num=1,
    max_position_embeddings=128,
    hidden_act="gelu_new",
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def is_complete(directory: Path) -> bool:
    """True when ``directory`` holds a finished tiny-ALBERT build."""
    return all((directory / name).is_file() for name in _REQUIRED)


def corpus_text() -> list[str]:
    """Paragraphs of English text from the standard library (``pydoc_data.topics``)."""
    paragraphs: list[str] = []
    for key in sorted(topics):
        for para in topics[key].split("\n\n"):
            para = " ".join(para.split())
            if len(para) > 40:
                paragraphs.append(para)
    return paragraphs


def _wordpiece_vocab(word_counts: dict[str, int], vocab_size: int, specials: list[str],
                     min_frequency: int = 2) -> list[str]:
    """A WordPiece vocabulary learnt by BPE merges with the ``##`` continuation prefix -- the
    algorithm of ``tokenizers``' ``WordPieceTrainer`` -- with every tie broken by the token strings.

    (``WordPieceTrainer`` itself breaks ties between equally frequent pairs in hash-map order, so
    two runs on the same text give different vocabularies; the tiny model must be reproducible.)
    """
    seqs = {w: [w[0], *("##" + c for c in w[1:])] for w in word_counts}
    vocab = list(specials)
    known = set(vocab)
    for sym in sorted({sym for seq in seqs.values() for sym in seq}):
        if sym not in known:
            vocab.append(sym)
            known.add(sym)
    pair_counts: dict[tuple[str, str], int] = {}
    where: dict[tuple[str, str], set[str]] = {}
    for w, seq in seqs.items():
        for pair in zip(seq, seq[1:]):
            pair_counts[pair] = pair_counts.get(pair, 0) + word_counts[w]
            where.setdefault(pair, set()).add(w)
    heap = [(-n, a, b) for (a, b), n in pair_counts.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        neg, a, b = heapq.heappop(heap)
        if pair_counts.get((a, b), 0) != -neg:
            continue  # stale entry
        if -neg < min_frequency:
            break
        merged = a + b[2:]
        if merged not in known:
            vocab.append(merged)
            known.add(merged)
        changed: set[tuple[str, str]] = set()
        for w in where.pop((a, b), ()):
            seq, c = seqs[w], word_counts[w]
            out: list[str] = []
            i = 0
            while i < len(seq):
                if i + 1 < len(seq) and seq[i] == a and seq[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            if len(out) == len(seq):
                continue
            for pair in zip(seq, seq[1:]):
                pair_counts[pair] -= c
                changed.add(pair)
            for pair in zip(out, out[1:]):
                pair_counts[pair] = pair_counts.get(pair, 0) + c
                where.setdefault(pair, set()).add(w)
                changed.add(pair)
            seqs[w] = out
        pair_counts.pop((a, b), None)
        for pair in changed:
            n = pair_counts.get(pair, 0)
            if n > 0:
                heapq.heappush(heap, (-n, *pair))
    return vocab


def _train_tokenizer(paragraphs: list[str], vocab_size: int):
    """A lowercase BERT-style WordPiece tokenizer (``tokenizers``), wrapped for transformers."""
    from transformers import PreTrainedTokenizerFast  # lazy: transformers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts: dict[str, int] = {}
    for para in paragraphs:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(para)):
            counts[word] = counts.get(word, 0) + 1
    vocab = _wordpiece_vocab(counts, vocab_size, specials)
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]",
                                     max_input_chars_per_word=100))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(specials)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=TINY_CONFIG["max_position_embeddings"],
                                   **SPECIAL_TOKENS)


def _mlm_batches(ids: torch.Tensor, tokenizer, *, seq_len: int, batch: int, steps: int, vocab: int,
                 generator: torch.Generator):
    """Yield (input_ids, labels): random windows of ``seq_len - 2`` tokens wrapped in [CLS] ... [SEP],
    15% of the inner tokens selected; of those 80% -> [MASK], 10% -> random token, 10% kept."""
    import torch  # lazy: torch

    inner = seq_len - 2
    n_windows = ids.numel() - inner
    cls_id, sep_id, mask_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    n_special = len(tokenizer.all_special_ids)
    for _ in range(steps):
        starts = torch.randint(0, n_windows, (batch,), generator=generator)
        body = ids[starts[:, None] + torch.arange(inner)]
        x = torch.cat([torch.full((batch, 1), cls_id), body, torch.full((batch, 1), sep_id)], dim=1)
        labels = torch.full_like(x, -100)
        pick = torch.rand(body.shape, generator=generator) < 0.15
        labels[:, 1:-1][pick] = body[pick]
        r = torch.rand(body.shape, generator=generator)
        new_body = body.clone()
        new_body[pick & (r < 0.8)] = mask_id
        rand_pos = pick & (r >= 0.8) & (r < 0.9)
        new_body[rand_pos] = torch.randint(n_special, vocab, (int(rand_pos.sum()),), generator=generator)
        x[:, 1:-1] = new_body
        yield x, labels


def build_tiny_albert(directory: Path, *, seed: int = 0, mlm_steps: int = 200, vocab_size: int = 2000,
                      seq_len: int = 32, batch_size: int = 32, lr: float = 1e-3) -> Path:
    """Build (or find) the tiny ALBERT in ``directory`` and return ``directory``.

    If ``directory`` already holds a complete build it is returned at once (whatever its build
    parameters). Otherwise the tokenizer and model are built in a temporary directory next to it
    and renamed into place, so an interrupted build never leaves half a model. Deterministic
    given ``seed``. Trains on one thread (see below); about 15-20 s of CPU for the
    default 200 steps.
    """
    import torch  # lazy: torch

    from transformers import AlbertConfig, AlbertForMaskedLM  # lazy: transformers

    directory = Path(directory)
    if is_complete(directory):
        return directory
    if directory.exists() and any(directory.iterdir()):
        raise FileExistsError(f"{directory} exists and is not a complete tiny-ALBERT build; remove it or pick another")
    directory.parent.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.building-", dir=directory.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp makes it 0700; the final directory gets ordinary permissions
    # Matrices this small gain nothing from intra-op threads, and on a busy machine OpenMP
    # spin-waiting makes 2 threads several times slower than 1 (measured: 82 s vs 13 s).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        log.info("building tiny-ALBERT (first use; cached in %s): tokenizer", directory.parent)
        paragraphs = corpus_text()
        tokenizer = _train_tokenizer(paragraphs, vocab_size)
        vocab = len(tokenizer)
        config = AlbertConfig(vocab_size=vocab, pad_token_id=tokenizer.pad_token_id,
                              bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                              **TINY_CONFIG)
        encodings = tokenizer.backend_tokenizer.encode_batch(paragraphs, add_special_tokens=False)
        ids = torch.tensor([i for enc in encodings for i in enc.ids], dtype=torch.long)

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AlbertForMaskedLM(config)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(seed + 1)
        losses: list[float] = []
        for x, labels in _mlm_batches(ids, tokenizer, seq_len=seq_len, batch=batch_size, steps=mlm_steps,
                                      vocab=vocab, generator=gen):
            # the MLM head only at the selected positions (the loss ignores the rest anyway)
            hidden = model.albert(input_ids=x).last_hidden_state
            picked = labels != -100
            logits = model.predictions(hidden[picked])
            loss = torch.nn.functional.cross_entropy(logits, labels[picked])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            if len(losses) % max(1, mlm_steps // 10) == 0 or len(losses) == mlm_steps:
                log.info("building tiny-ALBERT: MLM step %d/%d (loss %.2f)", len(losses), mlm_steps, losses[-1])
        model.eval()

        with _quiet_transformers():
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        meta = {
            "what": "tiny ALBERT for transient's demo and tests (models.tiny.build_tiny_albert)",
            "seed": seed, "mlm_steps": mlm_steps, "vocab_size": vocab, "seq_len": seq_len,
            "batch_size": batch_size, "lr": lr, "corpus": "pydoc_data.topics",
            "corpus_tokens": int(ids.numel()),
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "build_seconds": round(time.perf_counter() - t0, 2),
        }
        (tmp / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        try:
            if directory.exists():
                directory.rmdir()  # empty (checked above)
            os.rename(tmp, directory)
        except OSError:
            if not is_complete(directory):  # somebody else finished first: keep theirs
                raise
    finally:
        torch.set_num_threads(threads)
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


__all__ = ["MARKER", "TINY_CONFIG", "build_tiny_albert", "corpus_text", "is_complete"]
