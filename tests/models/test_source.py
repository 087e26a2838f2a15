"""Source strings are parsed once, into a typed object that families and loaders match on."""

import pickle
from pathlib import Path

import pytest

from models.registry import family_for
from models.source import Source
from runner.data.registry import DOCUMENTS, InputError, check_data


def check_source(source, field="text", **options):
    """The depth study's check of its input source: :class:`InputError` with the problem."""
    problem = check_data(source, Path("."), DOCUMENTS, field=field, **options)
    if problem:
        raise InputError(problem)


@pytest.mark.parametrize("text, scheme, rest", [
    ("hf:albert-base-v2", "hf", "albert-base-v2"),
    ("map:logistic", "map", "logistic"),
    ("builtin:tiny-albert", "builtin", "tiny-albert"),
    ("transject-layer:builtin", "transject-layer", "builtin"),
    ("layers:hf:EleutherAI/pythia-70m", "layers", "hf:EleutherAI/pythia-70m"),
    ("path:models/x", "path", "models/x"),
    ("models/x", "path", "models/x"),
    ("/abs/dir", "path", "/abs/dir"),
    ("C:/data/file.txt", "path", "C:/data/file.txt"),  # a drive letter is no scheme
    ("scaffold:", "scaffold", ""),
])
def test_a_source_is_its_scheme_and_rest(text, scheme, rest):
    s = Source(text)
    assert (s.scheme, s.rest) == (scheme, rest)
    assert s == text and str(s) == text  # ids, stores and messages see what the user wrote


def test_what_a_source_names():
    assert Source("hf:org/name").hub_id == "org/name" and Source("hf:org/name").on_hub
    assert Source("path:d").explicit_path and not Source("d").explicit_path
    assert Source("path:d").path == Path("d") == Source("d").path
    assert Source("layers:hf:org/m").inner.hub_id == "org/m"
    assert Source("layers:dir").inner.local
    assert Source("hf:org/name").location() == "org/name" and Source("path:a/b").location() == "a/b"


def test_a_source_survives_pickling_and_json():
    import json

    s = Source("layers:hf:org/m")
    back = pickle.loads(pickle.dumps(s))
    assert type(back) is Source and back.scheme == "layers" and back.inner.hub_id == "org/m"
    assert json.loads(json.dumps({"source": s})) == {"source": "layers:hf:org/m"}


@pytest.mark.parametrize("text, family", [
    ("map:logistic", "map"), ("hf:albert-base-v2", "albert"), ("path:x", "albert"), ("some/dir", "albert"),
    ("builtin:tiny-albert", "tiny-albert"), ("transject-layer:builtin", "transject-layer"),
    ("layers:hf:org/m", "layers"), ("builtin:lstm-lm", "lstm"), ("builtin:transject", "transject"),
])
def test_families_match_on_the_parsed_scheme(text, family):
    assert family_for(text).name == family


def test_an_unknown_scheme_names_no_family():
    assert family_for("s3://bucket/model") is None  # once taken for a local directory 's3:/bucket/model'
    assert family_for("transject-layers:x") is None


def test_an_input_source_with_an_unknown_scheme_is_refused_by_name():
    with pytest.raises(InputError, match="unknown scheme 'ftp:'"):
        check_source("ftp:example.org/corpus.txt")
    with pytest.raises(InputError, match="builtin"):
        check_source("builtin:nope")


def test_spec_fields_hold_parsed_sources():
    from runner.studies.depth.spec import InputSpec, ModelSpec

    m = ModelSpec(name="a", source="layers:hf:org/m")
    assert isinstance(m.source, Source) and m.source.scheme == "layers"
    assert isinstance(InputSpec().source, Source) and InputSpec().source.on_hub
