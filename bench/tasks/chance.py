"""The chance level of a split: what the trivial strategies (bench/tasks/trivial.py) score on it,
and the best of them.

Every strategy of a task (its kind's and its own) gives, per example, the probability that each
scored target is right; from those, per example (``outcomes``, like bench/metrics.py's outcomes of
a model, expected values for a guess):

    correct        the probability that every scored target is right (the product)
    token_correct  the expected number of scored targets right (the sum)
    tokens         the number of scored targets
    last_correct   the probability that the last scored target is right

and per split and per length bin the metrics ``acc`` (mean of correct), ``token_acc`` (sum of
token_correct over sum of tokens) and ``last_acc`` (mean of last_correct), exactly as a model's
are counted. The **chance level** of a metric on a split (``levels``) is the best strategy's
score there, named with it: a model's cell is judged against what the strongest trivial strategy
scores, not only against the majority class. A length bin's level is the best strategy on that
bin (choosing the strategy by length is itself trivial: the length is seen); a length-averaged
metric's is one strategy's over the whole split, as the metric averages a model's.
"""

from __future__ import annotations

import numpy as np

from .kinds import kind_of

METRICS = ("acc", "token_acc", "last_acc")
LENGTH_AVERAGED = "length_avg_"  # length_avg_<metric>: <metric> averaged over the split's length bins, unweighted


def strategies(task) -> dict:
    """Every trivial strategy of ``task`` by name: its kind's, then its own."""
    return {**kind_of(task.kind).trivial_strategies(), **task.trivial_strategies()}


def outcomes(task, columns: dict) -> dict[str, dict[str, np.ndarray]]:
    """Every trivial strategy of ``task`` on a split (its columns): {strategy: {"correct",
    "token_correct", "tokens", "last_correct"}}, one value per example in the split's order
    (expected values for a guess; an example with no scored target: correct 0, last_correct NaN)."""
    found = {}
    kind = kind_of(task.kind)
    for name, strategy in strategies(task).items():
        right = strategy(task, columns, kind)
        tokens = np.array([len(r) for r in right], dtype=np.int64)
        found[name] = {
            "correct": np.array([float(np.prod(r)) if len(r) else 0.0 for r in right]),
            "token_correct": np.array([float(np.sum(r)) for r in right]),
            "tokens": tokens,
            "last_correct": np.array([float(r[-1]) if len(r) else np.nan for r in right]),
        }
    return found


def scores(o: dict[str, np.ndarray], where: np.ndarray | None = None) -> dict[str, float]:
    """A strategy's acc, token_acc and last_acc over the examples ``where`` (all: None), counted as a
    model's are (bench/metrics.py): examples with a scored target only."""
    idx = np.arange(len(o["tokens"])) if where is None else np.asarray(where)
    scored = idx[o["tokens"][idx] > 0]
    if not scored.size:
        return {"acc": float("nan"), "token_acc": float("nan"), "last_acc": float("nan")}
    return {
        "acc": float(o["correct"][scored].mean()),
        "token_acc": float(o["token_correct"][scored].sum() / o["tokens"][scored].sum()),
        "last_acc": float(o["last_correct"][scored].mean()),
    }


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
            averaged = {name: {LENGTH_AVERAGED + m: float(np.mean([per_bin[b][name][m] for b in bins])) for m in METRICS} for name in found}
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
        out["by_length"] = {
            label: dict(entry, chance={m: v["level"] for m, v in by_length.get(label, {}).items()})
            for label, entry in out["by_length"].items()
        }
    return out
