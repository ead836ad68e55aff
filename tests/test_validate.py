"""`bench validate`: targets of the right base class, parameters of the right type; a wrong
target stops `bench run` with one line instead of an AttributeError."""

from pathlib import Path

import pytest
import yaml

from bench.cli import main
from bench.config import TRAIN_DEFAULTS
from bench.registry import Registry
from bench.schema import type_ok, type_problem
from bench.validation import registry_problems

ROOT = Path(__file__).resolve().parent.parent

BAD_MODELS = {
    "not-a-backbone": {"target": "bench.tasks.formal_languages:Parity"},
    "a-function": {"target": "bench.registry:deep_merge"},
    "two-layers": {"base": "transformer", "params": {"n_layers": "two", "dropout": 0}},
    "int-encoding": {"base": "transformer", "params": {"pos_encoding": 1}},
    "typo": {"base": "transformer", "params": {"n_layer": 2}},
    "odd-encoding": {"base": "transformer", "params": {"pos_encoding": "sideways"}},
    "bidirectional": {"base": "transformer", "params": {"causal": False}},  # cannot run causal tasks: no problem of either
}
PARITY = {"base": "parity"}
BAD_TASKS = {
    "not-a-task": {"base": "_formal", "target": "bench.models.transformer:Transformer"},
    "abstract": {"base": "_formal", "target": "bench.tasks.lra:FileTask"},
    "mistyped": {**PARITY, "params": {"n_train": "many"}},
    "bad-data": {
        **PARITY,
        "presets": {
            "smoke": {"data": {"bin_width": 2.5, "n_val": 10}},
            "small": {"data": {"colour": 3}},
            "paper": {"model": {"d_model": "big", "n_heads": 4}},
        },
    },
    "bad-family": {
        **PARITY,
        "presets": {
            "smoke": {"family": {"transformer": {"n_layers": "two"}}},
            "small": {"family": {"lstm": {"n_heads": 2}}},
            "paper": {"family": {"tbl": {"d_model": 8}}},
        },
    },
    "bad-train": {
        **PARITY,
        "presets": {
            "smoke": {"family_train": {"tbl": {"lr": 0.1}}},
            "small": {"family_train": {"tlb": {"lrr": 0.1, "batch_size": 64}}},
            "paper": {"train": {"schedule": "cosin"}},
        },
    },
    "mistyped-train": {**PARITY, "presets": {"smoke": {"family_train": {"tlb": {"lr": "fast"}}}}},
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
    assert registry_problems(Registry()) == []


def test_validate_reports_what_a_run_would_refuse_and_nothing_else(bad_registry):
    """One line per model entry and per task preset that `bench run` would refuse (the first
    refusal of each, in registry order), the model entries' first; each line is the run's own."""
    problems = registry_problems(Registry(bad_registry))
    valid = ", ".join(sorted(TRAIN_DEFAULTS))
    expected = [
        "models.not-a-backbone: target 'bench.tasks.formal_languages:Parity' is the class bench.tasks.formal_languages.Parity; "
        "a model target must be a subclass of bench.models.base.Backbone",
        "models.a-function: target 'bench.registry:deep_merge' is a function, not a class; "
        "a model target must be a subclass of bench.models.base.Backbone",
        "registry entry two-layers: model.n_layers='two': expected int (like 2), got str",
        "registry entry int-encoding: model.pos_encoding=1: expected str (like 'xpos'), got int",
        "registry model 'typo': params n_layer not accepted by bench.models.transformer:Transformer",
        "models.odd-encoding: bench.models.transformer:Transformer cannot be built with the smoke preset of bucket-sort "
        "(ValueError: unknown pos_encoding 'sideways'; choose one of xpos, rope, sinusoidal, learned, none)",
        "tasks.not-a-task: target 'bench.models.transformer:Transformer' is the class bench.models.transformer.Transformer; "
        "a task target must be a subclass of bench.tasks.base.Task",
        "tasks.abstract: task class 'bench.tasks.lra:FileTask' is abstract: it must implement generate, vocab",
        "registry entry mistyped: data.n_train='many': expected int (like 10000), got str",
        "preset bad-data.smoke.data: data.bin_width=2.5: expected int (like 10), got float",
        "preset bad-data.small.data: data.colour: task 'bad-data' has no parameter 'colour'; valid: "
        "bin1_max_len, bin_width, data_seed, max_len, min_len, n_test, n_train, n_val, start_symbol",
        "preset bad-data.paper.model: model.d_model='big': expected int (like 128), got str",
        "preset bad-family.smoke.family.transformer: model.n_layers='two': expected int (like 2), got str",
        "preset bad-family.small.family.lstm: n_heads not accepted by bench.models.rnn:RNN",
        "preset bad-family.paper.family: 'tbl' is not a model entry; valid: "
        f"{', '.join(sorted(Registry(bad_registry).model_names()))}; did you mean 'tlb' or 'gutlb'?",
        "preset bad-train.smoke.family_train: 'tbl' is not a model entry; valid: "
        f"{', '.join(sorted(Registry(bad_registry).model_names()))}; did you mean 'tlb' or 'gutlb'?",
        f"preset bad-train.small.family_train.tlb: train.lrr: training has no parameter 'lrr'; valid: {valid}; did you mean 'lr'?",
        "preset bad-train.paper.train: train.schedule='cosin': choose one of constant, linear, cosine, inverse_sqrt, step",
        "preset mistyped-train.smoke.family_train.tlb: train.lr='fast': expected float (like 0.001), got str",
    ]
    assert problems == expected  # dropout: 0 is a fine float; n_val: 10, n_heads: 4 and batch_size: 64 are ints


def test_validate_cli_prints_each_problem_and_exits_2(bad_registry, capsys):
    assert main(["validate", str(bad_registry)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 19 and all(line.startswith("bench: invalid registry: ") for line in err)


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
        # the refusals `bench validate` lists are the run's own
        (["--model", "lstm", "--task", "bad-data"], "preset bad-data.smoke.data: data.bin_width=2.5: expected int"),
        (["--model", "tlb", "--task", "bad-train"], "preset bad-train.smoke.family_train: 'tbl' is not a model entry"),
        (["--model", "two-layers", "--task", "parity"], "registry entry two-layers: model.n_layers='two': expected int"),
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
    assert type_problem("x.a", "s", 1) == "x.a='s': expected int (like 1), got str" and type_problem("x.b", 1, 2) is None
