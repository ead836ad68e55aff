"""Sizing a probe table in CPU seconds before it is run (bench/tables/probes-cpu.yaml, probes-linear-cpu.yaml;
docs/tasks.md "The probe table on the CPU", docs/linear_recurrence.md "The probe table: plan").

    OMP_NUM_THREADS=1 python scripts/benchmarks/probes_sizing.py [--table probes-cpu] [--steps N]
        [--tasks t1,t2] [--models m1,m2] [--set k=v ...] [--shared-with TABLE]

For each (task, row) of the table at its settings (its preset, the table's `set` and the column's
`set`; ``--set`` adds overrides, e.g. ``model.d_model=128``), builds the training step `bench run`
builds (bench/cost/step.py: TrainingStep) and measures, in CPU seconds of this process
(``time.process_time``, one thread: robust to other processes sharing the cores), the median of N
training steps on real, shuffled training batches and one forward pass (no gradient) over the first,
a middle and the last batch of every evaluated split at the eval batch size. A run's CPU seconds are
extrapolated as

    steps x (s per step) + epochs x (val forward) + (val + every test split forward)

(the trainer validates once per epoch, then tests every split once). Rows that differ from another
only by a sign or a factor in the recurrence (``SAME_COST_AS``) take that row's measurement. Prints
one line per cell, the totals per row and per task, and the table's plan: every cell x the table's
seeds; with ``--shared-with TABLE``, the cells that TABLE trains with the same model, task, preset
and settings (the same runs: trained once for both) counted apart.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAME_COST_AS = {"deltanet-neg": "deltanet", "mamba2-neg": "mamba2"}  # beta x 2 / a sign: the same step


def cells_of(table) -> dict[str, list[str]]:
    """{task: the overrides of its cells} (the table's set, then its first column of that task's set)."""
    found: dict[str, list[str]] = {}
    for col in table.columns:
        found.setdefault(col.task, [*table.set, *col.set])
    return found


def eval_forward(step, split_data, eval_bs: int) -> float:
    """CPU seconds of one pass over the split at ``eval_bs``: the mean forward of its first, middle and
    last batch, times the batches."""
    import torch

    from bench.data import collate
    from bench.runner.module import forward_batch

    n = len(split_data)
    batches = math.ceil(n / eval_bs)
    costs = []
    step.module.eval()
    with torch.no_grad():
        for b in sorted({0, batches // 2, batches - 1}):
            batch = collate([split_data[i] for i in range(b * eval_bs, min(n, (b + 1) * eval_bs))])
            t = time.process_time()
            forward_batch(step.backbone, step.head, batch)
            costs.append(time.process_time() - t)
    step.module.train()
    return statistics.mean(costs) * batches


def measure(registry, task: str, model: str, preset: str, sets: list[str], n_steps: int) -> dict:
    """One run's CPU seconds at these settings: ms per step, steps, training and evaluation seconds."""
    import numpy as np

    from bench.config import resolve_run
    from bench.cost import Setup, TrainingStep
    from bench.data import SplitData, collate, load_split

    step = TrainingStep(resolve_run(registry, model, task, preset, sets), Setup(task=task, preset=preset, lengths=[1]))
    train = step.config.train
    data = SplitData(load_split(step.task, "train"))
    rng = np.random.default_rng(0)
    batches = [collate([data[int(i)] for i in rng.choice(len(data), train.batch_size, replace=False)]) for _ in range(n_steps + 1)]
    step(batches[0])  # warm-up
    times = []
    for b in batches[1:]:
        t = time.process_time()
        step(b)
        times.append(time.process_time() - t)
    per_step = statistics.median(times)
    steps = math.ceil(len(data) / train.batch_size) * train.max_epochs
    if train.max_steps > 0:
        steps = min(steps, train.max_steps)
    val = eval_forward(step, SplitData(load_split(step.task, "val")), train.eval_batch_size)
    tests = sum(eval_forward(step, SplitData(load_split(step.task, s)), train.eval_batch_size) for s in step.task.test_splits())
    total = steps * per_step + train.max_epochs * val + val + tests
    return {"ms_step": 1000 * per_step, "steps": steps, "train_s": steps * per_step, "eval_s": total - steps * per_step, "total_s": total}


def shared_cells(table, other) -> set[tuple[str, str]]:
    """The (task, model) cells both tables train with the same preset and settings."""
    mine, theirs = cells_of(table), cells_of(other)
    if table.preset != other.preset:
        return set()
    rows = {r.model for r in other.rows}
    return {(t, r.model) for r in table.rows for t in mine if r.model in rows and sorted(mine[t]) == sorted(theirs.get(t, [None]))}


def main() -> None:
    import torch

    from bench.registry import Registry
    from bench.report.tables import load_table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", default="probes-cpu")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--tasks")
    ap.add_argument("--models")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--shared-with", dest="shared_with", help="a table whose identical cells are counted apart (trained once for both)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    registry = Registry()
    table = load_table(args.table)
    cols = cells_of(table)
    tasks = args.tasks.split(",") if args.tasks else list(cols)
    models = args.models.split(",") if args.models else [r.model for r in table.rows]
    cost: dict[tuple[str, str], float] = {}
    print(f"{'task':20s} {'model':20s} {'ms/step':>8s} {'steps':>6s} {'train s':>8s} {'eval s':>7s} {'run s':>7s}", flush=True)
    for task in tasks:
        for model in models:
            if model in SAME_COST_AS:
                continue
            m = measure(registry, task, model, table.preset, [*cols[task], *args.set], args.steps)
            cost[task, model] = m["total_s"]
            print(
                f"{task:20s} {model:20s} {m['ms_step']:8.1f} {m['steps']:6d} {m['train_s']:8.1f} {m['eval_s']:7.1f} {m['total_s']:7.1f}",
                flush=True,
            )
        for alias, base in SAME_COST_AS.items():
            if alias in models and (task, base) in cost:
                cost[task, alias] = cost[task, base]
    per_row: dict[str, float] = {}
    per_task: dict[str, float] = {}
    for (task, model), s in cost.items():
        per_row[model] = per_row.get(model, 0.0) + s
        per_task[task] = per_task.get(task, 0.0) + s
    print("per row (one seed, every task):", ", ".join(f"{k} {v:.0f} s" for k, v in per_row.items()))
    print("per task (one seed, every row):", ", ".join(f"{k} {v:.0f} s" for k, v in per_task.items()))
    seeds = len(table.seeds)
    shared = shared_cells(table, load_table(args.shared_with)) if args.shared_with else set()
    new = sum(v for c, v in cost.items() if c not in shared) * seeds
    again = sum(v for c, v in cost.items() if c in shared) * seeds
    print(
        f"one seed of everything: {sum(cost.values()):.0f} CPU s over {len(cost)} cells; x {seeds} seeds: {new / 3600:.1f} CPU h"
        + (f" of new runs, + {again / 3600:.1f} CPU h of cells {args.shared_with} trains anyway" if args.shared_with else "")
    )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
