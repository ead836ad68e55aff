"""The records of one cell of a table, read as they were written: their values, chance levels,
troubled seeds and per-example scores, from what each record holds (its metrics and its resolved
``config``); nothing here resolves a run or imports a model class (whether a record is stale is
bench/report/stale.py's question). Shared by results tables, checks tables, leaderboards and the
report page."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import UserError
from ..records import config_changes, outcomes_file, overrides_tag, read_record

MISSING, NOT_REPORTED, STALE, CHANCE, OTHER_CODE = "—", "n/r", "†", "~", "‡"
CHANCE_SES = 2  # the margin above the chance level is at least this many binomial standard errors
LEARNED_SHARE = 0.1  # ... and at least this share of the gap from the chance level to 100%
CHANCE_RULE = (
    f"{CHANCE} = at chance: the mean over seeds does not clear the chance level p by the margin, max({CHANCE_SES} SE, "
    f"{LEARNED_SHARE:g} x (1 - p)), SE = sqrt(p(1-p)/n), n = the split's examples; p = the score of the best trivial "
    "strategy on the split's own test examples (bench/tasks/trivial.py: the most frequent target, a guess among the "
    "context's values, a copy of the current, previous or first token, ...), named per column in the chance row"
)
CHANCE_ROW = "chance (trivial strategy)"  # the row of a results table that prints each column's chance level
TOKEN_CHANCE_RULE = (
    "; for a length-averaged metric p is each length bin's best strategy's score, averaged as the metric is "
    "(n = the examples of all its length bins)"
)


OTHER_CODE_RULE = (
    f"{OTHER_CODE} = records made from code their named commit does not give (a dirty tree: the record's "
    "git.diff_sha256 names the diff, or git.note says which code it was)"
)


def load_records(out: Path, models: list[str], tasks: list[str] | None, preset: str, tag: str = "") -> dict:
    """{(model, task): [record, ...]} for records made with the given overrides tag:
    seed<N>.json without overrides, seed<N>-<tag>.json with them."""
    found: dict = defaultdict(list)
    root = Path(out) / "runs"
    for path in sorted(root.glob(f"*/{preset}/*/seed*.json")):
        if path.stem.partition("-")[2] != tag:  # other overrides than the ones asked for
            continue
        task, model = path.parts[-4], path.parts[-2]
        if model not in models or (tasks and task not in tasks):
            continue
        rec = read_record(path)  # a malformed record: a warning, and left out
        if rec:
            found[(model, task)].append(rec)
    return found


LENGTH_AVERAGED = "length_avg_"  # length_avg_<metric>: <metric> averaged over the split's per-length bins


def record_value(rec: dict, split: str, metric: str):
    """A record's value of ``metric`` on ``split``: a metric of the split, minutes_per_epoch, or
    ``length_avg_<metric>``, the metric averaged over the split's per-length bins without weights
    (the Chomsky tasks' score: bench.tasks.base.length_averaged; None without bins)."""
    if metric == "minutes_per_epoch":
        epochs, seconds = rec.get("epochs_run"), rec.get("train_time_s")
        return seconds / epochs / 60 if epochs and seconds is not None else None
    split_metrics = rec.get("metrics", {}).get(split, {})
    if metric.startswith(LENGTH_AVERAGED):
        from ..tasks.base import length_averaged

        return length_averaged(split_metrics, metric[len(LENGTH_AVERAGED) :]) if split_metrics.get("by_length") else None
    return split_metrics.get(metric)


class Chance(NamedTuple):
    """A cell's chance level on a split: ``level`` (a fraction: the best trivial strategy's score),
    ``n`` (the split's examples) and ``strategy`` (the strategy that sets it)."""

    level: float
    n: int
    strategy: str


def chance_level(records: list[dict], split: str, metric: str = "acc") -> Chance | None:
    """The chance level of ``metric`` on ``split`` over a cell's records (their mean level, the
    smallest split size); None unless every record has one. A record's level is its split's
    ``chance`` (bench/tasks/trivial.py: the best trivial strategy's score of acc, token_acc or
    last_acc); records made before it was kept have only the majority guess's (``majority``,
    ``token_majority``, ``last_majority``). A ``length_avg_<metric>`` averages the bins' levels as
    the metric averages the bins (n: the examples of all bins)."""
    levels = [_chance_level(rec.get("metrics", {}).get(split, {}), metric) for rec in records]
    if not levels or any(c is None for c in levels):
        return None
    strategies = " / ".join(dict.fromkeys(c.strategy for c in levels))
    return Chance(sum(c.level for c in levels) / len(levels), min(c.n for c in levels), strategies)


#: the levels of records made before ``chance`` was kept: the majority guess's score per metric
CHANCE_KEYS = {"acc": ("majority",), "token_acc": ("token_majority",), "last_acc": ("last_majority", "majority")}
MAJORITY_GUESS = "most frequent target"
BEST_PER_BIN = "best per length bin"


def _level(metrics: dict, metric: str, in_bin: bool = False) -> Chance | None:
    """The chance level of ``metric`` in one split's (or bin's) metrics: its ``chance`` entry,
    else the first of its CHANCE_KEYS recorded; None without either."""
    n = metrics.get("n")
    if not n:
        return None
    kept = (metrics.get("chance") or {}).get(metric)
    if kept is not None:
        level, strategy = (kept, BEST_PER_BIN) if in_bin else (kept["level"], kept["strategy"])
        if level == level:
            return Chance(level, n, strategy)
        return None
    for key in CHANCE_KEYS.get(metric, ()):
        p = metrics.get(key)
        if p is not None and p == p:
            return Chance(p, n, "most frequent last target" if key == "last_majority" else MAJORITY_GUESS)
    return None


def _chance_level(split_metrics: dict, metric: str) -> Chance | None:
    """One record's chance level of ``metric`` on a split (None: none recorded): a length-averaged
    metric's is the split's (the best strategy's score averaged over the bins), else, for records
    made before the split kept one, the bins' levels averaged."""
    if metric.startswith(LENGTH_AVERAGED) and metric not in (split_metrics.get("chance") or {}):
        levels = [_level(b, metric[len(LENGTH_AVERAGED) :], in_bin=True) for b in (split_metrics.get("by_length") or {}).values()]
        if not levels or any(x is None for x in levels):
            return None
        strategy = BEST_PER_BIN if any(c.strategy == BEST_PER_BIN for c in levels) else levels[0].strategy
        return Chance(sum(c.level for c in levels) / len(levels), sum(c.n for c in levels), strategy)
    return _level(split_metrics, metric)


def chance_text(levels: list[tuple[float, str]], digits: int = 1) -> str:
    """A column's chance level as tables print it, from its cells' (level in display units,
    strategy): the level (a range where the records' levels differ) and the strategies that set it."""
    lo, hi = min(x for x, _ in levels), max(x for x, _ in levels)
    value = f"{lo:.{digits}f}" if round(lo, digits) == round(hi, digits) else f"{lo:.{digits}f}-{hi:.{digits}f}"
    return f"{value} ({' / '.join(dict.fromkeys(s for _, s in levels))})"


def margin(chance) -> float:
    """How far above the chance level p (of n examples) a score must be to count as learned:
    max(CHANCE_SES binomial standard errors, LEARNED_SHARE of the gap to 100%)."""
    p, n = chance[0], chance[1]
    return max(CHANCE_SES * math.sqrt(max(p * (1 - p), 0.0) / n), LEARNED_SHARE * (1 - p))


def at_chance(mean_acc: float, chance) -> bool:
    """Whether a cell's mean score (a fraction) stays below its chance level ``chance`` ((p, n, ...))
    plus the margin (``margin``): at the level, below it, or too little above it to count."""
    return mean_acc < chance[0] + margin(chance)


LEARNED_RULE = (
    f"k learned = the seeds whose own score clears the chance level p by the margin, max({CHANCE_SES} SE, "
    f"{LEARNED_SHARE:g} x (1 - p)) (the ~ rule applied to each seed)"
)


def learned(values: list[float], chance) -> int:
    """How many of a cell's per-seed scores (fractions) clear the chance level by the margin."""
    return sum(not at_chance(v, chance) for v in values)


def cell_records(out: Path, model: str, task: str, preset: str, overrides: list[str], seeds: list[int]) -> list[dict]:
    """The records of one cell made with exactly these overrides, for the expected seeds."""
    found = load_records(Path(out), [model], [task], preset, overrides_tag(overrides)).get((model, task), [])
    return sorted((r for r in found if r.get("seed") in seeds), key=lambda r: r.get("seed", 0))


def newest_settings(records: list[dict]) -> list[dict]:
    """The records of one run (a model, task, preset and overrides: one cell's seeds) made with the
    settings of its newest record (by ``date``): a record whose resolved ``config`` holds a setting
    the newest one changed (records.config_changes) was made before the run's settings moved on
    (a preset edited, then some seeds trained again) and is left out. Read from the records alone;
    whether the newest settings are still the registry's is the stale check's question
    (bench/report/stale.py)."""
    if len(records) < 2:
        return list(records)
    newest = max(records, key=lambda r: str(r.get("date") or ""))
    return [r for r in records if not config_changes(r.get("config"), newest.get("config"))]


def troubled_seeds(records: list[dict]) -> dict[str, int]:
    """{kind: seeds} of the records whose run went wrong (their ``trouble``, bench/runner/health.py),
    each seed counted once, by its first trouble's kind (collapsed, diverged, stuck)."""
    found: dict[str, int] = {}
    for r in records:
        if r.get("trouble"):
            kind = str(r["trouble"][0]).split(":")[0]
            found[kind] = found.get(kind, 0) + 1
    return found


def cell_scores(out: Path, table, row, col, preset: str, records: list[dict]) -> dict | None:
    """One cell's per-example scores on its split (``example_scores``) where bench keeps outcomes and every record has
    them (then a pair of such cells on the same data is tested paired): {"seeds": per seed
    {"index", "score"} (cells.example_scores: whole numbers where the metric allows), "unit": what
    a score's mean is multiplied by to give the metric, "data": the records' task configuration
    (two cells pair only on the same data)}; {"missing": the seeds} where a record names an
    outcomes file that is not there (its cell is marked and its pairs are not tested); None
    otherwise."""
    import json

    from ..metrics import load_outcomes

    metric = table.metric_of(col)
    tag = overrides_tag(table.cell_set(row, col))
    folder = Path(out) / "runs" / col.task / preset / row.model
    lost = [
        r["seed"]
        for r in records
        if "outcomes" in r and not outcomes_file(folder / f"seed{r['seed']}{'-' + tag if tag else ''}.json").is_file()
    ]
    if lost:
        return {"missing": f"seed{'s' if len(lost) > 1 else ''} {','.join(map(str, lost))}"}
    if metric == "minutes_per_epoch" or len(records) < 2 or not all("outcomes" in r for r in records):
        return None
    try:
        per_seed = [load_outcomes(folder / f"seed{r['seed']}{'-' + tag if tag else ''}.json").get(col.split) for r in records]
    except UserError:
        return None
    if not all(o is not None and "index" in o for o in per_seed):
        return None
    bins = [None] * len(per_seed)
    if metric.startswith(LENGTH_AVERAGED):
        task = _task_of(records[0])
        if task is None:
            return None
        bins = [[task.length_bin(int(x)) for x in o["length"]] for o in per_seed]
    scored = [example_scores(o, metric, b) for o, b in zip(per_seed, bins)]
    if any(s is None for s in scored) or len({u for _, u in scored}) != 1:
        return None
    data = {json.dumps((r.get("config") or {}).get("task"), sort_keys=True) for r in records}
    if len(data) != 1:
        return None
    return {"seeds": [{"index": o["index"], "score": s} for o, (s, _) in zip(per_seed, scored)], "unit": scored[0][1], "data": data.pop()}


def _task_of(rec: dict):
    """The task a record was made on, built from its resolved configuration (None: not buildable)."""
    from ..targets import import_task_class

    task = (rec.get("config") or {}).get("task") or {}
    try:
        cls = import_task_class(task["target"], f"tasks.{task['name']}")
        return cls.build(task["name"], dict(task.get("params") or {}))
    except (KeyError, UserError, TypeError, ValueError):
        return None


def example_scores(arrays: dict, metric: str, bins: list | None = None) -> tuple[np.ndarray, float] | None:
    """One run's per-example scores on a split whose mean over the split's examples, times ``unit``,
    is its record's ``metric`` (every example scored, as in every built-in task): (scores, unit),
    the scores whole numbers where the metric allows, so a paired test on them is exact; None where
    the outcomes cannot give the metric. From ``arrays`` (bench.load_outcomes: one split's):

    - ``acc``: ``correct`` (0/1), unit 1;
    - ``token_acc``: ``token_correct`` (positions right), unit n / (all scored positions): the
      examples weighted by their scored positions, as token_acc pools them;
    - ``last_acc``: ``last_correct`` (0/1, kept by runs made since it existed), or ``correct`` where
      every example has one scored target (classification: last_acc is acc); unit 1;
    - ``length_avg_<metric>``: the metric's per-example score weighted so that each length bin
      (``bins``: the bin of each example, in the arrays' order) counts 1 / (number of bins), as
      the metric averages its bins: float scores, unit 1."""
    from ..metrics import LAST_CORRECT

    n = len(arrays["correct"])
    if not n or (np.asarray(arrays["tokens"]) <= 0).any():
        return None
    if metric.startswith(LENGTH_AVERAGED):
        if bins is None or len(bins) != n:
            return None
        base = example_scores(arrays, metric[len(LENGTH_AVERAGED) :])
        if base is None:
            return None
        scores, _ = base
        labels = np.asarray(bins)
        names, at = np.unique(labels, return_inverse=True)
        if metric == LENGTH_AVERAGED + "token_acc":
            weight = np.bincount(at, weights=np.asarray(arrays["tokens"], float))  # scored positions per bin
        else:
            weight = np.bincount(at).astype(float)  # examples per bin
        return n * np.asarray(scores, float) / (len(names) * weight[at]), 1.0
    if metric == "acc":
        return np.asarray(arrays["correct"]), 1.0
    if metric == "token_acc":
        tokens = np.asarray(arrays["tokens"], dtype=np.int64)
        return np.asarray(arrays["token_correct"]), n / int(tokens.sum())
    if metric == "last_acc":
        last = arrays.get(LAST_CORRECT)
        if last is not None and (np.asarray(last) >= 0).all():
            return np.asarray(last), 1.0
        if (np.asarray(arrays["tokens"]) == 1).all():
            return np.asarray(arrays["correct"]), 1.0
    return None
