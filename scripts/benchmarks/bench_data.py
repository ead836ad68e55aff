"""Benchmark of data generation: generate + cache, then reload, every synthetic task's splits.

Goal: each synthetic task generated and cached in under 60 s and reloaded from the
cache in under 5 s on 2 CPU cores, at `paper` size. Uses the harness's own cache path
(bench.data.load_split), so "reload" measures what a run does: load the Hugging Face dataset
from disk and materialise its numpy columns (bench.data.SplitData).

    python scripts/benchmarks/bench_data.py [--preset paper] [--tasks listops,logic,...] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import torch

TASKS = ["listops", "logic", "flipflop", "lra-listops", "lra-pathfinder"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--out", default=None, help="also write the Markdown table here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cache = tempfile.mkdtemp(prefix="bench-data-")
    os.environ["BENCH_DATA_DIR"] = cache  # read by bench.data at call time
    from bench import build_task
    from bench.data import SplitData, load_split

    rows = ["| task | split | examples | tokens | generate + cache (s) | reload (s) |", "|---|---|---:|---:|---:|---:|"]
    totals = []
    try:
        for name in args.tasks.split(","):
            task = build_task(name, preset=args.preset)
            gen_total = load_total = 0.0
            for split in task.splits():
                t0 = time.perf_counter()
                load_split(task, split, refresh=True)
                t1 = time.perf_counter()
                data = SplitData(load_split(task, split))
                t2 = time.perf_counter()
                col = data.columns["tokens"]
                fixed = getattr(col, "dtype", np.dtype(object)) != np.dtype(object)  # one 2-D array vs ragged rows
                n_tok = int(col.size) if fixed else sum(len(t) for t in col)
                gen_total += t1 - t0
                load_total += t2 - t1
                rows.append(f"| {name} | {split} | {len(data)} | {n_tok:,} | {t1 - t0:.2f} | {t2 - t1:.2f} |")
                print(rows[-1], flush=True)
            ok = "yes" if gen_total < 60 and load_total < 5 else "NO"
            totals.append(f"| **{name}** | all | | | **{gen_total:.1f}** | **{load_total:.2f}** | {ok} |")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    table = "\n".join(rows)
    summary = "\n".join(
        ["| task | | | | generate + cache (s) | reload (s) | goal met (<60 s, <5 s) |", "|---|---|---|---|---:|---:|---|", *totals]
    )
    print("\n" + summary)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"preset `{args.preset}`\n\n{summary}\n\nPer split:\n\n{table}\n")


if __name__ == "__main__":
    main()
