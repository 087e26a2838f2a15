"""Every plug-in hook guarded at its boundary (issue 50, item 1), table driven: a data source's readers
(``documents``, ``rows``, ``tagged``, ``labelled``: what they raise or return, also while documents are
read), its registration (``gives``, ``name``, a reader it lacks), and a ``SimpleStudy``'s ``build``,
``trainable`` and ``analysis`` and its ``table``. Each case is one line naming the plug-in's module,
class and hook (exit 66), never a traceback, and nothing is written. In process, through the CLI's
entry point, with the registries restored after each case."""

from __future__ import annotations

import pytest

from tests.runner.plugin.test_plugin_failures import plugins  # noqa: F401  (the fixture)

# --------------------------------------------------------------------------- data sources

SOURCE = """
from runner.data.forms import Documents, Labelled, TaggedSentence
from runner.data.registry import DOCUMENTS, LABELLED, TAGGED, DataSource, InputError, register_data_source

class Odd(DataSource):
    name, scheme, written = "odd", "odd", "'odd:<x>'"
    gives = {gives}
{methods}
register_data_source(Odd())
"""

PROSE = ("the cat sat on the mat . the dog slept by the door . a bird sang in the tree . "
         "a man walked to the town . the market was full of people . ") * 4


def source(body: str, form: str = "documents", gives: str = "frozenset({DOCUMENTS})") -> str:
    method = {"documents": "    def documents(self, source, base, **options):\n",
              "tagged": "    def tagged(self, source, base, **options):\n",
              "labelled": "    def labelled(self, source, base, **options):\n"}[form]
    lines = "\n".join("        " + line for line in body.splitlines())
    return SOURCE.format(gives=gives, methods=method + lines + "\n")


DEPTH = """
[experiment]
name = "odd"
[[model]]
name = "albert"
source = "builtin:tiny-albert"
[input]
source = "odd:x"
samples = 2
tokens = 6
[dynamics]
steps = 3
[[measure]]
kind = "token_deviation"
"""

TRAINING = """
[experiment]
name = "odd"
[corpus]
source = "odd:x"
min_count = 1
drop_rare_sentences = false
analysis_tokens = 20
[training]
epochs = 1
batch_size = 2
bptt = 4
eval_batch_size = 2
embedding_dim = 4
hidden_dim = 4
[[model]]
name = "lm"
kind = "lm"
[[measure]]
kind = "entropy"
"""

TRANSJECT = """
[experiment]
name = "odd"
study = "transject"
[data]
source = "odd:x"
max_length = 12
analysis_examples = 2
[training]
epochs = 1
batch_size = 4
[[model]]
name = "tj"
variant = "transject"
d_model = 8
n_layers = 1
n_experts = 2
[[measure]]
kind = "entropy"
"""

WHO = "plugin_case_hooks.Odd"

