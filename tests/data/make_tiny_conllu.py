"""Regenerate ``tiny_tagged.conllu``: the ``builtin:tiny-tagged`` corpus as a CoNLL-U file, for the
tests of the .conllu reader (``python tests/data/make_tiny_conllu.py``)."""

from __future__ import annotations

from pathlib import Path

from runner.studies.training.data.tiny_tagged import conllu

if __name__ == "__main__":
    Path(__file__).with_name("tiny_tagged.conllu").write_text(conllu(), encoding="utf-8")
