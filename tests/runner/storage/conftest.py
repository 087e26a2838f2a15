"""The S3-compatible server the storage tests share: moto's server on 127.0.0.1, one per module."""

from __future__ import annotations

import pytest

from tests.runner import s3_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("moto.server", reason="the S3 cases need moto's server: pip install -e '.[test]'")
    pytest.importorskip("s3fs", reason="stores on S3 need s3fs: pip install -e '.[s3]'")
    s = s3_server.start(tmp_path_factory.mktemp("s3") / "moto.log")
    yield s
    s3_server.stop(s)


@pytest.fixture
def aws(server, monkeypatch):
    """The server, with this process's AWS variables (credentials, endpoint) pointing at it."""
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    return server
