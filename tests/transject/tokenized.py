"""A TransJect spec on local csv splits tokenized by a tokenizer directory (a hub-style tokenizer,
as the paper's BERT tokenizer for IMDb and AGnews), all written into one folder."""

from __future__ import annotations

from pathlib import Path

TEXTS = ["the film was great and the actors were great", "an awful script and awful actors",
         "great characters", "the script is awful", "a waste of the talents of the actors",
         "great great film", "awful film", "the characters are unlikeable"]

SPEC = """
[experiment]
name = "{name}"
study = "transject"
store = "{store}"

[data]
source = "r_{{split}}.csv"
tokenizer = "tok"
max_length = 12
analysis_examples = 2
analysis_text = "The characters are unlikeable and the script is awful."

[training]
epochs = {epochs}
batch_size = 4

[[model]]
name = "tj"
d_model = 8
n_layers = 1
n_experts = 2

[[measure]]
kind = "distances"
pairs = [["characters", "script"]]
"""


def write_data(folder: Path):
    """``tok/`` (a tokenizer trained on the texts), ``r_train.csv`` and ``r_test.csv``; the tokenizer."""
    from models.tiny import _train_tokenizer

    tok = _train_tokenizer(TEXTS * 4, 200)
    tok.save_pretrained(folder / "tok")
    for split, rows in (("train", TEXTS), ("test", TEXTS[:4])):
        (folder / f"r_{split}.csv").write_text("text,label\n" + "".join(f"{t},{int('great' in t)}\n" for t in rows))
    return tok


def write_spec(folder: Path, name: str, store: str, epochs: int = 1) -> Path:
    """``<name>.toml``: one tiny network on the data of :func:`write_data` (relative to ``folder``)."""
    path = folder / f"{name}.toml"
    path.write_text(SPEC.format(name=name, store=store, epochs=epochs))
    return path
