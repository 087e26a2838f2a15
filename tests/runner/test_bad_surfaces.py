"""Bad input on the newer surfaces (the Python API, store URLs, history, --log-to) is refused as the
spec file's mistakes are: one line naming what is wrong, a documented exit code or a typed error,
never a traceback, a silent acceptance or a folder named after a URL. In process."""

from __future__ import annotations

import pytest

from runner import api
from runner.core.errors import RunnerError

SPEC = """
[experiment]
name = "maps"
{store}
[[model]]
name = "tanh"
source = "map:tanh"
[input]
samples = 2
[dynamics]
steps = 10
[[measure]]
kind = "lyapunov"
k = 1e-3
"""


@pytest.fixture
def spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "maps.toml"
    path.write_text(SPEC.format(store=""))
    return path


API_CASES = [
    ("load_spec overrides None", lambda s: api.load_spec(s, None), "runner.api.load_spec: overrides: Input should be an instance of Sequence"),
    ("load_spec override not a string", lambda s: api.load_spec(s, [5]), "runner.api.load_spec: overrides[0]: Input should be a valid string"),
    ("load_spec overrides one string", lambda s: api.load_spec(s, "dynamics.steps=5"), "'str' instances are not allowed as a Sequence"),
    ("load_spec spec a number", lambda s: api.load_spec(3), "runner.api.load_spec: spec:"),
    ("plan spec None", lambda s: api.plan(None), "runner.api.plan: spec:"),
    ("apply replace a string", lambda s: api.apply(s, replace="no"), "runner.api.apply: replace: Input should be a valid boolean (got 'no')"),
    ("apply shards a string", lambda s: api.apply(s, shards="2"), "runner.api.apply: shards: Input should be a valid integer"),
    ("apply quiet an int", lambda s: api.apply(s, quiet=1), "runner.api.apply: quiet: Input should be a valid boolean"),
    ("open a number", lambda s: api.open(5), "runner.api.open: store: Input should be a valid string"),
    ("open history a string", lambda s: api.open("x.zarr", history="yes"), "runner.api.open: history:"),
    ("open nothing there", lambda s: api.open(s.parent / "none.zarr"), "no store here"),
    ("on_common_steps a path", lambda s: api.on_common_steps(s), "ds: an xarray.Dataset"),
    ("on_common_steps None", lambda s: api.on_common_steps(None), "ds: an xarray.Dataset (runner.api.open(store)), not NoneType"),
    ("on_common_steps dim empty", lambda s: api.on_common_steps(__import__("xarray").Dataset(), ""), "dim: a dimension name"),
]


@pytest.mark.parametrize("case, call, message", API_CASES, ids=[c[0] for c in API_CASES])
def test_the_api_refuses_wrong_arguments_with_a_typed_error(case, call, message, spec):
    with pytest.raises(RunnerError) as err:
        call(spec)
    assert message in str(err.value)


def test_the_api_refuses_an_arrays_folder_and_a_sweeps_tree(spec, tmp_path):
    import xarray as xr

    api.apply(spec)
    with pytest.raises(api.NotAStore, match="an array of a store, not a store; open the store that holds it"):
        api.open(tmp_path / "store/maps.zarr/lyapunov")
    with pytest.raises(api.ApiArgumentError, match="a sweep's .* DataTree"):
        api.on_common_steps(xr.DataTree())
    assert isinstance(api.open(tmp_path / "store/maps.zarr"), xr.Dataset)  # what is right still works
    assert api.load_spec(spec, ("dynamics.steps=5",)).overrides  # a tuple of overrides is a sequence


CLI_CASES = [
    ("history of no store", ["history", "nosuch.zarr"], 66, "nosuch.zarr: no such store"),
    ("history of a folder", ["history", "folder"], 66, "folder: no such store"),
    ("history --json of no store", ["history", "nosuch.zarr", "--json"], 66, "no such store"),
    ("history --remove ''", ["history", "nosuch.zarr", "--remove", ""], 2, "--remove needs a version's name"),
    ("apply --log-to ''", ["apply", "maps.toml", "--log-to", ""], 2, "--log-to needs a tracker: mlflow, or mlflow:URI"),
]


