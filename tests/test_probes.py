"""The probes (MQAR, selective copying, S5 / A5 / Z60 word problems): labels recomputed by
independent references written here, held-out splits disjoint from training, per-query
accuracy, models known to solve a probe learning it, and bad parameters refused in one line."""

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import bench
from bench.cli import main
from bench.metrics import OutcomeBuffer, example_outcomes
from bench.tasks.base import IGNORE
from bench.tasks.groups import GroupWordProblem
from bench.tasks.mqar import MQAR
from bench.tasks.selective_copy import SelectiveCopy

ROOT = Path(__file__).resolve().parents[1]


def splits_of(task) -> dict:
    return {s: task.generate(s, np.random.default_rng(task.split_seed(s))) for s in task.splits()}


def words(task, ids) -> list[str]:
    return [task.vocab[int(i)] if i != IGNORE else "." for i in ids]


# ---- MQAR -----------------------------------------------------------------------------------


def test_mqar_targets_are_the_values_the_prefix_pairs_with_the_queried_keys():
    task = MQAR(n_symbols=20, train_mix=[[16, 3, 200], [24, 5, 200]], test_settings=[[40, 8]], n_val=50, n_test=50)
    for data in splits_of(task).values():
        for tokens, targets, length in zip(data["tokens"], data["targets"], data["length"]):
            toks, tgts = words(task, tokens), words(task, targets)
            assert len(toks) == len(tgts) == length
            n = next(i for i, w in enumerate(toks) if not w.startswith(("k", "v"))) // 2  # the pairs' prefix
            keys, values = toks[0 : 2 * n : 2], toks[1 : 2 * n : 2]
            assert all(k.startswith("k") for k in keys) and all(v.startswith("v") for v in values)
            assert len(set(keys)) == len(keys) and len(set(values)) == len(values)
            assert (length, n) in {(16, 3), (24, 5), (40, 8)}
            pairs = dict(zip(keys, values))
            asked = []
            for t in range(len(toks)):
                if t >= 2 * n and toks[t] != "_":
                    assert (t - 2 * n) % 2 == 0 and tgts[t] == pairs[toks[t]]  # a query: its paired value
                    asked.append(toks[t])
                else:
                    assert tgts[t] == "."
            assert sorted(asked) == sorted(keys)  # every key asked once (n_queries = pairs by default)
    assert task.test_splits() == ["L40_kv8"]
    assert task.vocab[:4] == ["<pad>", "_", "k0", "k1"] and task.vocab[-1] == "v9" and task.vocab_size == 22


def test_mqar_fewer_queries_ask_a_random_subset_of_the_keys():
    task = MQAR(n_symbols=40, train_mix=[[30, 8, 400]], test_settings=[[30, 8]], n_queries=2, n_val=10, n_test=10)
    data = task.generate("train", np.random.default_rng(0))
    first_pair_asked = 0
    for tokens, targets in zip(data["tokens"], data["targets"]):
        toks = words(task, tokens)
        assert int((np.asarray(targets) != IGNORE).sum()) == 2
        first_pair_asked += toks[0] in toks[16:]
    assert 50 < first_pair_asked < 150  # 2 of 8 keys: the first pair asked in about 1/4 of 400 sequences


@pytest.mark.parametrize("power_a", [0.01, 1.0])
def test_mqar_query_slots_follow_zoologys_power_law(power_a):
    """One query: its slot k (offset 2k after the pairs) is drawn with probability k^(a-1) / sum."""
    task = MQAR(n_symbols=8, train_mix=[[24, 1, 4000]], test_settings=[[24, 1]], n_queries=1, power_a=power_a)
    data = task._sequences(np.random.default_rng(0), 4000, 24, 1)
    slot = (np.argmax(data["targets"] != IGNORE, axis=1) - 2) // 2
    p = np.arange(1, 12) ** (power_a - 1.0)
    p /= p.sum()
    freq = np.bincount(slot, minlength=11) / 4000
    assert np.abs(freq - p).max() < 0.03, (freq.round(3), p.round(3))


