"""Leaderboards from run records: rows = models, columns = task splits (x reported metric),
cells = mean ± std over seeds (in %), or the median, or both (the HALT paper reports flip-flop
with mean and median over seeds), FAIL for failed runs. Markdown, CSV and plots.

A cell whose records were made with settings the registry no longer gives (a preset edited
since; the records ``bench run`` and ``bench compare --run`` would train again; found by
bench/report/stale.py:mark_stale, which ``bench compare`` runs) is marked †, as in ``bench reproduce
--check-stale``, and the note says which settings changed and how to retrain them."""

from __future__ import annotations

import csv
import hashlib
import io
import math
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

from ..metrics import _bin_start
from ..records import other_code, write_atomic
from .cells import CHANCE, CHANCE_SES, LEARNED_SHARE, MISSING, OTHER_CODE, STALE, at_chance, chance_level
from .stats import mean_std


def stale_note(stale: dict, models: list[str], tasks: list[str], args=None) -> str:
    """The note under a table with stale cells: what changed, and the command that retrains them."""
    reasons = "; ".join(sorted(set(stale.values()))[:3])
    cells = ", ".join(f"{m} on {t}" for m, t in sorted(stale))
    command = ""
    if args is not None:
        seeds = f" --seeds {args.seeds}" if getattr(args, "seeds", None) else ""
        sets = "".join(f" --set {item}" for item in (args.set or []))
        command = (
            f"; retrain them with: bench compare --models {','.join(models)} --tasks {','.join(tasks)} --preset {args.preset}"
            f"{seeds}{sets} --out {args.out} --run"
        )
    return f"{STALE} = records made with settings the registry no longer gives ({len(stale)} cell(s): {cells}; {reasons}){command}"


STATS = ("mean", "median", "both")
STAT_TEXT = {"mean": "mean ± std over seeds", "median": "median over seeds", "both": "mean ± std over seeds (med = median)"}


def _check_stat(stat: str) -> None:
    if stat not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}, got {stat!r}")


def _present(values: list[float]) -> list[float]:
    return [v for v in values if v is not None and not math.isnan(v)]


def mean_std_percent(values: list[float]) -> str:
    """Mean ± sample std over seeds, in %; a lone value without std; MISSING when there is none."""
    vals = _present(values)
    if not vals:
        return MISSING
    mean, std = mean_std(vals)
    if std is None:
        return f"{100 * mean:.1f}"
    return f"{100 * mean:.1f} ± {100 * std:.1f}"


def median_percent(values: list[float]) -> str:
    """Median over seeds, in % (the mean of the two middle values for an even count); MISSING
    when there is none."""
    vals = sorted(_present(values))
    if not vals:
        return MISSING
    mid = len(vals) // 2
    median = vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
    return f"{100 * median:.1f}"


def cell_percent(values: list[float], stat: str = "mean") -> str:
    """One leaderboard cell: ``stat`` is "mean" (mean ± std), "median" or "both" ("mean ± std (med median)")."""
    _check_stat(stat)
    if stat == "mean":
        return mean_std_percent(values)
    if stat == "median" or median_percent(values) == MISSING:
        return median_percent(values)
    return f"{mean_std_percent(values)} (med {median_percent(values)})"


def _columns(records: dict, tasks: list[str]) -> list[tuple[str, str, str]]:
    cols = []
    for task in tasks:
        recs = [r for (m, t), rs in records.items() if t == task for r in rs if r.get("status") == "ok"]
        if not recs:
            cols.append((task, "", ""))
            continue
        splits = recs[0].get("test_splits") or [s for s in recs[0]["metrics"] if s != "val"]
        metrics = recs[0].get("report_metrics") or [recs[0].get("primary_metric", "acc")]
        for split in splits:
            for metric in metrics:
                cols.append((task, split, metric))
    return cols


def table(records: dict, models: list[str], tasks: list[str], stat: str = "mean") -> tuple[list[str], list[list[str]]]:
    """Header and rows; each cell summarises the ok seeds' values with ``cell_percent(values, stat)``."""
    _check_stat(stat)
    cols = _columns(records, tasks)
    headers = ["model"] + [f"{t}:{s} {m} ↑" if s else t for t, s, m in cols]
    rows = []
    for model in models:
        row = [model]
        for task, split, metric in cols:
            recs = records.get((model, task), [])
            failed = [r for r in recs if r.get("status") == "failed"]  # a pruned tuning trial is neither finished nor failed
            ok = [r for r in recs if r.get("status") == "ok"]
            if failed and not ok:
                row.append("FAIL")
                continue
            values = [r["metrics"].get(split, {}).get(metric) for r in ok]
            cell = cell_percent(values, stat) if split else MISSING
            if split and _at_chance(ok, split, metric, values):
                cell += f" {CHANCE}"
            if any(r.get("stale") for r in ok):
                cell += f" {STALE}"
            if any(other_code(r) for r in ok):
                cell += f" {OTHER_CODE}"
            if failed:
                cell += f" (FAIL {len(failed)}/{len(recs)})"
            row.append(cell)
        rows.append(row)
    return headers, rows


