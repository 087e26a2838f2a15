"""runner.data.hub.offline_hub: with the hub switched off, the hub libraries read their local caches
only inside it, whether imported before or inside it, and everything is as it was after it."""

from __future__ import annotations

import os
import subprocess
import sys

from runner.data.hub import offline_hub

CHECK = """
import os, sys
from runner.data.hub import offline_hub
{before}
with offline_hub() as offline:
    import datasets.config, huggingface_hub.constants as hub
    inside = (offline, datasets.config.HF_DATASETS_OFFLINE, datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE,
              os.environ.get("HF_DATASETS_OFFLINE"))
print(inside, datasets.config.HF_DATASETS_OFFLINE, os.environ.get("HF_DATASETS_OFFLINE"), os.environ.get("HF_HUB_OFFLINE"))
"""


def run(before: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_HUB_OFFLINE"] = "1"
    out = subprocess.run([sys.executable, "-c", CHECK.format(before=before)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_library_imported_inside_is_offline_and_the_environment_is_restored():
    assert run("") == "(True, True, True, True, '1') True None 1"  # read once, at its import: offline it stays


def test_a_library_imported_before_is_switched_off_inside_only():
    assert run("import datasets.config; datasets.config.HF_DATASETS_OFFLINE = False") == \
        "(True, True, True, True, '1') False None 1"
    with offline_hub() as offline:  # this process: switched off by the suite (tests/conftest.py)
        assert offline and os.environ["HF_DATASETS_OFFLINE"] == "1"