def test_mqar_accuracy_is_the_share_of_queries_answered():
    """token_acc counts queries over the whole split (not sequences): 4 right of 5 is 0.8, while
    acc (every query of a sequence right) is 1 of 2."""
    targets = torch.full((2, 10), IGNORE)
    targets[0, [2, 4, 6, 8]] = torch.tensor([5, 6, 7, 8])
    targets[1, 3] = 9
    logits = torch.zeros(2, 10, 12)
    logits[0, [2, 4, 6, 8], [5, 6, 7, 8]] = 1.0  # every query of the first sequence right
    logits[1, 3, 4] = 1.0  # the second one's only query wrong
    buf = OutcomeBuffer()
    buf.add(example_outcomes("lm", logits, {"targets": targets}), torch.tensor([10, 10]), {}, 2)
    summary = buf.summarize(lambda n: None)
    assert summary["token_acc"] == pytest.approx(0.8) and summary["acc"] == pytest.approx(0.5)
    assert MQAR.metric == "token_acc"


# ---- selective copying ------------------------------------------------------------------------


def test_selective_copy_targets_are_the_data_in_order():
    task = SelectiveCopy(n_symbols=5, n_data=4, train_len=12, test_lengths=[12, 30], n_train=300, n_val=30, n_test=30)
    for split, data in splits_of(task).items():
        L = 30 if split == "L30" else 12
        for tokens, targets, length in zip(data["tokens"], data["targets"], data["length"]):
            toks, tgts = words(task, tokens), words(task, targets)
            assert length == L and len(toks) == L + 4
            region = toks[:L]
            data_tokens = [w for w in region if w != "_"]  # the reference: the region without its noise
            assert len(data_tokens) == 4 and all(w.startswith("s") for w in data_tokens)
            assert toks[L:] == ["?"] * 4
            assert tgts == ["."] * L + data_tokens
    assert task.test_splits() == ["L12", "L30"] and task.vocab[:3] == ["<pad>", "_", "?"]


def test_selective_copy_positions_are_uniform():
    task = SelectiveCopy(n_symbols=3, n_data=2, train_len=10, test_lengths=[10])
    tokens = task._sequences(np.random.default_rng(0), 5000, 10)["tokens"][:, :10]
    share = (tokens != 1).mean(axis=0)  # how often each position holds data: 2 of 10
    assert np.abs(share - 0.2).max() < 0.025, share


# ---- group word problems --------------------------------------------------------------------


def compose(p: tuple, q: tuple) -> tuple:
    """(p . q)(i) = p(q(i)): q first."""
    return tuple(p[q[i]] for i in range(len(q)))


def sign(p: tuple) -> int:
    """+1 / -1 from the cycle decomposition (a cycle of length c is c - 1 transpositions)."""
    seen, transpositions = set(), 0
    for start in range(len(p)):
        length = 0
        while start not in seen:
            seen.add(start)
            start = p[start]
            length += 1
        transpositions += max(length - 1, 0)
    return -1 if transpositions % 2 else 1


@pytest.mark.parametrize("group", ["s5", "a5"])
def test_permutation_labels_are_the_running_products(group):
    task = GroupWordProblem(group=group, train_len=6, test_lengths=[6, 12], n_train=200, n_val=20, n_test=20)
    perms = {p for p in itertools.permutations(range(5)) if group == "s5" or sign(p) == 1}
    assert {tuple(map(int, name)) for name in task.vocab[1:]} == perms and len(task.vocab) == len(perms) + 1
    assert task.vocab[1] == "01234"
    for data in splits_of(task).values():
        for tokens, targets in zip(data["tokens"], data["targets"]):
            state = None
            for x, label in zip(words(task, tokens), words(task, targets)):
                x = tuple(map(int, x))
                state = x if state is None else compose(x, state)  # state_t = x_t . state_{t-1}
                assert label == "".join(map(str, state))


