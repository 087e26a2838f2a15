"""Loading from the Hugging Face hub or a local directory, in one place.

Every load goes through :func:`hf_load`: with the hub switched off or out of reach
(:func:`hub_off`) it uses the local cache only and fails at once instead of after the hub
client's retries; every failure becomes one :class:`ModelLoadError` line naming the source, the
first cause and what to do. Weights are read from safetensors only (never pickle), and remote code
is never trusted unless a caller passes ``trust_remote_code=True`` explicitly.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

_TRUE = {"1", "true", "yes", "on"}


def _switches() -> list[str]:
    """The offline switches set now (huggingface_hub reads them once, at import)."""
    return [v for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
            if os.environ.get(v, "").strip().lower() in _TRUE]


def hub_switched_off() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE, read now."""
    return bool(_switches())


def hub_off() -> bool:
    """The hub is switched off or cannot be reached."""
    return hub_switched_off() or not hub_reachable()


def why_hub_off() -> str:
    """Why the hub is not used here (where :func:`hub_off`), in words: the switch that is set, or the
    endpoint that does not answer."""
    switches = _switches()
    if switches:
        return f"the hub is switched off ({switches[0]}={os.environ[switches[0]]})"
    from huggingface_hub import constants  # lazy: huggingface_hub

    return f"the hub ({urlparse(constants.ENDPOINT).hostname}) cannot be reached from this machine"


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 5.0) -> bool:
    """Whether a TCP connection to the hub's endpoint (``HF_ENDPOINT``) opens; asked once per process."""
    from huggingface_hub import constants  # lazy: huggingface_hub

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
    except OSError:
        return False
    return True


class ModelLoadError(Exception):
    """A model or tokenizer could not be loaded; the message names the source and the reason.
    ``reason``, ``fix`` and ``detail`` (the library's own message) are its parts, when known."""

    def __init__(self, message: str, *, reason: str | None = None, fix: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.reason, self.fix, self.detail = reason, fix, detail


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")

#: exception class names (anywhere in the cause chain) that mean "could not get it from the hub"
_HUB_ERRORS = frozenset({
    "LocalEntryNotFoundError", "OfflineModeIsEnabled", "RepositoryNotFoundError", "RevisionNotFoundError",
    "EntryNotFoundError", "RemoteEntryNotFoundError", "GatedRepoError", "HfHubHTTPError", "HFValidationError",
    "ConnectionError", "ConnectError", "ConnectTimeout", "ReadTimeout", "TimeoutException", "NetworkError",
})
_HUB_MESSAGES = ("couldn't connect", "not a valid model identifier", "offline", "does not appear to have",
                 "not found", "repository not found", "404")


def _resolve_source(source: str) -> tuple[str, bool]:
    """``(what to pass to from_pretrained, looks like a hub id)``; raises for a missing local path."""
    if not isinstance(source, (str, os.PathLike)) or not str(source).strip():
        raise ModelLoadError(f"model source must be a hub id or a local directory, got {source!r}")
    s = str(source)
    expanded = os.path.expanduser(s)
    if os.path.isdir(expanded):
        return expanded, False
    if os.path.exists(expanded):
        raise ModelLoadError(f"cannot load from {s!r}: it is a file, not a model directory")
    if _HUB_ID.match(s) and not s.startswith("."):
        return s, True
    raise ModelLoadError(
        f"cannot load from {s!r}: the local directory {os.path.abspath(expanded)!r} does not exist "
        "(and it is not a hub id of the form 'name' or 'org/name')"
    )


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out and len(out) < 10:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


def _wrap(source: str, what: str, exc: BaseException, *, is_hub: bool, revision: str | None) -> ModelLoadError:
    """One line: what failed, its first cause, and (for hub ids) what to do without network."""
    chain = _chain(exc)
    reason = _first_line(chain[0])
    if len(reason) > 160:
        reason = reason[:157] + "..."
    msg = f"could not load the {what} from {source!r} ({reason})"
    short, fix = f"could not load the {what} from {source!r}", None
    if is_hub:
        hubby = any(type(e).__name__ in _HUB_ERRORS for e in chain) or any(
            m in str(e).lower() for e in chain for m in _HUB_MESSAGES
        )
        if hubby:
            rev = f" --revision {revision}" if revision else ""
            short += ": the Hugging Face hub cannot be reached or has no such repository"
            fix = (f"run `hf download {source}{rev} --local-dir DIR` on a machine with network and set source = "
                   "\"path:DIR\" (or point HF_HOME at a cache that holds it)")
            msg += f"; the Hugging Face hub cannot be reached or has no such repository: {fix}"
    return ModelLoadError(msg, reason=short, fix=fix, detail=reason)


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No progress bars or load reports while loading; problems are checked and raised by us."""
    from transformers.utils import logging as hf_logging  # lazy: transformers

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hub_logger = logging.getLogger("huggingface_hub")
    hub_level = hub_logger.level
    hub_logger.setLevel(logging.ERROR)  # its retry warnings would precede our own one-line error
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hub_logger.setLevel(hub_level)
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def hf_load(fn: Callable[..., Any], source: str, what: str, *, revision: str | None, **kwargs: Any) -> Any:
    path, is_hub = _resolve_source(source)
    try:
        with _quiet_transformers():
            return fn(path, revision=revision, local_files_only=hub_off() if is_hub else True, **kwargs)
    except ModelLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 -- every loading failure becomes one clear error
        raise _wrap(str(source), what, exc, is_hub=is_hub, revision=revision) from exc



def load_tokenizer(source: str, revision: str | None = None) -> Any:
    """``AutoTokenizer.from_pretrained(source)`` with the same error handling as :func:`load_albert`."""
    from transformers import AutoTokenizer  # lazy: transformers

    return hf_load(AutoTokenizer.from_pretrained, source, "tokenizer", revision=revision, trust_remote_code=False)


