"""Every resolved value knows its source (`bench explain`), and registry entries hold only what
differs from what they would get anyway. The expected sources are read off registry.yaml and
the constructors by hand."""

import json
import re

import pytest
import yaml

from bench.cli import main
from bench.config import resolve_run
from bench.registry import BACKBONE_SETTINGS, Registry, constructor_params, deep_merge
from bench.spec import layer
from bench.targets import import_model_class, import_task_class

REG = Registry()


def explain(capsys, *argv) -> dict:
    """{(section, key): (value, source)} from `bench explain` output."""
    assert main(["explain", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"-+( +-+){3}", lines[2])  # the table's rule, under its header
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[3:]]
    assert all(len(r) == 4 for r in rows), rows
    return {(section, key): (value, source) for section, key, value, source in rows}


def test_layer_merges_named_sources_and_remembers_each_value_s():
    values, sources = layer(
        [
            ("a", {"x": 1, "d": {"p": 1, "q": 2}, "n": None, "gone": {"k": 1}}),
            ("b", {"d": {"q": 3}, "n": {"m": [1, 2]}}),
            ("c", {"x": 5, "gone": 0, "e": {}}),
        ]
    )
    assert values == {"x": 5, "d": {"p": 1, "q": 3}, "n": {"m": [1, 2]}, "gone": 0, "e": {}}
    assert sources == {"x": "c", "d.p": "a", "d.q": "b", "n.m": "b", "gone": "c", "e": "c"}


def test_explain_the_paper_rsa_transformer_on_parity(capsys):
    rows = explain(capsys, "--model", "rsa-transformer-I", "--task", "parity", "--preset", "paper", "--set", "model.d_model=64")
    assert rows["model", "d_model"] == ("64", "--set")
    assert rows["model", "n_heads"] == ("5", "preset _formal.paper.model")  # beats the entry's own n_heads: 5
    assert rows["model", "d_ff"] == ("80", "preset _formal.paper.model")
    assert rows["model", "pos_encoding"] == ("sinusoidal", "preset _formal.paper.family.transformer")
    assert rows["model", "attn_backend"] == ("sdpa", "constructor default")
    assert rows["model", "rsa.kinds"] == ("[5, 0, 0, 0, 0, 0]", "registry entry rsa-transformer-I")
    assert rows["model", "rsa.lag_cap"] == ("200", "base entry rsa-transformer")
    assert rows["model", "causal"] == ("true", "task parity needs a causal model")
    assert rows["data", "n_train"] == ("10000", "constructor default")
    assert rows["train", "lr"] == ("0.005", "preset _formal.paper.train")
    assert rows["train", "select"] == ("last", "preset _formal.paper.train")
    assert rows["train", "grad_clip"] == ("1.0", "TRAIN_DEFAULTS")
    accepted = constructor_params(import_model_class("bench.models.transformer:Transformer", "test"))
    assert rows["model", "init"] == ("default", "every backbone's default")  # BACKBONE_SETTINGS, not a constructor's
    assert {k.split(".")[0] for (s, k) in rows if s == "model"} == {*accepted, *BACKBONE_SETTINGS, "causal"}


def test_explain_data_and_train_overrides_and_inherited_task_presets(capsys):
    rows = explain(capsys, "--model", "gru", "--task", "copy-s", "--preset", "paper", "--set", "data.max_len=128", "--set", "train.lr=0.01")
    assert rows["data", "max_len"] == ("128", "--set")
    assert rows["data", "n_train"] == ("6400", "preset copy-s.paper.data")
    assert rows["data", "n_val"] == ("500", "preset copy.paper.data")
    assert rows["data", "n_symbols"] == ("10", "constructor default")
    assert rows["train", "lr"] == ("0.01", "--set")
    assert rows["train", "batch_size"] == ("16", "preset copy.paper.train")
    assert rows["model", "cell"] == ("gru", "registry entry gru")
    assert rows["model", "n_layers"] == ("4", "preset copy.paper.model")  # RNN takes n_layers, not n_heads
    assert ("model", "n_heads") not in rows


def test_explain_entry_values_and_causal_sources(capsys):
    rows = explain(capsys, "--model", "gut-no-gate", "--task", "listops", "--preset", "smoke")
    assert rows["model", "gate"] == ("false", "registry entry gut-no-gate")
    assert rows["model", "global_halt"] == ("true", "constructor default")
    assert rows["model", "max_layers"] == ("3", "preset listops.smoke.family.ut")
    assert rows["model", "causal"] == ("false", "bidirectional unless set")
    rows = explain(capsys, "--model", "lstm", "--task", "listops", "--preset", "smoke", "--set", "model.causal=true")
    assert rows["model", "causal"] == ("true", "--set")
    rows = explain(capsys, "--model", "nope", "--task", "listops", "--preset", "smoke")
    assert rows["model", "causal"] == ("true", "NoPE is causal-only")