def test_the_docstrings_s5_example():
    task = GroupWordProblem(group="s5")
    ids = [task.vocab.index(w) for w in ("10234", "12034", "21034")]
    x = np.array(ids) - 1
    state = [x[0]]
    for e in x[1:]:
        state.append(task.table[e, state[-1]])
    assert [task.vocab[s + 1] for s in state] == ["10234", "21034", "01234"]
    assert compose((1, 2, 0, 3, 4), (1, 0, 2, 3, 4)) == (2, 1, 0, 3, 4)  # 12034 . 10234 = 21034


def test_z60_labels_are_running_sums_mod_60():
    task = GroupWordProblem(group="z60", train_len=7, test_lengths=[7, 21], n_train=200, n_val=20, n_test=20)
    assert task.vocab[1:] == [str(r) for r in range(60)]
    for data in splits_of(task).values():
        for tokens, targets in zip(data["tokens"], data["targets"]):
            total = 0
            for x, label in zip(words(task, tokens), words(task, targets)):
                total = (total + int(x)) % 60
                assert label == str(total)
    assert task.test_splits() == ["len7", "len21"]
    assert GroupWordProblem(group="z60", train_len=16).test_splits() == ["len16", "len32", "len64", "len128"]


# ---- held-out splits ----------------------------------------------------------------------------


def as_set(rows) -> set:
    return {tuple(int(x) for x in r) for r in rows}


@pytest.mark.parametrize(
    "make, iid, raw",
    [
        (
            lambda: MQAR(n_symbols=6, train_mix=[[7, 2, 600]], test_settings=[[7, 2], [9, 2]], n_val=100, n_test=100),
            "L7_kv2",
            lambda task, rng: task._sequences(rng, 300, 7, 2),
        ),
        (
            lambda: SelectiveCopy(n_symbols=2, n_data=2, train_len=5, test_lengths=[5, 10], n_train=600, n_val=100, n_test=100),
            "L5",
            lambda task, rng: task._sequences(rng, 300, 5),
        ),
        (
            lambda: GroupWordProblem(group="z60", train_len=2, test_lengths=[2, 4], n_train=3000, n_val=100, n_test=100),
            "len2",
            lambda task, rng: task._sequences(rng, 300, 2),
        ),
    ],
)
def test_validation_and_in_distribution_tests_never_hold_a_training_sequence(make, iid, raw):
    """Distributions small enough that independent draws repeat training sequences; the splits do not."""
    task = make()
    data = splits_of(task)
    train = as_set(data["train"]["tokens"])
    unfiltered = [tuple(int(x) for x in r) for r in raw(task, np.random.default_rng(99))["tokens"]]
    assert sum(r in train for r in unfiltered) > 30  # a test drawn without the filter would repeat training sequences
    assert train & as_set(data["val"]["tokens"]) == set()
    assert train & as_set(data[iid]["tokens"]) == set()
    assert as_set(data["val"]["tokens"]) & as_set(data[iid]["tokens"]) == set()
    assert len(data["val"]["tokens"]) == len(data[iid]["tokens"]) == 100


def test_same_seed_same_data_and_resizing_train_keeps_the_tests():
    a = MQAR(n_symbols=16, train_mix=[[12, 2, 50]], test_settings=[[24, 4]], n_val=10, n_test=10)
    b = MQAR(n_symbols=16, train_mix=[[12, 2, 80]], test_settings=[[24, 4]], n_val=10, n_test=10)
    for split in ("val", "L24_kv4"):
        x, y = (t.generate(split, np.random.default_rng(t.split_seed(split))) for t in (a, b))
        assert np.array_equal(np.stack(x["tokens"]), np.stack(y["tokens"]))
    x = a.generate("train", np.random.default_rng(5))["tokens"]
    y = a.generate("train", np.random.default_rng(5))["tokens"]
    assert np.array_equal(np.stack(x), np.stack(y))


# ---- the CLI ------------------------------------------------------------------------------------


