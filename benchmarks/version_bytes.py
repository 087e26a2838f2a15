"""Bytes a kept version holds of its own (issue 51, item 3): the quickstart applied at 300 steps,
then extended to 400 (the extension keeps the 300-step version in the history), on a local disk and
on S3 (moto's server on 127.0.0.1). For each: what ``plan`` said the version would keep, and what
it holds after: its own chunks, its own metadata, and its description (the history's
``manifest.json``: records and the store's manifest). Every other byte is shared with the store.

    OMP_NUM_THREADS=1 python benchmarks/version_bytes.py [--no-s3] [--json out.json]

About 2 minutes on 2 cores (two quickstart runs and two extensions per kind).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _runner(*args: str, cwd: Path, env: dict) -> str:
    out = subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=cwd, env=env, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"runner {' '.join(args)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return out.stdout


def measure(store: str, folder: Path, env: dict) -> dict:
    """Apply the quickstart at 300 steps to ``store``, extend it to 400, and say what the kept version holds."""
    from runner.storage.history import versions
    from runner.storage.location import location

    spec = (ROOT / "specs/quickstart.toml").read_text()
    spec = spec.replace('name = "quickstart"\n', f'name = "quickstart"\nstore = "{store}"\n', 1)
    (folder / "q.toml").write_text(spec)
    _runner("apply", "q.toml", "-q", cwd=folder, env=env)
    (folder / "q.toml").write_text(spec.replace("steps = 300", "steps = 400"))
    said = re.search(r"about ([0-9.]+ [kMG]?B)\s+of\s+its\s+own", _runner("plan", "q.toml", cwd=folder, env=env))
    _runner("apply", "q.toml", "-q", cwd=folder, env=env)
    path = location(store if "://" in store else str(folder / store))
    [version] = versions(path)
    own = version.own_by_kind()
    total = sum(path.files().values())
    return {"store": store, "store_bytes": total, "plan_said": said.group(1) if said else None,
            "own_chunks": own["chunks"], "own_metadata": own["metadata"], "description_bytes": own["description"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-s3", action="store_true", help="the local disk only")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "local"
        local.mkdir()
        out["local"] = measure("store/quickstart.zarr", local, env)
        if not args.no_s3:
            from tests.runner import s3_server

            server = s3_server.start(Path(tmp) / "moto.log")
            try:
                os.environ.update(server.env)
                remote = Path(tmp) / "s3"
                remote.mkdir()
                out["s3"] = measure(f"s3://{server.bucket()}/quickstart.zarr", remote, {**env, **server.env})
            finally:
                s3_server.stop(server)
    for kind, found in out.items():
        print(f"{kind:6} store {found['store_bytes'] / 1e3:6.1f} kB; the 300-step version's own: chunks "
              f"{found['own_chunks'] / 1e3:.1f} kB, metadata {found['own_metadata'] / 1e3:.1f} kB, description "
              f"{found['description_bytes'] / 1e3:.1f} kB; plan said {found['plan_said']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
