"""``--address`` to a Ray cluster that does not answer: refused in seconds, through the real CLI."""

from __future__ import annotations

import socket
import time

import pytest

from runner.run.execute.ray_cluster import ClusterUnreachable, host_and_port
from tests.runner.helpers import maps_spec, run_cli, write_spec

pytest.importorskip("ray", reason="--executor ray needs ray: pip install -e '.[ray]'")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing answers there


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_where_nothing_answers_exits_66_at_once_naming_it(tmp_path, scheme):
    write_spec(tmp_path, maps_spec("far", steps=20), "far.toml")
    address = f"{scheme}127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    done = run_cli("apply", "far.toml", "--executor", "ray", "--address", address, cwd=tmp_path, timeout=60)
    seconds = time.monotonic() - t0
    print(f"--address {address}: exit {done.returncode} after {seconds:.1f} s")
    assert done.returncode == 66, done.stderr
    assert f"--address {address}: no Ray cluster answers there" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert seconds < 30
    assert not (tmp_path / "store/far.zarr").exists()  # refused before anything was laid out


def test_addresses_are_read_as_ray_reads_them():
    assert host_and_port("ray://head:10001") == ("head", 10001)
    assert host_and_port("ray://head") == ("head", 10001)
    assert host_and_port("10.0.0.2:6379") == ("10.0.0.2", 6379)
    assert host_and_port("[::1]:6379") == ("::1", 6379)
    assert host_and_port("auto") is None
    with pytest.raises(ClusterUnreachable, match="'head': give HOST:PORT"):
        host_and_port("head")