#: (case, plug-in module, spec, command, what the one line says)
SOURCE_CASES = [
    ("documents raises", source("raise RuntimeError('the archive is gone')"), DEPTH, "apply",
     f"{WHO}.documents() raised RuntimeError: the archive is gone"),
    ("documents returns None", source("return None"), DEPTH, "apply",
     f"{WHO}.documents() returned None; it returns a runner.data.forms.Documents"),
    ("documents returns a list", source("return ['a text']"), DEPTH, "apply",
     f"{WHO}.documents() returned ['a text']; it returns a runner.data.forms.Documents"),
    ("documents gives numbers", source("return Documents('odd', [('doc', 42)])"), DEPTH, "apply",
     f"{WHO}.documents() gave the text of 'doc' as int; a text is a str"),
    ("documents gives bytes", source("return Documents('odd', [('doc', b'\\xff\\xfe')])"), DEPTH, "apply",
     f"{WHO}.documents() gave the text of 'doc' as bytes; decode it to a str"),
    ("documents gives a bare text", source("return Documents('odd', ['a text'])"), DEPTH, "apply",
     f"{WHO}.documents() gave 'a text'; each item is an (origin, text) pair"),
    ("documents gives an origin that is no string", source("return Documents('odd', [(7, 'a text')])"), DEPTH,
     "apply", f"{WHO}.documents() gave the origin 7; an origin is a string"),
    ("documents raises while read", source(f"def items():\n    yield ('a', {PROSE[:40]!r})\n    raise KeyError('row 2')\n"
                                           "return Documents('odd', items())"), DEPTH, "apply",
     f"{WHO}.documents() raised KeyError: 'row 2'"),
    ("tagged raises", source("raise ValueError('no tags')", "tagged", "frozenset({TAGGED})"), TRAINING, "plan",
     f"{WHO}.tagged() raised ValueError: no tags"),
    ("tagged returns None", source("return None", "tagged", "frozenset({TAGGED})"), TRAINING, "plan",
     f"{WHO}.tagged() returned None; it returns a list of runner.data.forms.TaggedSentence"),
    ("tagged returns tuples", source("return [('the', 'cat')]", "tagged", "frozenset({TAGGED})"), TRAINING, "plan",
     f"{WHO}.tagged() returned ('the', 'cat') among its sentences; each is a TaggedSentence"),
    ("documents gives a triple", source("return Documents('odd', [('doc', 'text', 1)])"), DEPTH, "apply",
     f"{WHO}.documents() gave ('doc', 'text', 1); each item is an (origin, text) pair"),
    ("documents gives None as a text", source("return Documents('odd', [('doc', None)])"), DEPTH, "apply",
     f"{WHO}.documents() gave the text of 'doc' as NoneType; a text is a str"),
    ("documents gives None as an item", source("return Documents('odd', [None])"), DEPTH, "apply",
     f"{WHO}.documents() gave None; each item is an (origin, text) pair"),
    ("documents gives a dict", source("return Documents('odd', [{'text': 'a'}])"), DEPTH, "apply",
     f"{WHO}.documents() gave {{'text': 'a'}}; each item is an (origin, text) pair"),
    ("documents returns a string", source("return 'the cat sat'"), DEPTH, "apply",
     f"{WHO}.documents() returned 'the cat sat'; it returns a runner.data.forms.Documents"),
    ("documents returns a generator", source("return (t for t in ['a'])"), DEPTH, "apply",
     f"{WHO}.documents() returned <generator object"),
    ("documents items that are no iterable", source("return Documents('odd', 42)"), DEPTH, "apply",
     f"{WHO}.documents() raised TypeError: 'int' object is not iterable"),
    ("tagged returns a generator", source("return (s for s in [])", "tagged", "frozenset({TAGGED})"), TRAINING,
     "plan", f"{WHO}.tagged() returned <generator object"),
    ("tagged returns None among sentences", source("return [None]", "tagged", "frozenset({TAGGED})"), TRAINING, "plan",
     f"{WHO}.tagged() returned None among its sentences; each is a TaggedSentence"),
    ("tagged returns strings", source("return ['the cat sat']", "tagged", "frozenset({TAGGED})"), TRAINING, "plan",
     f"{WHO}.tagged() returned 'the cat sat' among its sentences"),
    ("tagged returns a dict", source("return {}", "tagged", "frozenset({TAGGED})"), TRAINING, "plan",
     f"{WHO}.tagged() returned {{}}; it returns a list of runner.data.forms.TaggedSentence"),
    ("tagged raises a memory error", source("raise MemoryError()", "tagged", "frozenset({TAGGED})"), TRAINING, "plan",
     f"{WHO}.tagged() raised MemoryError"),
    ("labelled returns three splits", source("return (Labelled(['a'], [0]),) * 3", "labelled", "frozenset({LABELLED})"),
     TRANSJECT, "apply", f"{WHO}.labelled() returned (Labelled("),
    ("labelled returns a split and None", source("return (Labelled(['a'], [0]), None)", "labelled",
                                                 "frozenset({LABELLED})"), TRANSJECT, "apply",
     "it returns (train, test), two runner.data.forms.Labelled"),
    ("labelled returns None", source("return None", "labelled", "frozenset({LABELLED})"), TRANSJECT, "apply",
     f"{WHO}.labelled() returned None; it returns (train, test)"),
    ("labelled returns a dict", source("return {'train': 1}", "labelled", "frozenset({LABELLED})"), TRANSJECT,
     "apply", f"{WHO}.labelled() returned {{'train': 1}}; it returns (train, test)"),
    ("labelled raises", source("raise OSError('no split')", "labelled", "frozenset({LABELLED})"), TRANSJECT, "apply",
     f"{WHO}.labelled() raised OSError: no split"),
    ("labelled returns one split", source("return Labelled(['a b'], [0])", "labelled", "frozenset({LABELLED})"),
     TRANSJECT, "apply", f"{WHO}.labelled() returned Labelled(texts=['a b'], labels=[0]); it returns (train, test)"),
]

