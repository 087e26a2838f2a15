"""The store's lock on object storage: a lease that one ``apply`` holds, taken with S3's conditional writes.

On a disk the lock is ``flock`` on ``<store>.runner/apply.lock`` and dies with its process. S3 has
no such lock, but it has conditional writes, and they are enough:

- **Take.** ``PutObject <store>.runner/apply.lock`` with ``If-None-Match: *`` creates the object
  only if there is none: of two applies, exactly one gets it. The object says who holds it
  (``owner``, a random id; ``host``, ``pid`` and the process's start time) and for how long
  (``ttl`` seconds, ``TRANSIENT_LEASE_SECONDS``, default 60).
- **Renew.** A thread of the holder rewrites the object every ``ttl / 4`` seconds with
  ``If-Match: <its ETag>``, so the write lands only while the object is still the holder's. A
  renewal refused (412) means the lease was taken over: the lease is *lost*, and
  :meth:`Lease.check`, which the holder calls before it writes a record or a region, raises
  :class:`BucketLockLost`; it raises too once ``ttl`` has passed since the last renewal that landed (an
  unreachable server, a paused process), before anyone may take the lease over.
- **Stale.** A lease is stale when its last write is older than ``ttl`` by the server's own clock
  (the object's ``Last-Modified`` against the ``Date`` of the response: no clock of two machines
  is compared), or at once when its holder ran on this host and its process is gone (``kill -9``:
  pid and start time, so a reused pid is not taken for the holder).
- **Take over.** A stale lease is replaced with ``PutObject`` ``If-Match: <the stale ETag>``: of
  two applies that found it stale, one wins and the other is refused as locked.
- **Release.** The holder deletes the object if it is still its own (a stop of the renewals first).

The second apply on a store is refused with :class:`runner.storage.store_errors.StoreLocked` (exit 75), as on disk.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
import uuid
from email.utils import parsedate_to_datetime
from typing import Any

from runner.core import processes
from runner.core.errors import Locked
from runner.storage.objects import Remote
from runner.storage.store_errors import StoreLocked

DEFAULT_TTL = 60.0


class BucketLockLost(Locked):
    """This apply's lease on the store was taken over or could not be renewed: it must not write."""


def ttl_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("TRANSIENT_LEASE_SECONDS", DEFAULT_TTL)))
    except ValueError:
        return DEFAULT_TTL


def _refused(err: BaseException) -> bool:
    """A conditional write refused by the server (412 Precondition Failed, as s3fs translates it)."""
    return isinstance(err, FileExistsError) or (isinstance(err, OSError) and err.errno == errno.EINVAL)


class Lease:
    """The lock of the store whose runner folder is ``state_dir`` (on object storage)."""

    def __init__(self, state_dir: Remote, ttl: float | None = None):
        self.obj = state_dir / "apply.lock"
        self.ttl = ttl if ttl is not None else ttl_seconds()
        self.owner = uuid.uuid4().hex
        self.etag: str | None = None
        self.renewed = 0.0  # time.monotonic() of the last renewal that landed
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- S3 requests (through s3fs's client: its credentials, endpoint and retries)
    def _call(self, method: str, **kwargs: Any) -> dict:
        return self.obj.fs.call_s3(method, Bucket=self.obj.bucket, Key=self.obj.key.split("/", 1)[1], **kwargs)

    def _body(self) -> bytes:
        return json.dumps({"owner": self.owner, **processes.me(), "ttl": self.ttl, "ts": time.time()}).encode()

    def _put(self, **condition: str) -> None:
        sent = time.monotonic()
        out = self._call("put_object", Body=self._body(), **condition)
        self.etag, self.renewed = out["ETag"], sent

    # --- taking and giving back
    def acquire(self) -> None:
        """Take the lease, or raise :class:`runner.storage.store_errors.StoreLocked` naming its holder."""
        try:
            self._put(IfNoneMatch="*")
        except OSError as err:
            if not _refused(err):
                raise
            held = self._held()
            if held is None:  # released between our write and our look: try once more
                self._put(IfNoneMatch="*")
            else:
                info, etag, why_stale = held
                if why_stale is None:
                    raise StoreLocked(
                        f"{self._store()} is being written by "
                        f"another `runner apply` (pid {info.get('pid', '?')} on {str(info.get('host', '?')).split('/')[0]}; "
                        f"its lease {self.obj} lapses {info.get('ttl', '?')} s after its last renewal); wait for it "
                        "to finish or stop it, then apply again") from None
                try:
                    self._put(IfMatch=etag)  # take it over: only if nobody renewed or took it meanwhile
                except OSError as err2:
                    if _refused(err2):
                        raise StoreLocked(f"{self._store()} was just locked by another `runner apply`; "
                                          "wait for it to finish or stop it, then apply again") from None
                    raise
        self._thread = threading.Thread(target=self._renew, name="store-lease", daemon=True)
        self._thread.start()

    def _store(self) -> str:
        """The store this lease locks (``x.runner`` -> ``x.zarr``), for messages."""
        state = str(self.obj.parent)
        return state.removesuffix(".runner") + ".zarr" if state.endswith(".runner") else state

    def _held(self) -> tuple[dict, str, str | None] | None:
        """The lease found: (its contents, ETag, why it is stale or None), or None if it is gone."""
        try:
            head = self._call("head_object")
        except FileNotFoundError:
            return None
        try:
            info = json.loads(self.obj.read_bytes())
        except (FileNotFoundError, ValueError):
            info = {}
        now = parsedate_to_datetime(head["ResponseMetadata"]["HTTPHeaders"]["date"])
        age = (now - head["LastModified"]).total_seconds()
        ttl = float(info.get("ttl", DEFAULT_TTL)) if isinstance(info.get("ttl"), (int, float)) else DEFAULT_TTL
        if age > ttl:
            return info, head["ETag"], f"not renewed for {age:.0f} s (lease {ttl:g} s)"
        if processes.gone_here(info):
            return info, head["ETag"], f"its process {info['pid']} on this host is gone"
        return info, head["ETag"], None

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            try:
                self._put(IfMatch=self.etag)
            except OSError as err:
                if _refused(err):
                    self.lost = True
                    return
            except Exception:  # the server did not answer: try again; check() stops writes past ttl
                continue

    def check(self) -> None:
        """Raise :class:`BucketLockLost` if this apply may no longer write the store."""
        if self.lost:
            raise BucketLockLost(f"{self._store()}: this apply's lock ({self.obj}) was taken over by another apply; "
                            "it stopped before writing more. Finished work is kept")
        if time.monotonic() - self.renewed > self.ttl:
            raise BucketLockLost(f"{self._store()}: this apply's lock ({self.obj}) could not be renewed for "
                            f"{self.ttl:g} s (is the server reachable?); it stopped before writing more. "
                            "Finished work is kept: apply again to resume")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.lost or self.etag is None:
            return
        try:
            head = self._call("head_object")
            if head["ETag"] == self.etag:
                self._call("delete_object")
        except OSError:
            pass  # gone already, or unreachable: it expires after ttl
        self.etag = None
