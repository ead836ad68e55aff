"""Flip-flop language modelling (Liu et al. 2023) as in [HALT §6.6, Table 3].

A sequence of T tokens = T/2 instruction-bit pairs. Instructions: w (write the next bit to
memory), r (read: the next bit must equal the last written bit), i (ignore the next bit).
p(i) = p_i, p(w) = p(r) = (1 - p_i) / 2; the first instruction is w and the last is r.

    tokens:  w 0 i 1 w 1 r 1 i 0 r 1
    targets: . . . . . . 1 . . . 1 .      ("." = IGNORE; next-token targets: the position of
                                           each r is scored on predicting its read bit)

Only read bits are scored (a causal LM; the write / ignore bits are random). Metrics:
``last_acc`` = accuracy on the final read of each sequence, what [HALT §6.6, Table 3] reports
("the accuracy of the models in predicting the last read value"; mean and median of 3 runs),
listed first; ``token_acc`` = read-bit accuracy over every read, the reference code's
``accuracy``, on which it selects checkpoints (``save_by = "accuracy"``), so it stays the
model-selection metric here.

Splits: train at T = train_len, p_i = train_p_i; tests ``T<len>_p<p_i>`` for T in test_lens x
p_i in test_p_i; val = an equal mixture of every test distribution (``n_val_each`` each, the
paper's 1000 per setting), drawn from its own seed so it never equals a test set.
Generation is vectorised: the last write before each read is found with a running maximum
over write positions, so 160k x 512 tokens take about a second.
"""

from __future__ import annotations

import numpy as np

from .base import IGNORE, LMTask, TaskError

VOCAB = ["<pad>", "w", "r", "i", "0", "1"]
W, R, I, BIT0 = 1, 2, 3, 4


def flipflop_batch(rng: np.random.Generator, n: int, length: int, p_i: float):
    """n flip-flop sequences of `length` tokens: (tokens int8 [n, length], targets int8)."""
    if length % 2 or length < 4:
        raise TaskError(f"flipflop: length must be even and >= 4, got {length}")
    pairs = length // 2
    p_wr = (1.0 - p_i) / 2
    instr = rng.choice(np.array([W, R, I], dtype=np.int8), size=(n, pairs), p=[p_wr, p_wr, p_i])
    instr[:, 0], instr[:, -1] = W, R
    bits = rng.integers(0, 2, size=(n, pairs), dtype=np.int8)
    # index of the most recent write at or before each pair (pair 0 is always a write)
    last_w = np.maximum.accumulate(np.where(instr == W, np.arange(pairs), 0), axis=1)
    read = instr == R
    bits = np.where(read, np.take_along_axis(bits, last_w, axis=1), bits)
    tokens = np.empty((n, length), dtype=np.int8)
    tokens[:, 0::2], tokens[:, 1::2] = instr, BIT0 + bits
    targets = np.full((n, length), IGNORE, dtype=np.int8)
    targets[:, 0::2] = np.where(read, BIT0 + bits, IGNORE)  # position of r predicts its bit
    return tokens, targets


def _fmt(p):
    return f"{p:g}".replace("0.", "")


class FlipFlop(LMTask):
    """Flip-flop language modelling: remember the last written bit across distractors."""

    metric = "token_acc"  # selection, as the reference code's save_by = "accuracy"
    report_metrics = ("last_acc", "token_acc")  # [HALT Table 3] reports last-read accuracy
    version = "1"

    def __init__(
        self,
        n_train: int = 160000,
        n_test: int = 10000,
        n_val_each: int = 1000,
        train_len: int = 512,
        train_p_i: float = 0.8,
        test_lens: list | None = None,
        test_p_i: list | None = None,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        self.n_train, self.n_test, self.n_val_each = n_train, n_test, n_val_each
        self.train_len, self.train_p_i = train_len, train_p_i
        self.test_lens = list(test_lens) if test_lens is not None else [512, 1024]
        self.test_p_i = list(test_p_i) if test_p_i is not None else [0.1, 0.8, 0.98]
        self._settings = {f"T{L}_p{_fmt(p)}": (L, p) for L in self.test_lens for p in self.test_p_i}

    @property
    def vocab(self):
        return VOCAB

    def test_splits(self):
        return list(self._settings)

    def generate(self, split, rng):
        if split == "train":
            toks, tg = flipflop_batch(rng, self.n_train, self.train_len, self.train_p_i)
            return {"tokens": toks, "targets": tg}
        if split in self._settings:
            toks, tg = flipflop_batch(rng, self.n_test, *self._settings[split])
            return {"tokens": toks, "targets": tg}
        if split == "val":  # mixed lengths: variable-length rows
            rows_t, rows_g = [], []
            for L, p in self._settings.values():
                toks, tg = flipflop_batch(rng, self.n_val_each, L, p)
                rows_t.extend(toks)
                rows_g.extend(tg)
            return {"tokens": rows_t, "targets": rows_g}
        raise TaskError(f"flipflop: unknown split {split!r}")

    def length_bin(self, length):
        return f"T{length}"
