"""What RSA runs learned, and when their long strings were right: per run, the tested weights'
gates sigmoid(mu) and REM parameters (lambda of regular heads; gamma, theta of cyclical ones)
from the record's ``learned`` field, and the curve of any split watched during training
(``--set train.watch_splits=[bin1]``), from ``val_history``.

    python scripts/rem_report.py --task parity --models rsa-transformer-I,rsa-transformer-III
    python scripts/rem_report.py --task parity --models rsa-transformer-III --out results/parity_case3.md

Every record of the cell is shown, whatever its overrides (variants such as
``model.rsa.theta_init`` sit beside the plain runs, each labelled by its overrides).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench.records import identity_overrides, read_record  # noqa: E402


def variant(rec: dict) -> str:
    return ", ".join(identity_overrides(rec.get("overrides"))) or "(preset)"


def heads(layer: dict) -> str:
    """'-0.99 -0.71 +0.93 | 0.81@3.16 0.88@3.07': lambdas, then gamma@theta of cyclical heads."""
    regular = [f"{v:+.2f}" for k, v in layer.items() if k.startswith("lambda_")]
    cyclical = [f"{v:.2f}@{layer[k.replace('gamma', 'theta')]:.2f}" for k, v in layer.items() if k.startswith("gamma_")]
    return " ".join(regular) + (" | " + " ".join(cyclical) if cyclical else "")


def curve(history: list[dict], key: str) -> str:
    values = [h[key] for h in history if key in h]
    if not values:
        return "—"
    best = max(range(len(values)), key=values.__getitem__)
    return f"max {100 * values[best]:.1f} (epoch {best}); " + " ".join(f"{100 * v:.0f}" for v in values)


def pct(x) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def rows(out: Path, task: str, preset: str, models: list[str], watched: str) -> list[str]:
    lines = []
    for model in models:
        for path in sorted((out / "runs" / task / preset / model).glob("seed*.json")):
            rec = read_record(path)
            if rec.get("status") != "ok":
                continue
            m = rec["metrics"]
            head = (
                f"| {model} | {variant(rec)} | {rec['seed']} | {pct(m.get('bin0', {}).get('acc'))} | "
                f"{pct(m.get('bin1', {}).get('acc'))} | {curve(rec.get('val_history', []), watched + '_acc')} |"
            )
            learned = rec.get("learned") or {}
            layers = "<br>".join(f"l{i}: gate {v['gate']:.2f}; {heads(v)}" for i, v in enumerate(learned.values()))
            lines.append(head + f" {layers or '—'} |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="parity")
    p.add_argument("--preset", default="paper")
    p.add_argument("--models", default="rsa-transformer-I,rsa-transformer-II,rsa-transformer-III,rsa-transformer-IV")
    p.add_argument("--watched", default="bin1", help="the split whose per-epoch accuracy to show")
    p.add_argument("--results", default="results", help="folder holding runs/")
    p.add_argument("--out", help="also write the table to this Markdown file")
    args = p.parse_args()
    header = [
        f"| model | variant | seed | bin0 % | {args.watched} % (tested) | {args.watched} % per epoch (val-independent) "
        f"| tested weights per layer: sigmoid(mu); lambda of regular heads \\| gamma@theta of cyclical heads |",
        "|---|---|---|---|---|---|---|",
    ]
    table = header + rows(Path(args.results), args.task, args.preset, [m.strip() for m in args.models.split(",")], args.watched)
    text = "\n".join(table) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
