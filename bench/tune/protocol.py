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

Against the trivial level (the validation's chance level: the best trivial strategy's score,
bench/tasks/trivial.py, as a tuple (level, n, strategy) like bench/report/cells.py's Chance; a
score is at it when it does not clear it by the tables' margin, cells.at_chance):

    passed rung  a rung where no configuration's score clears the level stops nobody
                 (``rung_survivors``): on a task that learns abruptly every value is still on its
                 plateau there, and the plateau does not rank them
    nothing      every score the study has for a model at the level (``nothing_above_chance``):
    learned      it picks nothing
    diverged     a run that failed (a non-finite training loss), whose validation ended back at the
                 level after clearing it (``collapsed``), or whose training loss ended above its
                 first value (``loss_rose``): ``diverged`` says which
    stability    a pick that diverged, or whose numeric grid neighbour did (``grid_neighbours``,
                 the edge extension included), is flagged, and a stable neighbour within the noise
                 of it is taken instead (``stable_pick``)

Standard error of a difference of two accuracies a, b on n examples each (independent binomials; the
two runs are scored on the same validation examples, whose correlation makes the true SE smaller,
so the rule keeps more than it must, never fewer):

    se(a, b, n) = sqrt(a (1 - a) / n + b (1 - b) / n)
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..errors import UserError
from ..runner.health import loss_rose  # the divergence rule, shared with finished runs' records

LENGTHS = "lengths"


def parse_objective(text: str) -> tuple[str, str | None]:
    """``METRIC`` or ``METRIC@lengths`` -> (metric, aggregate); UserError on anything else."""
    metric, at, how = str(text).strip().partition("@")
    if not metric.isidentifier() or (at and how != LENGTHS):
        raise UserError(
            f"--objective {text!r}: write a validation metric, e.g. last_acc, or METRIC@{LENGTHS} for the mean over "
            "the validation's length bins (a table that averages its lengths)"
        )
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
    return [eta**-k for k in range(levels, 0, -1)] + [1.0]


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


# ---- the trivial level ------------------------------------------------------------------------------

#: binomial standard errors above the chance level within which a later validation counts as fallen back to it
COLLAPSE_SES = 2


def at_chance(score: float, chance) -> bool:
    """Whether ``score`` does not clear the chance level ``chance`` ((level, n, strategy)) by the
    tables' margin (bench/report/cells.py: ``at_chance``, ``margin``); False when no level is known."""
    if chance is None:
        return False
    from ..report.cells import at_chance as below_margin

    return below_margin(score, chance)


def nothing_above_chance(scores: Iterable[float], chance) -> bool:
    """Whether no score clears the chance level (every one at it); False when no level is known or
    there is no score."""
    scores = [v for v in scores if v is not None]
    return chance is not None and bool(scores) and all(at_chance(v, chance) for v in scores)


def chance_text(chance) -> str:
    """The chance level as the study's output says it: level (%), strategy, and the margin a score must clear."""
    from ..report.cells import margin

    return f"{100 * chance[0]:.1f}% by {chance[2]}, a score must clear it by {100 * margin(chance):.1f} points"


def rung_survivors(scores: dict, n: int, chance=None, eta: int = 2, z: float = 2.0) -> tuple[list, str | None]:
    """Who goes on from a rung, and the reason when nobody is stopped: ``survivors``, unless no
    configuration's score clears the trivial level (``nothing_above_chance``); then every one goes
    on (the rung is passed) and the reason says so."""
    if nothing_above_chance(scores.values(), chance):
        return list(scores), f"no configuration above the trivial level ({chance_text(chance)}): the rung is passed, nobody stopped"
    return survivors(scores, n, eta, z), None


def collapsed(curve: list[float], chance, z: float = 2.0) -> tuple[float, float] | None:
    """Whether a validation curve (its scores in order) ended back at the trivial level after
    clearing it: (the best earlier score, the last), or None. An earlier validation cleared the
    level by the tables' margin (``at_chance``), the last is at most COLLAPSE_SES binomial standard
    errors above the level, sqrt(p (1 - p) / n), or below it, and the fall from the best is beyond
    the validation's noise (more than ``z`` se of the difference): a score that barely cleared the
    level and wobbles back is noise, and a run that fell and recovered ended where it recovered."""
    if chance is None or len(curve) < 2:
        return None
    p, n = chance[0], chance[1]
    cleared = [v for v in curve[:-1] if not at_chance(v, chance)]
    last = curve[-1]
    if not cleared or last > p + COLLAPSE_SES * math.sqrt(max(p * (1 - p), 0.0) / n):
        return None
    top = max(cleared)
    return (top, last) if top - last > z * se(top, last, n) else None


def diverged(curve: list[float], losses: list[float], chance, failed: str | None = None) -> str | None:
    """Why a run counts as diverged, or None: it failed (the runs' only failure is a non-finite
    training loss), its training loss is not finite or ended above its first value (``loss_rose``),
    or its validation ended back at the trivial level after clearing it (``collapsed``)."""
    if failed:
        return f"the run failed ({failed})"
    if any(not math.isfinite(x) for x in losses):
        return "a non-finite training loss"
    if loss_rose(losses):
        return f"its training loss ended above its first value ({losses[-1]:.4g} > {losses[0]:.4g})"
    fell = collapsed(curve, chance)
    if fell is not None:
        return (
            f"its validation fell back to the trivial level ({100 * fell[1]:.1f}% after {100 * fell[0]:.1f}%, "
            f"chance {100 * chance[0]:.1f}%)"
        )
    return None


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def grid_neighbours(configs: dict, key) -> list:
    """The configurations next to ``key`` along each numeric axis: for each numeric setting, the
    nearest smaller and the nearest larger value among ``configs`` ({key: values}; the grid's and
    its extension's) whose other settings equal ``key``'s."""
    values = configs[key]
    out = []
    for axis, v in values.items():
        if not _number(v):
            continue
        line = {
            k: c[axis]
            for k, c in configs.items()
            if k != key and _number(c.get(axis)) and all(c.get(a) == values[a] for a in values if a != axis)
        }
        below = [k for k, x in line.items() if x < v]
        above = [k for k, x in line.items() if x > v]
        if below:
            out.append(max(below, key=lambda k: line[k]))
        if above:
            out.append(min(above, key=lambda k: line[k]))
    return out


def stable_pick(pick, selection: dict, n: int, configs: dict, unstable: dict, z: float = 2.0) -> tuple:
    """(the pick, the flags): a pick that diverged itself (in ``unstable``, {key: reason}) gives way
    to the best stable configuration of ``selection`` (those with a full-run score, {key: score})
    within ``z`` SE of it; a pick one of whose ``grid_neighbours`` diverged is flagged and gives way
    to its best stable neighbour within the noise of it; else it stays, flagged. Ties: the order
    of ``configs``."""

    def near(k):
        return k in selection and selection[k] >= selection[pick] - z * se(selection[pick], selection[k], n)

    order = list(configs)
    if pick in unstable:
        flags = [f"the pick {pick} diverged: {unstable[pick]}"]
        stable = [k for k in selection if k != pick and k not in unstable and near(k)]
    else:
        neighbours = grid_neighbours(configs, pick)
        flags = [f"its grid neighbour {k} diverged: {unstable[k]}" for k in neighbours if k in unstable]
        if not flags:
            return pick, []
        stable = [k for k in neighbours if k not in unstable and near(k)]
    if stable:
        new = max(stable, key=lambda k: (selection[k], -order.index(k)))
        return new, [*flags, f"{new}, stable and within the noise of {pick}, is taken instead"]
    return pick, [*flags, f"no stable neighbour within the noise of {pick}: it stays the pick, flagged"]
