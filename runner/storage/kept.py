"""Kept state bound to what was written (issue 48): every safetensors file a run keeps for a later one
(a pass's ``final/`` state and resume points, a training run's checkpoints and resume file)
carries in its metadata the BLAKE2b digest of its tensor bytes (:data:`DIGEST`, set by
:func:`runner.storage.checkpoint.write_tensors`), and is checked against it before it is used and by
``runner verify``. An edited value, a changed NaN pattern or a torn file is then found and named,
never continued from. Files written before the digest (no :data:`DIGEST` entry) are read as before.

Byte-level only (no torch), so ``verify`` and ``status`` stay light.
"""

from __future__ import annotations

import json

from runner.storage.location import Location, location
from runner.storage.digest import digest

DIGEST = "blake2b"
"""The metadata entry holding the digest of a file's tensor bytes (everything after its header)."""
SUFFIX = ".safetensors"


def split(raw: bytes) -> tuple[dict, bytes]:
    """(header, tensor bytes) of a safetensors file's bytes; ValueError for bytes that are not one."""
    if len(raw) < 8:
        raise ValueError("shorter than a safetensors header")
    n = int.from_bytes(raw[:8], "little")
    if n <= 0 or 8 + n > len(raw):
        raise ValueError("its header runs past its end")
    header = json.loads(raw[8:8 + n])
    if not isinstance(header, dict):
        raise ValueError("its header is not a JSON object")
    return header, raw[8 + n:]


def metadata(raw: bytes) -> dict[str, str]:
    return dict(split(raw)[0].get("__metadata__") or {})


def raw_problem(raw: bytes) -> str | None:
    """Why a file's bytes are not what was written (torn, not safetensors, or tensors whose digest is
    not the one it recorded), or None."""
    try:
        header, data = split(raw)
    except ValueError as err:
        return f"is torn or not a safetensors file ({err})"
    recorded = (header.get("__metadata__") or {}).get(DIGEST)
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)
            and isinstance(v.get("data_offsets"), list) and len(v["data_offsets"]) == 2]
    if max(ends, default=0) != len(data):
        return f"is torn ({len(data)} bytes of tensors, its header says {max(ends, default=0)})"
    if recorded is not None and recorded != digest(data):
        return "holds other values than were written (the digest of its tensors does not match the one it recorded)"
    return None


def problem(path: Location) -> str | None:
    """:func:`raw_problem` of the file at ``path`` (a missing file: None, the caller decides)."""
    try:
        raw = location(path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return raw_problem(raw)


def header_metadata(path: Location) -> dict[str, str] | None:
    """The metadata of a safetensors file, from its header alone (two small reads, however large its
    tensors); None when it is missing or not safetensors."""
    path = location(path)
    try:
        n = int.from_bytes(path.read_range(0, 8), "little")
        header = json.loads(path.read_range(8, 8 + n)) if 0 < n < 100_000_000 else None
    except (OSError, ValueError):
        return None
    return dict(header.get("__metadata__") or {}) if isinstance(header, dict) else None


def resume_points(state_dir: Location, store_id: str | None) -> dict[str, int]:
    """Task id -> the step (``t``) a pass that stopped will resume from, from the resume points kept in
    the store's runner folder (``checkpoints/``; those of another store are left out)."""
    out: dict[str, int] = {}
    folder = location(state_dir) / "checkpoints"
    for path in folder.glob(f"*{SUFFIX}"):
        meta = header_metadata(path)
        if not meta or meta.get("store_id") != store_id:
            continue
        try:
            t, ids = json.loads(meta.get("meta", "{}")).get("t"), json.loads(meta.get("tasks", "[]"))
        except ValueError:
            continue
        if isinstance(t, int) and t > 0:
            out.update({i: t for i in ids if isinstance(i, str)})
    return out


def kept_files(state_dir: Location) -> list[Location]:
    """Every kept safetensors file under a store's runner folder, in a stable order."""
    root = location(state_dir)
    keys = [k for k in root.files() if k.endswith(SUFFIX) and not k.rsplit("/", 1)[-1].startswith(".")]
    return [root / k for k in sorted(keys, key=lambda k: k.split("/"))]


def damaged(state_dir: Location) -> list[tuple[Location, str]]:
    """(file, what is wrong) of each kept file that is not what was written."""
    out = []
    for path in kept_files(state_dir):
        what = problem(path)
        if what:
            out.append((path, what))
    return out