def test_explain_family_train_sources_and_set_wins(capsys):
    rows = explain(capsys, "--model", "rsa-tlb", "--task", "listops", "--preset", "paper")  # rsa-tlb is based on tlb
    assert rows["train", "lr"] == ("0.00013975", "preset listops.paper.family_train.tlb")
    assert rows["train", "warmup_steps"] == ("8000", "preset listops.paper.family_train.tlb")
    assert rows["train", "betas"] == ("[0.9, 0.98]", "preset listops.paper.train")
    rows = explain(capsys, "--model", "gutlb", "--task", "listops", "--preset", "paper", "--set", "train.lr=0.001")
    assert rows["train", "lr"] == ("0.001", "--set")
    assert rows["train", "warmup_steps"] == ("8000", "preset listops.paper.family_train.gutlb")
    rows = explain(capsys, "--model", "transformer", "--task", "listops", "--preset", "paper")
    assert rows["train", "lr"] == ("0.00158", "preset listops.paper.train")


def test_family_train_layers_after_train_bases_first(tmp_path):
    """preset train < family_train of the entry's bases (most general first) < the entry's own < --set,
    whichever task preset (the task's or its base's) holds each."""
    path = tmp_path / "registry.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "tasks": {
                    "base-task": {
                        "base": "parity",
                        "presets": {"smoke": {"family_train": {"rsa-transformer": {"lr": 0.02, "max_epochs": 4}}}},
                    },
                    "task": {
                        "base": "base-task",
                        "presets": {
                            "smoke": {"train": {"lr": 0.5, "max_epochs": 3}, "family_train": {"transformer": {"lr": 0.01, "batch_size": 8}}}
                        },
                    },
                }
            }
        )
    )
    reg = Registry(path)
    run = resolve_run(reg, "rsa-transformer-I", "task", "smoke")
    assert {k: (getattr(run.train, k), run.train_sources[k]) for k in ("lr", "batch_size", "max_epochs")} == {
        "lr": (0.02, "preset base-task.smoke.family_train.rsa-transformer"),
        "batch_size": (8, "preset task.smoke.family_train.transformer"),
        "max_epochs": (4, "preset base-task.smoke.family_train.rsa-transformer"),
    }
    assert resolve_run(reg, "rsa-transformer-I", "task", "smoke", ["train.lr=0.3"]).train.lr == 0.3
    lstm = resolve_run(reg, "lstm", "task", "smoke")
    assert (lstm.train.lr, lstm.train_sources["lr"], lstm.train.batch_size) == (0.5, "preset task.smoke.train", 32)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "transfomer", "--task", "parity"], "did you mean 'transformer'"),
        (["--model", "transformer", "--task", "parity", "--set", "model.d_modl=3"], "has no parameter 'd_modl'"),
        (["--model", "transformer", "--task", "parity", "--preset", "large"], "unknown preset 'large'"),
    ],
)
def test_explain_bad_input_is_one_line(argv, message, capsys):
    assert main(["explain", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bench: error:") and message in err


def test_public_is_the_record_config():
    """Records hold this structure; the task's params are only those given (the class fills in its defaults)."""
    cfg = resolve_run(REG, "transformer", "copy", "smoke", ["data.n_train=100"]).public()
    assert list(cfg) == ["model", "task", "train", "preset"]
    assert list(cfg["model"]) == ["name", "target", "params", "causal"] and list(cfg["task"]) == [
        "name",
        "target",
        "params",
        "preset",
        "version",
    ]
    assert cfg["task"]["params"] == {"max_len": 40, "test_lengths": [40], "n_train": 100, "n_val": 64, "n_test": 64}
    assert cfg["task"]["version"] == "1"  # the copy generator was never bumped
    assert cfg["model"]["params"]["d_model"] == 32 and cfg["model"]["params"]["attn_backend"] == "sdpa"
    assert json.loads(json.dumps(cfg)) == cfg


def _redundant(section: str, entries: dict, name: str, accepted: dict) -> list[str]:
    """The entry's own params equal to what it would have without them (its bases', else the constructor's)."""
    bases, base = [], entries[name].get("base")
    while base:
        bases.append(base)
        base = entries[base].get("base")
    without = dict(accepted)
    for b in reversed(bases):
        without = deep_merge(without, entries[b].get("params") or {})
    own = entries[name].get("params") or {}
    return [
        f"{section}.{name}.params.{k}" for k, v in own.items() if k in without and (deep_merge({k: without[k]}, {k: v}) == {k: without[k]})
    ]


def test_registry_entries_hold_only_what_differs_from_the_constructor_and_their_bases():
    redundant = []
    for name in REG.model_names():
        accepted = constructor_params(import_model_class(REG.model_entry(name)["target"], name))
        redundant += _redundant("models", REG.raw_models, name, accepted)
    for name in REG.task_names():
        accepted = constructor_params(import_task_class(REG.task_entry(name)["target"], name), skip=("self",))
        redundant += _redundant("tasks", REG.raw_tasks, name, accepted)
    assert redundant == []
