"""A corpus of bad command-line flags and paths through the CLI's entry point (issue 22), for every
study: a flag that does not apply to a spec's study is refused (exit 2) naming the flag; a store
inside another store, a symbolic link as the store or its runner folder, a sweep point escaping the
sweep's store are refused before anything is created (65); ``figures`` refuses an ``--out`` it
cannot write (74) and a zarr store this project did not write (66). One ``error:`` line, no
traceback, nothing created or deleted. Unusual but right flags and paths are tested as accepted."""

from __future__ import annotations

import json
import os

import pytest

from runner.cli import main
from runner.core.formats import STORE_FORMAT
from runner.core.layout import with_internal

DEPTH = """
[experiment]
name = "d"

[[model]]
name = "m"
source = "map:tanh"
params = { g = 0.5, n = 8 }

[input]
samples = 4

[dynamics]
steps = 10

[[measure]]
kind = "token_deviation"
"""

TRAINING = """
[experiment]
name = "t"

[corpus]
source = "builtin:tiny-tagged"
min_count = 2
analysis_tokens = 100

[training]
epochs = 1
batch_size = 8
bptt = 10
eval_batch_size = 4
embedding_dim = 8
hidden_dim = 8

[[model]]
name = "lm"

[[measure]]
kind = "sparsity"
"""

TRANSJECT = """
[experiment]
name = "j"
study = "transject"

[data]
source = "listops:"
listops = { train = 16, test = 8, max_depth = 2, max_args = 3, min_length = 2, max_length = 20 }
max_length = 20
analysis_examples = 4

[training]
epochs = 1
batch_size = 8

[[model]]
name = "tj"
d_model = 8
n_layers = 1
n_experts = 2

[[measure]]
kind = "entropy"
"""

SPECS = {"depth": DEPTH, "training": TRAINING, "transject": TRANSJECT}
NAMES = {"depth": "d", "training": "t", "transject": "j"}


def with_store(study: str, store: str) -> str:
    text = SPECS[study]
    return text.replace(f'name = "{NAMES[study]}"', f'name = "{NAMES[study]}"\nstore = "{store}"', 1)


def with_sweep(study: str, key: str, values: str) -> str:
    return SPECS[study] + f"\n[sweep.experiment]\n{key} = {values}\n"


# --------------------------------------------------------------------------- flags

#: (id, study, spec text or None for the study's spec, argv after the spec, exit code, fragment)
FLAGS = []
for _s in SPECS:
    FLAGS += [
        (f"threads-zero-plan-{_s}", _s, None, ["plan", "--threads", "0"], 2, "--threads: give a number from 1 to 4096, not 0"),
        (f"threads-zero-apply-{_s}", _s, None, ["apply", "--threads", "0"], 2, "--threads: give a number from 1 to 4096, not 0"),
        (f"shards-zero-{_s}", _s, None, ["apply", "--shards", "0"], 2, "--shards: give a number >= 1"),
        (f"address-without-ray-{_s}", _s, None, ["apply", "--address", "auto"], 2,
         "--address names a Ray cluster: use it with --executor ray"),
        (f"executor-unknown-{_s}", _s, None, ["apply", "--executor", "slurm"], 2, "--executor: unknown executor 'slurm'"),
        (f"device-unknown-{_s}", _s, None, ["apply", "--device", "gpu"], 2, "--device: unknown device 'gpu'"),
    ]
for _s in ("training", "transject"):
    FLAGS += [
        (f"shards-on-{_s}", _s, None, ["apply", "--shards", "2"], 2,
         f"--shards applies only to studies that split their passes into sample shards (depth); this spec is a {_s} spec"),
        (f"shards-on-{_s}-sweep", _s, with_sweep(_s, "description", '["a", "b"]'), ["apply", "--shards", "4"], 2,
         f"this spec is a {_s} spec"),
        (f"shards-with-monitor-on-{_s}", _s, None, ["apply", "--shards", "2", "--monitor"], 2, "--shards applies only"),
    ]
