"""A measure registers in one statement: its class keywords (study, reference, params, tags)."""

from __future__ import annotations

from typing import Literal

import pytest

from runner.plugin import measures as registry
from runner.plugin.measures import MeasureParams, MeasureTags, measures
from runner.plugin.timings import NetworkMeasure

STUDY = "keywords-test"


class Params(MeasureParams):
    """A table of one kind."""

    kind: Literal["probe"]


@pytest.fixture
def clean():
    yield
    registry._REGISTRY.pop(STUDY, None)


def test_class_keywords_set_the_attributes_and_register(clean):
    class Probe(NetworkMeasure, study=STUDY, reference="Someone 2020", params=Params,
                tags=MeasureTags("network")):
        def variables(self, b, shape):
            pass

    assert (Probe.study, Probe.reference, Probe.Params, Probe.tags) == (STUDY, "Someone 2020", Params,
                                                                      MeasureTags("network"))
    assert measures(STUDY) == {"probe": Probe}

    class Quieter(Probe):  # no keywords: not a registration
        pass

    assert measures(STUDY) == {"probe": Probe}


def test_a_kind_taken_is_refused_unless_the_newcomer_replaces_it(clean):
    class Probe(NetworkMeasure, study=STUDY, params=Params, tags=MeasureTags("network")):
        def variables(self, b, shape):
            pass

    with pytest.raises(ValueError, match=f"^{STUDY} measure kind 'probe' is {__name__}.*Probe's; give "
                                         f"{__name__}.*Other another name, or set `replaces = True` to replace it$"):
        class Other(Probe, study=STUDY):
            pass

    class Replacing(Probe, study=STUDY):
        replaces = True

    assert measures(STUDY)["probe"] is Replacing
