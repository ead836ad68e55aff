"""Sizing the CPU proxy of [HALT Table 3] (bench/tables/halt-table3-cpu.yaml; docs/tasks.md).

    OMP_NUM_THREADS=1 python scripts/benchmarks/halt_flipflop_cpu.py [SECONDS] [ROW ...]

Times training steps (forward, loss, backward, clipping, the preset's AdamW: bench/cost/step.py's
TrainingStep, as `bench run` builds them) of each row of the table at the flip-flop `small`
preset on real training batches (T = 128, batch 32), one thread, rows interleaved in rounds of
10 steps until each row has run SECONDS seconds (default 60) or 300 steps; prints per row the
median ms per step over its rounds and its ratio to the first row. A ROW is
``label=model[:key=value...]`` (model settings); default: the rows of halt-table3-cpu.yaml.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROWS = [
    "transformer=transformer",
    "ut=ut",
    "gut=gut",
    "tlb=tlb:chunk_size=3",
    "tlb-chunk25=tlb:chunk_size=25",
    "gutlb=gutlb:chunk_size=3:memory_slots=10:max_layers=6",
    "gutlb-chunk25=gutlb:chunk_size=25:memory_slots=10:max_layers=6",
    "tlb-fr=tlb-fr",
]


def main(seconds: float, rows: list[str]) -> None:
    import torch

    from bench.cost import Row, Setup, training_step
    from bench.data import SplitData, collate, load_split
    from bench.registry import Registry

    torch.set_num_threads(1)
    registry = Registry()
    setup = Setup(task="flipflop", preset="small", lengths=[128])
    steps = {}
    for spec in rows:
        label, model = spec.split("=", 1)
        steps[label] = training_step(registry, Row.parse(model), setup)
    first = next(iter(steps.values()))
    data = SplitData(load_split(first.task, "train"))
    bs = first.batch_size
    batches = [collate([data[i] for i in range(k * bs, (k + 1) * bs)]) for k in range(10)]
    for step in steps.values():
        step(batches[0])  # warm-up
    times, spent = {k: [] for k in steps}, {k: 0.0 for k in steps}
    while any(spent[k] < seconds and len(times[k]) < 30 for k in steps):
        for k, step in steps.items():
            if spent[k] >= seconds or len(times[k]) >= 30:
                continue
            t = time.perf_counter()
            for b in batches:
                step(b)
            dt = time.perf_counter() - t
            spent[k] += dt
            times[k].append(dt / len(batches))
    ref = statistics.median(times[next(iter(steps))])
    for k in steps:
        m = statistics.median(times[k])
        print(f"{k:16s} {m * 1000:8.1f} ms/step  x{m / ref:5.2f}  ({10 * len(times[k])} steps in {spent[k]:.0f} s)", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    args = sys.argv[1:]
    secs = float(args.pop(0)) if args and args[0].replace(".", "").isdigit() else 60.0
    main(secs, args or ROWS)