FLAGS += [
    ("shards-with-monitor-on-depth", "depth", None, ["apply", "--shards", "2", "--monitor"], 2,
     "--monitor runs the apply here"),
]

#: Flags that apply: each study's spec, already applied once, with the flag: planned, or nothing to do.
ACCEPTED_FLAGS = []
for _s in SPECS:
    ACCEPTED_FLAGS += [(f"{_s}-plan{''.join(a)}", _s, ["plan", *a]) for a in
                       (["--json"], ["--no-estimate"], ["--threads", "1"])]
    ACCEPTED_FLAGS += [(f"{_s}-apply{''.join(a)}", _s, ["apply", "-q", *a]) for a in
                       (["--threads", "1"], ["--device", "cpu"], ["--replace"], ["--executor", "local"], ["--shards", "1"])]
ACCEPTED_FLAGS += [("depth-apply--shards2", "depth", ["apply", "-q", "--shards", "2"]),
                   ("depth-plan--recalibrate", "depth", ["plan", "--recalibrate"]),
                   ("training-plan--calibrate", "training", ["plan", "--calibrate"]),
                   ("transject-plan--calibrate", "transject", ["plan", "--calibrate"]),
                   ("transject-plan--recalibrate", "transject", ["plan", "--recalibrate"])]


# --------------------------------------------------------------------------- paths

#: (id, store path, fragment): refused for every study, by plan and apply (65).
STORES = [
    ("inside-a-runner-store", "ours.zarr/inner.zarr", "is inside the zarr store"),
    ("inside-a-runner-store-deeper", "ours.zarr/a/b.zarr", "is inside the zarr store"),
    ("inside-an-array-of-a-store", "ours.zarr/x/inner", "/ours.zarr/x; a store is never made inside another one"),
    ("inside-a-foreign-zarr", "foreign.zarr/mine.zarr", "/foreign.zarr; a store is never made inside another one"),
    ("inside-a-sweep-store", "sweep.zarr/extra", "/sweep.zarr; a store is never made inside another one"),
    ("symlink-to-empty-folder", "linked-empty.zarr", "linked-empty.zarr is a symbolic link (to real-empty)"),
    ("symlink-to-a-store", "linked-store.zarr", "linked-store.zarr is a symbolic link (to ours.zarr)"),
    ("symlink-dangling", "dangling.zarr", "dangling.zarr is a symbolic link (to nowhere)"),
    ("symlink-to-a-file", "linked-file.zarr", "linked-file.zarr is a symbolic link (to notes.txt)"),
    ("runner-folder-symlink", "runlink.zarr", "runlink.runner is a symbolic link (to elsewhere)"),
    ("runner-folder-holds-symlink", "recordlink.zarr", "recordlink.runner holds symbolic links (records)"),
]

#: (id, study, spec text, fragment): a sweep whose points would leave the sweep's store (65).
SWEEPS = []
for _s in SPECS:
    SWEEPS += [
        (f"sweep-store-axis-{_s}", _s, with_sweep(_s, "store", '["./escaped", "b"]'),
         "[sweep] experiment.store: cannot be swept: each point's store is a folder of the sweep's store"),
        (f"sweep-value-escaping-{_s}", _s, with_sweep(_s, "description", '["a/../../../escaped", "b"]'),
         "[sweep.experiment] description: the value 'a/../../../escaped' would put its point's store at"),
        (f"sweep-value-with-slash-{_s}", _s, with_sweep(_s, "description", '["x/y"]'), "use values without '/'"),
    ]

#: Unusual but right store paths: planned.
ACCEPTED_STORES = [
    ("under-a-symlinked-folder", "linked-folder/x.zarr"),  # only the store and runner folder must not be links
    ("absolute-outside", "{outside}/x.zarr"),
    ("empty-folder", "real-empty"),
    ("dotted-name", "a.b.c.zarr"),
]


