"""Trivial strategies (bench/tasks/trivial.py, scored by bench/tasks/chance.py): each strategy's outcomes on hand-written examples,
the chance level as the best of them, and the levels a record keeps (new runs, backfilled ones)."""

import json

import numpy as np
import pytest

from bench.tasks import chance, trivial
from bench.tasks.base import IGNORE
from bench.tasks.flipflop import FlipFlop
from bench.tasks.groups import COPY_FIRST, GroupWordProblem
from bench.tasks.listops import ListOps
from bench.tasks.modular_arithmetic import ModularArithmetic
from bench.tasks.mqar import GUESS_CONTEXT_VALUE, MQAR

X = IGNORE


def test_mqar_guessing_a_value_of_the_context_scores_one_over_the_pairs():
    """MQAR (n_symbols 8: keys are ids 2-5, values 6-9): a sequence of 2 pairs and one of 3 pairs;
    a uniform guess among the context's values is right with probability 1/2 and 1/3."""
    task = MQAR(n_symbols=8, train_mix=[[16, 2, 1]], test_settings=[[16, 2]])
    columns = {
        "tokens": [np.array([2, 6, 3, 7, 2, 1, 3, 1]), np.array([4, 8, 5, 9, 2, 6, 4, 1, 5, 1])],
        "targets": [np.array([X, X, X, X, 6, X, 7, X]), np.array([X, X, X, X, X, X, 8, X, 9, X])],
    }
    right = chance.outcomes(task, columns)[GUESS_CONTEXT_VALUE]
    assert right["token_correct"].tolist() == [1.0, pytest.approx(2 / 3)]  # 2 x 1/2, 2 x 1/3
    assert right["correct"].tolist() == [0.25, pytest.approx(1 / 9)]  # both queries right: (1/N)^2
    assert right["last_correct"].tolist() == [0.5, pytest.approx(1 / 3)]
    levels = chance.levels(task, columns)  # the most frequent value scores 1 of 4 queries: less
    assert levels["token_acc"] == {"level": pytest.approx((1 + 2 / 3) / 4), "strategy": GUESS_CONTEXT_VALUE}


def test_z60_copying_the_first_element_is_the_word_problems_floor():
    """The worked example of bench/tasks/groups.py, Z60: tokens 7 55 3 -> labels 7 2 5 (token id =
    residue + 1). Copying the first element and guessing the rest: 1 + 2/60 of 3 states; repeating
    the current element: right at the first state only (2 != 55, 5 != 3)."""
    task = GroupWordProblem("z60", train_len=3, test_lengths=[3])
    columns = {"tokens": [np.array([8, 56, 4])], "targets": [np.array([8, 3, 6])]}
    found = chance.outcomes(task, columns)
    assert found[COPY_FIRST]["token_correct"].tolist() == [pytest.approx(1 + 2 / 60)]
    assert found[trivial.REPEAT_TOKEN]["token_correct"].tolist() == [1.0]
    assert found[trivial.REPEAT_TOKEN]["last_correct"].tolist() == [0.0]
    assert chance.levels(task, columns)["token_acc"] == {"level": pytest.approx((1 + 2 / 60) / 3), "strategy": COPY_FIRST}
    # on a whole generated split the level is 1/L + (L - 1) / (60 L) in expectation: 7.8% at L 16
    words = GroupWordProblem("z60", 16, [16], n_test=2000)
    level = chance.levels(words, words.generate("len16", np.random.default_rng(0)))["token_acc"]["level"]
    assert level == pytest.approx(1 / 16 + 15 / (60 * 16), abs=0.004)


def test_flipflop_repeating_the_previous_bit_scores_what_the_instructions_allow():
    """The worked example of bench/tasks/flipflop.py: w 0 i 1 w 1 r 1 i 0 r 1 (ids w 1, r 2, i 3,
    bits 4 / 5). Reads at positions 6 and 10; the token before each is the bit of the instruction
    before: 1 (a write: right), then 0 (an ignore: wrong, the read is 1)."""
    task = FlipFlop(n_train=4, n_test=4, n_val_each=4, train_len=12, test_lens=[12], test_p_i=[0.5])
    tokens = np.array([1, 4, 3, 5, 1, 5, 2, 5, 3, 4, 2, 5])
    targets = np.full(12, X)
    targets[6], targets[10] = 5, 5
    right = chance.outcomes(task, {"tokens": [tokens], "targets": [targets]})[trivial.REPEAT_PREVIOUS]
    assert right["token_correct"].tolist() == [1.0] and right["last_correct"].tolist() == [0.0] and right["correct"].tolist() == [0.0]
    # at p_i 0.1 a read's previous instruction is an ignore (a random bit) 10% of the time: 0.9 + 0.05 = 95%
    dense = FlipFlop(n_train=4, n_test=4000, n_val_each=4, train_len=64, test_lens=[64], test_p_i=[0.1])
    split = dense.generate("T64_p1", np.random.default_rng(dense.split_seed("T64_p1")))
    level = chance.levels(dense, split)["last_acc"]
    assert level["strategy"] == trivial.REPEAT_PREVIOUS and level["level"] == pytest.approx(0.95, abs=0.01)


