"""Sizing bench/tables/probes-linear-cpu.yaml in CPU seconds (docs/linear_recurrence.md, "The probe table: plan").

    OMP_NUM_THREADS=1 nice python scripts/benchmarks/probes_linear_sizing.py [--steps N] [--models m1,m2] [--tasks t1,t2]

For each (task, family) at the table's settings (the `small` preset and the column's `set`), builds
the training step `bench run` builds (bench/cost/step.py: TrainingStep) and measures in CPU seconds
of this process (``time.process_time``, one thread: robust to other processes sharing the cores) the
median of N training steps on real training batches and one forward pass over a few batches of every
evaluated split. A run's CPU seconds are extrapolated as

    steps x (s per step) + epochs x (val forward) + (val + every test split forward)

(the trainer validates once per epoch, then tests every split once), as scripts/probes_cpu_sizing.py
does for probes-cpu. Prints one line per cell, the totals per family, and the table's plan: every
row x task x 5 seeds, the rows probes-cpu trains anyway (same preset, same settings) counted apart.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

SHARED_WITH_PROBES_CPU = {"transformer", "lstm", "ut", "gut", "tlb", "gutlb"}  # mqar, z60, mod-arith cells: probes-cpu's runs
SAME_COST_AS = {"deltanet-neg": "deltanet", "mamba2-neg": "mamba2"}  # one multiplication by 2 / a sign: the same step


def eval_forward(step, split_data, eval_bs: int) -> float:
    import torch

    from bench.data import collate
    from bench.runner.module import forward_batch

    n = len(split_data)
    batches = math.ceil(n / eval_bs)
    picks = sorted({0, batches // 2, batches - 1})
    costs = []
    step.module.eval()
    with torch.no_grad():
        for b in picks:
            batch = collate([split_data[i] for i in range(b * eval_bs, min(n, (b + 1) * eval_bs))])
            t = time.process_time()
            forward_batch(step.backbone, step.head, batch)
            costs.append(time.process_time() - t)
    step.module.train()
    return statistics.mean(costs) * batches


def measure(registry, task: str, model: str, sets: list[str], n_steps: int) -> float:
    import numpy as np

    from bench.config import resolve_run
    from bench.cost import Setup, TrainingStep
    from bench.data import SplitData, collate, load_split

    step = TrainingStep(resolve_run(registry, model, task, "small", sets), Setup(task=task, preset="small", lengths=[1]))
    train = step.config.train
    data = SplitData(load_split(step.task, "train"))
    bs = train.batch_size
    rng = np.random.default_rng(0)
    batches = [collate([data[int(i)] for i in rng.choice(len(data), bs, replace=False)]) for _ in range(n_steps + 1)]
    step(batches[0])  # warm-up
    times = []
    for b in batches[1:]:
        t = time.process_time()
        step(b)
        times.append(time.process_time() - t)
    steps = math.ceil(len(data) / bs) * train.max_epochs
    if train.max_steps > 0:
        steps = min(steps, train.max_steps)
    eval_bs = train.eval_batch_size
    val = eval_forward(step, SplitData(load_split(step.task, "val")), eval_bs)
    tests = sum(eval_forward(step, SplitData(load_split(step.task, s)), eval_bs) for s in step.task.test_splits())
    return steps * statistics.median(times) + train.max_epochs * val + val + tests


def main() -> None:
    import torch

    from bench.registry import Registry
    from bench.report.tables import load_table

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tasks")
    ap.add_argument("--models")
    args = ap.parse_args()
    torch.set_num_threads(1)
    registry = Registry()
    table = load_table("probes-linear-cpu")
    cols: dict = {}
    for col in table.columns:
        cols.setdefault(col.task, [*table.set, *col.set])
    rows = [r.model for r in table.rows]
    tasks = args.tasks.split(",") if args.tasks else list(cols)
    models = args.models.split(",") if args.models else [m for m in rows if m not in SAME_COST_AS]
    cost: dict = {}
    print(f"{'task':20s} {'model':20s} {'run CPU s':>9s}", flush=True)
    for task in tasks:
        for model in models:
            cost[task, model] = measure(registry, task, model, cols[task], args.steps)
            print(f"{task:20s} {model:20s} {cost[task, model]:9.1f}", flush=True)
    for alias, base in SAME_COST_AS.items():
        for task in tasks:
            if (task, base) in cost:
                cost[task, alias] = cost[task, base]
    seeds = len(table.seeds)
    new = sum(v for (task, m), v in cost.items() if m not in SHARED_WITH_PROBES_CPU or task == "parity") * seeds
    shared = sum(v for (task, m), v in cost.items() if m in SHARED_WITH_PROBES_CPU and task != "parity") * seeds
    print(f"per seed: {sum(cost.values()):.0f} CPU s over {len(cost)} cells")
    print(f"x {seeds} seeds: {new / 3600:.1f} CPU h new, + {shared / 3600:.1f} CPU h of cells probes-cpu trains anyway")


if __name__ == "__main__":
    main()
