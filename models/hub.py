"""Whether the Hugging Face hub can be used from this process.

Loads from the hub go through ``local_files_only=hub_off()``: with the hub switched off or out of
reach they use the local cache only, and fail at once instead of after the hub client's retries.
"""

from __future__ import annotations

import functools
import os

_TRUE = {"1", "true", "yes", "on"}


def hub_switched_off() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE, read now (huggingface_hub reads
    them once, at import)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_off() -> bool:
    """The hub is switched off or cannot be reached."""
    return hub_switched_off() or not hub_reachable()


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 5.0) -> bool:
    """Whether a TCP connection to the hub's endpoint (``HF_ENDPOINT``) opens; asked once per process."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
    except OSError:
        return False
    return True
