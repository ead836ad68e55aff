"""Write the majority-class share (and the majority-token and last-target shares) into run records made before records carried them.

A split's ``majority`` (bench/metrics.py: the share of the split's examples whose label is its
most frequent one) is what an accuracy is compared with to say "at chance" (bench/report/cells.py).
Records of classification tasks (kinds with one label per example) written before that field
existed lack it. The test data are deterministic from the record's resolved task (its
``config.task``: target, parameters, data seed): this script builds that task with the
project's own code, generates each split the record has metrics for that lacks the field
(``Task.generate`` with the split's own seed, as bench/data.py:load_split does), checks that the
split has the record's number of examples, and writes the share into ``metrics[split]`` (after
``last_acc``, where a new record has it), nothing else; each record is rewritten atomically.
Records of tasks with token targets (kind lm, and kind tag: the formal languages, whose position
is scored by its whole label vector) get ``token_majority`` and ``last_majority`` (the
share of the most frequent last scored target: the chance level of ``last_acc``, flip-flop's
last read) the same way, in each split and in each of its per-length bins
(bench/metrics.py:with_token_chance, what a new record gets); a ``token_majority`` already there
must come out the same, or the record is left alone.
Every record also gets ``chance`` where a split lacks it: the chance levels of acc, token_acc and
last_acc, each the score of the best trivial strategy on the split and the strategy's name, in the
split's metrics and in each of its per-length bins (bench/tasks/chance.py:with_levels, what a new
record gets).
Records whose task generator has changed since (another ``version``), whose kind has neither,
or whose split sizes do not match are left alone and named.

    python scripts/backfill_majority.py results/runs            # prints what it would write
    python scripts/backfill_majority.py results/runs --write
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench.errors import UserError  # noqa: E402
from bench.metrics import with_token_chance  # noqa: E402
from bench.targets import import_task_class  # noqa: E402
from bench.tasks.chance import levels as trivial_levels  # noqa: E402
from bench.tasks.chance import with_levels
from bench.tasks.kinds import KINDS, TaskKind  # noqa: E402
from scripts._bench_util import run_backfill  # noqa: E402

#: the kinds whose token_acc has a token-level chance level: those that say which targets it scores
TOKEN_KINDS = tuple(name for name, kind in KINDS.items() if type(kind).scored_targets is not TaskKind.scored_targets)


def _with_majority(split_metrics: dict, share: float) -> dict:
    """The split's metrics with ``majority`` after ``last_acc`` (the order bench/metrics.py writes)."""
    out = {}
    for key, value in split_metrics.items():
        out[key] = value
        if key == "last_acc":
            out["majority"] = share
    out.setdefault("majority", share)
    return out


def task_class(task_config: dict):
    """The task class a record names (records made before the move to bench/ name ``tasks.x:X``, now ``bench.tasks.x:X``)."""
    target = task_config["target"]
    return import_task_class("bench." + target if target.startswith("tasks.") else target, f"tasks.{task_config['name']}")


def generated(task_config: dict, split: str, cache: dict) -> tuple:
    """(the task, the columns of ``split``) of the data the task config describes."""
    key = json.dumps(task_config, sort_keys=True)
    cls = task_class(task_config)
    task = cls.build(task_config["name"], dict(task_config.get("params") or {}))
    found = cache.setdefault(key, {})
    if split not in found:
        found[split] = task.generate(split, np.random.default_rng(task.split_seed(split)))
    return task, found[split]


def majority_shares(task_config: dict, splits: list[str], cache: dict) -> dict:
    """{split: (majority share, examples)} of the data the task config describes."""
    shares = {}
    for split in splits:
        labels = np.asarray(generated(task_config, split, cache)[1]["label"])
        shares[split] = (float(np.unique(labels, return_counts=True)[1].max() / len(labels)), len(labels))
    return shares


def _lacks_token_chance(m) -> bool:
    """Whether a split's metrics lack a token-level chance level (``token_majority`` or ``last_majority``)."""
    return isinstance(m, dict) and bool(m.get("n")) and not {"token_majority", "last_majority"} <= set(m)


def _chance_last(split_metrics: dict) -> dict:
    """The split's metrics (and its bins') with ``chance`` last, where a new record has it."""

    def last(entry: dict) -> dict:
        return {**{k: v for k, v in entry.items() if k != "chance"}, **({"chance": entry["chance"]} if "chance" in entry else {})}

    out = last(split_metrics)
    if out.get("by_length"):
        out["by_length"] = {label: last(entry) for label, entry in out["by_length"].items()}
    return out


