"""`bench validate`: targets of the right base class, parameters of the right type; a wrong
target stops `bench run` with one line instead of an AttributeError."""
from pathlib import Path

import pytest
import yaml

from bench.cli import main
from bench.config import TRAIN_DEFAULTS
from bench.registry import Registry, type_ok, type_problems

ROOT = Path(__file__).resolve().parent.parent

BAD_MODELS = {
    "not-a-backbone": {"target": "bench.tasks.formal_languages:Parity"},
    "a-function": {"target": "bench.registry:deep_merge"},
    "two-layers": {"base": "transformer", "params": {"n_layers": "two", "dropout": 0, "pos_encoding": 1}},
}
BAD_TASKS = {
    "not-a-task": {"base": "_formal", "target": "bench.models.transformer:Transformer"},
    "abstract": {"base": "_formal", "target": "bench.tasks.lra:_FileTask"},
    "mistyped": {
        "base": "parity",
        "params": {"n_train": "many"},
        "presets": {
            "smoke": {
                "data": {"bin_width": 2.5, "n_val": 10},
                "model": {"d_model": "big", "n_heads": 4},
                "family": {"transformer": {"n_layers": "two"}, "lstm": {"n_heads": 2}},
                "family_train": {"tbl": {"lr": 0.1}, "tlb": {"lrr": 0.1, "lr": "fast", "schedule": "cosin", "batch_size": 64}},
            }
        },
    },
}


@pytest.fixture(scope="module")
def bad_registry(tmp_path_factory) -> Path:
    reg = yaml.safe_load((ROOT / "bench" / "registry.yaml").read_text())
    reg["models"].update(BAD_MODELS)
    reg["tasks"].update(BAD_TASKS)
    path = tmp_path_factory.mktemp("registry") / "registry.yaml"
    path.write_text(yaml.safe_dump(reg, allow_unicode=True, sort_keys=False))
    return path


def test_the_repository_registry_is_valid():
    assert Registry().validate() == []


def test_validate_reports_every_problem_and_nothing_else(bad_registry):
    problems = Registry(bad_registry).validate()
    expected = [
        "models.not-a-backbone: target 'bench.tasks.formal_languages:Parity' is the class bench.tasks.formal_languages.Parity; "
        "a model target must be a subclass of bench.models.base.Backbone",
        "models.a-function: target 'bench.registry:deep_merge' is a function, not a class; "
        "a model target must be a subclass of bench.models.base.Backbone",
        "models.two-layers.params.n_layers='two': expected int (like 2), got str",
        "models.two-layers.params.pos_encoding=1: expected str (like 'xpos'), got int",
        "tasks.not-a-task: target 'bench.models.transformer:Transformer' is the class bench.models.transformer.Transformer; "
        "a task target must be a subclass of bench.tasks.base.Task",
        "tasks.abstract: task class 'bench.tasks.lra:_FileTask' is abstract: it must implement generate, vocab",
        "tasks.mistyped.params.n_train='many': expected int (like 10000), got str",
        "tasks.mistyped.presets.smoke.data.bin_width=2.5: expected int (like 10), got float",
        "tasks.mistyped.presets.smoke.model.d_model='big': expected int (like 128), got str",
        "tasks.mistyped.presets.smoke.family.transformer.n_layers='two': expected int (like 2), got str",
        "tasks.mistyped.presets.smoke.family.lstm: n_heads not accepted by models.lstm",
        "tasks.mistyped.presets.smoke.family_train: 'tbl' is not a model entry",
        f"tasks.mistyped.presets.smoke.family_train.tlb: lrr not a training setting; valid: {', '.join(sorted(TRAIN_DEFAULTS))}; "
        "did you mean 'lr'?",
        "tasks.mistyped.presets.smoke.family_train.tlb.lr='fast': expected float (like 0.001), got str",
        "tasks.mistyped.presets.smoke.family_train.tlb.schedule='cosin': choose one of constant, linear, cosine, inverse_sqrt, step",
    ]
    assert problems == expected  # dropout: 0 is a fine float; n_val: 10, n_heads: 4 and batch_size: 64 are ints


def test_validate_cli_prints_each_problem_and_exits_2(bad_registry, capsys):
    assert main(["validate", str(bad_registry)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 15 and all(line.startswith("bench: invalid registry: ") for line in err)


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--model", "not-a-backbone", "--task", "parity"],
            "models.not-a-backbone: target 'bench.tasks.formal_languages:Parity' is the class",
        ),
        (
            ["--model", "a-function", "--task", "parity"],
            "is a function, not a class; a model target must be a subclass of bench.models.base.Backbone",
        ),
        (["--model", "lstm", "--task", "not-a-task"], "a task target must be a subclass of bench.tasks.base.Task"),
        (["--model", "lstm", "--task", "abstract"], "is abstract: it must implement generate, vocab"),
    ],
)
def test_run_with_a_wrong_target_is_one_line(bad_registry, argv, message, tmp_path, capsys):
    code = main(["--registry", str(bad_registry), "run", *argv, "--preset", "smoke", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("bench: error: ") and message in err[0], err
    assert not list(tmp_path.rglob("*.json"))


def test_type_rules():
    assert type_ok(2, 3) and not type_ok(2, True) and not type_ok(2, 2.0) and not type_ok(2, "2")
    assert type_ok(0.5, 1) and not type_ok(0.5, False)  # an int is a fine float, a bool is not
    assert type_ok(True, False) and not type_ok(True, 1)
    assert type_ok([1], (2, 3)) and not type_ok([1], "a") and type_ok({}, {"a": 1}) and not type_ok({}, [])
    assert type_ok(None, "anything")  # a None default says nothing about the type
    assert type_problems("x", {"a": "s", "b": 1, "c": 5}, {"a": 1, "b": 2}) == ["x.a='s': expected int (like 1), got str"]
