"""The "Adding a task" worked example (one file + one entry), taken from docs/adding-a-task.md
text itself, validates, generates what its docstring says and trains end to end."""

import sys

import numpy as np
import pytest
import yaml
from conftest import readme_example

import bench
from bench.config import resolve_run
from bench.registry import Registry
from bench.validation import registry_problems


@pytest.fixture
def readme_registry(tmp_path, monkeypatch):
    reg, _ = readme_example(tmp_path, monkeypatch, "majority.py", "tasks", "readme_tasks")
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump(reg, allow_unicode=True))
    yield Registry(path)
    for name in ("readme_tasks.majority", "readme_tasks"):
        sys.modules.pop(name, None)


def test_the_example_validates_and_generates_what_it_says(readme_registry):
    assert registry_problems(readme_registry) == []
    task = bench.build_task("majority", preset="smoke", registry=readme_registry)
    assert task.name == "majority"
    assert {k: task.params[k] for k in ("n_train", "n_val", "n_test", "max_len")} == {
        "n_train": 128,
        "n_val": 32,
        "n_test": 32,
        "max_len": 8,
    }
    assert task.vocab[0] == "<pad>" and task.splits() == ["train", "val", "iid", "long"]
    expected = {"train": (128, 1, 8), "val": (32, 1, 8), "iid": (32, 1, 8), "long": (32, 9, 16)}  # size, lengths
    for split, (size, lo, hi) in expected.items():
        data = task.generate(split, np.random.default_rng(task.split_seed(split)))
        assert len(data["tokens"]) == len(data["label"]) == size
        for tokens, label in zip(data["tokens"], data["label"]):
            ones, zeros = list(tokens).count(2), list(tokens).count(1)
            assert ones + zeros == len(tokens) and lo <= len(tokens) <= hi
            assert label == int(ones > zeros)  # a tie is 0
    assert [task.length_bin(n) for n in (1, 10, 11, 16)] == ["1-10", "1-10", "11-20", "11-20"]
    for preset in ("smoke", "small", "paper"):
        for model in ("transformer", "lstm"):
            resolve_run(readme_registry, model, "majority", preset)  # every preset resolves for every family
    paper = resolve_run(readme_registry, "transformer", "majority", "paper")
    assert paper.model.params["n_layers"] == 6 and paper.task.params["max_len"] == 50


def test_the_example_trains_and_reports_per_length(readme_registry, tmp_path):
    rec = bench.run(
        model="transformer", task="majority", preset="smoke", seed=0, out=tmp_path / "out", registry=readme_registry, progress=False
    )
    assert rec["status"] == "ok" and set(rec["metrics"]) == {"val", "iid", "long"}
    assert set(rec["metrics"]["iid"]["by_length"]) == {"1-10"}
    assert set(rec["metrics"]["long"]["by_length"]) == {"1-10", "11-20"}
    assert sum(b["n"] for b in rec["metrics"]["long"]["by_length"].values()) == 32


def test_every_model_builds_on_the_example_s_presets_without_a_family_block(readme_registry):
    """The page's presets state data, sizes and training only, and its entry lives in the file beside
    the module (the registry names just the target): every model entry resolves and is built on the
    smoke and small presets, the RSA-Transformer's 5-head Table 2 cases fitted to the 4 heads."""
    from bench.runner.build import instantiate_model

    entry = readme_registry.task_entry("majority")
    assert entry["description"].startswith("Majority") and set(entry["presets"]) == {"smoke", "small", "paper"}
    for preset in ("smoke", "small"):
        assert "family" not in entry["presets"][preset]
        for model in readme_registry.model_names():
            run = resolve_run(readme_registry, model, "majority", preset)
            instantiate_model(run.model, vocab_size=3)
    case_one = resolve_run(readme_registry, "rsa-transformer-I", "majority", "smoke").model
    assert case_one.params["rsa"]["kinds"] == [4, 0, 0, 0, 0, 0] and case_one.sources["rsa.kinds"] == "adapted to n_heads=4 by Transformer"
