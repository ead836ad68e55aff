"""The tuning protocol's rules, as pure functions (bench/tune/sync.py drives runs with them; the
replay benchmark, scripts/benchmarks/protocol_replay.py, applies them to recorded curves).

    objective    the metric the table reports, on validation, aggregated as the table does:
                 ``last_acc`` (a validation's own score) or ``last_acc@lengths`` (the mean over the
                 validation's length bins, for a table that averages its lengths)
    rungs        synchronous successive halving over the grid: rungs at 1/eta^K .. 1/eta, 1 of a
                 run (K = ceil(log_eta(configurations))); every live configuration reaches a rung
                 before any is stopped at it
    survivors    at a rung the top ceil(m / eta) go on, and so does every configuration within the
                 validation noise of the rung's best (``z`` standard errors of the difference of two
                 accuracies at the validation's size): a configuration is stopped only when it
                 trails the best by more than the noise, ties are kept
    contention   at the last rung, the configurations within the noise of the best: compared again
                 on a second seed (the mean of the two selects)
    extension    a best value at the edge of a numeric grid axis: the axis's next value one step out
                 (the grid's own ratio, or its own difference when a value is <= 0); not when the
                 pick ties another configuration (then the tie-break by grid order put it there)

Standard error of a difference of two accuracies a, b on n examples each (independent binomials; the
two runs are scored on the same validation examples, whose correlation makes the true SE smaller,
so the rule keeps more than it must, never fewer):

    se(a, b, n) = sqrt(a (1 - a) / n + b (1 - b) / n)
"""
from __future__ import annotations

import math

from ..errors import UserError

LENGTHS = "lengths"


def parse_objective(text: str) -> tuple[str, str | None]:
    """``METRIC`` or ``METRIC@lengths`` -> (metric, aggregate); UserError on anything else."""
    metric, at, how = str(text).strip().partition("@")
    if not metric.isidentifier() or (at and how != LENGTHS):
        raise UserError(f"--objective {text!r}: write a validation metric, e.g. last_acc, or METRIC@{LENGTHS} for the mean over "
                        "the validation's length bins (a table that averages its lengths)")
    return metric, (how or None)


def objective_value(scores: dict, objective: str) -> float:
    """The objective from one validation's scores (a record's ``metrics.val``, a run's last_eval)."""
    metric, how = parse_objective(objective)
    if how is None:
        if metric not in scores:
            raise UserError(f"objective {objective!r}: the validation has no metric {metric!r} (it has {', '.join(_numbers(scores))})")
        return float(scores[metric])
    bins = scores.get("by_length") or {}
    values = [b[metric] for b in bins.values() if metric in b]
    if not values:
        raise UserError(f"objective {objective!r}: the validation has no length bins with {metric!r}")
    return float(sum(values) / len(values))


def _numbers(scores: dict) -> list[str]:
    return [k for k, v in scores.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "n"]


def rung_fractions(configurations: int, eta: int = 2) -> list[float]:
    """The rungs of a bracket of ``configurations``, as fractions of a full run: 1/eta^K .. 1."""
    levels = math.ceil(math.log(configurations, eta) - 1e-9) if configurations > 1 else 0
    return [eta ** -k for k in range(levels, 0, -1)] + [1.0]


def rung_steps(fractions: list[float], validations: list[int]) -> list[int]:
    """Each rung's step: the first validation at or after its fraction of the run (the run's last
    validation ends it); rungs that land on one validation are one rung."""
    total = validations[-1]
    steps = [next(v for v in validations if v >= f * total - 1e-9) for f in fractions]
    return sorted(set(steps))


def se(a: float, b: float, n: int) -> float:
    """Standard error of the difference of two accuracies a and b, each on n examples."""
    return math.sqrt(max(a * (1 - a), 0.0) / n + max(b * (1 - b), 0.0) / n)


def within_noise(scores: dict, n: int, z: float = 2.0) -> list:
    """The keys whose score is within ``z`` standard errors of the best (the best included)."""
    best = max(scores.values())
    return [k for k, v in scores.items() if v >= best - z * se(best, v, n)]


def survivors(scores: dict, n: int, eta: int = 2, z: float = 2.0) -> list:
    """Who goes on from a rung: the top ceil(m / eta) (every key tied with the last of them too) and
    every key within the noise of the best; in the order of ``scores``."""
    if not scores:
        return []
    ranked = sorted(scores.values(), reverse=True)
    cut = ranked[max(1, math.ceil(len(scores) / eta)) - 1]
    near = set(within_noise(scores, n, z))
    return [k for k, v in scores.items() if v >= cut or k in near]


def edge_step(values: list, picked):
    """The value one step past ``picked`` when it is the smallest or largest of a numeric axis of two
    or more values (geometric step for positive axes: the ratio to its neighbour; else the
    difference); None when ``picked`` is inside the axis or the axis is not numeric."""
    numeric = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numeric) != len(values) or len(values) < 2 or picked not in values:
        return None
    ordered = sorted(values)
    if picked not in (ordered[0], ordered[-1]):
        return None
    neighbour = ordered[1] if picked == ordered[0] else ordered[-2]
    if all(v > 0 for v in ordered):
        out = picked * (picked / neighbour)
    else:
        out = picked + (picked - neighbour)
    if all(isinstance(v, int) for v in values):
        out = int(round(out))
        if out == picked:
            return None
    else:
        out = float(f"{out:.6g}")
    return out
