"""Multi-query associative recall, MQAR (Arora et al. 2023, "Zoology: Measuring and Improving
Recall in Efficient Language Models").

A sequence of L tokens opens with N key-value pairs ``k1 v1 ... kN vN`` (keys distinct within
a sequence, values too; keys and values come from disjoint halves of the vocabulary). The rest
is filler ``_`` with Q queries in it: keys of the prefix, each at a position whose target is
its paired value; every other target is IGNORE. Attention solves it at any N (look the key
up); a model with a bounded state must hold N pairs in it, and fails once they outgrow it.

``n_symbols`` is the number of key and value symbols together (Zoology's ``vocab_size``); the
model's vocabulary adds ``<pad>`` and ``_``.

Worked example (n_symbols 8: keys k0..k3, values v0..v3; L = 12, N = 2, Q = 2):

    tokens   k2  v0  k1  v3  k1   _   _   _  k2   _   _   _
    targets   .   .   .   .  v3   .   .   .  v0   .   .   .      ('.' = IGNORE)

Queries sit at even offsets of the region after the pairs (so a query is never next to
another), one slot per query drawn without replacement with probability proportional to
k^(power_a - 1) for the k-th slot, as Zoology draws them (power_a 0.01: most queries come
early, a few far away; 1.0: uniform). Q = N by default (every key asked once, Zoology's
setting); a smaller Q asks a random subset. The filler is one token, Zoology's
``random_non_queries=False`` (its ICLR figure 2); a query region filled with random tokens
would put unscored keys in it.

Training is a mix of (length, pairs) settings as Zoology trains (``train_mix``: rows
``[L, N, examples]``), validation the same mix (``n_val`` spread over it); each test split
``L<L>_kv<N>`` holds ``n_test`` sequences of one (L, N) in ``test_settings``, so accuracy is
reported per length and number of pairs. A test setting that is also a training setting draws
only sequences no other split can hold (bench/tasks/draws.py), so it never repeats a
training sequence.

Accuracy: ``token_acc`` is the share of queries answered (every scored position is a query;
the harness sums correct queries over all sequences and divides by all queries), the primary
metric; ``acc`` is the share of sequences whose every query is right.
"""

from __future__ import annotations

import numpy as np

from .base import IGNORE, LMTask, TaskError
from .draws import distinct_draws, draw_owned, positive

FILL = 1  # "_"