#: registrations refused when the plug-in loads
REGISTRATION_CASES = [
    ("gives None", source("return None", gives="None"), "gives = None; it is a frozenset of the forms it reads"),
    ("gives a list", source("return None", gives="['documents']"), "gives = ['documents']; it is a frozenset"),
    ("gives a form it does not read", source("return None", "documents", "frozenset({DOCUMENTS, TAGGED})"),
     "gives tagged but has no tagged() method of its own"),
    ("no name", source("return None").replace('name, scheme, written = "odd"', 'name, scheme, written = ""'),
     "name = ''; it is a non-empty string"),
    ("not a data source", "from runner.data.registry import register_data_source\nregister_data_source(object())\n",
     "is a object, not a runner.data.registry.DataSource"),
    ("gives a set of numbers", source("return None", gives="frozenset({1, 2})"), "gives = frozenset({1, 2})"),
    ("gives an empty name", source("return None", gives="frozenset({''})"), "gives = frozenset({''})"),
    ("gives a string", source("return None", gives="'documents'"), "gives = 'documents'; it is a frozenset"),
    ("no scheme", source("return None").replace('"odd", "odd", "\'odd:<x>\'"', '"odd", None, "\'odd:<x>\'"'),
     "scheme = None; it is a non-empty string"),
    ("no written form", source("return None").replace('"odd", "odd", "\'odd:<x>\'"', '"odd", "odd", 3'),
     "written = 3; it is a non-empty string"),
    ("a blank name", source("return None").replace('name, scheme, written = "odd"', 'name, scheme, written = "  "'),
     "name = '  '; it is a non-empty string"),
    ("gives rows without rows()", source("return None", gives="frozenset({DOCUMENTS, 'rows'})"),
     "gives rows but has no rows() method of its own"),
    ("gives labelled without labelled()", source("return None", gives="frozenset({DOCUMENTS, LABELLED})"),
     "gives labelled but has no labelled() method of its own"),
]


def _one_line(code: int, out: str, err: str, message: str) -> None:
    assert code == 66, (code, out, err)
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case, module, spec, command, message", SOURCE_CASES, ids=[c[0] for c in SOURCE_CASES])
def test_a_data_source_reader_outside_its_contract_is_one_line(case, module, spec, command, message, plugins,  # noqa: F811
                                                               in_process, tmp_path):
    plugins("plugin_case_hooks", plugin_case_hooks=module)
    (tmp_path / "odd.toml").write_text(spec)
    code, out, err = in_process(command, tmp_path / "odd.toml", *(["-q"] if command == "apply" else ["--no-estimate"]))
    _one_line(code, out, err, message)
    assert not (tmp_path / "store").exists() or command == "apply"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, module, message", REGISTRATION_CASES, ids=[c[0] for c in REGISTRATION_CASES])
def test_a_data_source_that_is_no_valid_registration_is_refused_at_load(case, module, message, plugins,  # noqa: F811
                                                                         in_process, tmp_path):
    plugins("plugin_case_hooks", plugin_case_hooks=module)
    (tmp_path / "odd.toml").write_text(DEPTH)
    code, out, err = in_process("plan", tmp_path / "odd.toml", "--no-estimate")
    _one_line(code, out, err, "plugin 'plugin_case_hooks' cannot be loaded: TypeError: ")
    assert message in err, err


def test_an_input_error_from_a_plug_in_reader_is_the_users_data_not_the_plug_in(plugins, in_process, tmp_path):  # noqa: F811
    """InputError is a reader's way to say the data cannot be read: it reaches the user as such (66, the
    source named), not as a broken plug-in."""
    plugins("plugin_case_hooks", plugin_case_hooks=source("raise InputError('the file has no text column')"))
    (tmp_path / "odd.toml").write_text(DEPTH)
    code, _, err = in_process("apply", tmp_path / "odd.toml", "-q")
    assert code == 66 and "[input] source 'odd:x': the file has no text column" in err, err
    assert "plugin_case_hooks" not in err and "Traceback" not in err


def test_a_well_behaved_plug_in_source_still_reads(plugins, in_process, tmp_path):  # noqa: F811
    plugins("plugin_case_hooks", plugin_case_hooks=source(f"return Documents('odd', [('doc', {PROSE!r})])"))
    (tmp_path / "odd.toml").write_text(DEPTH)
    code, _, err = in_process("apply", tmp_path / "odd.toml", "-q")
    assert code == 0, err


# --------------------------------------------------------------------------- SimpleStudy hooks

STUDY = """
import torch
from runner.plugin.study import register
from runner.spec.specfile import Table
from tests.plugins.toy_checkpointed import Chain, ChainStudy

class Other(Chain):
    pass

@register
class Broken(ChainStudy):
    name = "broken"
    {body}
"""

BROKEN = """
[experiment]
name = "broken"
study = "broken"
[broken]
epochs = 1
steps_per_epoch = 2
[[measure]]
kind = "entropy"
"""

SWHO = "plugin_case_study.Broken"

