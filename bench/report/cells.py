"""The records of one cell of a paper's table, and how they compare with what the registry gives
today; shared by results tables (reproduce.py) and checks tables (checks.py)."""
from __future__ import annotations

import math
from pathlib import Path

from ..config import resolve_run
from ..errors import UserError
from ..records import config_changes, overrides_tag
from .leaderboard import load_records

MISSING, NOT_REPORTED, STALE, CHANCE, NOT_ITS_COMMIT = "—", "n/r", "†", "~", "‡"
CHANCE_SES = 2  # a mean accuracy this many standard errors or less from the majority share is at chance
CHANCE_RULE = (f"{CHANCE} = at chance: the mean accuracy over seeds is within {CHANCE_SES} standard errors of the split's "
               "majority-class share p (SE = sqrt(p(1-p)/n), n = the split's examples)")
TOKEN_CHANCE_RULE = ("; for a token accuracy p is the accuracy of always guessing the split's most frequent target "
                     "token, for a last-read accuracy (last_acc) the share of the most frequent last target (length-averaged "
                     "as the metric is; n = the examples of all its length bins)")


NOT_ITS_COMMIT_RULE = (f"{NOT_ITS_COMMIT} = records made from code their named commit does not give (a dirty tree: the record's "
                       "git.diff_sha256 names the diff, or git.note says which code it was)")


def not_its_commit(rec: dict) -> bool:
    """Whether a record was made from code other than its named commit: a dirty tree, or a git.note saying so."""
    git = rec.get("git") or {}
    return bool(git.get("dirty") or git.get("note"))


LENGTH_AVERAGED = "length_avg_"  # length_avg_<metric>: <metric> averaged over the split's per-length bins


def record_value(rec: dict, split: str, metric: str):
    """A record's value of ``metric`` on ``split``: a metric of the split, minutes_per_epoch, or
    ``length_avg_<metric>``, the metric averaged over the split's per-length bins without weights
    (the Chomsky tasks' score: bench.tasks.chomsky.length_averaged; None without bins)."""
    if metric == "minutes_per_epoch":
        epochs, seconds = rec.get("epochs_run"), rec.get("train_time_s")
        return seconds / epochs / 60 if epochs and seconds is not None else None
    split_metrics = rec.get("metrics", {}).get(split, {})
    if metric.startswith(LENGTH_AVERAGED):
        from ..tasks.chomsky import length_averaged

        return length_averaged(split_metrics, metric[len(LENGTH_AVERAGED):]) if split_metrics.get("by_length") else None
    return split_metrics.get(metric)


def majority_share(records: list[dict], split: str, metric: str = "acc") -> tuple[float, int] | None:
    """(p, n) of a cell on ``split``: the chance level of ``metric`` (the records' mean) and the
    split's size (the smallest); None unless every record has one (older records) or for a
    metric without one. The chance level of ``acc`` is the majority-class share (classification
    kinds), of ``token_acc`` the majority-token share (``token_majority``: kinds with token
    targets), of ``last_acc`` the majority share of the last scored target (``last_majority``:
    flip-flop's last read; for classification kinds, whose last_acc is acc, ``majority``), of a
    ``length_avg_<metric>`` that guess's length-averaged accuracy, the bins' levels averaged as
    the metric averages the bins (n: the examples of all bins)."""
    shares = [_chance_level(rec.get("metrics", {}).get(split, {}), metric) for rec in records]
    if not shares or any(s is None for s in shares):
        return None
    return sum(p for p, _ in shares) / len(shares), min(n for _, n in shares)


CHANCE_KEYS = {"acc": ("majority",), "token_acc": ("token_majority",), "last_acc": ("last_majority", "majority")}


def _level(metrics: dict, metric: str) -> tuple[float, int] | None:
    """(chance level of ``metric``, examples) in one split's (or bin's) metrics: the first of its
    CHANCE_KEYS recorded; None without one."""
    for key in CHANCE_KEYS.get(metric, ()):
        p, n = metrics.get(key), metrics.get("n")
        if p is not None and p == p and n:
            return p, n
    return None


def _chance_level(split_metrics: dict, metric: str) -> tuple[float, int] | None:
    """One record's (chance level of ``metric``, examples) on a split (None: none recorded)."""
    if metric.startswith(LENGTH_AVERAGED):
        levels = [_level(b, metric[len(LENGTH_AVERAGED):]) for b in (split_metrics.get("by_length") or {}).values()]
        if not levels or any(x is None for x in levels):
            return None
        return sum(p for p, _ in levels) / len(levels), sum(n for _, n in levels)
    return _level(split_metrics, metric)


def at_chance(mean_acc: float, majority: tuple[float, int]) -> bool:
    """Whether a mean accuracy is within CHANCE_SES standard errors of the majority share p of n examples."""
    p, n = majority
    return abs(mean_acc - p) <= CHANCE_SES * math.sqrt(p * (1 - p) / n)


LEARNED_RULE = (f"k learned = the seeds whose own accuracy is more than {CHANCE_SES} standard errors above the chance level p "
                "(the ~ rule applied to each seed)")


def learned(values: list[float], majority: tuple[float, int]) -> int:
    """How many of a cell's per-seed accuracies (fractions) are above chance: more than CHANCE_SES
    standard errors above the chance level p of n examples (``at_chance``'s rule, one seed at a time)."""
    p, n = majority
    return sum(v - p > CHANCE_SES * math.sqrt(p * (1 - p) / n) for v in values)


def cell_records(out: Path, model: str, task: str, preset: str, overrides: list[str], seeds: list[int]) -> list[dict]:
    """The records of one cell made with exactly these overrides, for the expected seeds."""
    found = load_records(Path(out), [model], [task], preset, overrides_tag(overrides)).get((model, task), [])
    return sorted((r for r in found if r.get("seed") in seeds), key=lambda r: r.get("seed", 0))


def current_config(registry, model: str, task: str, preset: str, overrides: list[str]) -> dict | None:
    """What a run of this cell would be made with today (None: the cell cannot run)."""
    try:
        return resolve_run(registry, model, task, preset, overrides).public()
    except UserError:
        return None


def stale(rec: dict, current: dict | None) -> str | None:
    """The settings the record was made with that the registry no longer gives (None if none)."""
    return config_changes(rec.get("config"), current)
