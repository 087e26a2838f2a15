"""GMB-style tagged files: words, PTB POS and semantic tags (the semantic tag sets of the thesis'
Ch. 4, Sec. 3.1), and the coarse categories of the universal semantic tags."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The coarse category of every fine semantic tag (SEM), the 13 categories and UNK of the universal
#: semantic tag set. Sources: Bjerva, Plank & Bos (2016), "Semantic Tagging with Deep Residual
#: Networks", COLING, Table 1 (the 66 tags of the silver GMB tags the thesis used, Ch. 4 Sec. 3.1:
#: "the 66 fine-grained SEM tag classes fall under 13 coarse-grained tags, and an 'unknown' tag"), and
#: the later Parallel Meaning Bank list (Abzianidze & Bos 2017, "Towards Universal Semantic
#: Tagging", IWCS, Table 1; https://pmb.let.rug.nl/semtags), whose renamed or added tags (EQU, XCL,
#: QUC, QUV, COL, DEG, GPO, GEO, CTC, LIT, NTH) are listed too. Where the two lists disagree
#: (UOM: ATT in 2016, NAM in 2017) the 2016 GMB assignment is kept.
SEM_CATEGORIES: dict[str, tuple[str, ...]] = {
    "ANA": ("PRO", "DEF", "HAS", "REF", "EMP"),                                       # anaphoric
    "ACT": ("GRE", "ITJ", "HES", "QUE"),                                              # speech act
    "ATT": ("QUA", "UOM", "IST", "REL", "RLI", "SST", "PRI", "INT", "SCO",
            "QUC", "QUV", "COL", "DEG"),                                              # attribute
    "COM": ("EQA", "EQU", "MOR", "LES", "TOP", "BOT", "ORD"),                         # comparative
    "DEM": ("PRX", "MED", "DST"),                                                     # demonstrative
    "DIS": ("SUB", "COO", "APP", "BUT"),                                              # discourse
    "ENT": ("CON", "ROL"),                                                            # entity
    "EVE": ("EXS", "ENS", "EPS", "EXG", "EXT"),                                       # event
    "LOG": ("ALT", "EXC", "XCL", "NIL", "DIS", "IMP", "AND"),                         # logical
    "MOD": ("NOT", "NEC", "POS"),                                                     # modality
    "NAM": ("GPE", "PER", "LOC", "ORG", "ART", "NAT", "HAP", "URL",
            "GPO", "GEO", "CTC", "LIT", "NTH"),                                       # named entity
    "TNS": ("NOW", "PST", "FUT", "PRG", "PFT"),                                       # tense and aspect
    "TIM": ("DAT", "DOM", "YOC", "DOW", "MOY", "DEC", "CLO"),                         # temporal
    "UNK": ("UNK",),                                                                  # unknown
}
SEM_COARSE: dict[str, str] = {fine: coarse for coarse, fines in SEM_CATEGORIES.items() for fine in fines}


def sem_coarse(tag: str) -> str:
    """The coarse category of a fine SEM tag (``PRX`` -> ``DEM``); raises ``ValueError`` for a tag
    outside :data:`SEM_CATEGORIES`."""
    try:
        return SEM_COARSE[tag]
    except KeyError:
        raise ValueError(f"unknown semantic tag {tag!r}; known: {sorted(SEM_COARSE)}") from None


@dataclass(frozen=True)
class GmbSentence:
    """A sentence of a GMB-style tagged file: words, PTB POS tags and fine SEM tags."""

    words: tuple[str, ...]
    pos: tuple[str, ...]
    sem: tuple[str, ...]

    def __post_init__(self) -> None:
        if not len(self.words) == len(self.pos) == len(self.sem):
            raise ValueError("words, pos and sem must have the same length")

    @property
    def sem_coarse(self) -> tuple[str, ...]:
        return tuple(sem_coarse(t) for t in self.sem)


def parse_gmb(text: str) -> list[GmbSentence]:
    """GMB-style tagged text: one token per line with the whitespace-separated columns word, PTB POS
    and fine SEM tag (the Groningen Meaning Bank's silver tags as Bjerva et al. 2016 distributed
    them); a blank line ends a sentence; lines starting with ``#`` are comments. Raises
    ``ValueError`` naming the line of a row without three columns or with an unknown SEM tag."""
    sentences: list[GmbSentence] = []
    rows: list[tuple[str, str, str]] = []
    for lineno, line in enumerate(text.splitlines() + [""], 1):
        if line.startswith("#"):
            continue
        cols = line.split()
        if not cols:
            if rows:
                sentences.append(GmbSentence(*(tuple(c) for c in zip(*rows))))
                rows = []
            continue
        if len(cols) != 3:
            raise ValueError(f"GMB line {lineno}: expected 3 columns (word, PTB POS, SEM tag), got {len(cols)}")
        if cols[2] not in SEM_COARSE:
            raise ValueError(f"GMB line {lineno}: unknown semantic tag {cols[2]!r}")
        rows.append((cols[0], cols[1], cols[2]))
    return sentences


def read_gmb(path: str | Path) -> list[GmbSentence]:
    """``parse_gmb`` on a UTF-8 file."""
    return parse_gmb(Path(path).read_text(encoding="utf-8"))