STUDY_CASES = [
    ("build raises", "table = Other\n    def build(self, c, seed):\n        raise RuntimeError('no weights')",
     f"{SWHO}.build() raised RuntimeError: no weights"),
    ("build returns None", "table = Other\n    def build(self, c, seed):\n        return None",
     f"{SWHO}.build() returned NoneType; it returns a torch.nn.Module"),
    ("trainable raises", "table = Other\n    def trainable(self, c, seed):\n        raise KeyError('lr')",
     f"{SWHO}.trainable() raised KeyError: 'lr'"),
    ("trainable without epochs", "table = Other\n    def trainable(self, c, seed):\n        run = super().trainable(c, seed)\n"
                                 "        run.epochs = 0\n        return run",
     f"{SWHO}.trainable() returned Run whose epochs is 0"),
    ("trainable returns a module", "table = Other\n    def trainable(self, c, seed):\n        return torch.nn.Linear(2, 2)",
     f"{SWHO}.trainable() returned Linear whose model is None"),
    ("analysis raises", "table = Other\n    def analysis(self, c, seed):\n        raise IndexError('sentence')",
     f"{SWHO}.analysis() raised IndexError: sentence"),
    ("analysis returns a dict", "table = Other\n    def analysis(self, c, seed):\n        return {}",
     f"{SWHO}.analysis() returned dict; it returns a runner.checkpointed.simple.Analysis"),
    ("analysis returns None", "table = Other\n    def analysis(self, c, seed):\n        return None",
     f"{SWHO}.analysis() returned NoneType; it returns a runner.checkpointed.simple.Analysis"),
    ("build returns a tensor", "table = Other\n    def build(self, c, seed):\n        return torch.zeros(2)",
     f"{SWHO}.build() returned Tensor; it returns a torch.nn.Module"),
    ("trainable returns None", "table = Other\n    def trainable(self, c, seed):\n        return None",
     f"{SWHO}.trainable() returned NoneType whose model is None"),
    ("trainable with zero steps", "table = Other\n    def trainable(self, c, seed):\n        run = super().trainable(c, seed)\n"
                                  "        run.steps_per_epoch = 0\n        return run",
     f"{SWHO}.trainable() returned Run whose steps_per_epoch is 0"),
    ("trainable with boolean steps", "table = Other\n    def trainable(self, c, seed):\n        run = super().trainable(c, seed)\n"
                                     "        run.steps_per_epoch = True\n        return run",
     f"{SWHO}.trainable() returned Run whose steps_per_epoch is True"),
    ("trainable with fractional epochs", "table = Other\n    def trainable(self, c, seed):\n        run = super().trainable(c, seed)\n"
                                         "        run.epochs = 1.5\n        return run",
     f"{SWHO}.trainable() returned Run whose epochs is 1.5"),
    ("trainable without a model", "table = Other\n    def trainable(self, c, seed):\n        run = super().trainable(c, seed)\n"
                                  "        run.model = None\n        return run",
     f"{SWHO}.trainable() returned Run whose model is None"),
    ("build raises a type error", "table = Other\n    def build(self, c, seed):\n        return torch.nn.Linear('a', 2)",
     f"{SWHO}.build() raised TypeError"),
]

