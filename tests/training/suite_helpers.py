"""Tiny checkpoint suites for tests: a GPT-NeoX and a BERT with a word-level tokenizer trained on the tiny
corpus, saved at several "steps" into ``<dir>/step{N}/`` folders laid out like hub revisions."""

from __future__ import annotations

from pathlib import Path

import torch

from training_helpers import CORPUS

STEPS = (0, 10, 100, 1000)
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tokenizer(kind: str):
    """A word-level fast tokenizer of the tiny corpus' words (lowercased; ``<unk>``, ``<eos>`` included)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    words = [line.split("\t")[1].lower() for line in CORPUS.read_text().splitlines()
             if line and not line.startswith("#") and "\t" in line]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator([" ".join(words), "<unk> <eos>"], trainers.WordLevelTrainer(special_tokens=SPECIALS))
    if kind == "bert":
        tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[
            ("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def config(kind: str, vocab: int):
    from transformers import BertConfig, GPTNeoXConfig

    common = dict(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=128)
    return GPTNeoXConfig(**common) if kind == "gpt_neox" else BertConfig(**common)


def build_suite(root: Path, kind: str, seed: int = 0, steps=STEPS) -> Path:
    """``root/step{N}/`` for each step: the model with its language-modelling head, its weights drifting a
    little further from a random start at each step, the same tokenizer in each."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    tok = tokenizer(kind)
    torch.manual_seed(seed)
    model = (AutoModelForCausalLM if kind == "gpt_neox" else AutoModelForMaskedLM).from_config(config(kind, len(tok)))
    for step in steps:
        with torch.no_grad():
            for w in model.parameters():
                w.add_(0.05 * torch.randn_like(w))
        model.save_pretrained(root / f"step{step}")
        tok.save_pretrained(root / f"step{step}")
    return root