def run_cli(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


BAD = [
    ("mqar", ["data.n_symbols=6", "data.train_mix=[[16, 4, 10]]"], "4 pairs need 4 distinct keys and values, but n_symbols=6 has 3 keys"),
    ("mqar", ["data.train_mix=[[6, 4, 10]]"], "length 6 is below the span of 4 pairs and 4 queries; give length >= 15"),
    ("mqar", ["data.test_settings=[[16, 2], [20, 8]]"], "length 20 is below the span of 8 pairs and 8 queries; give length >= 31"),
    ("mqar", ["data.n_queries=9"], "n_queries=9 is more than the 2 pairs"),
    ("mqar", ["data.train_mix=[[16, 0, 10]]"], "must be a positive integer, got 0"),
    ("selective-copy", ["data.n_data=-1"], "n_data must be a positive integer, got -1"),
    ("selective-copy", ["data.test_lengths=[16, 2]"], "cannot hold n_data=4 data tokens"),
    ("s5", ["data.group=s6"], "unknown group 's6'; groups: s5, a5, z60"),
    ("z60", ["data.train_len=0"], "data.train_len=0: must be >= 1"),  # the shared size check, before the task
    ("a5", ["data.n_train=-5"], "data.n_train=-5: must be >= 1"),
]


@pytest.mark.parametrize("task, sets, message", BAD)
def test_bad_parameters_are_one_line_exit_2(task, sets, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    argv = ["run", "--model", "lstm", "--task", task, "--preset", "smoke", "--out", str(tmp_path / "out")]
    for s in sets:
        argv += ["--set", s]
    code, _, err = run_cli(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("bench: error:"), err
    assert message in lines[0]
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.json"))


@pytest.mark.slow  # a fresh interpreter importing torch: seconds on an idle machine, a minute on a busy one
def test_bad_group_from_a_real_process(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "run",
            "--model",
            "lstm",
            "--task",
            "s5",
            "--preset",
            "smoke",
            "--set",
            "data.group=q8",
            "--out",
            str(tmp_path / "out"),
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == ["bench: error: task 's5': unknown group 'q8'; groups: s5, a5, z60"]
    assert "Traceback" not in proc.stderr and not list(tmp_path.rglob("*.json"))


def test_list_and_explain_show_the_probes(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and all(name in out for name in ("mqar", "selective-copy", "s5", "a5", "z60"))
    code, out, _ = run_cli(capsys, "explain", "--model", "gut", "--task", "s5", "--preset", "small")
    assert code == 0
    for text in ("group", "s5", "train_len", "16", "test_lengths", "128"):
        assert text in out, text


# ---- models that solve the probes learn them (one thread: tiny models, a second only adds sync) --


@pytest.mark.slow
def test_the_transformer_learns_mqar_with_few_pairs(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    rec = bench.run(
        model="transformer",
        task="mqar",
        preset="smoke",
        seed=0,
        out=tmp_path,
        progress=False,
        overrides=[
            "data.n_symbols=8",
            "data.train_mix=[[12, 2, 2000]]",
            "data.test_settings=[[12, 2]]",
            "train.max_epochs=2",
            "train.lr=0.005",
            "train.num_threads=1",
        ],
    )
    assert rec["status"] == "ok"
    assert rec["metrics"]["L12_kv2"]["token_acc"] >= 0.9, rec["metrics"]["L12_kv2"]


@pytest.mark.slow
def test_the_lstm_learns_z60(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    rec = bench.run(
        model="lstm",
        task="z60",
        preset="smoke",
        seed=0,
        out=tmp_path,
        progress=False,
        overrides=[
            "data.n_train=4000",
            "data.test_lengths=[8, 16]",
            "model.d_model=64",
            "train.max_epochs=14",
            "train.lr=0.01",
            "train.num_threads=1",
        ],
    )
    assert rec["status"] == "ok"
    assert rec["metrics"]["len8"]["token_acc"] >= 0.9, rec["metrics"]["len8"]
