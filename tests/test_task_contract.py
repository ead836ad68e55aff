"""Every registry task keeps the task contract (bench/tasks/base.py) at its smoke preset: each split
is drawn from its own seed only (the same seed gives the same columns, another seed other ones), its
columns are the kind's (bench/tasks/kinds.py), of one length, with every token a vocabulary id and
every target within the task's classes / labels / vocabulary. Conformance checks over the registry's
tasks (tests/conformance.py): `make test-task NAME=...` runs them with every model's forward and
backward pass on the task (tests/test_models.py). A task that reads the user's files (it declares
``reads_user_files``) is checked where they are supplied; any other task that cannot build its
splits fails."""

import numpy as np
import pytest
from conformance import TASKS, task_class

import bench
from bench.errors import UserError
from bench.tasks.base import IGNORE, TaskError
from bench.tasks.kinds import KINDS


def smoke_task(name):
    try:
        task = bench.build_task(name, preset="smoke")
        task.generate("val", np.random.default_rng(task.split_seed("val")))  # the user's files, where it reads them
    except (UserError, TaskError) as exc:
        if task_class(name).reads_user_files:
            pytest.skip(f"{name} reads the user's files, and none are supplied ({exc})")
        raise
    return task


def ids(values) -> list[int]:
    return [int(x) for x in np.asarray(values).ravel()]


@pytest.mark.conformance(task="name")
@pytest.mark.parametrize("name", TASKS)
def test_a_split_is_drawn_from_its_seed_alone(name):
    task = smoke_task(name)
    split = task.test_splits()[0]
    seed = task.split_seed(split)
    first, again = (task.generate(split, np.random.default_rng(seed)) for _ in range(2))
    assert first.keys() == again.keys()
    for col in first:
        assert [np.asarray(x).tolist() for x in first[col]] == [np.asarray(x).tolist() for x in again[col]], f"{split}.{col} changed"
    other = task.generate(split, np.random.default_rng(seed + 1))
    assert [np.asarray(x).tolist() for x in other["tokens"]] != [np.asarray(x).tolist() for x in first["tokens"]]
    assert len({task.split_seed(s) for s in task.splits()}) == len(task.splits())  # a seed per split


@pytest.mark.conformance(task="name")
@pytest.mark.parametrize("name", TASKS)
def test_every_split_holds_the_kinds_columns_within_range(name):
    task = smoke_task(name)
    kind = KINDS[task.kind]
    assert task.vocab[0] == "<pad>" and len(set(task.vocab)) == task.vocab_size
    assert task.metric in task.report_metrics or task.metric in ("acc", "token_acc", "last_acc")
    for split in task.splits():
        cols = task.generate(split, np.random.default_rng(task.split_seed(split)))
        n = len(cols["tokens"])
        assert n > 0, f"{split} is empty"
        assert {"tokens", *kind.columns} <= set(cols), f"{split}: {sorted(cols)} lacks the {task.kind} columns {kind.columns}"
        assert all(len(c) == n for c in cols.values()), f"{split}: columns of different lengths"
        for col in ("tokens", "tokens2"):
            for row in cols.get(col, []):
                assert ids(row) and min(ids(row)) >= 0 and max(ids(row)) < task.vocab_size, f"{split}.{col}: an id outside the vocabulary"
        if "label" in cols:
            assert set(ids(cols["label"])) <= set(range(task.num_classes)), f"{split}: a label outside 0..{task.num_classes - 1}"
        for tokens, labels in zip(cols["tokens"], cols.get("labels", [])):
            assert np.asarray(labels).shape == (len(tokens), task.num_labels) and set(ids(labels)) <= {0, 1}
        for tokens, targets in zip(cols["tokens"], cols.get("targets", [])):
            scored = [t for t in ids(targets) if t != IGNORE]
            assert len(ids(targets)) == len(tokens) and scored, f"{split}: targets misaligned or none scored"
            assert min(scored) >= 0 and max(scored) < task.vocab_size
