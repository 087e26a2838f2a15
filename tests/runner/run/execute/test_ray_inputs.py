"""Ray workers read the inputs the driver wrote into the store; they never open the input source.

The driver (the real CLI in a subprocess, its own local cluster of 2 CPUs) stops once it has
written the inputs into the store (``RUNNER_TEST_STALL=inputs@1``); the test then renames the
spec's input file away and lets it go on. Marked ``ray`` and ``slow`` (a cluster, a worker
importing torch: 10-20 s on 2 cores).
"""

from __future__ import annotations

import pytest
import xarray as xr

from tests.runner.helpers import popen_cli, run_cli, wait_for, write_spec

pytest.importorskip("ray", reason="the Ray executor's tests need ray: pip install -e '.[ray]'")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

SPEC = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"
seed = 3

[[model]]
name = "albert"
source = "path:{model}"

[input]
source = "docs.txt"
samples = 6
tokens = 8

[dynamics]
steps = 20

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"
tau = 5
"""


@pytest.fixture(scope="module")
def tiny_albert(tmp_path_factory):
    from models.tiny import build_tiny_albert

    return build_tiny_albert(tmp_path_factory.mktemp("tiny") / "albert", mlm_steps=10)


@pytest.mark.timeout(300)
def test_workers_run_without_the_input_file_and_equal_a_local_run(tmp_path, tiny_albert):
    from pydoc_data.topics import topics

    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(" ".join(t.split()) for t in topics.values()))
    for name in ("ray", "local"):
        write_spec(tmp_path, SPEC.format(name=name, model=tiny_albert), f"{name}.toml")
    stalled = tmp_path / "store/ray.runner/stalled"
    driver = popen_cli("apply", "ray.toml", "--executor", "ray", "-q", cwd=tmp_path, RUNNER_TEST_STALL="inputs@1",
                       TRANSIENT_RAY_CPUS="2")
    wait_for(stalled.exists, driver, timeout=240)
    assert xr.open_zarr(tmp_path / "store/ray.zarr", consolidated=False)["input_ids"].min() >= 0  # written by the driver
    corpus.rename(tmp_path / "away.txt")  # no worker exists yet: none can have read it
    stalled.unlink()
    _, err = driver.communicate(timeout=240)
    assert driver.returncode == 0, err
    (tmp_path / "away.txt").rename(corpus)
    local = run_cli("apply", "local.toml", "-q", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    xr.testing.assert_equal(xr.open_zarr(tmp_path / "store/ray.zarr").drop_attrs(),
                            xr.open_zarr(tmp_path / "store/local.zarr").drop_attrs())


def _stalled_then_moved_away(tmp_path, spec: str, sources: list[str]) -> None:
    """Apply ``spec`` on a Ray cluster; once the driver has written the store's inputs, move
    ``sources`` away (no worker exists yet), let it go on, and move them back."""
    stalled = tmp_path / f"store/{spec}.runner/stalled"
    driver = popen_cli("apply", f"{spec}.toml", "--executor", "ray", "-q", cwd=tmp_path, RUNNER_TEST_STALL="inputs@1",
                       TRANSIENT_RAY_CPUS="2")
    wait_for(stalled.exists, driver, timeout=240)
    for name in sources:
        (tmp_path / name).rename(tmp_path / f"away-{name}")
    stalled.unlink()
    _, err = driver.communicate(timeout=240)
    for name in sources:
        (tmp_path / f"away-{name}").rename(tmp_path / name)
    assert driver.returncode == 0, err


@pytest.mark.timeout(300)
def test_training_workers_never_read_the_corpus_and_equal_a_local_run(tmp_path):
    """The corpus the driver read goes to the workers with the plan (the corpus file is gone while
    they train and measure); the spec was planned first, so apply itself did not read the corpus."""
    from tests.training.training_helpers import CORPUS, TINY

    (tmp_path / "corpus.conllu").write_text(CORPUS.read_text())
    text = TINY.read_text().replace('source = "builtin:tiny-tagged"', 'source = "corpus.conllu"')
    text = text[:text.index("[[model]]\nname = \"tagger_upos\"")] + text[text.index("[[measure]]"):]
    text = text[:text.index("[[measure]]", text.index("[[measure]]") + 1)]  # the first measure: SVCCA
    for name in ("ray", "local"):
        write_spec(tmp_path, text.replace('name = "lstm_tiny"', f'name = "{name}"\nstore = "store/{name}.zarr"'),
                   f"{name}.toml")
        assert run_cli("plan", f"{name}.toml", cwd=tmp_path).returncode == 0
    _stalled_then_moved_away(tmp_path, "ray", ["corpus.conllu"])
    assert run_cli("apply", "local.toml", "-q", cwd=tmp_path).returncode == 0
    ray_ds = xr.open_zarr(tmp_path / "store/ray.zarr").drop_attrs().drop_vars("checkpoint_path")
    xr.testing.assert_equal(ray_ds, xr.open_zarr(tmp_path / "store/local.zarr").drop_attrs().drop_vars("checkpoint_path"))


@pytest.mark.timeout(300)
def test_transject_workers_never_read_the_data_or_tokenizer_and_equal_a_local_run(tmp_path):
    from tests.transject.tokenized import write_data
    from tests.transject.tokenized import write_spec as write_transject_spec

    write_data(tmp_path)
    for name in ("ray", "local"):
        write_transject_spec(tmp_path, name, f"store/{name}.zarr", epochs=2)
    _stalled_then_moved_away(tmp_path, "ray", ["r_train.csv", "r_test.csv", "tok"])
    assert run_cli("apply", "local.toml", "-q", cwd=tmp_path).returncode == 0
    drop = [v for v in ("checkpoint_path", "export_path") if v in xr.open_zarr(tmp_path / "store/ray.zarr")]
    xr.testing.assert_equal(xr.open_zarr(tmp_path / "store/ray.zarr").drop_attrs().drop_vars(drop),
                            xr.open_zarr(tmp_path / "store/local.zarr").drop_attrs().drop_vars(drop))