@pytest.fixture
def workdir(tmp_path_factory, tmp_path, monkeypatch):
    """A working directory with stores, links and files for the path cases."""
    import zarr

    ours = zarr.open_group(tmp_path / "ours.zarr", mode="w", zarr_format=3)
    ours.attrs.update({**with_internal({}, store_id="0" * 32), "store_format": STORE_FORMAT})
    ours.create_array("x", shape=(2,), dtype="f8", dimension_names=["n"])
    (tmp_path / "ours.runner" / "records").mkdir(parents=True)
    zarr.open_group(tmp_path / "foreign.zarr", mode="w", zarr_format=3)
    sweep = zarr.open_group(tmp_path / "sweep.zarr", mode="w", zarr_format=3)
    sweep.attrs.update(with_internal({}, store_id="1" * 32, sweep={"dims": {}, "points": []}))
    (tmp_path / "notes.txt").write_text("k\n")
    (tmp_path / "real-empty").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked-empty.zarr").symlink_to("real-empty")
    (tmp_path / "linked-store.zarr").symlink_to("ours.zarr")
    (tmp_path / "dangling.zarr").symlink_to("nowhere")
    (tmp_path / "linked-file.zarr").symlink_to("notes.txt")
    (tmp_path / "runlink.runner").symlink_to("elsewhere")
    (tmp_path / "recordlink.runner").mkdir()
    (tmp_path / "recordlink.runner" / "records").symlink_to("../elsewhere")
    (tmp_path / "linked-folder").symlink_to("elsewhere")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSIENT_CACHE", str(tmp_path_factory.getbasetemp() / "bad-paths-cache"))
    return tmp_path


def _listing(root):
    return sorted((p.relative_to(root).as_posix(), p.lstat().st_size) for p in root.rglob("*") if p.name != "spec.toml")


def _run(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _refused(code, err, expected, fragment):
    assert code == expected, (code, err)
    assert err.startswith("error: ") and "Traceback" not in err, err
    assert fragment in err, err


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case, study, text, argv, expected, fragment", FLAGS, ids=[c[0] for c in FLAGS])
def test_flag_that_does_not_apply_is_refused(workdir, capsys, case, study, text, argv, expected, fragment):
    spec = workdir / "spec.toml"
    spec.write_text(text or SPECS[study])
    before = _listing(workdir)
    code, _, err = _run(capsys, argv[0], spec, *argv[1:])
    _refused(code, err, expected, fragment)
    assert len(err.strip().splitlines()) == 1, err
    assert _listing(workdir) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["plan", "apply"])
@pytest.mark.parametrize("study", list(SPECS))
@pytest.mark.parametrize("case, store, fragment", STORES, ids=[c[0] for c in STORES])
def test_store_path_that_nests_or_links_is_refused(workdir, capsys, command, study, case, store, fragment):
    spec = workdir / "spec.toml"
    spec.write_text(with_store(study, store))
    before = _listing(workdir)
    code, _, err = _run(capsys, command, spec, *(["-q"] if command == "apply" else []))
    _refused(code, err, 65, fragment)
    assert err.removeprefix("error: ").startswith(f"{spec}:"), err
    assert "never" in err  # says the rule, not only the symptom
    assert _listing(workdir) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["plan", "apply"])
@pytest.mark.parametrize("case, study, text, fragment", SWEEPS, ids=[c[0] for c in SWEEPS])
def test_sweep_point_leaving_the_sweep_store_is_refused(workdir, capsys, command, case, study, text, fragment):
    spec = workdir / "spec.toml"
    spec.write_text(text)
    before = _listing(workdir)
    code, _, err = _run(capsys, command, spec, *(["-q"] if command == "apply" else []))
    _refused(code, err, 65, fragment)
    assert err.removeprefix("error: ").startswith(f"{spec}:"), err
    assert _listing(workdir) == before
    assert not (workdir.parent / "escaped").exists() and not (workdir / "escaped").exists()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("study", list(SPECS))
