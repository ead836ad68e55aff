"""Trivial strategies: what a model can score on a split without solving its task.

A strategy answers every scored target of a split from what needs no solution of the task: a
constant (the split's most frequent target), the token at the scored position or the one before
it, a uniform guess among the values the context offers. A task kind names the strategies that
apply to all its tasks (``TaskKind.trivial_strategies``, bench/tasks/kinds.py), a task the ones it
adds (``Task.trivial_strategies``: MQAR's guess among the context's values, the word problems' copy
of the first element). Each strategy is a function ``(task, columns, kind) -> list of arrays``:
per example of the split (its columns as bench/data.py holds them; ``kind`` the task's TaskKind),
the probability that each of its scored targets is answered right, in the order of the kind's
``example_targets`` (1.0 / 0.0 for a deterministic answer; 1/N for a uniform guess among N values).
What they score, and the chance level the best of them sets: bench/tasks/chance.py.

A constant answer is the split's most frequent target (``most frequent target``), or, for the
last scored target, the most frequent last target (``most frequent last target``): the guesses
whose ``token_acc`` / ``last_acc`` are the records' ``token_majority`` / ``last_majority``
(bench/metrics.py), and, for one label per example, ``majority``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Strategy = Callable[["object", dict, "object"], list]


MOST_FREQUENT = "most frequent target"
MOST_FREQUENT_LAST = "most frequent last target"
REPEAT_TOKEN = "repeat the current token"
REPEAT_PREVIOUS = "repeat the previous token"
TOKEN_LOOKUP = "best label of the current symbol"


def shifted(tokens: np.ndarray, where: np.ndarray, offset: int) -> np.ndarray:
    """``tokens`` at the positions ``where + offset``, -1 where that falls outside the sequence."""
    at = where + offset
    ok = (at >= 0) & (at < len(tokens))
    return np.where(ok, tokens[np.clip(at, 0, max(len(tokens) - 1, 0))] if len(tokens) else -1, -1)


def _mode(values: np.ndarray):
    """The most frequent value (the smallest of those tied), None when empty."""
    if not values.size:
        return None
    found, counts = np.unique(values, return_counts=True)
    return found[counts.argmax()]


def targets_of(kind, columns: dict) -> list[np.ndarray]:
    """Per example of a split, its scored targets as integers (the kind's ``example_targets``)."""
    return [np.asarray(t, dtype=np.int64) for t in kind.example_targets(columns)]


def most_frequent_target(task, columns: dict, kind) -> list[np.ndarray]:
    """Answer every scored target with the split's most frequent target."""
    targets = targets_of(kind, columns)
    guess = _mode(np.concatenate(targets) if targets else np.zeros(0))
    return [(t == guess).astype(float) for t in targets]


def most_frequent_last_target(task, columns: dict, kind) -> list[np.ndarray]:
    """Answer every scored target with the split's most frequent last target (the constant that
    scores best on the last one)."""
    targets = targets_of(kind, columns)
    guess = _mode(np.asarray([t[-1] for t in targets if t.size]))
    return [(t == guess).astype(float) for t in targets]


def repeat_current_token(task, columns: dict, kind) -> list[np.ndarray]:
    """Answer each scored target with the token read at its position (a word problem's first
    state is its first element; a copy continues a repeat)."""
    return [(t == x).astype(float) for t, x in zip(targets_of(kind, columns), kind.scored_inputs(columns))]


def repeat_previous_token(task, columns: dict, kind) -> list[np.ndarray]:
    """Answer each scored target with the token before its position (flip-flop: the bit of the
    instruction before the read; modular arithmetic: the last number)."""
    return [(t == x).astype(float) for t, x in zip(targets_of(kind, columns), kind.scored_inputs(columns, -1))]


def best_label_of_symbol(task, columns: dict, kind) -> list[np.ndarray]:
    """Answer each position with the label vector most frequent on the split after its symbol:
    a lookup from the symbol just read, with no memory of the prefix (tag kinds: the alphabet is
    a few symbols, so the lookup is counted on the split itself without fitting its examples)."""
    targets, inputs = targets_of(kind, columns), kind.scored_inputs(columns)
    if not targets:
        return []
    flat_t, flat_x = np.concatenate(targets), np.concatenate(inputs)
    symbols, at = np.unique(flat_x, return_inverse=True)
    guess = np.array([_mode(flat_t[at == i]) for i in range(len(symbols))])
    right = (flat_t == guess[at]).astype(float)
    return np.split(right, np.cumsum([len(t) for t in targets])[:-1])
