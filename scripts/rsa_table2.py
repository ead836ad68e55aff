"""Our formal-language runs next to [RSA Table 2], per seed, with the REM gates: the detailed
companion of ``bench reproduce rsa-table2`` (which prints ours / paper / Δ per cell and writes
Markdown, CSV and a plot). The languages, models and the paper's numbers come from
``bench/tables/rsa-table2.yaml``; nothing is hard-coded here.

    python scripts/rsa_table2.py                                              # paper preset records
    python scripts/rsa_table2.py --out results/leaderboards/rsa_table2_paper.md

Rows: language x model; cells: sequence accuracy (%) on bin 0 (training lengths) and bin 1 (longer
strings), mean ± std over the seeds found, with the per-seed values, the number of seeds, and the
paper's number beside ours. ``--set`` must repeat the learning-relevant overrides the runs were
made with (the records are filed under their hash, as ``bench compare --set`` reads them;
``train.num_threads`` is not one of them).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench.records import overrides_tag  # noqa: E402
from bench.report.cells import load_records  # noqa: E402
from bench.report.leaderboard import mean_std_percent  # noqa: E402
from bench.report.tables import load_table  # noqa: E402
from scripts._bench_util import emit  # noqa: E402

TABLE = load_table("rsa-table2")
LANGUAGES = list(dict.fromkeys(c.task for c in TABLE.columns))
MODELS = [r.model for r in TABLE.rows]


def paper_value(task: str, model: str) -> tuple[float, float] | None:
    """[RSA Table 2] bin 0 / bin 1 in %, from bench/tables/rsa-table2.yaml."""
    row = next((r for r in TABLE.rows if r.model == model), None)
    if row is None:
        return None
    pair = {c.split: v for c, v in zip(TABLE.columns, row.paper) if c.task == task and v is not None}
    return (pair["bin0"][0], pair["bin1"][0]) if {"bin0", "bin1"} <= set(pair) else None


def gates(recs: list[dict]) -> str:
    """sigmoid(mu) per layer at the tested (best-on-validation) weights, averaged over seeds."""
    per_layer: dict[str, list[float]] = {}
    for r in recs:
        for k, v in (r["metrics"].get("val", {}).get("stats") or {}).items():
            if k.startswith("rsa_gate_l"):
                per_layer.setdefault(k, []).append(v)
    if not per_layer:
        return "—"
    return ", ".join(f"{sum(v) / len(v):.2f}" for _, v in sorted(per_layer.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results", help="folder holding runs/ (as bench's --out)")
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--set", action="append", default=[], help="the overrides the runs were made with")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--tasks", default=",".join(LANGUAGES))
    ap.add_argument("--out", help="also write the table (Markdown) here")
    args = ap.parse_args()
    models, tasks = args.models.split(","), args.tasks.split(",")
    records = load_records(Path(args.results), models, tasks, args.preset, overrides_tag(args.set))

    lines = [
        "| language | model | seeds | bin 0 % (ours) | bin 1 % (ours) | per seed bin 0 / bin 1 "
        "| [RSA Table 2] bin 0 / bin 1 | REM gates per layer | epochs | commit |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task in tasks:
        for model in models:
            recs = sorted((r for r in records.get((model, task), []) if r.get("status") == "ok"), key=lambda r: r["seed"])
            if not recs:
                continue
            b0 = [r["metrics"]["bin0"]["acc"] for r in recs]
            b1 = [r["metrics"]["bin1"]["acc"] for r in recs]
            per_seed = ", ".join(f"{100 * a:.0f}/{100 * b:.0f}" for a, b in zip(b0, b1))
            ref = paper_value(task, model)
            ref_s = "—" if ref is None else f"{ref[0]:.0f} / {ref[1]:.0f}"
            epochs = ",".join(sorted({str(r.get("epochs_run")) for r in recs}))
            commits = ",".join(sorted({(r.get("git") or {}).get("commit", "?")[:7] for r in recs}))
            seeds = ",".join(str(r["seed"]) for r in recs)
            lines.append(
                f"| {task} | {model} | {seeds} | {mean_std_percent(b0)} | {mean_std_percent(b1)} | {per_seed} "
                f"| {ref_s} | {gates(recs)} | {epochs} | {commits} |"
            )
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
