"""A new task kind is one class (bench/tasks/kinds.py): a regression kind and a task of that kind,
both defined in this file only, validate and train a smoke run end to end; and the shipped kinds
own their collate, head, loss and outcomes (nothing else switches on kind names)."""

import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from conftest import ROOT
from torch import nn

import bench
from bench.data import collate
from bench.registry import Registry
from bench.tasks.base import Task
from bench.tasks.kinds import KINDS, TaskKind, pool


class CountKind(TaskKind):
    """ "tokens": [..], "count": float; the pooled state regresses the count, right within 0.5."""

    name = "test_count"
    columns = ("count",)

    def collate(self, examples, batch):
        batch["count"] = torch.tensor([float(ex["count"]) for ex in examples])

    def output_layer(self, d_model, vocab_size, num_classes, num_labels):
        return nn.Linear(d_model, 1)

    def logits(self, layer, out, mask, out2=None, mask2=None):
        return layer(pool(out, mask)).squeeze(-1)

    def loss(self, logits, batch):
        return F.mse_loss(logits, batch["count"])

    def outcomes(self, logits, batch):
        correct = (logits - batch["count"]).abs() < 0.5
        return {
            "correct": correct,
            "tok_correct": correct.long(),
            "n_scored": torch.ones_like(correct, dtype=torch.long),
            "last_correct": correct.float(),
        }


class CountOnes(Task):
    """How many 1s in a bit string (a regression task of the kind above)."""

    kind = "test_count"

    def __init__(self, n_train: int = 64, n_val: int = 16, n_test: int = 16, max_len: int = 6, data_seed: int = 1234):
        super().__init__(data_seed)
        self.sizes = {"train": n_train, "val": n_val, "test": n_test}
        self.max_len = max_len

    @property
    def vocab(self):
        return ["<pad>", "0", "1"]

    def test_splits(self):
        return ["test"]

    def generate(self, split, rng):
        strings = [rng.integers(0, 2, size=n) for n in rng.integers(1, self.max_len + 1, size=self.sizes[split])]
        return {"tokens": [s + 1 for s in strings], "count": [float(s.sum()) for s in strings]}


class FixedLabels(Task):
    """Classification whose labels are known: val 1 1 1 0 (majority share 3/4), test 2 0 2 1 2 (3/5)."""

    kind = "classify"
    num_classes = 3
    LABELS = {"train": [0, 1, 2] * 6, "val": [1, 1, 1, 0], "test": [2, 0, 2, 1, 2]}

    @property
    def vocab(self):
        return ["<pad>", "a", "b", "c"]

    def test_splits(self):
        return ["test"]

    def generate(self, split, rng):
        labels = self.LABELS[split]
        return {"tokens": [np.array([label + 1, *rng.integers(1, 4, size=3)]) for label in labels], "label": labels}


def registry_with(tmp_path, monkeypatch, name: str, task_class: type) -> Registry:
    """The shipped registry plus the task ``task_class`` of this file as ``name``, with a smoke preset."""
    module = __name__  # as pytest imported this file; the registry's target imports it from sys.modules
    assert getattr(sys.modules[module], task_class.__name__) is task_class
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    reg = yaml.safe_load((ROOT / "bench" / "registry.yaml").read_text())
    reg["tasks"][name] = {
        "target": f"{module}:{task_class.__name__}",
        "description": "test double",
        "presets": {
            "smoke": {
                "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32, "dropout": 0.0},
                "train": {"max_epochs": 1, "batch_size": 16},
            }
        },
    }
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump(reg, allow_unicode=True))
    return Registry(path)


@pytest.fixture
def count_registry(tmp_path, monkeypatch):
    return registry_with(tmp_path, monkeypatch, "count-ones", CountOnes)


def test_a_new_kind_is_one_class_and_trains(count_registry, tmp_path):
    assert KINDS["test_count"] is not None and isinstance(KINDS["test_count"], CountKind)
    rec = bench.run(
        model="transformer", task="count-ones", preset="smoke", seed=0, out=tmp_path / "out", registry=count_registry, progress=False
    )
    assert rec["status"] == "ok" and set(rec["metrics"]) == {"val", "test"}
    assert 0.0 <= rec["metrics"]["test"]["acc"] <= 1.0 and rec["metrics"]["test"]["n"] == 16
    assert "majority" not in rec["metrics"]["test"]  # a kind without class labels has no majority share


def test_a_classification_record_carries_each_split_s_majority_share(tmp_path, monkeypatch):
    """The share of each split's most frequent label, counted from the labels evaluated."""
    reg = registry_with(tmp_path, monkeypatch, "fixed-labels", FixedLabels)
    rec = bench.run(model="transformer", task="fixed-labels", preset="smoke", seed=0, out=tmp_path / "out", registry=reg, progress=False)
    assert rec["status"] == "ok"
    assert {s: (m["n"], m["majority"]) for s, m in rec["metrics"].items()} == {"val": (4, 0.75), "test": (5, 0.6)}


def test_collate_uses_the_kind_s_columns():
    examples = [{"index": 0, "tokens": np.array([1, 2]), "count": 1.0}, {"index": 1, "tokens": np.array([2]), "count": 1.0}]
    batch = collate(examples, kind="test_count")
    assert batch["count"].tolist() == [1.0, 1.0] and batch["tokens"].tolist() == [[1, 2], [2, 0]]
    assert batch["length"].tolist() == [2, 1]
    assert collate(examples)["count"].tolist() == [1.0, 1.0]  # the kind found by its columns


def test_shipped_kinds_are_registered():
    assert {"classify", "pair_classify", "tag", "lm"} <= set(KINDS)
    assert KINDS["pair_classify"].pair and not KINDS["classify"].pair
