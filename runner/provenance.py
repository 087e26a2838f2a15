"""Where a result came from: spec text and hash, package versions, git revision, device."""

from __future__ import annotations

import json
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "xarray", "zarr", "numpy", "pydantic", "transient")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def git_revision() -> tuple[str, bool]:
    """(commit, dirty) of the project's checkout, ("unknown", False) outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown", False
    if commit.returncode != 0:
        return "unknown", False
    return commit.stdout.strip(), bool(dirty.stdout.strip())


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def provenance_attrs(spec_text: str, spec_sha: str, device: str) -> dict[str, str | bool]:
    """Root attributes of a store; strings only, so ``to_netcdf`` of the dataset keeps working."""
    commit, dirty = git_revision()
    return {
        "Conventions": "CF-1.11",
        "source": f"transient runner {package_versions().get('transient', '?')}",
        "runner_spec_toml": spec_text,
        "runner_spec_sha256": spec_sha,
        "runner_package_versions": json.dumps(package_versions(), sort_keys=True),
        "runner_git_commit": commit,
        "runner_git_dirty": str(dirty).lower(),
        "runner_device": device,
        "runner_updated_utc": now(),
    }
