"""The kit's SimpleStudy planned in process: one network or several, its device, and a plan that pickles by
name (a Ray worker gets it) for the toy studies of tests/plugins/."""

from __future__ import annotations

import pickle

import pytest
import torch

from runner.checkpointed.schedule import checkpoint_resource
from runner.checkpointed.simple import Network
from runner.plugin.loader import PluginError
from tests.plugins.toy_checkpointed import Chain, ChainStudy
from tests.plugins.toy_two_networks import Counting, CountingStudy, Net

MEASURES = [{"kind": "svcca", "layers": ["hidden"]},
            {"kind": "svcca", "compare": "seed", "networks": ["tanh"], "reference": ["relu"], "layers": ["hidden"]}]


def planned(study, table: dict, measures=({"kind": "entropy"},)):
    spec = study.spec_model().model_validate({"experiment": {"name": "t", "study": study.name, "seed": 3},
                                              study.name: table, "measure": list(measures)})
    return study.prepare(spec, None)


def test_one_network_keeps_its_task_ids_and_its_plan_pickles_by_name():
    p = planned(ChainStudy(), {"epochs": 2})
    trainer = p.tasks[0]
    assert trainer.key == {"chain": Chain(epochs=2).model_dump(), "seed": 3}  # as before the kit took several
    assert p.labels == ["chain"] and p.device == "cpu" and not p.unmet
    back = pickle.loads(pickle.dumps(p))  # plain pickle: the spec model is rebuilt by name, never by value
    assert type(back.spec) is type(p.spec) and back.spec == p.spec
    assert back.spec.canonical_json() == p.spec.canonical_json() and back.tasks == p.tasks


def test_two_networks_each_train_and_a_measure_naming_one_reads_the_other():
    p = planned(CountingStudy(), {}, MEASURES)
    assert p.labels == ["tanh", "relu"]
    trainers = [t for t in p.tasks if t.kind == "train"]
    assert [t.key["network"] for t in trainers] == ["tanh", "relu"] and trainers[0].id != trainers[1].id
    assert "device" not in trainers[0].key["counting"]  # the device is not part of what a network is
    seed = [t for t in p.tasks if t.kind == "svcca" and t.params["compare"] == "seed"]
    assert {t.network for t in seed} == {0}  # the measure names tanh only
    assert all(checkpoint_resource(1, t.checkpoint) in t.needs for t in seed)  # relu at the same checkpoint
    assert pickle.loads(pickle.dumps(p)).spec == p.spec


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_this_machine_lacks_is_an_unmet_requirement():
    p = planned(CountingStudy(), {"device": "cuda"})
    assert p.device == "cuda" and [u.kind for u in p.unmet] == ["device"]
    assert "[counting] device" in p.unmet[0]


class Mismatched(CountingStudy):
    """relu trained for fewer epochs than tanh: not one checkpoint axis."""

    name, table = "mismatched", Counting

    def trainable(self, c: Net, seed: int):
        run = super().trainable(c, seed)
        run.epochs = 1 if c.nonlinearity == "relu" else run.epochs
        return run


class Twice(CountingStudy):
    name, table = "twice", Counting

    def networks(self, c: Counting, seed: int) -> list[Network]:
        return [Network("same", seed, Net(**c.model_dump(), nonlinearity=f)) for f in c.nonlinearities]


@pytest.mark.parametrize("study, message", [
    (Mismatched(), "network 'relu' has (steps_per_epoch, epochs, layers) (8, 1,"),
    (Twice(), "Twice.networks() returned networks labelled ['same', 'same']; each network has a label of its own"),
])
def test_networks_outside_the_kits_contract_are_one_plugin_error(study, message):
    with pytest.raises(PluginError) as err:
        planned(study, {})
    assert message in str(err.value)