def test_modular_arithmetic_repeating_the_last_number_is_one_of_its_strategies():
    """The answer is read at "=", after the last number: 1 + 2 * 3 - 4 = 3 and 2 + 4 = 1 are wrong by
    that strategy, 1 * 3 = 3 is right."""
    task = ModularArithmetic(n_train=4, n_val=4, n_test_per_length=4)
    ids = {name: i for i, name in enumerate(task.vocab)}

    def example(text: str, answer: int):
        tokens = np.array([ids[c] for c in text.split()])
        targets = np.full(len(tokens), X)
        targets[-1] = ids[str(answer)]
        return tokens, targets

    (t1, g1), (t2, g2), (t3, g3) = example("1 + 2 * 3 - 4 =", 3), example("2 + 4 =", 1), example("1 * 3 =", 3)
    found = chance.outcomes(task, {"tokens": [t1, t2, t3], "targets": [g1, g2, g3]})
    assert found[trivial.REPEAT_PREVIOUS]["correct"].tolist() == [0.0, 0.0, 1.0]


def test_a_classification_split_s_level_is_its_majority_share():
    task = ListOps(n_train=4, n_val=4, n_test=4)
    columns = {"tokens": [np.array([1])] * 5, "label": np.array([3, 3, 1, 3, 0])}
    assert chance.levels(task, columns) == {m: {"level": 0.6, "strategy": trivial.MOST_FREQUENT} for m in ("acc", "token_acc", "last_acc")}


def test_the_best_label_of_the_current_symbol_is_a_lookup_without_memory():
    """A tag split whose label is a function of the symbol just read: the lookup is always right,
    the most frequent vector only on the majority symbol's positions."""
    from bench.tasks.formal_languages import Parity

    task = Parity(n_train=4, n_val=4, n_test=4)
    tokens = [np.array([1, 2, 2]), np.array([2, 1])]
    labels = [np.array([[1, 0], [0, 1], [0, 1]]), np.array([[0, 1], [1, 0]])]  # symbol 1 -> [1, 0], symbol 2 -> [0, 1]
    found = chance.outcomes(task, {"tokens": tokens, "labels": labels, "length": [3, 2]})
    assert found[trivial.TOKEN_LOOKUP]["correct"].tolist() == [1.0, 1.0]
    assert found[trivial.MOST_FREQUENT]["token_correct"].tolist() == [2.0, 1.0]  # [0, 1] (vector 2) is the most frequent


def test_levels_by_length_and_length_averaged_take_one_strategy_for_the_split():
    """Two bins: strategy A right on bin 1 only, B on bin 2 only (per bin the best is 100%), while
    averaged over the bins each scores 50%: the length-averaged level is 50%, not 100%."""
    task = FlipFlop(n_train=4, n_test=4, n_val_each=4, train_len=8, test_lens=[8], test_p_i=[0.5])
    # lengths 4 and 6: the scored target equals the current token in the first, the previous one in the second
    columns = {
        "tokens": [np.array([1, 4, 2, 5]), np.array([1, 4, 3, 5, 2, 4])],
        "targets": [np.array([X, X, 2, X]), np.array([X, X, X, X, 5, X])],
    }
    found = chance.levels(task, columns, lambda length: f"T{length}")
    assert found["by_length"]["T4"]["token_acc"]["level"] == 1.0 and found["by_length"]["T6"]["token_acc"]["level"] == 1.0
    assert found["length_avg_token_acc"]["level"] == 0.5
    metrics = chance.with_levels({"n": 2, "by_length": {"T4": {"n": 1}, "T6": {"n": 1}}}, task, columns)
    assert metrics["by_length"]["T4"]["chance"]["token_acc"] == 1.0 and metrics["chance"]["length_avg_token_acc"]["level"] == 0.5


def test_a_split_s_metrics_get_its_chance_levels(tmp_path, monkeypatch):
    """bench/data.py: TaskData.with_chance, what every new record's split metrics go through."""
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    from bench.data import TaskData

    task = MQAR(n_symbols=64, train_mix=[[32, 4, 16]], test_settings=[[64, 8]], n_val=16, n_test=50)
    data = TaskData(task, 8, 8, 0)
    metrics = data.with_chance("L64_kv8", {"n": 50, "token_acc": 0.5, "by_length": {"L64": {"n": 50}}})
    assert metrics["chance"]["token_acc"] == {"level": 0.125, "strategy": GUESS_CONTEXT_VALUE}
    assert metrics["by_length"]["L64"]["chance"]["token_acc"] == 0.125 and "token_majority" in metrics


def test_backfill_writes_the_levels_a_new_run_records(tmp_path):
    """scripts/backfill_majority.py on a committed MQAR record with its ``chance`` removed writes it
    back unchanged (the same levels a run computes), nothing else."""
    from script_helpers import ROOT as root
    from script_helpers import load_script

    script = load_script("scripts/backfill_majority.py")
    original = (root / "results/runs/mqar/small/transformer/seed0.json").read_text()
    rec = json.loads(original)
    assert rec["metrics"]["L64_kv16"]["chance"]["token_acc"] == {"level": 0.0625, "strategy": GUESS_CONTEXT_VALUE}
    for m in rec["metrics"].values():
        m.pop("chance")
        for entry in (m.get("by_length") or {}).values():
            entry.pop("chance")
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps(rec, indent=2) + "\n")
    filled, what = script.backfill(path, {})
    assert what.startswith("chance val ")
    assert json.dumps(filled, indent=2) + "\n" == original
