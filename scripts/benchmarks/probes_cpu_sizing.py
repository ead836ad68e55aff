"""Sizing the CPU probe table (bench/tables/probes-cpu.yaml; docs/tasks.md, "The probe table on the CPU").

    OMP_NUM_THREADS=1 python scripts/benchmarks/probes_cpu_sizing.py [--steps N] [--tasks t1,t2] [--models m1,m2] [--set k=v ...]

For each (task, family) at the table's settings (the `small` preset, the table's `set` and the
column's `set`, read from the table file; ``--set`` adds overrides, e.g. ``model.d_model=128``),
builds the training step `bench run` builds (bench/cost/step.py: TrainingStep) and measures, in
CPU seconds of this process (``time.process_time``, one thread: robust to other processes
sharing the cores): the median of N training steps on real, shuffled training batches, and one
forward pass (no gradient) on a first, a middle and a last batch of every evaluated split at the
eval batch size. A run's CPU seconds are extrapolated as

    steps x (ms per step) + epochs x (val forward) + (val + every test split forward)

(the trainer validates once per epoch, then tests every split once). Prints one line per cell
and the totals per family and per task.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ["transformer", "nope", "rsa-transformer", "transformer-star", "xl", "rsa-xl", "brt", "tlb", "rsa-tlb", "ut", "gut",
            "gutlb", "r-transformer", "lstm", "gru"]


def columns_of(table_name: str) -> dict[str, list[str]]:
    """{task: the overrides of its cells} from the table (the table's set, then the column's)."""
    from bench.report.tables import load_table

    table = load_table(table_name)
    found = {}
    for col in table.columns:
        found.setdefault(col.task, [*table.set, *col.set])
    return found


def eval_forward(step, split_data, eval_bs: int) -> float:
    """CPU seconds of one pass of the split at ``eval_bs``: the mean of the first, middle and last batch's forward, times the batches."""
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


def measure(registry, task: str, model: str, sets: list[str], n_steps: int) -> dict:
    import numpy as np
    import torch

    from bench.cost import Setup, TrainingStep
    from bench.data import SplitData, collate, load_split

    step = TrainingStep(registry, model, Setup(task=task, preset="small", lengths=[1]), sets)
    train = step.config.train
    data = SplitData(load_split(step.task, "train"))
    bs = train["batch_size"]
    rng = np.random.default_rng(0)
    batches = [collate([data[int(i)] for i in rng.choice(len(data), bs, replace=False)]) for _ in range(n_steps + 1)]
    step(batches[0])  # warm-up
    times = []
    for b in batches[1:]:
        t = time.process_time()
        step(b)
        times.append(time.process_time() - t)
    per_step = statistics.median(times)
    steps = math.ceil(len(data) / bs) * train["max_epochs"]
    if train["max_steps"] > 0:
        steps = min(steps, train["max_steps"])
    eval_bs = train["eval_batch_size"]
    val = eval_forward(step, SplitData(load_split(step.task, "val")), eval_bs)
    tests = {s: eval_forward(step, SplitData(load_split(step.task, s)), eval_bs) for s in step.task.test_splits()}
    total = steps * per_step + train["max_epochs"] * val + val + sum(tests.values())
    torch.manual_seed(0)
    return {"ms_step": 1000 * per_step, "steps": steps, "train_s": steps * per_step, "eval_s": total - steps * per_step, "total_s": total}


def main() -> None:
    import torch

    from bench.registry import Registry

    ap = argparse.ArgumentParser()
    ap.add_argument("--table", default="probes-cpu")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--tasks")
    ap.add_argument("--models")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    torch.set_num_threads(1)
    registry = Registry()
    cols = columns_of(args.table)
    tasks = args.tasks.split(",") if args.tasks else list(cols)
    models = args.models.split(",") if args.models else FAMILIES
    per_family, per_task = {}, {}
    print(f"{'task':20s} {'model':16s} {'ms/step':>8s} {'steps':>6s} {'train s':>8s} {'eval s':>7s} {'run s':>7s}", flush=True)
    for task in tasks:
        for model in models:
            m = measure(registry, task, model, [*cols[task], *args.set], args.steps)
            per_family[model] = per_family.get(model, 0.0) + m["total_s"]
            per_task[task] = per_task.get(task, 0.0) + m["total_s"]
            print(f"{task:20s} {model:16s} {m['ms_step']:8.1f} {m['steps']:6d} {m['train_s']:8.1f} {m['eval_s']:7.1f} {m['total_s']:7.1f}",
                  flush=True)
    print("per family (one seed, every task):", ", ".join(f"{k} {v:.0f} s" for k, v in per_family.items()))
    print("per task (one seed, every family):", ", ".join(f"{k} {v:.0f} s" for k, v in per_task.items()))
    print(f"one seed of everything: {sum(per_task.values()):.0f} CPU s")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