@pytest.mark.parametrize("case, args, code, message", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_the_cli_refuses_bad_history_and_tracker_arguments(case, args, code, message, in_process, tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    got, out, err = in_process(*args)
    assert got == code and message in err and err.count("\n") == 1, (got, out, err)
    assert not (tmp_path / "store").exists()  # nothing applied


STORES = [
    ("s3 without //", 's3:/bucket/x.zarr', "'s3:/bucket/x.zarr' looks like a URL without '//' after 's3:'"),
    ("file without //", 'file:x.zarr', "looks like a URL without '//' after 'file:'"),
    ("file on another host", 'file://elsewhere/x.zarr', "a file:// URL names a path on this machine"),
]


@pytest.mark.parametrize("case, store, message", STORES, ids=[c[0] for c in STORES])
def test_a_store_url_never_becomes_a_local_folder_of_its_name(case, store, message, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=f'store = "{store}"'))
    code, out, err = in_process("apply", "maps.toml", "-q")
    assert code == 65 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["maps.toml"]


def test_a_file_url_store_is_its_local_path(in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=f'store = "file://{tmp_path}/there.zarr"'))
    code, out, err = in_process("apply", "maps.toml", "-q")
    assert code == 0, err
    assert (tmp_path / "there.zarr" / "zarr.json").exists() and not (tmp_path / "file:").exists()


def test_a_store_name_longer_than_file_systems_allow_is_refused_before_anything(in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=f'store = "store/{"b" * 250}.zarr"'))
    code, out, err = in_process("apply", "maps.toml", "-q")
    assert code == 65 and "longer than file systems allow (255 bytes, with .history)" in err, err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("command", ["show", "verify", "status", "monitor", "history"])