def backfill_tokens(rec: dict, task_config: dict, cache: dict) -> tuple[dict | None, str]:
    """The record with ``token_majority`` and ``last_majority`` written into every split lacking
    one (TOKEN_KINDS); a value already there is computed again the same way and kept in its place."""
    metrics = rec["metrics"]
    todo = [s for s, m in metrics.items() if _lacks_token_chance(m)]
    if not todo:
        return None, "nothing to write"
    done = []
    for split in todo:
        task, columns = generated(task_config, split, cache)
        if len(columns["tokens"]) != metrics[split]["n"]:
            return None, f"split sizes differ: {split} ({len(columns['tokens'])} generated, {metrics[split]['n']} in the record)"
        had = metrics[split].get("token_majority")
        metrics[split] = _chance_last(with_token_chance(metrics[split], task.kind, columns, task.length_bin))
        now = metrics[split]["token_majority"]
        if had is not None and had != now and not (had != had and now != now):  # NaN only where both are NaN
            return None, f"{split}: token_majority {had} in the record, {metrics[split]['token_majority']} from the data: other data"
        done.append((split, metrics[split]["token_majority"], metrics[split]["last_majority"]))
    return rec, (
        "token_majority "
        + ", ".join(f"{s} {t:.3f}" for s, t, _ in done)
        + "; last_majority "
        + ", ".join(f"{s} {x:.3f}" for s, _, x in done)
    )


def backfill_chance(rec: dict, task_config: dict, cache: dict) -> tuple[dict | None, str]:
    """The record with ``chance`` (bench/tasks/chance.py:with_levels) written into every split
    lacking it, and into its per-length bins."""
    metrics = rec["metrics"]
    todo = [s for s, m in metrics.items() if isinstance(m, dict) and m.get("n") and "chance" not in m]
    if not todo:
        return None, "nothing to write"
    levels = cache.setdefault("levels", {})
    for split in todo:
        task, columns = generated(task_config, split, cache)
        if len(columns["tokens"]) != metrics[split]["n"]:
            return None, f"split sizes differ: {split} ({len(columns['tokens'])} generated, {metrics[split]['n']} in the record)"
        key = (json.dumps(task_config, sort_keys=True), split)
        if key not in levels:
            levels[key] = trivial_levels(task, columns, task.length_bin)
        metrics[split] = with_levels(metrics[split], task, columns, levels[key])
    return rec, "chance " + ", ".join(
        f"{s} " + "/".join(f"{m} {v['level']:.3f} ({v['strategy']})" for m, v in metrics[s]["chance"].items()) for s in todo
    )


def backfill(path: Path, cache: dict) -> tuple[dict | None, str]:
    """(the record with the shares and chance levels written, or None, what was done or why not)."""
    rec = json.loads(path.read_text())
    metrics = rec.get("metrics") or {}
    task = (rec.get("config") or {}).get("task") or {}
    if rec.get("status") != "ok" or "target" not in task:
        return None, "nothing to write"
    todo = [s for s, m in metrics.items() if isinstance(m, dict) and m.get("n") and "majority" not in m]
    try:
        cls = task_class(task)
    except UserError as exc:
        return None, f"task class not found: {exc}"
    if cls.kind not in ("classify", "pair_classify", *TOKEN_KINDS):
        return None, f"kind {cls.kind}: no label per example and no token targets"
    lacking = [s for s, m in metrics.items() if _lacks_token_chance(m)]
    no_chance = [s for s, m in metrics.items() if isinstance(m, dict) and m.get("n") and "chance" not in m]
    if not (lacking if cls.kind in TOKEN_KINDS else todo) and not no_chance:
        return None, "nothing to write"
    if str(task.get("version", "1")) != str(cls.version):
        return None, f"made by generator version {task.get('version', '1')}, the code's is {cls.version}: other data"
    said = []
    if lacking if cls.kind in TOKEN_KINDS else todo:
        written, what = backfill_tokens(rec, task, cache) if cls.kind in TOKEN_KINDS else backfill_shares(rec, task, todo, cache)
        if written is None:
            return None, what
        said.append(what)
    if no_chance:
        written, what = backfill_chance(rec, task, cache)
        if written is None:
            return None, what
        said.append(what)
    return rec, "; ".join(said)


def backfill_shares(rec: dict, task: dict, todo: list[str], cache: dict) -> tuple[dict | None, str]:
    """The record with ``majority`` written into the splits ``todo`` (one label per example)."""
    metrics = rec["metrics"]
    shares = majority_shares(task, todo, cache)
    wrong = [f"{s} ({shares[s][1]} generated, {metrics[s]['n']} in the record)" for s in todo if shares[s][1] != metrics[s]["n"]]
    if wrong:
        return None, "split sizes differ: " + ", ".join(wrong)
    for split in todo:
        metrics[split] = _with_majority(metrics[split], shares[split][0])
    return rec, ", ".join(f"{s} {shares[s][0]:.3f}" for s in todo)


def main() -> int:
    return run_backfill(__doc__, backfill)


if __name__ == "__main__":
    raise SystemExit(main())
