"""Grid wall time: `bench compare --run --jobs N` against the same grid run serially (--jobs 1),
measured side by side in one run, on fresh output folders with the data cache warm; then the
same command again, which must train nothing.

    python scripts/benchmarks/bench_grid.py [--jobs 2] [--models transformer,lstm,nope] [--tasks parity,copy] [--preset smoke] [--repeats 1]

Prints the times and the ratio; results/perf/grid.md keeps a measured table."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def grid(out: Path, models: str, tasks: str, jobs: int, preset: str = "smoke") -> tuple[float, str]:
    argv = [
        sys.executable,
        "-m",
        "bench",
        "compare",
        "--models",
        models,
        "--tasks",
        tasks,
        "--preset",
        preset,
        "--run",
        "--jobs",
        str(jobs),
        "--out",
        str(out),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        sys.exit(f"grid failed ({proc.returncode}): {proc.stderr[-400:]}")
    return time.perf_counter() - t0, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--models", default="transformer,lstm,nope")
    ap.add_argument("--tasks", default="parity,copy")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--preset", default="smoke")
    args = ap.parse_args()
    cells = len(args.models.split(",")) * len(args.tasks.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        grid(Path(tmp) / "warm", args.models, args.tasks, args.jobs, args.preset)  # fills the data cache
        serial, parallel = [], []
        for r in range(args.repeats):  # alternate, so machine noise hits both
            serial.append(grid(Path(tmp) / f"serial{r}", args.models, args.tasks, 1, args.preset)[0])
            parallel.append(grid(Path(tmp) / f"parallel{r}", args.models, args.tasks, args.jobs, args.preset)[0])
        again, printed = grid(Path(tmp) / f"parallel{args.repeats - 1}", args.models, args.tasks, args.jobs, args.preset)
    s, p = min(serial), min(parallel)
    print(f"{cells} {args.preset} cells on {os.cpu_count()} cores: serial {s:.1f}s, --jobs {args.jobs} {p:.1f}s, ratio {p / s:.2f}")
    print(f"same command again: {again:.1f}s; {printed.splitlines()[0]}")


if __name__ == "__main__":
    main()
