"""The depth study's core reads what measures and model families declare, never their names:
strides, memory kept beside the batch, state checks, twins in the trajectory key, weights."""

from __future__ import annotations

from runner.plugin.measures import measure_problems, measures
from runner.studies.depth.measure import DepthView, NetworkSize
from runner.studies.depth.resolve import Network
from runner.studies.depth.spec import spec_model
from runner.studies.depth.study import _state_nbytes, trajectory_key


def _spec(models: list[dict], measure: list[dict], steps: int = 20, samples: int = 4):
    return spec_model().model_validate({
        "experiment": {"name": "declarations"}, "model": models, "input": {"samples": samples},
        "dynamics": {"steps": steps, "precision": "fp64"}, "measure": measure})


def _net(spec, i: int, n_hidden: int) -> Network:
    return Network(i, 0, spec.model[i], 0, "fp64", 1, n_hidden, 0)


def test_memory_counts_the_batch_a_declared_window_and_declared_weights():
    """By counting: fp64 elements are 8 bytes; a tanh reservoir of N = 100 holds W drawn in fp64 and W
    and g W^T in the working precision (3 x 8 x N^2 bytes); PCA keeps its window of steps 0, 5, ..., 20
    (5 points) of 2 samples on the device; the batch is 4 samples and the Lyapunov exponent's 4 twins
    and 4 twins of its linearity check."""
    spec = _spec([{"name": "r", "source": "map:tanh", "params": {"n": 100}}],
                 [{"kind": "pca", "samples": [0, 1], "every": 5}, {"kind": "lyapunov", "tau": 2}])
    sample = 100 * 8
    assert _state_nbytes(spec, [_net(spec, 0, 100)]) == (4 + 8) * sample + 5 * 2 * sample + 3 * 8 * 100 ** 2
    logistic = _spec([{"name": "l", "source": "map:logistic"}], [{"kind": "lyapunov", "tau": 2}])
    assert _state_nbytes(logistic, [_net(logistic, 0, 1)]) == (4 + 8) * 8  # a formula: no weights


def test_strides_are_what_each_measure_declares():
    registry = measures("depth")
    assert registry["lyapunov"].tags.step.strides == ("tau",) and registry["effective_dimension"].tags.step.strides == ("every",)
    spec = _spec([{"name": "l", "source": "map:logistic"}],
                 [{"kind": "lyapunov", "tau": 4}, {"kind": "effective_dimension", "every": 6}], steps=24)
    assert spec.stride_lcm() == 12
    long = _spec([{"name": "l", "source": "map:logistic"}], [{"kind": "effective_dimension", "every": 40}])
    assert not long.problems()  # the spec's own rules; the stride is the measure's to check
    assert measure_problems("depth", long, DepthView(long)) == [
        (("measure", 0, "every"), "40 is larger than [dynamics] steps = 20; the measure would keep no value")]
    # PCA's every only thins its window: a window of its first point is valid (its window is checked apart)
    window = _spec([{"name": "l", "source": "map:logistic"}], [{"kind": "pca", "every": 40}])
    assert not window.problems() and not measure_problems("depth", window, DepthView(window))


def test_a_trajectory_beyond_every_state_is_refused_by_its_own_check():
    """The one problems hook, asked again once the sizes are known: no state hook of its own."""
    spec = _spec([{"name": "h", "source": "map:henon"}], [{"kind": "trajectory", "elements": [0, 2]}])
    assert measure_problems("depth", spec, DepthView(spec)) == []  # the sizes are not known yet
    sized = DepthView(spec, (NetworkSize("h", "fp32", 1, 2),))
    (loc, message), = measure_problems("depth", spec, sized)
    assert loc == ("measure", 0, "elements") and "elements [2] are beyond every network's state" in message


def test_twins_enter_the_key_unless_their_measure_keeps_them_out():
    maps = [{"name": "l", "source": "map:logistic"}]
    unchecked = _spec(maps, [{"kind": "lyapunov", "tau": 2, "check_samples": 0}])
    key = trajectory_key(unchecked, _net(unchecked, 0, 1))
    assert key["with_perturbation"] and "twins" not in key  # stores made before twins were listed keep their ids
    alone = _spec(maps, [{"kind": "lyapunov", "tau": 2}])  # one twin per sample and one of the linearity check
    assert trajectory_key(alone, _net(alone, 0, 1))["twins"] == [["lyapunov", 8]]
    both = _spec(maps, [{"kind": "lyapunov", "tau": 2}, {"kind": "twin_distance", "samples": [1]}])
    assert trajectory_key(both, _net(both, 0, 1))["twins"] == [["lyapunov", 8], ["twin_distance", 1]]


def test_a_split_is_refused_by_the_measure_on_a_view_with_shards():
    """Effective dimension's per-shard statistic of a wide network is too large to combine: said by its
    problems on a view that knows the shard count, never on the unsplit one."""
    spec = _spec([{"name": "l", "source": "map:logistic"}], [{"kind": "effective_dimension"}])
    wide = (NetworkSize("wide", "fp32", 512, 4096),)
    assert measure_problems("depth", spec, DepthView(spec, wide)) == []
    (loc, message), = measure_problems("depth", spec, DepthView(spec, wide, shards=2))
    assert loc == ("measure", 0, "every") and message.startswith("wide: its per-shard statistic is a 2097152 x 2097152")