@pytest.mark.parametrize("case, store", ACCEPTED_STORES, ids=[c[0] for c in ACCEPTED_STORES])
def test_unusual_but_right_store_path_is_planned(workdir, tmp_path_factory, capsys, study, case, store):
    store = store.format(outside=tmp_path_factory.mktemp("outside"))
    spec = workdir / "spec.toml"
    spec.write_text(with_store(study, store))
    code, out, err = _run(capsys, "plan", spec, "--no-estimate")
    assert code == 0, err
    assert "Plan: " in out


@pytest.mark.timeout(30)
@pytest.mark.parametrize("study", list(SPECS))
def test_sweep_value_that_is_one_folder_name_is_planned(workdir, capsys, study):
    spec = workdir / "spec.toml"
    spec.write_text(with_sweep(study, "description", '["..", "a.b"]'))  # folders 'description=..', 'description=a.b'
    code, out, err = _run(capsys, "plan", spec, "--no-estimate")
    assert code == 0, err
    assert "description=.." in out


# --------------------------------------------------------------------------- applied stores


@pytest.fixture(scope="module")
def applied(tmp_path_factory):
    """Each study's spec applied once (seconds in all); the folder holding specs and stores."""
    from _pytest.monkeypatch import MonkeyPatch

    root = tmp_path_factory.mktemp("applied")
    mp = MonkeyPatch()
    mp.chdir(root)
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSIENT_CACHE", str(tmp_path_factory.getbasetemp() / "bad-paths-cache"))
    try:
        for study, text in SPECS.items():
            (root / f"{study}.toml").write_text(text)
            assert main(["apply", "-q", f"{study}.toml"]) == 0, study
    finally:
        mp.undo()
    return root


@pytest.fixture
def in_applied(applied, monkeypatch):
    monkeypatch.chdir(applied)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSIENT_CACHE", str(applied.parent / "bad-paths-cache"))
    return applied


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, study, argv", ACCEPTED_FLAGS, ids=[c[0] for c in ACCEPTED_FLAGS])
def test_flag_that_applies_is_accepted(in_applied, capsys, case, study, argv):
    code, out, err = _run(capsys, argv[0], f"{study}.toml", *argv[1:])
    assert code == 0, (code, out, err)
    if argv[0] == "apply":
        assert "nothing to do" in out
    elif "--json" in argv:
        assert json.loads(out)["study"] == study


#: (id, figures argv after the store, exit code, fragment)
FIGURES = [
    ("out-existing-file", ["--out", "notes.txt"], 74, "--out: notes.txt exists and is not a folder"),
    ("out-under-a-file", ["--out", "notes.txt/figs"], 74, "--out: cannot create the folder notes.txt/figs (Not a directory)"),
    ("out-unwritable", ["--out", "/proc/figs"], 74, "--out: cannot create the folder /proc/figs"),
    ("only-unknown", ["--only", "fig99"], 2, "--only: no figure fig99"),
]

#: (id, what the target is, exit code, fragment): stores figures will not draw.
FOREIGN = [
    ("foreign-zarr", "foreign.zarr", 66, "foreign.zarr is a zarr store this project did not write"),
    ("foreign-zarr-with-dimension-names", "named.zarr", 66, "named.zarr is a zarr store this project did not write"),
    ("corrupt-root-metadata", "corrupt.zarr", 66, "its metadata corrupt.zarr/zarr.json is corrupt (not JSON"),
    ("binary-root-metadata", "binary.zarr", 66, "its metadata binary.zarr/zarr.json is corrupt (not JSON"),
    ("empty-folder", "empty", 66, "empty: no such store"),
    ("missing", "missing.zarr", 66, "missing.zarr: no such store"),
    ("spec-never-applied", "never.toml", 66, "no such store (run `runner apply never.toml`)"),
]


