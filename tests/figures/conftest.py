"""Tiny stores written by real runs of ``runner apply``, for the figure recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runner import launcher
from tests.runner.helpers import cli_env, write_spec

#: The tiny ALBERT twice: pre-trained, and re-drawn as the paper's initial network.
ALBERTS = """
    [[model]]
    name = "pretrained"
    source = "{albert}"

    [[model]]
    name = "initial"
    source = "{albert}"
    init = {{ scheme = "truncated_normal", std = 0.02, clip = 2.0 }}
"""

DEPTH = """
    [experiment]
    name = "depth"
    seed = 0
""" + ALBERTS + """    replicates = 2

    [[model]]
    name = "reservoir"
    source = "map:tanh"
    params = {{ g = 1.5, n = 16 }}

    [input]
    source = "builtin:pydoc-topics"
    samples = 8
    tokens = 8

    [dynamics]
    steps = {steps}
    checkpoint_every = 20

    [[measure]]
    kind = "token_deviation"

    [[measure]]
    kind = "lyapunov"
    tau = 5

    [[measure]]
    kind = "transient_chaos"

    [[measure]]
    kind = "orbit"

    [[measure]]
    kind = "effective_dimension"

    [[measure]]
    kind = "trajectory"
    samples = [0]
    tokens = [0, 1, 2, 3]
    elements = [0]

    [[measure]]
    kind = "attention"
    samples = [0]
    every = 20

    [[measure]]
    kind = "pca"
    samples = [0]
    start = 20
    stop = {steps}
    """


def depth_spec(root: Path, albert: Path, steps: int = 80) -> Path:
    return write_spec(root, DEPTH.format(albert=albert, steps=steps), "depth.toml")


def apply(spec: Path, root: Path) -> None:
    out = launcher.run(["apply", "-q", str(spec)], cwd=root, env=cli_env(root, OMP_NUM_THREADS="1"), timeout=600)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="session")
def tiny_albert(tmp_path_factory) -> Path:
    from models.tiny import build_tiny_albert

    return build_tiny_albert(tmp_path_factory.mktemp("albert") / "tiny", seed=0, mlm_steps=20)


@pytest.fixture(scope="session")
def depth_store(tmp_path_factory, tiny_albert) -> Path:
    """A finished depth store: tiny ALBERT pre-trained and initial (2 replicates), and a tanh map."""
    root = tmp_path_factory.mktemp("depth")
    apply(depth_spec(root, tiny_albert), root)
    return root / "store" / "depth.zarr"


@pytest.fixture(scope="session")
def training_store(shipped_store) -> Path:
    """A finished store of specs/tiny/lstm_tiny.toml (every training measure)."""
    return shipped_store("lstm_tiny")


SWEPT = """
    [experiment]
    name = "swept"
    seed = 0
""" + ALBERTS + """
    [input]
    source = "builtin:pydoc-topics"
    samples = 6

    [dynamics]
    steps = 60

    [[measure]]
    kind = "token_deviation"

    [sweep.input]
    tokens = [4, 8]
    """


@pytest.fixture(scope="session")
def swept_store(tmp_path_factory, tiny_albert) -> Path:
    """A sweep over N_w (Fig. 2B) of the tiny ALBERT, pre-trained and initial."""
    root = tmp_path_factory.mktemp("swept")
    apply(write_spec(root, SWEPT.format(albert=tiny_albert), "swept.toml"), root)
    return root / "store" / "swept.zarr"


@pytest.fixture(scope="session")
def transject_store(shipped_store) -> Path:
    """A finished store of specs/tiny/transject_tiny.toml (four tiny models, two seeds, every measure)."""
    return shipped_store("transject_tiny")