COMPARE_CHANCE_RULE = (
    f"{CHANCE} = at chance: the mean over seeds does not clear the chance level p, the best trivial strategy's score on the "
    f"split's own test examples (bench/tasks/trivial.py: the most frequent target, a copy of a token, ...), by the margin "
    f"max({CHANCE_SES} SE, {LEARNED_SHARE:g} x (1 - p)), SE = sqrt(p(1-p)/n) (docs/statistics.md)"
)


def _at_chance(ok: list[dict], split: str, metric: str, values: list) -> bool:
    """Whether a cell's mean over its finished seeds stays at its chance level (cells.at_chance: the
    best trivial strategy's score on the split plus the margin); False where the records keep no level."""
    present = _present(values)
    level = chance_level(ok, split, metric) if ok and present else None
    return level is not None and at_chance(sum(present) / len(present), level)


def chance_note(records: dict, models: list[str], tasks: list[str]) -> str:
    """The note under a leaderboard whose cells are marked at chance: the rule, and "nothing learned"
    when every cell with a chance level is at it ("" when no cell is at chance)."""
    marks = []
    for task, split, metric in _columns(records, tasks):
        for model in models:
            ok = [r for r in records.get((model, task), []) if r.get("status") == "ok"]
            values = [r["metrics"].get(split, {}).get(metric) for r in ok] if split else []
            if ok and _present(values) and chance_level(ok, split, metric) is not None:
                marks.append(_at_chance(ok, split, metric, values))
    if not any(marks):
        return ""
    nothing = "nothing learned: every cell is at its chance level; " if all(marks) else ""
    return nothing + COMPARE_CHANCE_RULE


def seeds_note(records: dict, models: list[str], tasks: list[str]) -> str:
    counts = sorted({len(records.get((m, t), [])) for m in models for t in tasks} - {0})
    return f"seeds per cell: {', '.join(map(str, counts))}" if counts else "no records found"


def write_tables(
    out: Path, preset: str, models: list[str], tasks: list[str], headers, rows, note: str, tag: str = "", stat: str = "mean"
) -> tuple[Path, Path]:
    key = hashlib.sha1(f"{','.join(models)}|{','.join(tasks)}".encode()).hexdigest()[:6]
    name = f"{preset}--{'+'.join(tasks)[:60]}--{key}" + (f"--set-{tag}" if tag else "") + (f"--{stat}" if stat != "mean" else "")
    folder = Path(out) / "leaderboards"
    folder.mkdir(parents=True, exist_ok=True)
    md = folder / f"{name}.md"
    md_text = (
        f"# Leaderboard: preset `{preset}`\n\nCells: {STAT_TEXT[stat]}, in % (↑ higher is better). {note}.\n\n"
        + tabulate(rows, headers=headers, tablefmt="github")
        + "\n"
    )
    csv_path = folder / f"{name}.csv"
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(headers)
    writer.writerows(rows)
    for path, text in ((md, md_text), (csv_path, buf.getvalue())):
        write_atomic(path, text)
    return md, csv_path


def plot(out: Path, preset: str, records: dict, models: list[str], tasks: list[str]) -> list[Path]:
    """Per-length accuracy (and any per-example '*depth*' statistic) against input length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    folder = Path(out) / "leaderboards" / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        series: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # quantity -> model -> bin -> values
        for model in models:
            for rec in records.get((model, task), []):
                if rec.get("status") != "ok":
                    continue
                metric = rec.get("primary_metric", "acc")
                for split in rec.get("test_splits", []):
                    res = rec["metrics"].get(split, {})
                    for label, entry in (res.get("by_length") or {}).items():
                        series[metric][model][label].append(entry.get(metric, entry.get("acc")))
                        for k, v in entry.items():
                            if "depth" in k:
                                series[k][model][label].append(v)
                    if not res.get("by_length") and split.startswith("len"):
                        series[metric][model][split[3:]].append(res.get(metric))
        for quantity, per_model in series.items():
            fig, ax = plt.subplots(figsize=(6, 3.6))
            for model, bins in per_model.items():
                labels = sorted(bins, key=_bin_start)
                xs = [_bin_start(lb) for lb in labels]
                ys = [sum(v) / len(v) for v in (bins[lb] for lb in labels)]
                ax.plot(xs, ys, marker="o", label=model)
            ax.set_xlabel("input length (bin start)")
            ax.set_ylabel(quantity)
            ax.set_title(f"{task} ({preset})")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            fig.tight_layout()
            path = folder / f"{preset}--{task}--{quantity}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written
