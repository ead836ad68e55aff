"""Copy task [RSA §4.4, App. E.4] (after Katharopoulos et al. 2020, Nguyen et al. 2021).

Ten random symbols are repeated, a reserved separator between the copies, up to the
sequence length. Causal LM: only the positions after the first copy (and its separator)
are predictable, so only they are scored.

Worked example (n_symbols=10, pattern_len=4 for brevity, length 12):

    sequence   s3 s7 s7 s1 | s3 s7 s7 s1 | s3 s7      ('|' = <sep>)
    tokens     s3 s7 s7 s1 | s3 s7 s7 s1 | s3         (sequence[:-1])
    targets     .  .  .  . s3 s7 s7 s1 | s3 s7        (sequence[1:], '.' = not scored)

Training lengths are drawn uniformly from [2 * (pattern_len + 1), max_len]; each test split
``len<L>`` holds sequences of exactly length L, so accuracy is reported per length.
"""

from __future__ import annotations

import numpy as np

from .base import IGNORE, LMTask


class Copy(LMTask):
    def __init__(
        self,
        n_symbols: int = 10,
        pattern_len: int = 10,
        max_len: int = 128,
        test_lengths: list | None = None,
        n_train: int = 6400,
        n_val: int = 500,
        n_test: int = 500,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        min_len = 2 * (pattern_len + 1)
        if max_len < min_len:
            raise ValueError(f"max_len={max_len} is too short: a copy task needs at least {min_len} tokens with pattern_len={pattern_len}")
        self.n_symbols, self.pattern_len, self.max_len = n_symbols, pattern_len, max_len
        self.test_lengths = [int(x) for x in (test_lengths or [max_len])]
        bad = [x for x in self.test_lengths if x < min_len]
        if bad:
            raise ValueError(f"test_lengths {bad} are shorter than the minimum {min_len}")
        self.n_train, self.n_val, self.n_test = n_train, n_val, n_test

    @property
    def vocab(self) -> list[str]:
        return ["<pad>", "<sep>", *(f"s{i}" for i in range(self.n_symbols))]

    def test_splits(self) -> list[str]:
        return [f"len{L}" for L in self.test_lengths]

    def _sequences(self, rng: np.random.Generator, lengths: np.ndarray) -> dict:
        period = self.pattern_len + 1
        patterns = rng.integers(2, 2 + self.n_symbols, size=(len(lengths), self.pattern_len))
        unit = np.concatenate([patterns, np.ones((len(lengths), 1), dtype=patterns.dtype)], axis=1)  # pattern + <sep>
        tokens, targets = [], []
        for row, L in zip(unit, lengths):
            seq = np.tile(row, -(-int(L) // period))[: int(L)]
            tgt = seq[1:].copy()
            tgt[: period - 1] = IGNORE  # targets inside the first copy (and its separator) are unpredictable
            tokens.append(seq[:-1])
            targets.append(tgt)
        return {"tokens": tokens, "targets": targets, "length": [int(L) for L in lengths]}

    def generate(self, split: str, rng: np.random.Generator) -> dict:
        if split == "train" or split == "val":
            n = self.n_train if split == "train" else self.n_val
            lengths = rng.integers(2 * (self.pattern_len + 1), self.max_len + 1, size=n)
        else:
            lengths = np.full(self.n_test, int(split[3:]))
        return self._sequences(rng, lengths)
