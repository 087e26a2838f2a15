"""Helpers of the training-study tests: the tiny spec, rewritten to use a temporary store."""

from __future__ import annotations

from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "specs" / "tiny" / "lstm_tiny.toml"
CORPUS = ROOT / "tests" / "data" / "tiny_tagged.conllu"


def tiny_spec(tmp_path: Path, name: str = "tiny", replace: dict[str, str] | None = None) -> Path:
    """A copy of specs/tiny/lstm_tiny.toml whose store lives in ``tmp_path``."""
    text = TINY.read_text()
    text = text.replace('seed = 0\n', f'seed = 0\nstore = "{tmp_path / (name + ".zarr")}"\n', 1)
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path