@pytest.fixture
def figures_dir(in_applied):
    """Targets beside the applied stores, made once (figures never writes beside a refused one)."""
    import zarr

    if not (in_applied / "named.zarr").exists():
        (in_applied / "notes.txt").write_text("k\n")
        zarr.open_group("foreign.zarr", mode="w", zarr_format=3).create_array("x", shape=(2,), dtype="f8")
        zarr.open_group("named.zarr", mode="w", zarr_format=3).create_array("x", shape=(2,), dtype="f8",
                                                                            dimension_names=["n"])
        for name, meta in (("corrupt.zarr", b'{"zarr_format": 3, '), ("binary.zarr", b"\xff\xfe\x00\x01")):
            (in_applied / name).mkdir()
            (in_applied / name / "zarr.json").write_bytes(meta)
        (in_applied / "empty").mkdir()
        (in_applied / "never.toml").write_text(DEPTH.replace('name = "d"', 'name = "never"'))
    return in_applied


@pytest.mark.timeout(30)
@pytest.mark.parametrize("study", list(SPECS))
@pytest.mark.parametrize("case, argv, expected, fragment", FIGURES, ids=[c[0] for c in FIGURES])
def test_figures_refuses_an_out_it_cannot_write(figures_dir, capsys, study, case, argv, expected, fragment):
    before = _listing(figures_dir)
    code, _, err = _run(capsys, "figures", f"store/{NAMES[study]}.zarr", *argv)
    _refused(code, err, expected, fragment)
    assert len(err.strip().splitlines()) == 1, err
    assert _listing(figures_dir) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case, target, expected, fragment", FOREIGN, ids=[c[0] for c in FOREIGN])
def test_figures_refuses_a_store_this_project_did_not_write(figures_dir, capsys, case, target, expected, fragment):
    before = _listing(figures_dir)
    code, _, err = _run(capsys, "figures", target)
    _refused(code, err, expected, fragment)
    assert len(err.strip().splitlines()) == 1, err
    assert _listing(figures_dir) == before


@pytest.mark.timeout(60)
def test_figures_writes_into_an_existing_or_new_folder(figures_dir, capsys):
    (figures_dir / "out-existing").mkdir(exist_ok=True)
    for out in ("out-existing", os.path.join("new", "deeper")):
        code, stdout, err = _run(capsys, "figures", "store/d.zarr", "--out", out)
        assert code == 0, err
        assert (figures_dir / out / "figures.json").is_file()


def test_the_corpus_is_large():
    cases = (len(FLAGS) + len(ACCEPTED_FLAGS) + len(STORES) * len(SPECS) + len(SWEEPS)
             + len(ACCEPTED_STORES) * len(SPECS) + len(SPECS) + len(FIGURES) * len(SPECS) + len(FOREIGN) + 1)
    assert cases >= 130


#: A spec path that is there but no file: named for what it is, never "no such spec file (did you mean
#: itself?)" (issue 50).
ODD_SPECS = [
    ("symlink loop", lambda d: (d / "loop.toml").symlink_to(d / "loop.toml"), "a symbolic link in a loop, not a spec file"),
    ("dangling symlink", lambda d: (d / "loop.toml").symlink_to(d / "gone.toml"),
     "a symbolic link to", "which does not exist, not a spec file"),
    ("fifo", lambda d: os.mkfifo(d / "loop.toml"), "a named pipe (FIFO), not a spec file"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", ODD_SPECS, ids=[c[0] for c in ODD_SPECS])
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_spec_path_that_is_no_file_is_named_for_what_it_is(tmp_path, capsys, case, command):
    _, make, *fragments = case
    make(tmp_path)
    code = main([command, str(tmp_path / "loop.toml")])
    err = capsys.readouterr().err
    assert code == 66 and all(f in err for f in fragments) and "did you mean" not in err, err
    assert err.count("\n") == 1 and not (tmp_path / "store").exists()
