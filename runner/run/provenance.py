"""Where a result came from: spec text and hash, package versions, the code that ran, the device.

The store's root holds what a reader looks for (``title``, ``summary``, ``keywords``, ``history``,
``references``, ``source``, ``Conventions``, ``date_modified``; the store sets ``date_created``) and, in its runner attribute, the rest: the spec, package versions,
the git commit and whether the checkout had changes (untracked files count), and a hash of the
source of every module of this project and of every plugin that was imported (``code_sha256``,
with each file's hash), so that a measure in an untracked file or a plugin outside the repository
still changes the recorded identity of the code.

The runner attribute is the provenance's summary (spec, its hash, versions, commit, ``code_sha256``
and how many files it hashes, device, study): what ``print(ds)`` shows stays short. The full
provenance, each code file with its hash, is ``provenance.json`` in the store's runner folder
(``<name>.runner/``), named by the summary's ``provenance_file``; ``code_sha256`` is the hash of
that file list (:func:`code_identity`), so the summary binds the file.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
from runner.core.layout import internal
from runner.storage.store import atomic_write_bytes, now, runner_dir
from runner.storage.store import root_attrs as read_root
from importlib import metadata
from pathlib import Path

from models.registry import families
from runner.plugin.measures import _REGISTRY
from runner.plugin.loader import plugin_names
from runner.plugin.study import studies

PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "xarray", "zarr", "numpy", "pydantic", "transient")
ROOT = Path(__file__).resolve().parents[2]  # the project: runner/run/provenance.py
#: What ``Conventions`` says: CF's variable attributes (long_name, UDUNITS units, flag_values of the
#: variable's type, flag_meanings, coordinates) and ACDD's discovery attributes; tests/test_cf.py runs
#: the IOOS compliance checker on the tiny specs' stores.
CONVENTIONS = "CF-1.11, ACDD-1.3"
UNITS_NOTE = ("Counts (steps of the map, epochs, tokens) and quantities in nats are dimensionless: their units are "
              "'1' and the long_name says what is counted or per what ('(steps)', 'per step', '(nats per token)'). "
              "CF defines no standard_name for these quantities, so none is given. 'NaN' is where a value does not "
              "exist; a categorical outcome has flag_values and flag_meanings.")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def git_revision(root: Path = ROOT) -> tuple[str, bool]:
    """(commit, dirty) of the project's checkout, ("unknown", False) outside git. Dirty: any change
    to a tracked file or any untracked file that git does not ignore."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=normal"], cwd=root,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown", False
    if commit.returncode != 0:
        return "unknown", False
    return commit.stdout.strip(), bool(dirty.stdout.strip())


def code_files() -> dict[str, str]:
    """sha256 of the source of each imported module of this project (``runner``, ``analyses``,
    ``models``) and of each plugin module (the module of every registered study, measure and
    model family, wherever it lives), by path (relative to the project when inside it)."""
    # a copy: another thread (the tracker's export) may import while this one reads
    names = {n for n in list(sys.modules) if n.split(".")[0] in ("runner", "analyses", "models")} | plugin_modules()
    out = {}
    for name in sorted(names):
        file = getattr(sys.modules.get(name), "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        path = Path(file).resolve()
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            continue
        out[str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)] = digest
    return out


def code_identity() -> tuple[str, dict[str, str]]:
    files = code_files()
    whole = hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in sorted(files.items())).encode()).hexdigest()
    return whole, files


def provenance(spec_text: str, spec_sha: str, device: str, **extra) -> dict:
    """The runner attribute's provenance entries of a store (JSON-able)."""
    commit, dirty = git_revision()
    code, files = code_identity()
    return {"spec_toml": spec_text, "spec_sha256": spec_sha, "package_versions": package_versions(),
            "git_commit": commit, "git_dirty": dirty, "code_sha256": code, "code_files": files,
            "device": device, "updated_utc": now(), **extra}


#: The full provenance's file in a store's runner folder.
PROVENANCE_FILE = "provenance.json"


def write_full(state_dir, prov: dict) -> dict:
    """Write the full provenance (``prov``, with ``code_files``) to :data:`PROVENANCE_FILE` in the
    store's runner folder ``state_dir`` (whole or not at all); the summary for the runner
    attribute: ``prov`` without the file list, with its count and where it is."""
    atomic_write_bytes(state_dir / PROVENANCE_FILE, json.dumps(prov, indent=1, sort_keys=True).encode())
    summary = {k: v for k, v in prov.items() if k != "code_files"}
    folder = [state_dir.parent.name, state_dir.name] if state_dir.parent.suffix == ".runner" else [state_dir.name]
    return {**summary, "code_files_count": len(prov.get("code_files", {})),
            "provenance_file": "/".join([*folder, PROVENANCE_FILE])}


def read_full(store_path, prov: dict | None = None) -> dict:
    """The full provenance of the store at ``store_path``: its runner folder's
    :data:`PROVENANCE_FILE` (``{}`` when there is none, or when it is of other code than the store's
    summary says: a later run's), or, for a store written before there was one, the runner
    attribute itself (``prov``) that held it all."""
    prov = internal(read_root(store_path) or {}) if prov is None else prov
    if "code_files" in prov:
        return prov
    try:
        full = json.loads((runner_dir(store_path) / PROVENANCE_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    return full if isinstance(full, dict) and full.get("code_sha256") == prov.get("code_sha256") else {}


def root_attrs(title: str, references: list[str], commit: str, dirty: bool, summary: str = "",
               keywords: list[str] = ()) -> dict[str, str]:
    """The root attributes a reader looks for; strings only, so ``to_netcdf`` of the dataset works.
    ``summary`` and ``keywords`` (a comma-separated list) are ACDD's; ``date_modified`` is now."""
    version = package_versions().get("transient", "?")
    where = "" if commit == "unknown" else f" (git {commit[:12]}{', with changes' if dirty else ''})"
    return {"title": title, "summary": summary or title, "keywords": ", ".join(dict.fromkeys(k for k in keywords if k)),
            "Conventions": CONVENTIONS, "source": f"transient runner {version}{where}",
            "references": "\n".join(dict.fromkeys(r for r in references if r)), "comment": UNITS_NOTE,
            "date_modified": now()}


def plugin_modules() -> set[str]:
    """The modules that define a registered study, measure, model family or reference map, and
    those named in ``TRANSIENT_PLUGINS`` (what provenance hashes beside the project's own code).
    Called when a run writes its provenance, never by a command that computes nothing: the
    reference maps' classes bring torch."""
    from models.maps import MAPS  # lazy: torch

    classes = [*studies().values(), *(m for by_kind in _REGISTRY.values() for m in by_kind.values()),
               *(type(f) for f in families()), *MAPS.values()]
    names = {c.__module__ for c in classes}
    return names | set(plugin_names())
