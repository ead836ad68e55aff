"""Issue 28: bench as an installable package. The registry is layered (shipped -> plugins ->
the user's file), plugin packages add models and tasks through the ``bench.registries``
entry-point group, old top-level targets (``models.x:Y``) get a one-line error naming the new
path, and the light commands (--help, list, validate, explain) never import Lightning."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.cli import main
from bench.registry import DEFAULT_REGISTRY, ENTRY_POINT_GROUP, Registry, task_files
from bench.validation import registry_problems

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_registry_and_tables_are_package_data():
    from bench.report.tables import TABLES_DIR, table_names

    assert DEFAULT_REGISTRY == ROOT / "bench" / "registry.yaml" and DEFAULT_REGISTRY.is_file()
    assert TABLES_DIR == ROOT / "bench" / "tables" and "rsa-table2" in table_names()
    text = (ROOT / "pyproject.toml").read_text()
    assert 'include = ["bench*"]' in text and '"registry.yaml", "tables/*.yaml", "tasks/*.yaml", "tasks/*/*.yaml"' in text
    # every task file is package data by those patterns (bench/tasks/ and its packages, one level down)
    assert task_files() and all(len(p.relative_to(ROOT / "bench" / "tasks").parts) <= 2 for p in task_files())
    reg = Registry(plugins=False)
    assert {reg.origin[("tasks", name)] for name in reg.raw_tasks} == {p.relative_to(ROOT / "bench").as_posix() for p in task_files()}


# ---- a user's registry extends the shipped one -------------------------------------------------
def test_a_user_registry_adds_to_and_overrides_the_shipped_one(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        textwrap.dedent("""\
        models:
          tiny-transformer:                 # a new entry based on a shipped one
            base: transformer
            params: {n_layers: 1}
          lstm:                             # replaces the shipped entry of that name
            target: bench.models.rnn:RNN
            params: {cell: gru}
            description: mine
        """)
    )
    shipped, reg = Registry(), Registry(path)
    assert reg.user_path == path and reg.layers == ["registry.yaml", "mine.yaml"]
    assert set(reg.model_names()) == set(shipped.model_names()) | {"tiny-transformer"}
    assert reg.task_names() == shipped.task_names()  # no tasks: section: the shipped tasks stay
    assert reg.model_entry("tiny-transformer")["params"] == {"n_layers": 1}
    assert reg.model_entry("tiny-transformer")["lineage"] == ["tiny-transformer", "transformer"]
    assert reg.model_entry("lstm")["description"] == "mine" and reg.model_entry("lstm")["params"] == {"cell": "gru"}
    assert reg.model_names().index("lstm") == shipped.model_names().index("lstm")  # in its place in listings
    assert registry_problems(reg) == []


def test_the_shipped_file_named_explicitly_adds_nothing():
    reg = Registry(DEFAULT_REGISTRY)
    assert reg.user_path is None and reg.layers == ["registry.yaml"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("model:\n  x: {base: transformer}\n", "unknown top-level key(s) model"),
        ("- just a list\n", "must be a mapping with a 'models:' and/or a 'tasks:' section"),
        ("models:\n  x: [1]\n", "mine.yaml: models.x must be a mapping"),
    ],
)
def test_a_malformed_user_registry_is_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    assert main(["--registry", str(path), "list"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "target, new", [("models.xl:TransformerXL", "bench.models.xl:TransformerXL"), ("tasks.copy:Copy", "bench.tasks.copy:Copy")]
)
def test_an_old_top_level_target_names_the_new_path(tmp_path, capsys, target, new):
    section = "models" if target.startswith("models") else "tasks"
    path = tmp_path / "old.yaml"
    extra = "\n    presets: {smoke: {data: {n_train: 8}}}" if section == "tasks" else ""
    path.write_text(f"{section}:\n  old-entry:\n    target: {target}{extra}\n")
    problems = registry_problems(Registry(path))
    assert problems == [
        f"{section}.old-entry: target {target!r} names bench's old top-level package {section!r}; "
        f"models/ and tasks/ moved into bench: write {new!r}"
    ]


# ---- plugins: the bench.registries entry-point group ----------------------------------------
PLUGIN_MODULE = '''\
"""A plugin package: one model and one task, registered through its registry.yaml."""
from bench.models.rnn import RNN
from bench.tasks.formal_languages import Parity


class PluginRNN(RNN):
    """An RNN that lives outside bench."""


class PluginParity(Parity):
    """Parity that lives outside bench."""
'''

PLUGIN_REGISTRY = """\
models:
  plugin-rnn:
    target: benchplugin_demo:PluginRNN
    description: "an RNN from a plugin package"