def test_a_part_of_a_store_is_not_taken_for_one(command, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    assert in_process("apply", "maps.toml", "-q")[0] == 0
    code, _, err = in_process(command, "store/maps.zarr/lyapunov")
    assert code == 66 and "an array of a store, not a store; give the store that holds it" in err, err
    code, _, err = in_process(command, "store/maps.runner")
    assert code == 66 and "the runner's folder beside the store store/maps.zarr; give the store" in err, err


OVERRIDES = [
    ("a table only the override makes", "nosuchtable.x=1", "maps.toml: --set nosuchtable.x=1: [nosuchtable]: unknown table"),
    ("a misspelt table", "dynamcs.steps=1", "maps.toml: --set dynamcs.steps=1: [dynamcs]: unknown table (did you mean 'dynamics'?)"),
    ("an index on a table", "dynamics[0].steps=1", "--set dynamics[0].steps=1: [dynamics] is a table, not an array of tables; "
                                                   "write --set dynamics.steps=1"),
]


@pytest.mark.parametrize("case, override, message", OVERRIDES, ids=[c[0] for c in OVERRIDES])
def test_an_override_is_blamed_not_a_line_of_the_file(case, override, message, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    code, out, err = in_process("plan", "maps.toml", "--no-estimate", "--set", override)
    assert code in (2, 65) and message in err, err
    assert "maps.toml:1:" not in err


BUCKETS = [
    ("upper case and underscore", "s3://Bad_Bucket/x.zarr", "'Bad_Bucket' is not a valid S3 bucket name"),
    ("too short", "s3://ab/x.zarr", "'ab' is not a valid S3 bucket name"),
    ("two dots", "s3://my..bucket/x.zarr", "'my..bucket' is not a valid S3 bucket name"),
    ("an IP address", "s3://192.168.1.1/x.zarr", "'192.168.1.1' is not a valid S3 bucket name"),
    ("a .. folder", "s3://my-bucket/runs/../x.zarr", "'.' and '..' are not folders on object storage"),
    ("no key", "s3://my-bucket", "name a store inside the bucket"),
    ("another scheme", "gs://my-bucket/x.zarr", "gs:// is not supported"),
]


@pytest.mark.parametrize("case, store, message", BUCKETS, ids=[c[0] for c in BUCKETS])
def test_a_malformed_bucket_or_key_is_named_before_any_request(case, store, message, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=f'store = "{store}"'))
    code, out, err = in_process("apply", "maps.toml", "-q")
    assert code == 66 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["maps.toml"]


def test_status_says_n_a_for_tasks_that_do_not_apply(in_process, tmp_path):
    """token_deviation needs several tokens per sample: on a map it is not applicable, and status
    says so, as plan and the monitor do, instead of counting it done."""
    import json

    (tmp_path / "maps.toml").write_text(SPEC.format(store="") + '\n[[measure]]\nkind = "token_deviation"\n')
    assert in_process("apply", "maps.toml", "-q")[0] == 0
    code, out, err = in_process("status", "store/maps.zarr", "--json")
    states = {t["measure"]: t["state"] for t in json.loads(out)["tasks"]}
    assert states == {"lyapunov": "done", "token_deviation": "n/a"} and json.loads(out)["state"] == "done"
    code, out, err = in_process("status", "store/maps.zarr")
    assert "1/1 tasks done, 1 not applicable" in out


# (args after the command, exit code, the line's text): every --set, flag and target mistake in
# one line naming it, before anything runs
FLAGS = [
    (["plan", "maps.toml", "--set", "=3"], 2, "--set =3: expected KEY=VALUE, e.g. --set experiment.seed=3"),
    (["plan", "maps.toml", "--set", "a"], 2, "--set a: expected KEY=VALUE"),
    (["plan", "maps.toml", "--set", "dynamics.steps="], 2, "--set dynamics.steps=: no value after '='"),
    (["plan", "maps.toml", "--set", "dynamics.steps=[1,"], 2, "--set dynamics.steps=[1,: '[1,' is not a TOML value"),
    (["plan", "maps.toml", "--set", "dynamics.steps=-5"], 65,
     "maps.toml: --set dynamics.steps=-5: [dynamics] steps: Input should be greater than or equal to 1"),
    (["plan", "maps.toml", "--set", "dynamics.steps=1e100"], 65, "--set dynamics.steps=1e100: [dynamics] steps: Input "
                                                                 "should be a valid integer"),
    (["plan", "maps.toml", "--set", 'model[9].name="x"'], 2, "model[9]: the spec has 1 such entry (indices from 0)"),
    (["plan", "maps.toml", "--set", 'model[-1].name="x"'], 2, "'model[-1]' is not a key"),
    (["plan", "maps.toml", "--set", 'model.name="x"'], 2, "--set model.name=\"x\": model is an array; give an index"),
    (["plan", "maps.toml", "--set", 'experiment.seed="three"'], 65, "[experiment] seed: Input should be a valid integer"),
    (["plan", "maps.toml", "--set", 'measure[0].kind="nope"'], 65, "kind: unknown kind 'nope'; known: attention"),
    (["plan", "maps.toml", "--set", "dynamics.steps.x=1"], 2, "--set dynamics.steps.x=1: dynamics.steps is a value, "
                                                              "not a table"),
    (["apply", "maps.toml", "--threads", "0"], 2, "--threads: give a number >= 1, not 0"),
    (["apply", "maps.toml", "--threads", "-2"], 2, "--threads: give a number >= 1, not -2"),
    (["apply", "maps.toml", "--executor", "nope"], 2, "--executor: unknown executor 'nope'; known: local, ray"),
    (["apply", "maps.toml", "--shards", "0"], 2, "--shards: give a number >= 1"),
    (["apply", "maps.toml", "--address", "127.0.0.1:1"], 2, "--address names a Ray cluster: use it with --executor ray"),
    (["apply", "maps.toml", "--log-to", "wandb"], 2, "--log-to wandb: unknown tracker 'wandb'; known: mlflow"),
    (["apply", "maps.toml", "--log-to", "mlflow:"], 2, "--log-to mlflow:: no URI after ':'"),
    (["history", "maps.zarr", "--remove", "nosuchversion"], 66, "maps.zarr: no such store"),
    (["show", "s3://Bad_Bucket/x.zarr"], 66, "'Bad_Bucket' is not a valid S3 bucket name"),
    (["status", "gs://b/x.zarr"], 66, "gs:// is not supported"),
    (["verify", "s3://my-bucket/../x.zarr"], 66, "'.' and '..' are not folders on object storage"),
]


@pytest.mark.parametrize("args, code, message", FLAGS, ids=[" ".join(a[:1] + a[2:]) for a, _, _ in FLAGS])
def test_a_bad_flag_or_override_is_one_line_before_anything_runs(args, code, message, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    got, out, err = in_process(*args)
    assert got == code and message in err and err.count("\n") == 1, (got, out, err)
    assert "Traceback" not in err and not (tmp_path / "store").exists()


def test_plan_detailed_exitcode_counts_a_damaged_chunk_as_work_to_do(in_process, tmp_path):
    """A chunk whose bytes changed (its crc32c fails) is what apply would repair: exit 2, not 0."""
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    assert in_process("apply", "maps.toml", "-q")[0] == 0
    assert in_process("plan", "maps.toml", "--no-estimate", "--detailed-exitcode")[0] == 0
    chunk = max((p for p in (tmp_path / "store/maps.zarr/lyapunov").rglob("*") if p.is_file() and p.name != "zarr.json"),
                key=lambda p: p.stat().st_size)
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit
    chunk.write_bytes(bytes(data))
    assert in_process("plan", "maps.toml", "--no-estimate", "--detailed-exitcode")[0] == 2
    assert in_process("apply", "maps.toml", "-q")[0] == 0  # the repair
    assert in_process("plan", "maps.toml", "--no-estimate", "--detailed-exitcode")[0] == 0


def test_a_folder_given_as_the_spec_lists_its_specs(in_process, tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "maps.toml").write_text(SPEC.format(store=""))
    code, out, err = in_process("plan", "specs")
    assert code == 66 and "specs: a folder, not a spec file; give one of its specs (specs/maps.toml)" in err, err
