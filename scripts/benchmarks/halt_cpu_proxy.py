"""Sizing the CPU proxies of [HALT Tables 1, 2] (bench/tables/halt-table{1,2}-cpu.yaml; docs/tasks.md).

    python scripts/benchmarks/halt_cpu_proxy.py steps listops transformer,ut,gut,gut-no-global-halt,gut-no-gate,gut-no-transition,tlb,gutlb
    python scripts/benchmarks/halt_cpu_proxy.py estimate listops 35000 5

``steps``: one training step (forward, backward, AdamW) of each family at the small preset's sizes
on the small preset's batches, 5 steps per round, families interleaved round-robin over 3
rounds, one thread, median per family, printed with its ratio to the first family (the machine
is shared: the ratios count, not the milliseconds).

``estimate``: the grid time of the small preset with N_TRAIN training examples x EPOCHS, for every
family of the table x 3 seeds, two jobs at a time: per family, time per step and overhead
(validation + tests) from the committed small-preset records (runs made with
train.num_threads=1), the GUT ablations (no small records) as GUT x their measured ratio to GUT
(RATIOS below, from ``steps``); overhead scaled half fixed, half per epoch.
"""

from __future__ import annotations

import glob
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"listops": dict(n_train=5000, batch=32, epochs=5), "logic": dict(n_train=6000, batch=64, epochs=6)}
ABLATIONS = ("gut-no-global-halt", "gut-no-gate", "gut-no-transition")
RATIOS = {  # ms per step measured by `steps` (docs/tasks.md); only the ratios to GUT are used
    "listops": {"gut": 492.1, "gut-no-global-halt": 554.2, "gut-no-gate": 351.0, "gut-no-transition": 445.7},
    "logic": {"gut": 762.5, "gut-no-global-halt": 913.6, "gut-no-gate": 565.9, "gut-no-transition": 740.2},
}


def steps(task_name: str, families: list[str], rounds: int = 3) -> None:
    import torch

    import bench
    from bench.data import SplitData, collate, load_split
    from bench.runner.module import Head, forward_batch, task_loss

    torch.set_num_threads(1)
    task = bench.build_task(task_name, preset="small")
    data = SplitData(load_split(task, "train"))
    bs = SMALL[task_name]["batch"]
    batches = [collate([data[i] for i in range(k * bs, (k + 1) * bs)]) for k in range(6)]
    models = {}
    for f in families:
        torch.manual_seed(0)
        backbone = bench.build_model(f, task=task_name, preset="small").train()
        head = Head(task.kind, backbone.d_model, task.vocab_size, task.num_classes, task.num_labels)
        models[f] = (backbone, head, torch.optim.AdamW([*backbone.parameters(), *head.parameters()], lr=1e-3))

    def step(f, batch):
        backbone, head, opt = models[f]
        logits, aux, _ = forward_batch(backbone, head, batch)
        loss = task_loss(task.kind, logits, batch) + aux
        opt.zero_grad()
        loss.backward()
        opt.step()

    for f in families:
        step(f, batches[0])  # warm-up
    times = {f: [] for f in families}
    for _ in range(rounds):
        for f in families:  # interleaved: the shared machine's load hits every family alike
            t = time.perf_counter()
            for b in batches[1:]:
                step(f, b)
            times[f].append((time.perf_counter() - t) / (len(batches) - 1))
    ref = statistics.median(times[families[0]])
    for f in families:
        m = statistics.median(times[f])
        print(f"{task_name} {f:20s} {m * 1000:8.1f} ms/step  x{m / ref:5.2f} of {families[0]}")


def estimate(task: str, n_train: int, epochs: int, seeds: int = 3, jobs: int = 2) -> None:
    from bench.records import read_record

    s = SMALL[task]
    steps_small = math.ceil(s["n_train"] / s["batch"]) * s["epochs"]
    steps_cpu = math.ceil(n_train / s["batch"]) * epochs
    fam = {}
    for f in ("transformer", "ut", "gut", "tlb", "gutlb"):
        recs = [read_record(Path(p)) for p in glob.glob(str(ROOT / f"results/runs/{task}/small/{f}/seed[0-9].json"))]
        recs = [r for r in recs if r and "train.num_threads=1" in r.get("overrides", [])]
        fam[f] = (
            statistics.mean(r["train_time_s"] for r in recs) / steps_small,
            statistics.mean(r["wall_time_s"] - r["train_time_s"] for r in recs),
        )
    for f in ABLATIONS:
        fam[f] = (fam["gut"][0] * RATIOS[task][f] / RATIOS[task]["gut"], fam["gut"][1])
    per_seed = {f: step * steps_cpu + over * (0.5 + 0.5 * epochs / s["epochs"]) for f, (step, over) in fam.items()}
    total = sum(per_seed.values()) * seeds / jobs
    small_total = sum(step * steps_small + over for step, over in fam.values()) * seeds / jobs
    print(
        f"{task}: n_train {n_train} x {epochs} epochs = {steps_cpu} steps ({steps_cpu / steps_small:.2f}x small's {steps_small});"
        " per family (s): " + ", ".join(f"{f} {v:.0f}" for f, v in per_seed.items())
    )
    print(
        f"  grid {len(fam)} families x {seeds} seeds, --jobs {jobs}: {total / 3600:.2f} h (small preset's grid: {small_total / 3600:.2f} h)"
    )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if len(sys.argv) >= 4 and sys.argv[1] == "steps":
        steps(sys.argv[2], sys.argv[3].split(","))
    elif len(sys.argv) == 5 and sys.argv[1] == "estimate":
        estimate(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
