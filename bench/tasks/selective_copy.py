"""Selective copying (Gu & Dao 2023, "Mamba", §3.1 and App. E.1; after the copying task of the S4
repository, whose generator scatters the data among noise): K data tokens sit at random
positions among noise tokens ``_`` in a region of L tokens; then come K cue tokens ``?``, and
the target at the i-th cue is the i-th data token. A model must keep the data and drop the
noise by content, since the data's positions vary from sequence to sequence.

Worked example (n_symbols 4: s0..s3; L = 8, K = 3):

    tokens    _  s2   _   _  s0  s2   _   _   ?   ?   ?
    targets   .   .   .   .   .   .   .   .  s2  s0  s2      ('.' = IGNORE)

The data are uniform over ``n_symbols`` symbols (repeats allowed), their positions a uniform
K-subset of the L. A sequence holds L + K tokens; ``length`` (what per-length metrics bin on)
is L. Splits: train and val at ``train_len``; tests ``L<L>`` at each of ``test_lengths``
(default train_len x 1, 2, 4), the same K spread over longer noise; the test at train_len
never repeats a training sequence (bench/tasks/draws.py). Metrics: ``token_acc`` (share of
data tokens copied, the primary one) and ``acc`` (sequences copied whole).
"""

from __future__ import annotations

import numpy as np

from .base import IGNORE, LMTask, TaskError
from .draws import distinct_draws, draw_owned, positive

NOISE, CUE = 1, 2  # "_", "?"


class SelectiveCopy(LMTask):
    def __init__(
        self,
        n_symbols: int = 14,
        n_data: int = 16,
        train_len: int = 4096,
        test_lengths: list | None = None,
        n_train: int = 10000,
        n_val: int = 500,
        n_test: int = 500,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        positive(n_symbols=n_symbols, n_data=n_data, train_len=train_len, n_train=n_train, n_val=n_val, n_test=n_test)
        self.n_symbols, self.n_data, self.train_len = n_symbols, n_data, train_len
        self.test_lengths = [int(x) for x in (test_lengths or [train_len * k for k in (1, 2, 4)])]
        for L in [train_len, *self.test_lengths]:
            positive(test_lengths=L)
            if L < n_data:
                raise TaskError(f"a region of {L} tokens cannot hold n_data={n_data} data tokens; give lengths >= {n_data}")
        self.n_train, self.n_val, self.n_test = n_train, n_val, n_test

    @property
    def vocab(self) -> list[str]:
        return ["<pad>", "_", "?", *(f"s{i}" for i in range(self.n_symbols))]

    def test_splits(self) -> list[str]:
        return [f"L{L}" for L in self.test_lengths]

    def _sequences(self, rng: np.random.Generator, n: int, L: int) -> dict:
        """n sequences with a region of L tokens: tokens, targets (n, L + K), length."""
        K = self.n_data
        data = 3 + rng.integers(0, self.n_symbols, size=(n, K))  # token ids, in order
        positions = np.sort(distinct_draws(rng, n, L, K), axis=1)  # a uniform K-subset, in sequence order
        tokens = np.full((n, L + K), NOISE, dtype=np.int16)
        np.put_along_axis(tokens, positions, data, axis=1)
        tokens[:, L:] = CUE
        targets = np.full((n, L + K), IGNORE, dtype=np.int16)
        targets[:, L:] = data
        return {"tokens": tokens, "targets": targets, "length": np.full(n, L)}

    def generate(self, split: str, rng: np.random.Generator) -> dict:
        if split in ("train", "val"):
            n = self.n_train if split == "train" else self.n_val
            return draw_owned(lambda m: self._sequences(rng, m, self.train_len), n, split)
        L = int(split[1:])
        if L == self.train_len:
            return draw_owned(lambda m: self._sequences(rng, m, L), self.n_test, "test")
        return self._sequences(rng, self.n_test, L)