LOAD_CASES = [
    ("table None", "table = None", "SimpleStudy plugin_case_study.Broken: table = None; it is the spec table"),
    ("table not a Table", "table = dict", "table = <class 'dict'>; it is the spec table of its settings"),
    ("no table of its own", "pass", "SimpleStudy plugin_case_study.Broken: names a study but no table of its own"),
    ("table an instance", "table = Other()", "it is the spec table of its settings, a runner.spec.specfile.Table subclass"),
    ("table a string", "table = 'broken'", "table = 'broken'; it is the spec table"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case, body, message", STUDY_CASES, ids=[c[0] for c in STUDY_CASES])
def test_a_simple_study_hook_outside_its_contract_is_one_line(case, body, message, plugins, in_process,  # noqa: F811
                                                              tmp_path):
    plugins("plugin_case_study", plugin_case_study=STUDY.format(body=body))
    (tmp_path / "broken.toml").write_text(BROKEN)
    for command in ("plan", "apply"):
        code, out, err = in_process(command, tmp_path / "broken.toml", "--no-estimate" if command == "plan" else "-q")
        _one_line(code, out, err, message)
    assert not (tmp_path / "store").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, body, message", LOAD_CASES, ids=[c[0] for c in LOAD_CASES])
def test_a_simple_study_without_a_table_is_refused_at_load(case, body, message, plugins, in_process, tmp_path):  # noqa: F811
    plugins("plugin_case_study", plugin_case_study=STUDY.format(body=body))
    (tmp_path / "broken.toml").write_text(BROKEN)
    code, out, err = in_process("plan", tmp_path / "broken.toml", "--no-estimate")
    _one_line(code, out, err, "plugin 'plugin_case_study' cannot be loaded: TypeError: ")
    assert message in err, err


# --------------------------------------------------------------------------- identity, check, problems at plan

HOOKED = """
from runner.data.forms import Documents
from runner.data.registry import DOCUMENTS, DataSource, register_data_source

class Odd(DataSource):
    name, scheme, written, gives = "odd", "odd", "'odd:<x>'", frozenset({{DOCUMENTS}})
    def documents(self, source, base, **options):
        return Documents("odd", [])
    def {hook}(self, *args, **options):
        {body}

register_data_source(Odd())
"""

PLAN_CASES = [
    ("identity returns an empty string", "identity", "return ''", "identity() returned ''; it returns a non-empty string"),
    ("identity returns a number", "identity", "return 3", "identity() returned 3; it returns a non-empty string"),
    ("identity returns bytes", "identity", "return b'sha'", "identity() returned b'sha'; it returns a non-empty string"),
    ("identity returns a dict", "identity", "return {'sha': 1}", "identity() returned {'sha': 1}"),
    ("identity raises KeyError", "identity", "raise KeyError('revision')", "identity() raised KeyError: 'revision'"),
    ("identity raises an OS error", "identity", "raise PermissionError(13, 'denied')", "identity() raised PermissionError"),
    ("check returns a number", "check", "return 3", "check() returned 3; it returns None or a message"),
    ("check returns bytes", "check", "return b'no'", "check() returned b'no'; it returns None or a message"),
    ("check returns True", "check", "return True", "check() returned True; it returns None or a message"),
    ("check returns a tuple", "check", "return ('no',)", "check() returned ('no',); it returns None or a message"),
    ("check raises ValueError", "check", "raise ValueError('bad')", "check() raised ValueError: bad"),
    ("check raises a recursion error", "check", "return self.check(*args, **options)", "check() raised RecursionError"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, hook, body, message", PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_a_data_source_hook_at_plan_is_one_line(case, hook, body, message, plugins, in_process, tmp_path):  # noqa: F811
    plugins("plugin_case_hooks", plugin_case_hooks=HOOKED.format(hook=hook, body=body))
    (tmp_path / "odd.toml").write_text(DEPTH)
    code, out, err = in_process("plan", tmp_path / "odd.toml", "--no-estimate")
    _one_line(code, out, err, f"{WHO}.{message}")
    assert not (tmp_path / "store").exists()


#: Registrations of model families and executors that are not one, refused when the plug-in loads.
OTHER_REGISTRATIONS = [
    ("a family class", "from models.registry import Family, register_family\nclass F(Family):\n    name = 'f'\n"
                       "register_family(F)\n", "register_family takes an instance: register_family(F())"),
    ("a family that is no family", "from models.registry import register_family\nregister_family(object())\n",
     "register_family takes a models.registry.Family, not object"),
    ("a family without a name", "from models.registry import Family, register_family\nclass F(Family):\n    name = ''\n"
                                "register_family(F())\n", "name = ''; it is a non-empty string"),
    ("an executor with a blank name", "from runner.run.execute.registry import register_executor\n"
                                      "register_executor(' ', 'pkg.mod:Ex')\n", "register_executor: name ' '"),
    ("an executor named by a number", "from runner.run.execute.registry import register_executor\n"
                                      "register_executor(3, 'pkg.mod:Ex')\n", "register_executor: name 3"),
    ("an executor without a class", "from runner.run.execute.registry import register_executor\n"
                                    "register_executor('mine', 'pkg.mod')\n", "the target is 'package.module:Class'"),
    ("an executor given a class", "from runner.run.execute.registry import register_executor\n"
                                  "register_executor('mine', object)\n", "the target is 'package.module:Class'"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, module, message", OTHER_REGISTRATIONS, ids=[c[0] for c in OTHER_REGISTRATIONS])
def test_a_registration_that_is_none_is_refused_at_load(case, module, message, plugins, in_process, tmp_path):  # noqa: F811
    plugins("plugin_case_hooks", plugin_case_hooks=module)
    (tmp_path / "odd.toml").write_text(DEPTH.replace("odd:x", "builtin:pydoc-topics"))
    code, out, err = in_process("plan", tmp_path / "odd.toml", "--no-estimate")
    _one_line(code, out, err, "plugin 'plugin_case_hooks' cannot be loaded: TypeError: ")
    assert message in err, err
