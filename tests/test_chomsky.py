"""The Chomsky-hierarchy tasks (Deletang et al. 2023): every split's targets recomputed by an
independent reference (Python arithmetic, slicing, a list as the stack, ``sorted``), the layout,
the splits' disjointness, bad parameters at the CLI, and a model that learns one of them."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bench
from bench.cli import main
from bench.tasks.base import IGNORE
from bench.tasks.bucket_sort import BucketSort
from bench.tasks.chomsky import length_averaged
from bench.tasks.modular_arithmetic import ModularArithmetic
from bench.tasks.reverse_string import ReverseString
from bench.tasks.stack_manipulation import StackManipulation

ROOT = Path(__file__).resolve().parent.parent


def modular_reference(symbols: list[str], modulus: int) -> list[str]:
    """Python's own precedence and left-to-right evaluation, then Python's modulo."""
    return [str(eval(" ".join(symbols), {"__builtins__": {}}) % modulus)]


def stack_reference(symbols: list[str]) -> list[str]:
    stack = []
    for s in symbols:
        if s in "01":
            stack.append(s)
        elif s == "POP":
            if stack:
                stack.pop()
        else:
            stack.append(s[-1])  # PUSH0 / PUSH1
    return stack[::-1] + ["$"]


def stack_input_ok(symbols: list[str]) -> bool:
    """A non-empty stack of bits, then actions only (one bit alone at length 1)."""
    bits = len(symbols) - len([s for s in symbols if s not in "01"])
    return bits >= 1 and all(s in "01" for s in symbols[:bits]) and all(s not in "01" for s in symbols[bits:])


TASKS = {
    "modular-arithmetic": (ModularArithmetic, lambda t, s: modular_reference(s, t.modulus)),
    "reverse-string": (ReverseString, lambda t, s: s[::-1]),
    "stack-manipulation": (StackManipulation, lambda t, s: stack_reference(s)),
    "bucket-sort": (BucketSort, lambda t, s: sorted(s, key=int)),
}
SIZES = {"max_len": 12, "test_max_len": 40, "test_len_step": 7, "n_train": 300, "n_val": 40, "n_test": 60, "n_test_per_length": 5}


def decode(task, tokens, targets) -> tuple[list[str], list[str]]:
    """(input symbols, output symbols), checking the layout: input, "=", "_" x (k - 1), targets on the last k."""
    words = [task.vocab[t] for t in tokens]
    n = words.index("=")
    assert all(w not in ("=", "_", "<pad>") for w in words[:n])
    assert words[n + 1 :] == ["_"] * (len(words) - n - 1)
    assert list(targets[:n]) == [IGNORE] * n and IGNORE not in list(targets[n:])
    return words[:n], [task.vocab[t] for t in targets[n:]]


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("split", ["train", "iid", "ood"])
def test_targets_match_an_independent_reference(name, split):
    cls, reference = TASKS[name]
    task = cls(**SIZES)
    data = task.generate(split, np.random.default_rng(task.split_seed(split)))
    assert len(data["tokens"]) == {"train": 300, "iid": 60, "ood": 5 * len(task.ood_lengths)}[split]
    for tokens, targets, length in zip(data["tokens"], data["targets"], data["length"]):
        symbols, answer = decode(task, tokens, targets)
        assert len(symbols) == length
        assert answer == reference(task, symbols), " ".join(symbols)
        if name == "stack-manipulation":
            assert stack_input_ok(symbols), " ".join(symbols)
        if name == "modular-arithmetic":
            assert length % 2 == 1 and all((s in "+-*") == (i % 2 == 1) for i, s in enumerate(symbols))
    lengths = set(data["length"])
    if split == "ood":
        expected = range(13, 41, 7) if name != "modular-arithmetic" else [13, 19, 27, 33]  # 13, 20, 27, 34 made odd
        assert sorted(lengths) == list(expected)
        assert all(data["length"].count(n) == 5 for n in lengths)
    else:
        assert min(lengths) >= 1 and max(lengths) <= 12 and len(lengths) >= 5


def test_worked_examples():
    """The docstrings' examples and the reference repository's own (hand-computed)."""
    task = ModularArithmetic()
    plus, minus, times = 0, 1, 2
    cases = [
        ([1, 2, 3, 4], [plus, times, minus], 3),
        ([1, 2, 3], [plus, times], 2),
        ([1, 1, 1], [minus, minus], 4),
        ([0, 1, 4, 3, 2], [times, plus, times, minus], 0),
    ]
    for numbers, ops, value in cases:
        assert task.evaluate(np.array([numbers]), np.array([ops]))[0] == value
    from bench.tasks.stack_manipulation import final_stack

    assert final_stack([0, 1, 1, 0], [4, 2, 2]) == [0, 1, 1]  # PUSH1 POP POP
    assert final_stack([1, 1, 0], [2, 2, 2, 2]) == []  # the last POP meets an empty stack
    data = ReverseString().vocab, BucketSort().vocab
    assert data == (["<pad>", "=", "_", "0", "1"], ["<pad>", "=", "_", "0", "1", "2", "3", "4"])


@pytest.mark.parametrize("name", TASKS)
def test_splits_are_disjoint_seeded_and_ood_is_longer(name):
    cls, _ = TASKS[name]
    task = cls(**{**SIZES, "n_train": 2000, "n_val": 200, "n_test": 400})
    texts, lengths = {}, {}
    for split in task.splits():
        data = task.generate(split, np.random.default_rng(task.split_seed(split)))
        again = task.generate(split, np.random.default_rng(task.split_seed(split)))
        assert all(np.array_equal(a, b) for a, b in zip(data["tokens"], again["tokens"]))
        texts[split] = {" ".join(task.vocab[t] for t in tokens) for tokens in data["tokens"]}
        lengths[split] = data["length"]
    assert not texts["train"] & texts["val"] and not texts["train"] & texts["iid"] and not texts["val"] & texts["iid"]
    assert min(lengths["ood"]) > 12 >= max(lengths["train"]) >= 11


@pytest.mark.parametrize("task", [BucketSort(alphabet_size=200, **SIZES), ModularArithmetic(modulus=131, **SIZES)])
def test_large_alphabets_keep_their_token_ids(task):
    name = "bucket-sort" if isinstance(task, BucketSort) else "modular-arithmetic"
    data = task.generate("ood", np.random.default_rng(0))
    assert max(int(t.max()) for t in data["tokens"]) > 127  # past int8
    for tokens, targets in zip(data["tokens"], data["targets"]):
        symbols, answer = decode(task, tokens, targets)
        assert answer == TASKS[name][1](task, symbols)


def test_per_length_bins_and_the_length_averaged_score():
    task = ReverseString(max_len=10, test_max_len=30, bin_width=1)
    assert task.length_bin(17) == "17"
    assert ReverseString(bin_width=20).length_bin(41) == "41-60"
    split = {"token_acc": 0.6, "by_length": {"41": {"token_acc": 1.0}, "61": {"token_acc": 0.5}, "81": {"token_acc": 0.0}}}
    assert length_averaged(split) == pytest.approx(0.5)  # the unweighted mean over lengths, not the pooled 0.6


BAD = [
    ("reverse-string", "data.max_len=0", "data.max_len=0: must be >= 1"),  # the shared size check, before the task
    ("reverse-string", "data.min_len=-1", "data.min_len=-1: must be >= 1"),
    ("bucket-sort", "data.n_train=-5", "n_train=-5"),
    ("bucket-sort", "data.test_max_len=30", "test_max_len=30 must exceed max_len=40"),
    ("bucket-sort", "data.alphabet_size=1", "alphabet_size=1"),
    ("reverse-string", "data.alphabet_size=0", "alphabet_size=0"),
    ("modular-arithmetic", "data.modulus=1", "modulus=1"),
    ("modular-arithmetic", "data.operators=+/", "operators"),
    ("stack-manipulation", "data.test_len_step=0", "test_len_step=0"),
]


@pytest.mark.parametrize("task,setting,message", BAD, ids=[b[1] for b in BAD])
def test_bad_parameters_are_one_line_exit_2(task, setting, message, tmp_path, capsys):
    code = main(["run", "--model", "lstm", "--task", task, "--preset", "small", "--set", setting, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("bench: error:") and message in lines[0], err
    assert not list(tmp_path.rglob("*.json"))


def test_bad_parameter_from_a_subprocess_has_no_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.cli",
            "run",
            "--model",
            "transformer",
            "--task",
            "modular-arithmetic",
            "--set",
            "data.modulus=0",
            "--out",
            str(tmp_path),
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "modulus=0: must be >= 2" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_transformer_learns_bucket_sort_at_short_lengths(tmp_path):
    rec = bench.run(
        model="transformer",
        task="bucket-sort",
        preset="smoke",
        seed=0,
        out=tmp_path,
        progress=False,
        overrides=[
            "data.max_len=8",
            "data.n_train=1000",
            "data.test_max_len=16",
            "data.test_len_step=4",
            "model.d_model=64",
            "train.max_epochs=3",
            "train.lr=0.005",
            "train.num_threads=1",
        ],
    )
    assert rec["status"] == "ok"
    assert rec["metrics"]["iid"]["token_acc"] > 0.95  # chance: ~0.2 per token (5 symbols)


def test_a_record_carries_the_token_chance_of_each_split_and_length(tmp_path):
    """``token_majority``: the token accuracy of always guessing the split's most frequent answer,
    in the split and in each length bin, recounted here from the task's own data."""
    from collections import Counter

    from bench.targets import import_task_class

    overrides = [
        "data.max_len=8",
        "data.n_train=64",
        "data.n_val=32",
        "data.test_max_len=16",
        "data.test_len_step=4",
        "train.max_epochs=1",
        "train.num_threads=1",
    ]
    rec = bench.run(model="gru", task="modular-arithmetic", preset="smoke", seed=0, out=tmp_path, progress=False, overrides=overrides)
    assert rec["status"] == "ok"
    cfg = rec["config"]["task"]  # the task the run resolved (its parameters and data seed)
    task = import_task_class(cfg["target"], "modular-arithmetic").build("modular-arithmetic", dict(cfg["params"]))
    for split in ("iid", "ood"):
        data = task.generate(split, np.random.default_rng(task.split_seed(split)))
        answers = [int(t[t != IGNORE][0]) for t in data["targets"]]  # one answer token per expression
        guess, count = Counter(answers).most_common(1)[0]
        metrics = rec["metrics"][split]
        assert metrics["token_majority"] == pytest.approx(count / len(answers))
        assert metrics["last_majority"] == pytest.approx(count / len(answers))  # one scored token: it is the last
        for label, entry in metrics["by_length"].items():
            mine = [a for a, n in zip(answers, data["length"]) if task.length_bin(int(n)) == label]
            assert entry["token_majority"] == pytest.approx(sum(a == guess for a in mine) / len(mine))
    # scripts/backfill_majority.py writes the same values into a record made before they existed
    import json

    from script_helpers import load_script

    script = load_script("scripts/backfill_majority.py")
    older = json.loads(json.dumps(rec))
    for split in older["metrics"].values():
        split.pop("token_majority")
        split.pop("last_majority")
        for entry in split.get("by_length", {}).values():
            entry.pop("token_majority")
            entry.pop("last_majority")
    path = tmp_path / "older.json"
    path.write_text(json.dumps(older))
    filled, what = script.backfill(path, {})
    assert what.startswith("token_majority val ") and json.dumps(filled) == json.dumps(rec)
