"""What the probe tasks (MQAR, selective copying, group word problems) draw alike: held-out
splits that never repeat a training sequence, distinct draws, and size checks.

A test split drawn from the training distribution (same length, same setting) could hand the
model a sequence it trained on; at small vocabularies and short lengths that is likely, not
rare. Here a sequence of the training distribution belongs to exactly one split by a stable
hash of its tokens (``crc32 % 20``: 0-15 train, 16-17 val, 18-19 test) and each split keeps
only its own, so train, val and the in-distribution tests are disjoint by construction, at any
size. Splits at other lengths or settings are disjoint anyway and need no filter.
"""

from __future__ import annotations

import zlib

import numpy as np

from .base import TaskError

HASH_BUCKETS = 20
OWNER_BUCKETS = {"train": range(16), "val": range(16, 18), "test": range(18, 20)}


def owner(tokens) -> str:
    """Which of train / val / test a sequence of the training distribution belongs to."""
    bucket = zlib.crc32(np.asarray(tokens, dtype=np.int32).tobytes()) % HASH_BUCKETS
    return next(name for name, buckets in OWNER_BUCKETS.items() if bucket in buckets)


def draw_owned(draw, n: int, split: str) -> dict:
    """``n`` examples of ``draw``'s distribution that belong to ``split`` (train, val or test).

    ``draw(m)`` returns m examples as a dict of numpy columns (first axis = example, one of them
    ``tokens``); rows owned by another split are dropped and more are drawn until n are kept.
    """
    share = len(OWNER_BUCKETS[split]) / HASH_BUCKETS
    parts, kept = [], 0
    for _ in range(50):
        if kept >= n:
            break
        cols = draw(int((n - kept) / share * 1.2) + 16)
        mine = np.array([owner(t) == split for t in cols["tokens"]])
        parts.append({k: v[mine] for k, v in cols.items()})
        kept += int(mine.sum())
    if kept < n:
        raise TaskError(f"could not draw {n} {split} examples apart from the other splits: the distribution is too small")
    return {k: np.concatenate([p[k] for p in parts])[:n] for k in parts[0]}


def positive(**sizes) -> None:
    """Raises a one-line TaskError unless every size is an integer >= 1."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise TaskError(f"{name} must be a positive integer, got {value!r}")


def distinct_draws(rng: np.random.Generator, n: int, pool: int, k: int) -> np.ndarray:
    """(n, k) integers in [0, pool), distinct within a row: each row a uniform random ordered k-subset.

    Few draws from a large pool: i.i.d. rows, redrawing those that repeat a number (conditioning on
    distinctness keeps them uniform). Otherwise the order of uniform keys, a chunk of rows at a time.
    """
    if k * k <= pool:  # a row repeats with probability < 1 - exp(-1/2): a few rounds
        out = rng.integers(0, pool, size=(n, k))
        while True:
            srt = np.sort(out, axis=1)
            again = (srt[:, 1:] == srt[:, :-1]).any(axis=1)
            if not again.any():
                return out
            out[again] = rng.integers(0, pool, size=(int(again.sum()), k))
    out = np.empty((n, k), dtype=np.int64)
    chunk = max(1, 2**22 // pool)  # rows of uniforms held at once: ~32 MB
    for lo in range(0, n, chunk):
        u = rng.random((min(chunk, n - lo), pool))
        out[lo : lo + len(u)] = np.argsort(u, axis=1)[:, :k]
    return out
