"""Our formal-language runs next to [RSA Table 2], read from the run records.

    python scripts/rsa_table2.py --set train.num_threads=1                  # paper preset records
    python scripts/rsa_table2.py --set train.num_threads=1 --out results/rsa_table2_full.md

Rows: language x model; cells: sequence accuracy (%) on bin 0 (training lengths) and bin 1 (longer
strings), mean ± std over the seeds found, with the per-seed values, the number of seeds, and the
paper's number beside ours. ``--set`` must repeat the overrides the runs were made with (the
records are filed under their hash, as ``bench compare --set`` reads them).

The paper's values are its Table 2 (vanilla Transformer with sinusoidal PE; RSA-Transformer cases
I-IV), as printed; they are what we compare with, not results of this code.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench.report.leaderboard import load_records, mean_std_percent  # noqa: E402
from bench.records import overrides_tag  # noqa: E402

LANGUAGES = ["parity", "tomita3", "tomita5", "tomita6", "d2", "d4"]
MODELS = ["transformer", "rsa-transformer-I", "rsa-transformer-II", "rsa-transformer-III", "rsa-transformer-IV"]
# [RSA Table 2], bin 0 / bin 1 sequence accuracy.
PAPER = {
    "d2": {"transformer": (0.2, 0.2), "I": (1, 1), "II": (1, 1), "III": (1, 1), "IV": (1, 1)},
    "d4": {"transformer": (1, 0.08), "I": (1, 1), "II": (1, 1), "III": (1, 1), "IV": (1, 1)},
    "parity": {"transformer": (0.29, 0), "I": (0.99, 0.67), "II": (0.97, 0.53), "III": (0.91, 0.62), "IV": (0.9, 0.52)},
    "tomita3": {"transformer": (0.89, 0.11), "I": (1, 0.97), "II": (1, 0.97), "III": (1, 0.98), "IV": (1, 0.98)},
    "tomita5": {"transformer": (0.07, 0), "I": (0.63, 0.16), "II": (0.82, 0.17), "III": (0.49, 0), "IV": (0.72, 0.35)},
    "tomita6": {"transformer": (0, 0), "I": (0.78, 0.35), "II": (0.89, 0.38), "III": (0.95, 0.46), "IV": (0.64, 0.39)},
}


def paper_value(task: str, model: str) -> tuple[float, float] | None:
    key = "transformer" if model == "transformer" else model.rpartition("-")[2]
    return PAPER.get(task, {}).get(key)


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
        "| language | model | seeds | bin 0 % (ours) | bin 1 % (ours) | per seed bin 0 / bin 1 | [RSA Table 2] bin 0 / bin 1 | REM gates per layer | epochs | commit |",
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
            ref_s = "—" if ref is None else f"{100 * ref[0]:.0f} / {100 * ref[1]:.0f}"
            epochs = ",".join(sorted({str(r.get("epochs_run")) for r in recs}))
            commits = ",".join(sorted({(r.get("git") or {}).get("commit", "?")[:7] for r in recs}))
            seeds = ",".join(str(r["seed"]) for r in recs)
            lines.append(
                f"| {task} | {model} | {seeds} | {mean_std_percent(b0)} | {mean_std_percent(b1)} | {per_seed} | {ref_s} | {gates(recs)} | {epochs} | {commits} |"
            )
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("# " + " ".join(["python"] + sys.argv) + "\n\n" + text + "\n")


if __name__ == "__main__":
    main()
