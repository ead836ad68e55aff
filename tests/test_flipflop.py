"""Flip-flop: reads return the last write, only read bits are scored, p_i is respected."""

import numpy as np
import pytest

from bench.tasks.base import IGNORE
from bench.tasks.flipflop import VOCAB, FlipFlop, flipflop_batch


def test_reads_equal_last_write_and_only_reads_are_scored():
    toks, tg = flipflop_batch(np.random.default_rng(0), 200, 64, 0.5)
    for seq, tgt in zip(toks, tg):
        words = [VOCAB[t] for t in seq]
        assert words[0] == "w" and words[-2] == "r"
        memory = None
        for t in range(0, len(words), 2):
            instr, bit = words[t], words[t + 1]
            assert instr in "wri" and bit in "01"
            if instr == "w":
                memory = bit
            if instr == "r":
                assert bit == memory
                assert tgt[t] == seq[t + 1]  # the position of r predicts its bit
            else:
                assert tgt[t] == IGNORE
            assert tgt[t + 1] == IGNORE


@pytest.mark.parametrize("p_i", [0.1, 0.8, 0.98])
def test_instruction_frequencies_match_p_i(p_i):
    toks, _ = flipflop_batch(np.random.default_rng(1), 2000, 512, p_i)
    instr = toks[:, 2:-2:2]  # drop the forced first write and last read
    freq = {c: float((instr == VOCAB.index(c)).mean()) for c in "wri"}
    assert abs(freq["i"] - p_i) < 0.01
    assert abs(freq["w"] - (1 - p_i) / 2) < 0.01 and abs(freq["r"] - (1 - p_i) / 2) < 0.01


def test_splits_and_determinism():
    task = FlipFlop(n_train=64, n_test=16, n_val_each=4, train_len=32, test_lens=[32, 64])
    assert task.test_splits() == ["T32_p1", "T32_p8", "T32_p98", "T64_p1", "T64_p8", "T64_p98"]
    gen = lambda s: task.generate(s, np.random.default_rng(task.split_seed(s)))
    a, b = gen("train"), gen("train")
    assert a["tokens"].shape == (64, 32) and np.array_equal(a["tokens"], b["tokens"])
    assert gen("T64_p98")["tokens"].shape == (16, 64)
    val = gen("val")
    assert sorted({len(t) for t in val["tokens"]}) == [32, 64] and len(val["tokens"]) == 24
    # the validation set is not any test set
    test = gen("T32_p8")["tokens"]
    assert not any(np.array_equal(v, t) for v in val["tokens"] for t in test)


def test_cached_through_the_harness(tmp_path, monkeypatch):
    from bench.data import SplitData, collate, load_split

    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    task = FlipFlop(n_train=32, n_test=8, n_val_each=2, train_len=16, test_lens=[16])
    fresh = SplitData(load_split(task, "train"))
    again = SplitData(load_split(task, "train"))  # second call reads the cache
    batch = collate([again[i] for i in range(4)])
    direct, tg = flipflop_batch(np.random.default_rng(task.split_seed("train")), 32, 16, 0.8)
    assert np.array_equal(fresh.columns["tokens"], direct)
    assert np.array_equal(batch["targets"].numpy(), tg[:4])