tasks:
  plugin-parity:
    base: parity
    target: benchplugin_demo:PluginParity
    description: "parity from a plugin package"
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An installed plugin distribution: its package and a dist-info with the entry point, on sys.path."""
    site = tmp_path / "site"
    (site / "benchplugin_demo").mkdir(parents=True)
    (site / "benchplugin_demo" / "__init__.py").write_text(PLUGIN_MODULE)
    (site / "benchplugin_demo" / "registry.yaml").write_text(PLUGIN_REGISTRY)
    info = site / "benchplugin_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: benchplugin-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ndemo = benchplugin_demo\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("BENCH_NO_PLUGINS", raising=False)
    yield site
    sys.modules.pop("benchplugin_demo", None)


def test_a_plugin_package_adds_models_and_tasks(plugin, capsys, monkeypatch, tmp_path):
    reg = Registry()
    assert reg.layers[0] == "registry.yaml" and reg.layers[1].startswith("plugin 'demo' (benchplugin_demo, from benchplugin-demo)")
    assert "plugin-rnn" in reg.model_names() and "plugin-parity" in reg.task_names()
    assert registry_problems(reg) == []
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "an RNN from a plugin package" in out and "parity from a plugin package" in out
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    import bench

    rec = bench.run(model="plugin-rnn", task="plugin-parity", preset="smoke", seed=0, out=tmp_path / "out", progress=False)
    assert rec["status"] == "ok" and rec["config"]["model"]["target"] == "benchplugin_demo:PluginRNN"
    monkeypatch.setenv("BENCH_NO_PLUGINS", "1")
    assert "plugin-rnn" not in Registry().model_names()


def test_a_plugin_may_name_a_mapping_or_a_file(plugin, monkeypatch):
    (plugin / "benchplugin_demo" / "entries.py").write_text(
        "from pathlib import Path\n"
        "MAPPING = {'models': {'from-mapping': {'base': 'lstm'}}}\n"
        "def path():\n    return Path(__file__).with_name('registry.yaml')\n"
    )
    (plugin / "benchplugin_demo-0.1.dist-info" / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\na = benchplugin_demo.entries:MAPPING\nb = benchplugin_demo.entries:path\n"
    )
    reg = Registry()
    assert {"from-mapping", "plugin-rnn"} <= set(reg.model_names())
    assert registry_problems(reg) == []


def test_a_broken_plugin_is_one_line_naming_it(plugin, capsys):
    (plugin / "benchplugin_demo-0.1.dist-info" / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nbroken = benchplugin_nowhere\n")
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert "plugin 'broken' (benchplugin_nowhere, from benchplugin-demo) cannot be loaded" in err and "BENCH_NO_PLUGINS=1" in err
    assert len(err.strip().splitlines()) == 1


# ---- start-up: the light commands import no Lightning (and --help, list no torch) -------------
LIGHT = {
    "--help": ("lightning", "pytorch_lightning", "torch"),
    "--version": ("lightning", "pytorch_lightning", "torch"),
    "list": ("lightning", "pytorch_lightning", "torch"),
    "validate": ("lightning", "pytorch_lightning"),
    "explain --model transformer --task parity": ("lightning", "pytorch_lightning"),
    "reproduce --list": ("lightning", "pytorch_lightning"),
}


@pytest.mark.parametrize("command", list(LIGHT))
def test_light_commands_import_no_lightning(command):
    code = (
        "import sys\nfrom bench.cli import main\n"
        f"try:\n    code = main({command.split()!r})\nexcept SystemExit as exc:\n    code = exc.code\n"
        f"heavy = [m for m in {LIGHT[command]!r} if m in sys.modules]\n"
        "assert code in (0, None), code\nassert not heavy, f'imported {heavy}'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("bad", [["--set", "data.group=q8"], ["--set", "model.d_model=-4"], ["--seeds", "0,x"], ["--logger", "nope"]])
def test_bench_run_refuses_bad_input_before_loading_lightning(bad, tmp_path):
    """Every check on a run's input is in its planning (bench/runner/planning.py), which needs no
    Lightning: the one-line refusal comes before seconds of importing it, and nothing is written."""
    argv = ["run", "--model", "lstm", "--task", "s5", "--preset", "smoke", "--out", str(tmp_path / "out"), *bad]
    code = (
        "import sys\nfrom bench.cli import main\n"
        f"code = main({argv!r})\n"
        "heavy = [m for m in ('lightning', 'pytorch_lightning') if m in sys.modules]\n"
        "assert code == 2, code\nassert not heavy, f'imported {heavy}'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.json"))


def test_list_reads_the_streaming_flags_as_the_classes_have_them(registry):
    from bench.targets import import_model_class, static_class_attrs

    flags = ("supports_causal", "supports_streaming")
    for name in registry.model_names():
        target = registry.model_entry(name)["target"]
        cls = import_model_class(target, name)
        assert static_class_attrs(target, flags) in (None, {f: getattr(cls, f) for f in flags}), name
    assert static_class_attrs("bench.models.transformer:Transformer", flags) == {"supports_causal": True, "supports_streaming": True}
    assert static_class_attrs("bench.models.nowhere:X", flags) is None


def test_version_is_the_distribution_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"bench {version('bench')}\n"


def test_lazy_api_and_generate_stays_the_function():
    import bench
    from bench.generate import load_tested  # noqa: F401 - importing the submodule must not shadow the function

    assert callable(bench.generate) and bench.generate.__module__ == "bench.generate"
    assert bench.Registry is Registry and callable(bench.run) and callable(bench.build_model)
    from bench.runner.callbacks import RunInterrupted

    assert RunInterrupted is bench.RunInterrupted


# ---- conventions --------------------------------------------------------------------------------
def test_weight_decay_goes_by_dimension_not_by_name():
    import torch
    from torch import nn

    from bench.runner.module import decay_groups

    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.proj = nn.Linear(4, 4)  # weight decayed, bias not
            self.ln = nn.LayerNorm(4)  # gain and bias: not decayed
            self.norm_matrix = nn.Parameter(torch.zeros(4, 4))  # "norm" in its name, yet a matrix: decayed
            self.gate = nn.Parameter(torch.zeros(()))  # a scalar: not decayed
            self.frozen = nn.Parameter(torch.zeros(4, 4), requires_grad=False)  # not trained: in no group

    toy = Toy()
    decay, no_decay = decay_groups(toy)
    ids = lambda ps: {id(p) for p in ps}  # noqa: E731
    assert ids(decay) == ids([toy.embed.weight, toy.proj.weight, toy.norm_matrix])
    assert ids(no_decay) == ids([toy.proj.bias, toy.ln.weight, toy.ln.bias, toy.gate])


def test_reproduce_reads_the_reference_records_and_cost_writes_to_the_output_folder(tmp_path, monkeypatch):
    from bench.cli import build_parser
    from bench.parsing import reference_out

    monkeypatch.delenv("BENCH_OUT", raising=False)
    monkeypatch.chdir(ROOT)
    assert build_parser().parse_args(["reproduce", "--list"]).out is None and reference_out() == "results"
    assert build_parser().parse_args(["cost", "--task", "parity"]).out == "out/cost"
    monkeypatch.chdir(tmp_path)  # no results/ here: an installed bench used elsewhere
    assert reference_out() == "out"
    monkeypatch.setenv("BENCH_OUT", str(tmp_path / "mine"))
    assert reference_out() == str(tmp_path / "mine")
    assert build_parser().parse_args(["cost", "--task", "parity"]).out == str(tmp_path / "mine" / "cost")


def test_every_cli_option_has_help():
    import argparse

    from bench.cli import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in [("bench", parser), *subs.items()]:
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue  # the commands: each has its own help
            assert action.help, f"{name} {'/'.join(action.option_strings) or action.dest} has no help"


def readme_plugin() -> dict[str, str]:
    """The plugin example of docs/plugins.md: {file name: text} for pyproject.toml, mybench/__init__.py, mybench/registry.yaml."""
    import re

    section = (ROOT / "docs" / "plugins.md").read_text()
    files = {name: text for name, text in re.findall(r"`([\w./]+)`:\n\n```\w+\n(.*?)```", section, re.S)}
    assert set(files) == {"pyproject.toml", "mybench/__init__.py", "mybench/registry.yaml"}, set(files)
    return files


def test_the_docs_plugin_example_works(tmp_path, monkeypatch):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    import bench

    files = readme_plugin()
    project = tomllib.loads(files["pyproject.toml"])["project"]
    entry_points = project["entry-points"][ENTRY_POINT_GROUP]
    site = tmp_path / "site"
    (site / "mybench").mkdir(parents=True)
    for name in ("mybench/__init__.py", "mybench/registry.yaml"):
        (site / name).write_text(files[name])
    info = site / f"{project['name']}-{project['version']}.dist-info"  # what pip install ./mybench leaves
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("BENCH_NO_PLUGINS", raising=False)
    try:
        reg = Registry()
        assert {"my-gru"} <= set(reg.model_names()) and {"parity-start"} <= set(reg.task_names())
        assert registry_problems(reg) == []
        model = bench.build_model("my-gru", task="parity-start", preset="smoke", registry=reg)
        assert type(model).__module__ == "mybench" and model.rnn.mode == "GRU"
        assert bench.build_task("parity-start", preset="smoke", registry=reg).params["start_symbol"] is True
    finally:
        sys.modules.pop("mybench", None)


def test_a_task_file_holds_tasks_only_and_each_task_once(tmp_path, monkeypatch):
    """The shipped tasks come from the files beside their modules: two files giving one name, or a
    file with more than a tasks: section, stop with one line naming the files."""
    import bench.registry as registry_module
    from bench.errors import UserError

    tasks = tmp_path / "tasks"
    (tasks / "sub").mkdir(parents=True)
    (tasks / "a.yaml").write_text("tasks:\n  twice: {target: bench.tasks.copy:Copy}\n")
    (tasks / "sub" / "b.yaml").write_text("tasks:\n  twice: {target: bench.tasks.copy:Copy}\n")
    monkeypatch.setattr(registry_module, "TASKS_DIR", tasks)
    assert registry_module.task_files() == [tasks / "a.yaml", tasks / "sub" / "b.yaml"]
    with pytest.raises(UserError, match=r"^tasks/sub/b\.yaml: tasks\.twice is also given by tasks/a\.yaml; give each task in one file$"):
        Registry(plugins=False)
    (tasks / "sub" / "b.yaml").write_text("models:\n  m: {target: bench.models.rnn:RNN}\n")
    with pytest.raises(UserError, match=r"^tasks/sub/b\.yaml must be a mapping with a 'tasks:' section only"):
        Registry(plugins=False)
