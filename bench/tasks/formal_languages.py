"""Formal languages in the setup of Bhattamishra et al. (2020), as used by [RSA App. E.2].

Every string belongs to its language; the model reads it left to right and, at every
position, emits a 2-way multi-label target. A string counts as correct only if every
position is correct. Lengths: train and bin0 in [2, 50] ([2, 100] for D_n), bin1 in
[51, 100] ([101, 200] for D_n); 10k train / 2k per bin (D_n: 5k / 1k).

Targets per language (after reading the prefix w_1..w_t):

* Parity, Tomita 5, Tomita 6: membership of the prefix, one-hot [w not in L, w in L].
* Tomita 3: which next symbol keeps the prefix in L: [w0 in L, w1 in L].
* D_n (star-free, D_1 = (ab)*, D_n = (a D_{n-1} b)*): which next symbol keeps w a prefix
  of some string in D_n: depth 0 -> {a}, 0 < depth < n -> {a, b}, depth n -> {b}.

Strings are drawn as the generator of Bhattamishra et al. (their Transformer-Formal-Languages
repository, where [RSA App. E.2] took its data) draws them, re-implemented:

* Parity, Tomita 5, Tomita 6: symbols 0 / 1 with equal probability; after each symbol the
  string stops with probability 1 / (1 + L), L = (lo + hi) // 2 of the split's length window
  [lo, hi]; a string that has not stopped by hi is cut there, one shorter than lo is dropped
  (so many strings sit exactly at hi: Parity bin1 ~36%). Parity appends a 1 to a string with
  an odd number of 1s (dropped if that passes hi); Tomita 5 / 6 drop non-members.
* Tomita 3: a uniform length in [lo, hi], filled run by run: a fair coin picks the symbol, the
  run length is uniform over what is left, and a run of 0s after an odd run of 1s is an even
  uniform draw; so strings are a few long runs.
* D_n: Bhattamishra et al.'s D_n generator cannot produce 5k distinct D2 strings of length
  2-100 (its nested blocks are ~0.75 of the outer length), so the paper's D_n files come from
  elsewhere; we draw a uniform even length, then a uniform D_n string of that length.

Train, val and bin0 share the length window; the source draws train and bin0 from one
de-duplicated pool, so no bin0 string is a training string. Here every split keeps its own
seed, and a string of that window belongs to one split by a stable content hash
(``crc32(string) % 20``: 0-2 bin0, 3 val, 4-19 train), so the three are disjoint.

``start_symbol=True`` (off by default, as in both papers) puts a ``<s>`` before every string,
labelled with the target of the empty prefix (``start_target``); ``length`` stays the string's.

Worked example, Parity, string 0110:

    tokens   0      1      1      0
    labels   [0,1]  [1,0]  [0,1]  [0,1]     ("0" even, "01" odd, "011" even, "0110" even)

Worked example, D2, string aabbab:

    tokens   a      a      b      b      a      b
    depth    1      2      1      0      1      0
    labels   [1,1]  [0,1]  [1,1]  [1,0]  [1,1]  [1,0]
"""

from __future__ import annotations

import zlib
from typing import ClassVar

import numpy as np

from .base import Task

#: a string of the training window goes to bin0, val or train by crc32(string) % HASH_BUCKETS
HASH_BUCKETS = 20
BIN0_BUCKETS, VAL_BUCKETS = (0, 1, 2), (3,)


def window_split(s: str) -> str:
    """Which of train / val / bin0 a string of the training length window belongs to."""
    h = zlib.crc32(s.encode()) % HASH_BUCKETS
    return "bin0" if h in BIN0_BUCKETS else "val" if h in VAL_BUCKETS else "train"


def stopping_length(rng: np.random.Generator, lo: int, hi: int) -> int:
    """Length of a string grown as Bhattamishra et al. grow Parity / Tomita strings: each step
    stops with probability 1 / (1 + L), L = (lo + hi) // 2, else adds a symbol; cut at hi."""
    mean = (lo + hi) // 2
    return min(int(rng.geometric(1.0 / (1 + mean))) - 1, hi)


