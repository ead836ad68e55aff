"""How long a run takes per preset and task on this machine, two ways, as Markdown (docs/presets.md):

1. measured: the wall time of every finished CPU record under RESULTS/runs made at a preset's own
   settings (no learning override: only train.num_threads and the like), per (preset, task):
   runs, median, fastest, slowest (every family together);
2. estimated: ``bench run``'s own estimate before training (bench/runner/estimate.py: a timed
   step of a copy of the model times the steps, plus validation and testing), for a handful of
   (model, task, preset) combinations, built as ``bench run`` builds them, nothing trained.

    python scripts/preset_times.py [RESULTS] > times.md       (RESULTS: default results)

The load of the machine when it ran is printed with the table: on a shared machine every time grows with it.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's bench, not an installed one
COMBOS = [
    (model, task, preset)
    for preset in ("smoke", "small")
    for task in ("parity", "copy", "flipflop", "listops")
    for model in ("transformer", "lstm", "gut")
]


def measured(results: Path) -> list[list[str]]:
    from bench.records import identity_overrides

    times = defaultdict(list)
    for path in results.glob("runs/*/*/*/*.json"):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(rec, dict) or rec.get("status") != "ok" or (rec.get("device") or {}).get("type") != "cpu":
            continue
        if identity_overrides(rec.get("overrides")) or not rec.get("wall_time_s") or rec.get("resumed_from"):
            continue
        times[rec["preset"], rec["task"]].append((rec["wall_time_s"] / 60, rec["model"], (rec.get("device") or {}).get("threads")))
    rows = []
    for (preset, task), runs in sorted(times.items()):
        minutes = [m for m, _, _ in runs]
        threads = sorted({t for _, _, t in runs if t})
        rows.append(
            [
                preset,
                task,
                str(len(runs)),
                str(len({m for _, m, _ in runs})),
                "/".join(map(str, threads)) or "?",
                f"{statistics.median(minutes):.1f}",
                f"{min(minutes):.1f}",
                f"{max(minutes):.1f}",
            ]
        )
    return rows


def estimated() -> list[list[str]]:
    from bench.runner.estimate import duration, estimate
    from bench.runner.lifecycle import build, plan_run

    rows = []
    with tempfile.TemporaryDirectory() as out:
        for model, task, preset in COMBOS:
            plan = plan_run(model, task, preset, 0, out, None)
            _, data, module = build(plan)
            est = estimate(module, data, plan.train, torch.device("cpu"))
            rows.append(
                [
                    preset,
                    task,
                    model,
                    f"{est.params:,}",
                    f"{est.steps:,}",
                    f"{est.step_s:.3g}",
                    duration(est.train_s),
                    duration(est.eval_s),
                    duration(est.total_s),
                ]
            )
            print(f"  {preset} {task} {model}: {duration(est.total_s)}", file=sys.stderr, flush=True)
    return rows


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main() -> None:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "results")
    load = os.getloadavg()
    print(
        f"Made by `python scripts/preset_times.py {results}` on {os.cpu_count()} CPU cores, load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) when the estimates were timed.\n"
    )
    print("**Measured** (the records' wall time, minutes; every family at the preset's own settings):\n")
    print(table(["preset", "task", "runs", "families", "threads", "median min", "fastest", "slowest"], measured(results)))
    print("\n**Estimated** before training by `bench run` (one timed step x the steps, plus validation and testing):\n")
    print(table(["preset", "task", "model", "params", "steps", "s/step", "training", "val + test", "total"], estimated()))


if __name__ == "__main__":
    main()
