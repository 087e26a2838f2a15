"""Bad input on the newer surfaces (the Python API, store locations, overrides, flags, history,
--log-to) is refused as the spec file's mistakes are: one line naming what is wrong, a documented
exit code or a typed error, never a traceback, a silent acceptance or a folder named after a URL.
In process; the plugins' corpus is tests/runner/plugin/test_plugin_failures.py."""

from __future__ import annotations

import re
from pathlib import Path

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


@pytest.fixture(autouse=True)
def no_bucket_answers(monkeypatch, tmp_path):
    """Object storage at an endpoint nothing listens on, with no credentials of this machine's: a
    case that should be refused before any request fails fast (and differently) if one is made."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "none")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "none")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


def nothing_written(tmp_path, *kept: str) -> None:
    """Only the files the case itself made are there: no store, no folder named after a URL."""
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["maps.toml", *kept]), left


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
    ("on_common_steps dim a number", lambda s: api.on_common_steps(__import__("xarray").Dataset(), 3),
     "runner.api.on_common_steps: dim: a dimension name, not 3"),
    # a spec given as a dict: what TOML cannot hold is named by its place, never tomli_w's TypeError
    ("dict spec with None", lambda s: api.load_spec(_dict(experiment={"name": "maps", "store": None})),
     "runner.api.load_spec: spec['experiment']['store']: None is not a TOML value (strings, numbers, booleans, dates, "
     "lists and tables) (leave the key out for its default)"),
    ("dict spec with a set", lambda s: api.plan(_dict(experiment={"name": "maps", "seed": {1}})),
     "runner.api.load_spec: spec['experiment']['seed']: {1} is not a TOML value"),
    ("dict spec with a number as a key", lambda s: api.plan({**_dict(), 3: {}}),
     "runner.api.load_spec: spec: the key 3 is not a string"),
    ("dict spec with an object in a list", lambda s: api.plan(_dict(model=[{"name": "tanh", "source": object()}])),
     "runner.api.load_spec: spec['model'][0]['source']: <object object"),
    ("dict spec with a bad store", lambda s: api.plan(_dict(experiment={"name": "maps", "store": "gs://b/x.zarr"})),
     "<dict>: [experiment] store: gs://b/x.zarr: the runner writes stores on local disks and on s3:// only"),
    ("dict spec empty", lambda s: api.plan({}), "<dict>: (top level): which study is this?"),
    # apply's options: refused as the CLI's flags are, before the spec is read
    ("apply threads 0", lambda s: api.apply(s, threads=0), "runner.api.apply: threads: give a number from 1 to 4096, not 0"),
    ("apply threads too many", lambda s: api.apply(s, threads=100_000), "threads: give a number from 1 to 4096, not 100000"),
    ("apply shards 0", lambda s: api.apply(s, shards=0), "runner.api.apply: shards: give a number >= 1, not 0"),
    ("apply device unknown", lambda s: api.apply(s, device="gpu7"), "runner.api.apply: device: unknown device 'gpu7'"),
    ("apply device empty", lambda s: api.apply(s, device=""), "runner.api.apply: device:"),
    ("apply executor unknown", lambda s: api.apply(s, executor="nope"),
     "runner.api.apply: executor: unknown executor 'nope'; known: local, ray"),
    ("apply address empty", lambda s: api.apply(s, executor="ray", address=" "),
     "runner.api.apply: address needs a Ray cluster's address"),
    ("apply address without ray", lambda s: api.apply(s, address="127.0.0.1:1"),
     "runner.api.apply: address names a Ray cluster: use it with executor='ray'"),
    ("apply a Plan with overrides", lambda s: api.apply(api.plan(s), ["dynamics.steps=3"]),
     "runner.api.apply: overrides: a Plan is resolved already"),
    ("apply an unknown keyword", lambda s: api.apply(s, thread=2), "runner.api.apply: thread: Unexpected keyword argument"),
    ("apply a positional option", lambda s: api.apply(s, [], "local"), "runner.api.apply: executor: Unexpected positional"),
    ("load_spec a bytes path", lambda s: api.load_spec(b"maps.toml"), "runner.api.load_spec: spec: Input should be"),
    ("load_spec no such file", lambda s: api.load_spec("nope.toml"), "nope.toml: no such spec file (did you mean 'maps.toml'?)"),
    ("load_spec a folder", lambda s: api.load_spec("."), ".: a folder, not a spec file; give one of its specs (maps.toml)"),
    # overrides: the CLI's --set messages
    ("override without '='", lambda s: api.load_spec(s, ["dynamics.steps"]), "--set dynamics.steps: expected KEY=VALUE"),
    ("override set twice", lambda s: api.load_spec(s, ["experiment.seed=3", "experiment.seed=4"]),
     "--set experiment.seed=4: experiment.seed is set already by --set experiment.seed=3; give each key once"),
    ("override of an unknown table", lambda s: api.plan(s, ["nosuch.x=1"]), "maps.toml: --set nosuch.x=1: [nosuch]: unknown table"),
    ("override of a store", lambda s: api.plan(s, ["experiment.store=s3://Bad_Bucket/x.zarr"]),
     "maps.toml: --set experiment.store=s3://Bad_Bucket/x.zarr: [experiment] store: s3://Bad_Bucket/x.zarr: 'Bad_Bucket' "
     "is not a valid S3 bucket name"),
    # open: every store location parsed before anything is read
    ("open gs", lambda s: api.open("gs://bucket/x.zarr"), "gs://bucket/x.zarr: the runner writes stores on local disks and "
                                                         "on s3:// only"),
    ("open a bad bucket", lambda s: api.open("s3://Bad_Bucket/x.zarr"), "'Bad_Bucket' is not a valid S3 bucket name"),
    ("open a bucket only", lambda s: api.open("s3://my-bucket"), "name a store inside the bucket, such as s3://my-bucket/NAME.zarr"),
    ("open ''", lambda s: api.open(""), "'' names no store; give a path such as 'store/NAME.zarr'"),
    ("open ~", lambda s: api.open("~/x.zarr"), "'~/x.zarr': '~' is not expanded here"),
    ("open file://", lambda s: api.open("file://"), "'file://' names no path; write file:///PATH/NAME.zarr"),
    ("open a NUL byte", lambda s: api.open("a\0b.zarr"), "holds a NUL byte"),
    ("open a bucket nothing answers", lambda s: api.open("s3://my-bucket/x.zarr"), "s3://my-bucket/x.zarr: cannot reach the "
                                                                                  "bucket 'my-bucket'"),
    ("open a spec file", lambda s: api.open(s), "maps.toml: no store here (run `runner apply` on its spec first)"),
    ("open corrupt metadata", lambda s: api.open(_made(s, "c.zarr", "zarr.json", "{not json")),
     "c.zarr: its metadata c.zarr/zarr.json is corrupt (not JSON), so it cannot be opened"),
    ("open a variable's corrupt metadata", lambda s: api.open(_damaged(s, "lyapunov/zarr.json")),
     "made.zarr is damaged: the metadata (zarr.json) of lyapunov is corrupt; they belong to 1 finished task(s)"),
    ("open a variable that is gone", lambda s: api.open(_damaged(s, "lyapunov")),
     "made.zarr is damaged: 1 chunk(s) of lyapunov are missing, truncated, corrupt"),
    ("open a kept version that is gone", lambda s: api.open(_damaged(s, "history"), history=True),
     "is not a zarr store (no zarr.json); `runner history made.zarr` lists the versions"),
    ("open a zarr v2 store", lambda s: api.open(_made(s, "v2.zarr", ".zgroup", '{"zarr_format": 2}')),
     "v2.zarr: no store here (a zarr format 2 store; this runner reads its own stores, format 3)"),
]


def _dict(**tables) -> dict:
    """The maps spec as a dict, with ``tables`` replaced."""
    from runner.core import toml

    return {**toml.loads(SPEC.format(store="")), **tables}


def _damaged(spec, part: str) -> str:
    """A store applied at made.zarr with ``part`` damaged: a metadata file overwritten, or the
    store of the version ``apply --replace`` kept deleted (``history``)."""
    import shutil

    api.apply(spec, ['experiment.store="made.zarr"'])
    if part == "history":
        api.apply(spec, ['experiment.store="made.zarr"', "dynamics.steps=12"], replace=True)
        (version,) = (spec.parent / "made.history").iterdir()
        shutil.rmtree(version / "made.zarr")
    elif not part.endswith(".json"):  # a variable's folder
        shutil.rmtree(spec.parent / "made.zarr" / part)
    else:
        (spec.parent / "made.zarr" / part).write_text("{broken")
    return "made.zarr"


def _made(spec, folder: str, name: str, text: str):
    (spec.parent / folder).mkdir()
    (spec.parent / folder / name).write_text(text)
    return folder


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, call, message", API_CASES, ids=[c[0] for c in API_CASES])
def test_the_api_refuses_wrong_arguments_with_a_typed_error(case, call, message, spec):
    with pytest.raises(RunnerError) as err:
        call(spec)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert not (spec.parent / "store").exists()  # nothing applied


# the same input through the API and the CLI: the same message (the CLI prints it after "error: ")
SAME_AS_CLI = [
    ("unknown table", lambda s: api.plan("maps.toml", ["nosuch.x=1"]), ["plan", "maps.toml", "--set", "nosuch.x=1"]),
    ("set twice", lambda s: api.plan("maps.toml", ["experiment.seed=3", "experiment.seed=4"]),
     ["plan", "maps.toml", "--set", "experiment.seed=3", "--set", "experiment.seed=4"]),
    ("bad value", lambda s: api.plan("maps.toml", ["dynamics.steps=-5"]), ["plan", "maps.toml", "--set", "dynamics.steps=-5"]),
    ("no such spec", lambda s: api.plan("nope.toml"), ["plan", "nope.toml"]),
    ("bad store", lambda s: api.open("s3://ab/x.zarr"), ["show", "s3://ab/x.zarr"]),
    ("an array's folder", lambda s: api.open(_made(s, "a.zarr", "zarr.json", '{"node_type": "array"}')),
     ["status", "a.zarr"]),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, call, args", SAME_AS_CLI, ids=[c[0] for c in SAME_AS_CLI])
def test_the_api_says_what_the_cli_says(case, call, args, spec, in_process):
    with pytest.raises(RunnerError) as err:
        call(spec)
    code, out, cli = in_process(*args)
    assert code == err.value.exit_code
    said = str(err.value)
    if "store that holds it" in said:  # the API opens, the CLI's commands are given a store
        said = said.split(", not a store")[0]
    assert said in cli, (said, cli)


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
    ("figures --out ''", ["figures", "nosuch.zarr", "--out", ""], 2, "--out needs a folder for the figures"),
    ("apply --address ''", ["apply", "maps.toml", "--executor", "ray", "--address", ""], 2,
     "--address needs a Ray cluster's address (auto, ray://HOST:10001)"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, args, code, message", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_the_cli_refuses_bad_history_and_tracker_arguments(case, args, code, message, in_process, tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    got, out, err = in_process(*args)
    assert got == code and message in err and err.count("\n") == 1, (got, out, err)
    assert not (tmp_path / "store").exists()  # nothing applied


# [experiment] store = VALUE (TOML): refused at validation, naming the spec's line (exit 65), before
# any request to a bucket (no_bucket_answers would make one fail otherwise) and before anything is
# written: no folder named after a URL
STORES = [
    ("s3 without //", '"s3:/bucket/x.zarr"', "'s3:/bucket/x.zarr' looks like a URL without '//' after 's3:'"),
    ("file without //", '"file:x.zarr"', "looks like a URL without '//' after 'file:'"),
    ("http without //", '"http:/x.zarr"', "'http:/x.zarr' looks like a URL without '//' after 'http:'"),
    ("file on another host", '"file://elsewhere/x.zarr"', "a file:// URL names a path on this machine"),
    ("file relative", '"file://relative"', "'file://relative': a file:// URL names a path on this machine "
                                           "(file:///PATH/NAME.zarr), not on 'relative'"),
    ("file with no path", '"file://"', "'file://' names no path; write file:///PATH/NAME.zarr"),
    ("file of the root", '"file:///"', "'/' names no folder of its own"),
    ("upper case and underscore", '"s3://Bad_Bucket/x.zarr"', "'Bad_Bucket' is not a valid S3 bucket name"),
    ("too short", '"s3://ab/x.zarr"', "'ab' is not a valid S3 bucket name"),
    ("two dots", '"s3://my..bucket/x.zarr"', "'my..bucket' is not a valid S3 bucket name"),
    ("an IP address", '"s3://192.168.1.1/x.zarr"', "'192.168.1.1' is not a valid S3 bucket name"),
    ("a hyphen first", '"s3://-bad/x.zarr"', "'-bad' is not a valid S3 bucket name"),
    ("credentials in the URL", '"s3://user:pw@my-bucket/x.zarr"', "'user:pw@my-bucket' is not a valid S3 bucket name"),
    ("a .. folder", '"s3://my-bucket/runs/../x.zarr"', "'.' and '..' are not folders on object storage"),
    ("a . folder", '"s3://my-bucket/./x.zarr"', "'.' and '..' are not folders on object storage"),
    ("an empty folder", '"s3://my-bucket//x.zarr"', "an empty folder name ('//') in the key; write "
                                                     "s3://my-bucket/x.zarr"),
    ("a query", '"s3://my-bucket/x.zarr?versionId=3"', "a store URL has no query or fragment ('?', '#')"),
    ("a fragment", '"s3://my-bucket/x.zarr#v1"', "a store URL has no query or fragment"),
    ("a NUL byte in the key", '"s3://my-bucket/x\\u0000.zarr"', "holds a NUL byte, which no path or key may hold"),
    ("no key", '"s3://my-bucket"', "name a store inside the bucket"),
    ("no key but a slash", '"s3://my-bucket/"', "s3://my-bucket/: name a store inside the bucket"),
    ("no bucket", '"s3://"', "s3://: no bucket after s3://; write s3://BUCKET/NAME.zarr"),
    ("no bucket, a key", '"s3:///x.zarr"', "s3:///x.zarr: no bucket after s3://"),
    ("gs", '"gs://my-bucket/x.zarr"', "gs:// is not supported"),
    ("http", '"http://example.com/x.zarr"', "http:// is not supported"),
    ("https", '"https://example.com/x.zarr"', "https:// is not supported"),
    ("memory", '"memory://x.zarr"', "memory:// is not supported"),
    ("a scheme of digits first", '"1s3://b/x.zarr"', "'1s3://b/x.zarr' is neither a URL"),
    ("no scheme before ://", '"://x.zarr"', "'://x.zarr' is neither a URL (a scheme such as s3:// or file:// first) "
                                            "nor a local path"),
    ("a home folder", '"~/x.zarr"', "'~/x.zarr': '~' is not expanded here (a shell would expand it); write the "
                                    "whole path, such as "),
    ("a Windows path", "'C:\\x.zarr'", "is a Windows path; on this machine write a POSIX path"),
    ("backslashes", "'store\\x.zarr'", "is a Windows path"),
    ("a NUL byte in a path", '"a\\u0000b.zarr"', "'a\\x00b.zarr' holds a NUL byte"),
    ("blank", '" "', "' ' names no store"),
    ("empty", '""', "[experiment] store: String should have at least 1 character"),
    ("a dot", '"."', "'.' names no folder of its own"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, store, message", STORES, ids=[c[0] for c in STORES])
def test_a_store_url_never_becomes_a_local_folder_of_its_name(case, store, message, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=f"store = {store}"))
    code, out, err = in_process("apply", "maps.toml", "-q")
    assert code == 65 and message in err and err.startswith("error: maps.toml:4: [experiment] store: "), err
    assert err.count("\n") == 1 and "Traceback" not in err
    nothing_written(tmp_path)


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


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["show", "verify", "status", "monitor", "history"])
def test_a_part_of_a_store_is_not_taken_for_one(command, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    assert in_process("apply", "maps.toml", "-q")[0] == 0
    code, _, err = in_process(command, "store/maps.zarr/lyapunov")
    assert code == 66 and "an array of a store, not a store; give the store that holds it" in err, err
    code, _, err = in_process(command, "store/maps.runner")
    assert code == 66 and "the runner's folder beside the store store/maps.zarr; give the store" in err, err


@pytest.mark.timeout(60)
def test_a_size_problem_of_the_file_is_not_blamed_on_an_unrelated_override(in_process, tmp_path):
    text = SPEC.format(store="").replace("samples = 2", "samples = 10000000")
    (tmp_path / "maps.toml").write_text(text.replace("steps = 10", "steps = 10000000"))
    code, out, err = in_process("plan", "maps.toml", "--no-estimate", "--set", 'model[0].name="other"')
    assert code == 65 and re.search(r"^error: maps\.toml:\d+: \[(dynamics|input)\] (steps|samples): the store would "
                                    r"need ", err) and "--set" not in err, err


# (case, a folder beside where a store would be, the command): a part of a store, even before the
# store exists, is named as what it is, not "no such store" nor "not created yet"
PARTS = [(f"{command} {folder}", folder, command, message)
         for folder, message in [("store/maps.runner", "store/maps.runner: the runner's folder beside the store "
                                                       "store/maps.zarr; give the store"),
                                  ("store/maps.history", "store/maps.history: the earlier versions of the store "
                                                         "store/maps.zarr; give the store (`runner history "
                                                         "store/maps.zarr` lists them)")]
         for command in ("show", "verify", "status", "figures")]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, folder, command, message", PARTS, ids=[c[0] for c in PARTS])
def test_a_part_of_a_store_is_named_even_before_the_store(case, folder, command, message, in_process, tmp_path):
    (tmp_path / folder).mkdir(parents=True)
    code, out, err = in_process(command, folder)
    assert code == 66 and message in err and err.count("\n") == 1, (code, out, err)
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [Path(folder).name]


# (case, the --set, exit code, the line's text): the problem is told at the override, never at a line
# of the file (the file's line is not what the user changed)
OVERRIDES = [
    ("a table only the override makes", "nosuchtable.x=1", 65, "maps.toml: --set nosuchtable.x=1: [nosuchtable]: unknown table"),
    ("a misspelt table", "dynamcs.steps=1", 65, "maps.toml: --set dynamcs.steps=1: [dynamcs]: unknown table (did you mean "
                                                "'dynamics'?)"),
    ("an index on a table", "dynamics[0].steps=1", 2, "--set dynamics[0].steps=1: [dynamics] is a table, not an array of "
                                                      "tables; write --set dynamics.steps=1"),
    ("an index on an entry", "model[0][1].x=1", 2, "--set model[0][1].x=1: [model[0]] is a table, not an array of tables"),
    ("an unknown key", "dynamics.nope=1", 65, "maps.toml: --set dynamics.nope=1: [dynamics] nope: unknown key (known keys: "
                                              "steps,"),
    ("a table made a value", "experiment=3", 65, "maps.toml: --set experiment=3: [experiment]: Input should be a valid "
                                                 "dictionary"),
    ("an array made a value", "model=3", 65, "maps.toml: --set model=3: [model]: Input should be a valid list"),
    ("an entry made a value", "model[0]=3", 65, "maps.toml: --set model[0]=3: [[model]] #1: Input should be a valid "
                                                "dictionary"),
    ("a name with a path", "experiment.name=../x", 65, "maps.toml: --set experiment.name=../x: [experiment] name: String "
                                                       "should match pattern"),
    ("nan for an integer", "experiment.seed=nan", 65, "maps.toml: --set experiment.seed=nan: [experiment] seed: Input "
                                                      "should be a valid integer"),
    ("a measure's bound", "measure[0].k=-1", 65, "maps.toml: --set measure[0].k=-1: [[measure]] #1 (lyapunov) k: Input "
                                                 "should be greater than 0"),
    ("a sweep's axis made up", "sweep.x=[1,2]", 65, "maps.toml: --set sweep.x=[1,2]: [sweep] x: expected a table of lists"),
    ("a store of another scheme", 'experiment.store="gs://b/x.zarr"', 65,
     "maps.toml: --set experiment.store=\"gs://b/x.zarr\": [experiment] store: gs://b/x.zarr: the runner writes stores "
     "on local disks and on s3:// only"),
    ("a store with a bad bucket", "experiment.store=s3://Bad_Bucket/x.zarr", 65,
     "maps.toml: --set experiment.store=s3://Bad_Bucket/x.zarr: [experiment] store: s3://Bad_Bucket/x.zarr: 'Bad_Bucket' "
     "is not a valid S3 bucket name"),
    ("a store in the home folder", "experiment.store=~/x.zarr", 65,
     "maps.toml: --set experiment.store=~/x.zarr: [experiment] store: '~/x.zarr': '~' is not expanded here"),
    ("a store of a URL without //", "experiment.store=s3:/b/x.zarr", 65,
     "--set experiment.store=s3:/b/x.zarr: [experiment] store: 's3:/b/x.zarr' looks like a URL without '//'"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, override, code, message", OVERRIDES, ids=[c[0] for c in OVERRIDES])
def test_an_override_is_blamed_not_a_line_of_the_file(case, override, code, message, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    got, out, err = in_process("plan", "maps.toml", "--no-estimate", "--set", override)
    assert got == code and message in err and err.count("\n") == 1, (got, err)
    assert not re.search(r"maps\.toml:\d+:", err) and "Traceback" not in err
    nothing_written(tmp_path)


# (case, the file's sizes, the --set): a size problem depends on the samples and the steps (and the
# networks, the measures): it is told at the override that made it, not at the file's line the
# check happens to name (the largest variable's axis)
SIZES = [
    ("samples blamed, not the file's steps", {"steps": 10**6}, "input.samples=1000000000",
     "maps.toml: --set input.samples=1000000000: [input] samples: the store would need "),
    ("steps blamed, not the file's samples", {"samples": 10**5}, "dynamics.steps=1000000000",
     "maps.toml: --set dynamics.steps=1000000000: [dynamics] steps: the store would need "),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, sizes, override, message", SIZES, ids=[c[0] for c in SIZES])
def test_a_size_problem_is_blamed_on_the_override_that_made_it(case, sizes, override, message, in_process, tmp_path):
    text = SPEC.format(store="").replace("samples = 2", f"samples = {sizes.get('samples', 2)}")
    (tmp_path / "maps.toml").write_text(text.replace("steps = 10", f"steps = {sizes.get('steps', 10)}"))
    assert in_process("plan", "maps.toml", "--no-estimate")[0] == 0  # the file alone is fine
    code, out, err = in_process("plan", "maps.toml", "--no-estimate", "--set", override)
    assert code == 65 and message in err and err.count("\n") == 1, err
    assert not re.search(r"maps\.toml:\d+:", err)


# (case, command and target): a store location given on the command line is parsed before anything
# is read (exit 66, one line naming it), by every command that reads a store
TARGETS = [
    ("show ''", ["show", ""], "'' names no store; give a path such as 'store/NAME.zarr', or s3://BUCKET/NAME.zarr"),
    ("status ''", ["status", ""], "'' names no store"),
    ("verify ''", ["verify", ""], "'' names no store"),
    ("history ''", ["history", ""], "'' names no store"),
    ("figures ''", ["figures", ""], "'' names no store"),
    ("monitor ''", ["monitor", ""], "'' names no store"),
    ("show file://", ["show", "file://"], "'file://' names no path; write file:///PATH/NAME.zarr"),
    ("show file on another host", ["show", "file://elsewhere/x.zarr"], "a file:// URL names a path on this machine "
                                                                        "(file:///PATH/NAME.zarr), not on 'elsewhere'"),
    ("status ~", ["status", "~/x.zarr"], "'~/x.zarr': '~' is not expanded here"),
    ("verify a Windows path", ["verify", "C:\\runs\\x.zarr"], "is a Windows path; on this machine write a POSIX path"),
    ("history s3 without //", ["history", "s3:/b/x.zarr"], "'s3:/b/x.zarr' looks like a URL without '//' after 's3:'"),
    ("figures file without //", ["figures", "file:x.zarr"], "'file:x.zarr' looks like a URL without '//' after 'file:'"),
    ("monitor memory", ["monitor", "memory://x.zarr"], "memory:// is not supported"),
    ("show http", ["show", "http://example.com/x.zarr"], "http:// is not supported"),
    ("status no bucket", ["status", "s3:///x.zarr"], "s3:///x.zarr: no bucket after s3://"),
    ("verify a bucket only", ["verify", "s3://my-bucket"], "s3://my-bucket: name a store inside the bucket"),
    ("history an empty folder", ["history", "s3://my-bucket//x.zarr"], "an empty folder name ('//') in the key"),
    ("figures a short bucket", ["figures", "s3://ab/x.zarr"], "'ab' is not a valid S3 bucket name"),
    ("monitor a query", ["monitor", "s3://my-bucket/x.zarr?v=1"], "a store URL has no query or fragment"),
    ("show a NUL byte", ["show", "a\0b.zarr"], "holds a NUL byte"),
    ("status no scheme", ["status", "://x.zarr"], "'://x.zarr' is neither a URL"),
    ("show a bucket nothing answers", ["show", "s3://my-bucket/x.zarr"], "s3://my-bucket/x.zarr: cannot reach the bucket "
                                                                         "'my-bucket': nothing answers"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, args, message", TARGETS, ids=[c[0] for c in TARGETS])
def test_a_bad_store_location_on_the_command_line_is_one_line(case, args, message, in_process, tmp_path):
    (tmp_path / "maps.toml").write_text(SPEC.format(store=""))
    code, out, err = in_process(*args)
    assert code == 66 and message in err and err.count("\n") == 1, (code, out, err)
    assert "Traceback" not in err and "usage:" not in err
    nothing_written(tmp_path)


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
    (["plan", "maps.toml", "--set", "experiment.seed=3", "--set", "experiment.seed=4"], 2,
     "--set experiment.seed=4: experiment.seed is set already by --set experiment.seed=3; give each key once"),
    (["plan", "maps.toml", "--set", "dynamics.steps=5", "--set", "dynamics={steps = 6}"], 2,
     "--set dynamics={steps = 6}: replaces the whole of dynamics, which --set dynamics.steps=5 set a key of; give "
     "--set dynamics.steps=5 after it"),
    (["apply", "maps.toml", "--threads", "0"], 2, "--threads: give a number from 1 to 4096, not 0"),
    (["apply", "maps.toml", "--threads", "-2"], 2, "--threads: give a number from 1 to 4096, not -2"),
    (["apply", "maps.toml", "--threads", "100000"], 2, "--threads: give a number from 1 to 4096, not 100000"),
    (["plan", "maps.toml", "--threads", "4097"], 2, "--threads: give a number from 1 to 4096, not 4097"),
    (["apply", "maps.toml", "--executor", "nope"], 2, "--executor: unknown executor 'nope'; known: local, ray"),
    (["apply", "maps.toml", "--executor", ""], 2, "--executor: unknown executor ''"),
    (["apply", "maps.toml", "--shards", "0"], 2, "--shards: give a number >= 1, not 0"),
    (["apply", "maps.toml", "--device", ""], 2, "--device: "),
    (["apply", "maps.toml", "--device", "gpu"], 2, "--device: unknown device 'gpu'"),
    (["apply", "maps.toml", "--address", "127.0.0.1:1"], 2, "--address names a Ray cluster: use it with --executor ray"),
    (["apply", "maps.toml", "--log-to", "wandb"], 2, "--log-to wandb: unknown tracker 'wandb'; known: mlflow"),
    (["apply", "maps.toml", "--log-to", "mlflow:"], 2, "--log-to mlflow:: no URI after ':'"),
    (["apply", "maps.toml", "--log-to", "mlflow:nonsense://x"], 2, "--log-to mlflow:nonsense://x: MLflow stores no runs "
                                                                   "at nonsense: URIs; give a folder, sqlite:///FILE.db"),
    (["apply", "maps.toml", "--log-to", "mlflow:s3://b/runs"], 2, "MLflow stores no runs at s3: URIs"),
    (["apply", "maps.toml", "--log-to", "mlflow:sqlite:m.db"], 2, "--log-to mlflow:sqlite:m.db: a SQLite URI names its "
                                                                  "file after three slashes: sqlite:///FILE.db"),
    (["apply", "maps.toml", "--log-to", "MLflow"], 2, "--log-to MLflow: unknown tracker 'MLflow'; known: mlflow"),
    (["history", "maps.zarr", "--remove", "nosuchversion"], 66, "maps.zarr: no such store"),
    (["show", "s3://Bad_Bucket/x.zarr"], 66, "'Bad_Bucket' is not a valid S3 bucket name"),
    (["status", "gs://b/x.zarr"], 66, "gs:// is not supported"),
    (["verify", "s3://my-bucket/../x.zarr"], 66, "'.' and '..' are not folders on object storage"),
]


@pytest.mark.timeout(60)
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