class FormalLanguage(Task):
    kind = "tag"
    version = "2"  # 2: Bhattamishra et al.'s string distributions; train / val / bin0 disjoint
    requires_causal = True
    metric = "acc"
    report_metrics = ("acc",)
    num_labels = 2
    alphabet: ClassVar[str] = "01"
    #: lengths must be a multiple of this (Tomita 5 and D_n strings have even length)
    length_step: ClassVar[int] = 1
    default_lengths: ClassVar[tuple[int, int, int]] = (2, 50, 100)  # train lo, train hi (= bin0), bin1 hi

    def __init__(
        self,
        n_train: int = 10000,
        n_val: int = 1000,
        n_test: int = 2000,
        min_len: int | None = None,
        max_len: int | None = None,
        bin1_max_len: int | None = None,
        bin_width: int = 10,
        start_symbol: bool = False,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        lo, hi, hi1 = self.default_lengths
        self.min_len = lo if min_len is None else min_len
        self.max_len = hi if max_len is None else max_len
        self.bin1_max_len = hi1 if bin1_max_len is None else bin1_max_len
        if not 1 <= self.min_len <= self.max_len < self.bin1_max_len:
            raise ValueError(f"need 1 <= min_len <= max_len < bin1_max_len, got {self.min_len}, {self.max_len}, {self.bin1_max_len}")
        self.n_train, self.n_val, self.n_test = n_train, n_val, n_test
        self.bin_width = bin_width
        self.start_symbol = start_symbol

    @property
    def vocab(self) -> list[str]:
        return ["<pad>", *self.alphabet, *(["<s>"] if self.start_symbol else [])]

    def test_splits(self) -> list[str]:
        return ["bin0", "bin1"]

    def length_bin(self, length: int) -> str:
        lo = (length - 1) // self.bin_width * self.bin_width + 1
        return f"{lo}-{lo + self.bin_width - 1}"

    # --- language definition (subclasses) -------------------------------------------------
    def draw(self, rng: np.random.Generator, lo: int, hi: int) -> str | None:
        """One string for the length window [lo, hi] as the source generator draws it, or None
        when the draw is rejected. Default: a uniform length (a multiple of ``length_step``),
        then ``sample``."""
        step = self.length_step
        choices = np.arange(-(-lo // step) * step, hi + 1, step)
        if len(choices) == 0:
            raise ValueError(f"no length in [{lo}, {hi}] is a multiple of {step}")
        return self.sample(rng, int(rng.choice(choices)))

    def sample(self, rng: np.random.Generator, length: int) -> str:
        """One random string of the language with exactly this length (for the default draw)."""
        raise NotImplementedError

    def targets(self, s: str) -> list[list[int]]:
        raise NotImplementedError

    def start_target(self) -> list[int]:
        """The target after reading the empty prefix: the label of the start symbol, if any."""
        raise NotImplementedError

    # --- generation ------------------------------------------------------------------------
    def generate(self, split: str, rng: np.random.Generator) -> dict:
        n = {"train": self.n_train, "val": self.n_val}.get(split, self.n_test)
        lo, hi = (self.max_len + 1, self.bin1_max_len) if split == "bin1" else (self.min_len, self.max_len)
        shared_window = split != "bin1"  # train, val and bin0 draw from one window: keep them disjoint
        seen: dict[str, None] = {}  # insertion-ordered: the split never depends on set order
        attempts = 0
        while len(seen) < n and attempts < 500 * n:
            attempts += 1
            s = self.draw(rng, lo, hi)
            if s is None or (shared_window and window_split(s) != split):
                continue
            seen.setdefault(s, None)
        strings = list(seen)
        index = {c: i + 1 for i, c in enumerate(self.alphabet)}
        start = [len(self.alphabet) + 1] if self.start_symbol else []  # "<s>", scored with start_target
        first = [self.start_target()] if self.start_symbol else []
        return {
            "tokens": [start + [index[c] for c in s] for s in strings],
            "labels": [first + self.targets(s) for s in strings],
            "length": [len(s) for s in strings],  # the string's length, without "<s>"
        }


def _membership_targets(member_prefixes: list[bool]) -> list[list[int]]:
    return [[0, 1] if m else [1, 0] for m in member_prefixes]


class Parity(FormalLanguage):
    """Binary strings with an even number of 1s."""

    def draw(self, rng, lo, hi):
        n = stopping_length(rng, lo, hi)
        if n < lo:
            return None
        bits = rng.integers(0, 2, size=n)
        if bits.sum() % 2:  # the source appends a 1 to an odd string, dropping it past hi
            if n + 1 > hi:
                return None
            bits = np.append(bits, 1)
        return "".join(map(str, bits))

    def targets(self, s):
        ones, out = 0, []
        for c in s:
            ones += c == "1"
            out.append(ones % 2 == 0)
        return _membership_targets(out)

    def start_target(self):
        return _membership_targets([True])[0]  # no 1s: even


class _CountLanguage(FormalLanguage):
    """Languages defined by counts of 0s and 1s; grown like Parity, kept if in L."""

    def member(self, zeros: int, ones: int) -> bool:
        raise NotImplementedError

    def draw(self, rng, lo, hi):
        n = stopping_length(rng, lo, hi)
        if n < lo:
            return None
        bits = rng.integers(0, 2, size=n)
        ones = int(bits.sum())
        return "".join(map(str, bits)) if self.member(n - ones, ones) else None

    def targets(self, s):
        zeros = ones = 0
        out = []
        for c in s:
            ones += c == "1"
            zeros += c == "0"
            out.append(self.member(zeros, ones))
        return _membership_targets(out)

    def start_target(self):
        return _membership_targets([self.member(0, 0)])[0]


class Tomita5(_CountLanguage):
    """Even number of 0s and even number of 1s (so every string has even length)."""

    length_step = 2

    def member(self, zeros, ones):
        return zeros % 2 == 0 and ones % 2 == 0


class Tomita6(_CountLanguage):
    """The difference between the numbers of 0s and 1s is a multiple of 3."""

    def member(self, zeros, ones):
        return (zeros - ones) % 3 == 0


class Tomita3(FormalLanguage):
    """No odd-length run of 1s immediately followed by an odd-length run of 0s.

    DFA states: 0 start / even 1-run, 1 odd 1-run, 2 even 0-run after an odd 1-run,
    3 odd 0-run after an odd 1-run (rejecting, recoverable), 4 dead. Accepting: {0, 1, 2}.
    """

    DELTA = {(0, "0"): 0, (0, "1"): 1, (1, "0"): 3, (1, "1"): 0, (2, "0"): 3, (2, "1"): 1, (3, "0"): 2, (3, "1"): 4}
    ACCEPT = (0, 1, 2)

    def draw(self, rng, lo, hi):
        """Bhattamishra et al.'s Tomita 3 strings: a uniform length filled run by run."""
        length = int(rng.integers(lo, hi + 1))
        runs, total, last_toss, last_ones = [], 0, None, 0
        while total < length:
            left = length - total
            toss = "01"[int(rng.integers(2))]
            if toss == "1":
                count = int(rng.integers(left + 1))
                last_ones = count if (last_toss == "0" and count) else last_ones + count
            elif last_toss is None or last_ones % 2 == 0:
                count = int(rng.integers(left + 1))
            else:  # 0s after an odd run of 1s: an even count keeps the string in the language
                count = 2 * int(rng.integers(left // 2 + 1))
            runs.append(toss * count)
            total += count
            if count:
                last_toss = toss
        s = "".join(runs)
        return s if self.accepts(s) else None

    def accepts(self, s: str) -> bool:
        q = 0
        for c in s:
            q = self.DELTA.get((q, c), 4)
        return q in self.ACCEPT

    def targets(self, s):
        q, out = 0, []
        for c in s:
            q = self.DELTA.get((q, c), 4)
            out.append(self._next_ok(q))
        return out

    def start_target(self):
        return self._next_ok(0)

    def _next_ok(self, q: int) -> list[int]:
        """[w0 in L, w1 in L] for a prefix w that leaves the DFA in state q."""
        return [int(self.DELTA.get((q, n), 4) in self.ACCEPT) for n in "01"]


class StarFreeDn(FormalLanguage):
    """D_n over {a, b}: D_1 = (ab)*, D_n = (a D_{n-1} b)*, i.e. balanced strings of depth <= n.

    Strings of a given length are drawn uniformly among all D_n strings of that length, by
    counting completions: paths[r][d] = number of ways to finish with r symbols left at depth d.
    """

    alphabet = "ab"
    length_step = 2
    default_lengths = (2, 100, 200)
    depth: ClassVar[int] = 2

    def __init__(self, n_train: int = 5000, n_val: int = 500, n_test: int = 1000, **kwargs):
        super().__init__(n_train=n_train, n_val=n_val, n_test=n_test, **kwargs)
        self._paths: dict[int, np.ndarray] = {}

    def _completions(self, length: int) -> np.ndarray:
        if length not in self._paths:
            n = self.depth
            paths = np.zeros((length + 1, n + 1), dtype=object)  # exact big integers
            paths[0][0] = 1
            for r in range(1, length + 1):
                for d in range(n + 1):
                    paths[r][d] = (paths[r - 1][d + 1] if d < n else 0) + (paths[r - 1][d - 1] if d > 0 else 0)
            self._paths[length] = paths
        return self._paths[length]

    def sample(self, rng, length):
        paths = self._completions(length)
        d, out = 0, []
        for r in range(length, 0, -1):
            up = paths[r - 1][d + 1] if d < self.depth else 0
            down = paths[r - 1][d - 1] if d > 0 else 0
            # choose 'a' with probability up / (up + down); exact for huge counts via a float ratio
            go_up = rng.random() < float(up / (up + down)) if up and down else bool(up)
            d += 1 if go_up else -1
            out.append("a" if go_up else "b")
        return "".join(out)

    def targets(self, s):
        d, out = 0, []
        for c in s:
            d += 1 if c == "a" else -1
            out.append(self._next_ok(d))
        return out

    def start_target(self):
        return self._next_ok(0)

    def _next_ok(self, depth: int) -> list[int]:
        """[a may follow, b may follow] at this depth."""
        return [int(depth < self.depth), int(depth > 0)]


class D2(StarFreeDn):
    depth = 2


class D4(StarFreeDn):
    depth = 4
