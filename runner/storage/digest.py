"""The digest that binds a chunk file, a record or a manifest to its bytes."""

from __future__ import annotations

import hashlib


def digest(data: bytes | memoryview) -> str:
    """BLAKE2b with a 128-bit digest, as hex (hashlib: about 1 GB/s on one core)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def bytes_digests(folder, keys: list[str]) -> dict[str, str | None]:
    """Key -> the digest of the bytes of the file ``key`` under ``folder`` (a
    :class:`~runner.storage.location.StoreLocation`), read (None: no such file)."""
    got = folder.read_many([folder / k for k in keys])
    by_key = {str(p)[len(str(folder)) + 1:]: data for p, data in got.items()}
    return {k: digest(by_key[k]) if k in by_key else None for k in keys}