class MQAR(LMTask):
    def __init__(
        self,
        n_symbols: int = 8192,
        train_mix: list | None = None,
        test_settings: list | None = None,
        n_queries: int | None = None,
        power_a: float = 0.01,
        n_val: int = 1000,
        n_test: int = 1000,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        positive(n_symbols=n_symbols, n_val=n_val, n_test=n_test)
        self.n_symbols = n_symbols
        self.n_keys = n_symbols // 2
        self.n_values = n_symbols - self.n_keys
        self.n_queries = n_queries
        if not (isinstance(power_a, (int, float)) and power_a > 0):
            raise TaskError(f"power_a must be > 0 (1.0 = uniform query positions), got {power_a!r}")
        self.power_a = float(power_a)
        self.train_mix = [self._setting(row, 3, "train_mix") for row in (train_mix or _ZOOLOGY_TRAIN)]
        self.test_settings = [self._setting(row, 2, "test_settings") for row in (test_settings or _ZOOLOGY_TEST)]
        self.n_val, self.n_test = n_val, n_test

    def _setting(self, row, width: int, where: str) -> tuple[int, ...]:
        """One [L, N] (or [L, N, examples]) row, checked against the vocabulary and the length."""
        if not isinstance(row, (list, tuple)) or len(row) != width:
            shape = "[length, pairs, examples]" if width == 3 else "[length, pairs]"
            raise TaskError(f"each {where} row is {shape}, got {row!r}")
        for v in row:
            positive(**{f"every number of {where} row {list(row)}": v})
        L, N = int(row[0]), int(row[1])
        if N > min(self.n_keys, self.n_values):
            raise TaskError(
                f"{N} pairs need {N} distinct keys and values, but n_symbols={self.n_symbols} "
                f"has {self.n_keys} keys; give n_symbols >= {2 * N} or fewer pairs"
            )
        Q = self._queries(N)
        if L < 2 * N + 2 * Q - 1:
            raise TaskError(
                f"length {L} is below the span of {N} pairs and {Q} queries; "
                f"give length >= {2 * N + 2 * Q - 1} (2 * pairs + 2 * queries - 1)"
            )
        return tuple(int(v) for v in row)

    def _queries(self, N: int) -> int:
        if self.n_queries is None:
            return N
        positive(n_queries=self.n_queries)
        if self.n_queries > N:
            raise TaskError(f"n_queries={self.n_queries} is more than the {N} pairs of a setting; give n_queries <= {N}")
        return self.n_queries

    @property
    def vocab(self) -> list[str]:
        return ["<pad>", "_", *(f"k{i}" for i in range(self.n_keys)), *(f"v{i}" for i in range(self.n_values))]

    def test_splits(self) -> list[str]:
        return [f"L{L}_kv{N}" for L, N in self.test_settings]

    def _sequences(self, rng: np.random.Generator, n: int, L: int, N: int) -> dict:
        """n MQAR sequences of length L with N pairs: tokens, targets (n, L) and length."""
        Q = self._queries(N)
        keys = 2 + distinct_draws(rng, n, self.n_keys, N)  # token ids, (n, N)
        values = 2 + self.n_keys + distinct_draws(rng, n, self.n_values, N)
        tokens = np.full((n, L), FILL, dtype=np.int64)
        tokens[:, 0 : 2 * N : 2], tokens[:, 1 : 2 * N : 2] = keys, values
        # query slots: even offsets of the region after the pairs; Gumbel-top-Q of log p draws Q slots
        # without replacement with p(k) ~ k^(power_a - 1), in the order sequential draws would give
        slots = (L - 2 * N + 1) // 2
        log_p = (self.power_a - 1) * np.log(np.arange(1, slots + 1))
        order = np.argsort(-(log_p + rng.gumbel(size=(n, slots))), axis=1)[:, :Q]
        asked = distinct_draws(rng, n, N, Q)  # which pairs are queried, in query-draw order
        positions = 2 * N + 2 * order
        targets = np.full((n, L), IGNORE, dtype=np.int64)
        np.put_along_axis(tokens, positions, np.take_along_axis(keys, asked, axis=1), axis=1)
        np.put_along_axis(targets, positions, np.take_along_axis(values, asked, axis=1), axis=1)
        dtype = np.int16 if self.vocab_size < 2**15 else np.int32
        return {"tokens": tokens.astype(dtype), "targets": targets.astype(dtype), "length": np.full(n, L)}

    def _draw(self, rng, n: int, L: int, N: int, owner: str | None) -> dict:
        if owner is None:
            return self._sequences(rng, n, L, N)
        return draw_owned(lambda m: self._sequences(rng, m, L, N), n, owner)

    def generate(self, split: str, rng: np.random.Generator) -> dict:
        if split in ("train", "val"):
            sizes = (
                [row[2] for row in self.train_mix]
                if split == "train"
                else [self.n_val // len(self.train_mix) + (i < self.n_val % len(self.train_mix)) for i in range(len(self.train_mix))]
            )
            parts = [self._draw(rng, n, L, N, split) for (L, N, _), n in zip(self.train_mix, sizes) if n]
        else:
            L, N = self.test_settings[self.test_splits().index(split)]
            trained = any((L, N) == (l, k) for l, k, _ in self.train_mix)
            parts = [self._draw(rng, self.n_test, L, N, "test" if trained else None)]
        return {
            "tokens": [t for p in parts for t in p["tokens"]],
            "targets": [t for p in parts for t in p["targets"]],
            "length": [int(x) for p in parts for x in p["length"]],
        }

    def length_bin(self, length: int) -> str:
        return f"L{length}"

    def trivial_strategies(self) -> dict:
        """Beside the kind's, a uniform guess among the values of the context's pairs: right with
        probability 1/N at each query of a sequence of N pairs (N distinct value tokens precede
        the queries), what a model scores that knows a value is asked but not which."""
        return {GUESS_CONTEXT_VALUE: guess_context_value}


GUESS_CONTEXT_VALUE = "guess a value of the context"


def guess_context_value(task: MQAR, columns: dict, kind=None) -> list[np.ndarray]:
    """Per sequence, 1/N at each query (N: the distinct value tokens before the first query)."""
    out = []
    for tokens, targets in zip(columns["tokens"], columns["targets"]):
        tokens, where = np.asarray(tokens), np.flatnonzero(np.asarray(targets) != IGNORE)
        if not where.size:
            out.append(np.zeros(0))
            continue
        context = tokens[: where[0]]
        values = np.unique(context[context >= 2 + task.n_keys])
        out.append(np.full(where.size, 1.0 / max(len(values), 1)))
    return out


# Zoology's MQAR sweep as Based (Arora et al. 2024) runs it (zoology/experiments/paper_configs/
# arxiv24_based_figure2/configs.py): train on a mix of (L, N, examples), test up to L 1024 with 256 pairs
_ZOOLOGY_TRAIN = [[64, 4, 100_000], [128, 8, 20_000], [256, 16, 20_000], [256, 32, 20_000], [256, 64, 20_000]]
_ZOOLOGY_TEST = [[64, 4], [64, 8], [64, 16], [128, 32], [256, 64], [512, 128], [1024, 256]]
