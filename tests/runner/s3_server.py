"""A real S3-compatible server on 127.0.0.1 for the tests: moto's server mode, as a subprocess.

``moto[server]`` is in the test extras; without it (or without s3fs) the tests that need the
server are skipped. The server answers S3's conditional writes (``If-None-Match``, ``If-Match``)
as S3 does, which the store's lock relies on (:mod:`runner.storage.bucket_lock`).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@dataclass
class S3Server:
    url: str
    process: subprocess.Popen
    log: Path | None = None

    def requests(self, bucket: str) -> list[tuple[str, str]]:
        """(method, path) of every request made so far to ``bucket``, from the server's log."""
        found = re.findall(r'"([A-Z]+) /' + re.escape(bucket) + r'([/?]\S*)? HTTP', self.log.read_text())
        return [(method, path) for method, path in found]

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach the server (the standard AWS variables)."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.url}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.url, aws_access_key_id="testing",
                            aws_secret_access_key="testing", region_name="us-east-1")

    def bucket(self) -> str:
        """A new, empty bucket."""
        name = f"test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(log: Path, timeout: float = 60.0) -> S3Server:
    """Start moto's server on a free port and wait until it answers a request. It logs every
    request, to ``log`` (a pipe nobody reads would fill and stop the server)."""
    port = _free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **CREDENTIALS})
    server = S3Server(f"http://127.0.0.1:{port}", proc, log)
    client = server.client()
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.list_buckets()
            return server
        except Exception:  # noqa: BLE001 - not listening yet
            if proc.poll() is not None:
                raise RuntimeError(f"moto's server exited: {log.read_text()[-2000:]}") from None
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.05)


def stop(server: S3Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
