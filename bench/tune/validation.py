"""What a study needs to know of its validation split: its size (``bench tune`` warns below
MIN_VAL examples and records why a study goes on anyway) and the chance level of the study's
objective on it (the best trivial strategy's score, bench/tasks/trivial.py), which the protocol's
rules compare scores with (bench/tune/protocol.py) before any record of the study exists.

The chance level is a property of the split alone: the data settings are the study's (a trial
changes ``train.*`` / ``model.*`` values only), so one level serves every configuration and rung
of a model's bracket. A finished record carries it too (``metrics.val.chance``, read by
bench/report/cells.py:chance_level), which ``record_chance`` reads.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from .protocol import parse_objective

log = logging.getLogger("bench.tune")

#: the smallest validation split a study feeding a table should select on (2 SE of a difference
#: of two accuracies near 50% is 4.5 points at 1,000 examples, 8.2 at 300)
MIN_VAL = 1000
LENGTH_AVERAGED = "length_avg_"  # a METRIC@lengths objective's chance level: the split's length_avg_<METRIC>


def level_key(objective: str) -> str:
    """The key of the objective's chance level in a split's levels (``length_avg_<METRIC>`` for METRIC@lengths)."""
    metric, how = parse_objective(objective)
    return LENGTH_AVERAGED + metric if how else metric


def resolved(registry, meta: dict, model: str):
    """The run config of the study's model at the study's settings (its data settings are every trial's)."""
    from ..config import resolve_run
    from ..runner.build import _registry

    return resolve_run(_registry(registry), model, meta["task"], meta["preset"], list(meta["set"]))


def val_columns(config) -> tuple[object, dict, int]:
    """(the task object, the validation split's columns, its examples) of a resolved run config:
    the split from the data cache (generated into it when missing, as the runs would)."""
    from ..data import SplitData, load_split
    from ..runner.build import instantiate_task

    task = instantiate_task(config.task)
    split = SplitData(load_split(task, "val"))
    return task, split.columns, split.n


def val_size_settings(config) -> list[str]:
    """The ``data.*`` settings of the task that set its validation size (e.g. data.n_val, flip-flop's data.n_val_each)."""
    return [f"data.{k}" for k in config.task.values if "val" in k]


def size_warning(n: int, settings: list[str], reason: str | None) -> str | None:
    """The one line ``bench tune`` prints for a validation split under MIN_VAL examples (None at or above it)."""
    if n >= MIN_VAL:
        return None
    two_se = 200 * math.sqrt(2 * 0.25 / n)
    how = (
        f"raise it with --set {settings[0]}=..."
        if len(settings) == 1
        else f"raise it with --set (one of {', '.join(settings)})"
        if settings
        else "raise the task's validation size (bench explain lists its data.* settings)"
    )
    head = (
        f"bench: the validation split has {n} examples, under the {MIN_VAL:,} a tuned table should select on "
        f"(2 SE of a difference near 50% is {two_se:.1f} points at this size)"
    )
    if reason:
        return f"{head}; going on, because: {reason} (recorded in study.json)"
    return f"{head}: {how}, or give --val-reason TEXT to record why the study goes on at this size"


def validation_chance(registry, meta: dict, model: str):
    """The chance level of the study's objective on its validation split, (level, n, strategy), or
    None when the split has none for it (a metric without a trivial level) or it cannot be computed
    (said in the log: the rules that need it are then off for the bracket)."""
    from ..tasks.chance import levels

    try:
        task, columns, n = val_columns(resolved(registry, meta, model))
        found = levels(task, columns, task.length_bin).get(level_key(meta["objective"]))
    except Exception as exc:  # noqa: BLE001 - the study goes on without the rules that need a level, and says so
        log.warning(
            f"tune: {model}: the validation's chance level cannot be computed ({exc}); rungs are not passed for it, "
            "and 'nothing learned' is not decided"
        )
        return None
    if not found or found.get("level") != found.get("level"):
        return None
    return float(found["level"]), int(n), str(found["strategy"])


def record_chance(out: Path, record: str | None, objective: str | None):
    """The chance level of ``objective`` (None: the record's primary metric) on a finished record's
    validation (bench/report/cells.py: chance_level), (level, n, strategy), or None."""
    from ..records import read_record
    from ..report.cells import chance_level

    if not record or not (Path(out) / record).exists():
        return None
    rec = read_record(Path(out) / record, quiet=True)
    objective = objective or rec.get("primary_metric")
    if not objective:
        return None
    found = chance_level([rec], "val", level_key(objective))
    return None if found is None else (found.level, found.n, found.strategy)
