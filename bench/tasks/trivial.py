"""Trivial strategies: what a model can score on a split without solving its task, and the chance
level they set.

A strategy answers every scored target of a split from what needs no solution of the task: a
constant (the split's most frequent target), the token at the scored position or the one before
it, a uniform guess among the values the context offers. ``Task.trivial_strategies`` names the
strategies that apply to a task: its kind's (``TaskKind.trivial_strategies``) and the task's own (MQAR's guess
among the context's values, the word problems' copy of the first element). Each strategy is a
function ``(task, columns) -> list of arrays``: per example of the split (its columns as
bench/data.py holds them), the probability that each of its scored targets is answered right, in
the order of ``example_targets`` (1.0 / 0.0 for a deterministic answer; 1/N for a uniform guess
among N values). From those, per example (``outcomes``, like bench/metrics.py's outcomes of a
model, expected values for a guess):

    correct        the probability that every scored target is right (the product)
    token_correct  the expected number of scored targets right (the sum)
    tokens         the number of scored targets
    last_correct   the probability that the last scored target is right

and per split and per length bin the metrics ``acc`` (mean of correct), ``token_acc`` (sum of
token_correct over sum of tokens) and ``last_acc`` (mean of last_correct), exactly as a model's
are counted. The **chance level** of a metric on a split (``levels``) is the best strategy's
score there, named with it: a model's cell is judged against what the strongest trivial strategy
scores, not only against the majority class. A length bin's level is the best strategy on that
bin (choosing the strategy by length is itself trivial: the length is seen).

A constant answer is the split's most frequent target (``most frequent target``), or, for the
last scored target, the most frequent last target (``most frequent last target``): the guesses
whose ``token_acc`` / ``last_acc`` are the records' ``token_majority`` / ``last_majority``
(bench/metrics.py), and, for one label per example, ``majority``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


Strategy = Callable[["object", dict], list]

MOST_FREQUENT = "most frequent target"
MOST_FREQUENT_LAST = "most frequent last target"
REPEAT_TOKEN = "repeat the current token"
REPEAT_PREVIOUS = "repeat the previous token"
TOKEN_LOOKUP = "best label of the current symbol"
METRICS = ("acc", "token_acc", "last_acc")
LENGTH_AVERAGED = "length_avg_"  # length_avg_<metric>: <metric> averaged over the split's length bins, unweighted


def example_targets(kind: str, columns: dict) -> list[np.ndarray]:
    """Per example of a split, its scored targets as integers (the kind's ``example_targets``)."""
    from .kinds import kind_of

    return [np.asarray(t, dtype=np.int64) for t in kind_of(kind).example_targets(columns)]


def scored_inputs(kind: str, columns: dict, offset: int = 0) -> list[np.ndarray]:
    """Per example, the input token at each scored position shifted by ``offset`` (the kind's ``scored_inputs``)."""
    from .kinds import kind_of

    return kind_of(kind).scored_inputs(columns, offset)


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


def most_frequent_target(task, columns: dict) -> list[np.ndarray]:
    """Answer every scored target with the split's most frequent target."""
    targets = example_targets(task.kind, columns)
    guess = _mode(np.concatenate(targets) if targets else np.zeros(0))
    return [(t == guess).astype(float) for t in targets]


def most_frequent_last_target(task, columns: dict) -> list[np.ndarray]:
    """Answer every scored target with the split's most frequent last target (the constant that
    scores best on the last one)."""
    targets = example_targets(task.kind, columns)
    guess = _mode(np.asarray([t[-1] for t in targets if t.size]))
    return [(t == guess).astype(float) for t in targets]


def repeat_current_token(task, columns: dict) -> list[np.ndarray]:
    """Answer each scored target with the token read at its position (a word problem's first
    state is its first element; a copy continues a repeat)."""
    return [(t == x).astype(float) for t, x in zip(example_targets(task.kind, columns), scored_inputs(task.kind, columns))]


def repeat_previous_token(task, columns: dict) -> list[np.ndarray]:
    """Answer each scored target with the token before its position (flip-flop: the bit of the
    instruction before the read; modular arithmetic: the last number)."""
    return [(t == x).astype(float) for t, x in zip(example_targets(task.kind, columns), scored_inputs(task.kind, columns, -1))]


def best_label_of_symbol(task, columns: dict) -> list[np.ndarray]:
    """Answer each position with the label vector most frequent on the split after its symbol:
    a lookup from the symbol just read, with no memory of the prefix (tag kinds: the alphabet is
    a few symbols, so the lookup is counted on the split itself without fitting its examples)."""
    targets, inputs = example_targets(task.kind, columns), scored_inputs(task.kind, columns)
    if not targets:
        return []
    flat_t, flat_x = np.concatenate(targets), np.concatenate(inputs)
    symbols, at = np.unique(flat_x, return_inverse=True)
    guess = np.array([_mode(flat_t[at == i]) for i in range(len(symbols))])
    right = (flat_t == guess[at]).astype(float)
    return np.split(right, np.cumsum([len(t) for t in targets])[:-1])


def outcomes(task, columns: dict) -> dict[str, dict[str, np.ndarray]]:
    """Every trivial strategy of ``task`` on a split (its columns): {strategy: {"correct",
    "token_correct", "tokens", "last_correct"}}, one value per example in the split's order
    (expected values for a guess; an example with no scored target: correct 0, last_correct NaN)."""
    found = {}
    for name, strategy in task.trivial_strategies().items():
        right = strategy(task, columns)
        tokens = np.array([len(r) for r in right], dtype=np.int64)
        found[name] = {"correct": np.array([float(np.prod(r)) if len(r) else 0.0 for r in right]),
                       "token_correct": np.array([float(np.sum(r)) for r in right]),
                       "tokens": tokens,
                       "last_correct": np.array([float(r[-1]) if len(r) else np.nan for r in right])}
    return found


def scores(o: dict[str, np.ndarray], where: np.ndarray | None = None) -> dict[str, float]:
    """A strategy's acc, token_acc and last_acc over the examples ``where`` (all: None), counted as a
    model's are (bench/metrics.py): examples with a scored target only."""
    idx = np.arange(len(o["tokens"])) if where is None else np.asarray(where)
    scored = idx[o["tokens"][idx] > 0]
    if not scored.size:
        return {"acc": float("nan"), "token_acc": float("nan"), "last_acc": float("nan")}
    return {"acc": float(o["correct"][scored].mean()), "token_acc": float(o["token_correct"][scored].sum() / o["tokens"][scored].sum()),
            "last_acc": float(o["last_correct"][scored].mean())}


def best(per_strategy: dict[str, dict[str, float]]) -> dict[str, dict]:
    """{metric: {"level", "strategy"}}: the best strategy's score per metric (ties: the first named)."""
    out = {}
    for metric in METRICS:
        found = [(s[metric], name) for name, s in per_strategy.items() if s[metric] == s[metric]]  # NaN: nothing scored
        if found:
            level, name = max(found, key=lambda x: x[0])  # max keeps the first of equals
            out[metric] = {"level": level, "strategy": name}
    return out


def levels(task, columns: dict, length_bin=None) -> dict:
    """The chance levels of a split: {"acc" | "token_acc" | "last_acc": {"level", "strategy"}} and,
    where ``length_bin`` puts examples in bins, "length_avg_<metric>": the best strategy's score
    averaged over the bins without weights (as bench/tasks/chomsky.py:length_averaged averages a
    model's: one strategy for the whole split) and "by_length": {bin: the best strategy's scores
    on the bin's examples}."""
    found = outcomes(task, columns)
    out = best({name: scores(o) for name, o in found.items()})
    if length_bin is not None:
        lengths = columns["length"] if "length" in columns else [len(t) for t in columns["tokens"]]
        bins: dict[str, list[int]] = {}
        for i, length in enumerate(lengths):
            label = length_bin(int(length))
            if label is not None:
                bins.setdefault(label, []).append(i)
        if bins:
            per_bin = {label: {name: scores(o, np.asarray(idx)) for name, o in found.items()} for label, idx in bins.items()}
            averaged = {name: {LENGTH_AVERAGED + m: float(np.mean([per_bin[b][name][m] for b in bins])) for m in METRICS}
                        for name in found}
            for metric in METRICS:
                key = LENGTH_AVERAGED + metric
                ranked = [(s[key], name) for name, s in averaged.items() if s[key] == s[key]]
                if ranked:
                    level, name = max(ranked, key=lambda x: x[0])
                    out[key] = {"level": level, "strategy": name}
            out["by_length"] = {label: best(per_bin[label]) for label in bins}
    return out


def with_levels(split_metrics: dict, task, columns: dict, found: dict | None = None) -> dict:
    """``split_metrics`` of a split whose every example was evaluated, with ``chance``: its chance
    levels (``levels``, or ``found``: what it returned for this split), {metric: {"level",
    "strategy"}} in the split's metrics and {metric: level} in each of its per-length bins."""
    found = dict(levels(task, columns, task.length_bin) if found is None else found)
    by_length = found.pop("by_length", {})
    out = dict(split_metrics, chance=found)
    if out.get("by_length"):  # a bin holds the levels only (its strategies: ``levels``)
        out["by_length"] = {label: dict(entry, chance={m: v["level"] for m, v in by_length.get(label, {}).items()})
                            for label, entry in out["by_length"].items()}
    return out
