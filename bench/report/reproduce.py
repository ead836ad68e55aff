"""``bench reproduce``: a paper's table, our run records beside the paper's numbers.

Each table is one YAML file in ``bench/tables/`` (the file name is the table's name); adding a table
is adding a file. ``bench reproduce --list`` lists them; ``bench reproduce NAME`` prints rows =
the table's rows, and per column (task, split) our value (mean ± std over seeds, n seeds; ``—``
when no record exists, never 0), the paper's and the difference; it writes Markdown, CSV and a
plot under ``OUT/reproduce/NAME[--PRESET][--set-TAG].*``. ``--run`` first trains the missing cells
through the grid machinery of ``bench compare --run``. ``--seeds`` and ``--set`` change the
table's seeds and add overrides to every cell (after the table's own: a proxy of a table, e.g.
more data at the small preset; the outputs' names carry the overrides' tag).

Records are read from ``OUT/runs/<task>/<preset>/<model>/seed<N>[-<tag>].json``, the tag being
the hash of the cell's learning-relevant overrides (table + row + column ``set``). A cell whose
records were made with settings the registry no longer resolves to (a preset edited since) is
marked † and the note names the differences. A cell of accuracies whose records carry the split's
majority-class share (classification tasks) and whose mean is within 2 standard errors of it is
marked ~ (at chance; bench/report/cells.py:at_chance). A table with ``kind: cost`` (HALT Table 5 on the
CPU) is measured instead of trained: ``--run`` times its cells (bench/report/cost_table.py). A table with ``kind: checks`` (e.g.
nope-properties) lists checks instead of cells: bench/report/checks.py. A results table's
``claims`` (the paper's findings over its cells) are judged beside the numbers, printed and
written to the Markdown and to ``...--claims.csv`` (bench/report/claims.py:run_claims). The YAML
schema: bench/report/tables.py. The write-ups in OUT (``results/*.md``) show the tables in marked
blocks, filled here from the Markdown just written (bench/report/writeup.py).
"""
from __future__ import annotations

import csv
import io
import math
import shlex
from pathlib import Path

from tabulate import tabulate

from ..config import parse_overrides, resolve_run
from ..grid import plan_grid
from ..records import other_code, overrides_tag, write_atomic
from ..registry import PRESETS, suggest
from ..stats import mean_std
from ..errors import UserError
from .cells import (CHANCE, CHANCE_RULE, MISSING, NOT_REPORTED, STALE, at_chance, cell_records, current_config, majority_share,
                    record_value, stale)
from . import cost_table, stats, writeup
from .checks import checks_summary, record_cells, run_checks
from .claims import run_claims
from .leaderboard import OTHER_CODE, OTHER_CODE_RULE, cell_percent
from .tables import TABLES_DIR, Table, apply_tuned, check_names, load_table, table_names, with_tuned_column

__all__ = ["MISSING", "NOT_REPORTED", "STALE", "build", "cell_records", "check_names", "current_config", "list_tables", "load_table",
           "plan", "record_value", "reproduce", "select_table", "stale", "table_names"]

PROXY_PRESETS = ("smoke", "small")
BINOMIAL_METRICS = ("acc", "last_acc")  # one 0/1 outcome per example: a binomial standard error applies


# ---- cells ----------------------------------------------------------------------------------

def _summary(values: list[float], stat: str) -> float | None:
    vals = sorted(values)
    if not vals:
        return None
    if stat == "median":
        mid = len(vals) // 2
        return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
    return sum(vals) / len(vals)


def _ours_text(values: list[float], center: float | None, table: Table, examples: int | None = None) -> str:
    """values as recorded (fractions, or minutes): the mean ± the half-width of its 95% t interval
    over seeds (stats.mean_ci), or the median, with n; beside an accuracy, the test set's binomial
    standard error of one run (``examples``: the split's size)."""
    if center is None:
        return MISSING
    scale, digits = (100.0, 1) if table.unit == "%" else (1.0, 2)
    if table.stat == "median":
        text = cell_percent(values, "median") if table.unit == "%" else f"{center:.2f}"
        return f"{text} ({len(values)})"
    mean, half = stats.mean_ci(values)
    text = f"{scale * mean:.{digits}f}" + ("" if half is None else f" ± {scale * half:.{digits}f}") + f" ({len(values)}"
    if examples and table.metric in BINOMIAL_METRICS:
        text += f", se {scale * stats.binomial_se(min(max(mean, 0.0), 1.0), examples):.{digits}f}"
    return text + ")"


def _examples(records: list[dict], split: str) -> int | None:
    """The split's number of examples (the smallest over the records), None when not recorded."""
    sizes = [r.get("metrics", {}).get(split, {}).get("n") for r in records]
    return min(sizes) if sizes and all(sizes) else None


def _outcomes(out: Path, table: Table, row, col, preset: str, records: list[dict]) -> list[dict] | None:
    """Per-seed outcomes of one cell's split ({"index", "correct"}), where bench keeps them and
    every record has them (a paired test on the same examples); None otherwise."""
    import bench

    load = getattr(bench, "load_outcomes", None)
    if load is None or table.metric != "acc" or len(records) < 2 or not all("outcomes" in r for r in records):
        return None
    tag = overrides_tag(table.cell_set(row, col))
    folder = Path(out) / "runs" / col.task / preset / row.model
    try:
        per_seed = [load(folder / f"seed{r['seed']}{'-' + tag if tag else ''}.json").get(col.split) for r in records]
    except UserError:
        return None
    return per_seed if all(o is not None and "index" in o and "correct" in o for o in per_seed) else None


def _paper_text(paper) -> str:
    if paper is None:
        return NOT_REPORTED
    mean, std = paper
    return f"{round(mean, 2):g}" + ("" if std is None else f" ± {round(std, 2):g}")


def _delta(ours: float | None, paper, kind: str) -> float | None:
    if ours is None or paper is None:
        return None
    if kind == "ratio":
        return ours / paper[0] if paper[0] else None
    return ours - paper[0]


def _delta_text(d: float | None, kind: str) -> str:
    if d is None:
        return MISSING
    return f"×{d:.2f}" if kind == "ratio" else f"{round(d, 1) or 0.0:+.1f}"  # no "-0.0"


def build(table: Table, out: Path, preset: str, registry=None) -> dict:
    """Headers, rows, per-cell numbers, and the runs found / expected (a run is a model, task,
    override set and seed: one run fills every column of its task). With a registry, records
    made with settings the registry no longer gives are left out of a cell that has current
    ones, and marked STALE where they are all it has. A cell at chance (``at_chance``: its mean
    accuracy near the split's majority-class share) is marked CHANCE; ``at_chance`` maps it to
    that share in display units, for the claims.

    Layout: one row per table row and (ours, paper, Δ) per column; a table of several tasks
    with several splits each (RSA Table 2) is printed long instead, one row per (task, row)
    and (ours, paper, Δ) per split, as the papers print it."""
    texts, cells, present, expected, stale_runs, values_by_cell, chance_by_cell, outcomes = {}, [], set(), set(), {}, {}, {}, {}
    scale = 100.0 if table.unit == "%" else 1.0
    for row in table.rows:
        for col, paper in zip(table.columns, row.paper):
            run = (row.model, col.task, tuple(sorted(table.cell_set(row, col))))
            recs = cell_records(out, row.model, col.task, preset, table.cell_set(row, col), table.seeds)
            ok = [r for r in recs if r.get("status") == "ok"]
            failed = sum(r.get("status") == "failed" for r in recs)  # pruned tuning trials: not finished, not failed
            mark = ""
            if registry is not None and ok:
                if run not in stale_runs:
                    current = current_config(registry, row.model, col.task, preset, table.cell_set(row, col))
                    stale_runs[run] = {r["seed"]: stale(r, current) for r in ok}
                fresh = [r for r in ok if not stale_runs[run][r["seed"]]]
                ok, mark = (fresh, "") if fresh else (ok, f" {STALE}")
            expected.add(run)
            present.update((*run, r["seed"]) for r in ok if not mark)
            raw = [v for v in (record_value(r, col.split, table.metric) for r in ok) if v is not None and not math.isnan(v)]
            values = [v * scale for v in raw]
            values_by_cell[row.label, col.label] = (values, bool(mark))
            majority = majority_share(ok, col.split) if table.metric == "acc" and raw else None
            if majority and at_chance(sum(raw) / len(raw), majority):
                chance_by_cell[row.label, col.label] = majority[0] * scale
            per_seed = _outcomes(out, table, row, col, preset, ok) if raw else None
            if per_seed:
                outcomes[row.label, col.label] = per_seed
            center = _summary(values, table.stat)
            d = _delta(center, paper, table.delta)
            examples = _examples(ok, col.split) if raw else None
            ci = stats.mean_ci(values)[1] if values else None
            text = "FAIL" if failed and not ok else _ours_text(raw, center, table, examples) + mark
            text += f" {CHANCE}" if (row.label, col.label) in chance_by_cell else ""
            text += f" {OTHER_CODE}" if any(other_code(r) for r in ok) else ""
            if failed and ok:
                text += f" (FAIL {failed}/{len(recs)})"
            texts[row.label, col.label] = [text, _paper_text(paper), _delta_text(d, table.delta)]
            cells.append({"row": row.label, "model": row.model, "task": col.task, "split": col.split, "column": col.label,
                          "n": len(values), "failed": failed, "ours": center, "ours_std": mean_std(values)[1] if values else None,
                          "ours_ci95": ci, "examples": examples,
                          "binomial_se": (scale * stats.binomial_se(min(max(sum(raw) / len(raw), 0.0), 1.0), examples)
                                          if examples and raw and table.metric in BINOMIAL_METRICS else None),
                          "paper": None if paper is None else paper[0], "paper_std": None if paper is None else paper[1], "delta": d,
                          "stale": bool(mark), "majority": None if majority is None else majority[0] * scale,
                          "at_chance": (row.label, col.label) in chance_by_cell})
    headers, rows = _layout(table, texts)
    only_stale = [run for run, by_seed in stale_runs.items() if all(by_seed.values())]
    reasons = sorted({why for run in only_stale for why in stale_runs[run].values() if why})
    return {"headers": headers, "rows": rows, "cells": cells, "values": values_by_cell, "at_chance": chance_by_cell, "outcomes": outcomes,
            "chance": CHANCE_RULE if chance_by_cell else "", "present": len(present), "expected": len(expected) * len(table.seeds),
            "other_code": OTHER_CODE_RULE if any(f" {OTHER_CODE}" in t[0] for t in texts.values()) else "",
            "stale": (f"{STALE} = only records made with settings the registry no longer gives for that cell "
                      f"({len(only_stale)} of {len(expected)} (model, task) cells; {'; '.join(reasons[:3])}): "
                      "rerun them to compare the current setting; they do not count as present") if reasons else ""}


def _layout(table: Table, texts: dict) -> tuple[list[str], list[list[str]]]:
    tasks = list(dict.fromkeys(c.task for c in table.columns))
    if len(tasks) == 1 or len(table.columns) == len(tasks):  # wide: a column per (task, split)
        headers = ["row"] + [f"{c.label} {what}" for c in table.columns for what in ("ours", "paper", "Δ")]
        return headers, [[r.label] + [t for c in table.columns for t in texts[r.label, c.label]] for r in table.rows]
    splits = list(dict.fromkeys(c.split for c in table.columns))
    label = {(c.task, c.split): c.label for c in table.columns}
    headers = ["task", "row"] + [f"{split} {what}" for split in splits for what in ("ours", "paper", "Δ")]
    rows = [[task, r.label] + [t for split in splits for t in texts.get((r.label, label.get((task, split))), ["", "", ""])]
            for task in tasks for r in table.rows]
    return headers, rows


def note(table: Table, preset: str, present: int, expected: int, out: Path) -> str:
    se = ", se = the test set's binomial standard error of one run, sqrt(p(1-p)/examples)" if table.metric in BINOMIAL_METRICS else ""
    stat = "median over seeds (n)" if table.stat == "median" else f"mean ± half-width of its 95% t interval over seeds (n{se})"
    unit = "in %" if table.unit == "%" else "in minutes per epoch"
    where = f"preset {preset}"
    if preset != table.preset:
        proxy = "a CPU-sized proxy, not the paper's sizes" if preset in PROXY_PRESETS else "not the paper's preset"
        where = f"{preset} preset (the table's is {table.preset}): {proxy}"
    delta = "Δ = ours / paper" if table.delta == "ratio" else "Δ = ours - paper in points"
    overrides = f"; overrides: {' '.join(table.set)}" if table.set else ""
    return (f"{where}; {present}/{expected} runs present (seeds {','.join(map(str, table.seeds))} per cell){overrides}; "
            f"ours = {stat} {unit}, from records under {out}/runs; paper: {table.source}; "
            f"{delta}; {MISSING} = no record, {NOT_REPORTED} = not reported by the paper")


# ---- outputs --------------------------------------------------------------------------------

def output_stem(out: Path, table: Table, preset: str, overrides: list[str] = ()) -> Path:
    """OUT/reproduce/<table>[--<preset>][--set-<tag>]: a proxy preset or extra overrides never
    overwrite the table at its own settings."""
    tag = overrides_tag(list(overrides))
    return Path(out) / "reproduce" / (table.name + (f"--{preset}" if preset != table.preset else "") + (f"--set-{tag}" if tag else ""))


def _csv_text(csv_rows: list[dict]) -> str:
    buf = io.StringIO()
    if csv_rows:
        writer = csv.DictWriter(buf, fieldnames=list(csv_rows[0]))
        writer.writeheader()
        writer.writerows(csv_rows)
    return buf.getvalue()


def write_outputs(stem: Path, title: str, command: str, note_text: str, headers: list[str], rows: list[list], csv_rows: list[dict],
                  claims: dict | None = None) -> list[Path]:
    """NAME.md (the table, and the claims when given) and NAME.csv; the claims also to NAME--claims.csv."""
    md, csv_path = stem.with_suffix(".md"), stem.with_suffix(".csv")
    text = f"# {title}\n\n`{command}`\n\n{note_text}.\n\n{tabulate(rows, headers=headers, tablefmt='github', disable_numparse=True)}\n"
    if claims:
        text += (f"\n## The paper's claims\n\nRule: {claims['rule']}.\n\n"
                 f"{tabulate(claims['rows'], headers=claims['headers'], tablefmt='github', disable_numparse=True)}\n")
    write_atomic(md, text)
    write_atomic(csv_path, _csv_text(csv_rows))
    paths = [md, csv_path]
    if claims:
        paths.append(stem.with_name(stem.name + "--claims.csv"))
        write_atomic(paths[-1], _csv_text(claims["csv"]))
    return paths


def plot(stem: Path, table: Table, cells: list[dict], preset: str) -> Path | None:
    """Ours (y, ± std) against the paper (x) per cell, one colour per row; None when no cell has both."""
    both = [c for c in cells if c["ours"] is not None and c["paper"] is not None]
    if not both:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    for label in dict.fromkeys(c["row"] for c in both):
        mine = [c for c in both if c["row"] == label]
        ax.errorbar([c["paper"] for c in mine], [c["ours"] for c in mine], yerr=[c["ours_std"] or 0 for c in mine],
                    fmt="o", capsize=2, label=label, alpha=0.8)
    lo = min(0.0, *(c["ours"] for c in both), *(c["paper"] for c in both))
    hi = max(*(c["ours"] for c in both), *(c["paper"] for c in both)) * 1.05 or 1.0
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
    ax.set_xlabel(f"paper ({table.unit})")
    ax.set_ylabel(f"ours, {table.stat} over seeds ({table.unit})")
    ax.set_title(f"{table.name} ({preset} preset)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = stem.with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- training the missing cells -------------------------------------------------------------

def plan(table: Table, registry, preset: str, out: Path, rerun: bool = False) -> tuple[list, list]:
    """(cells to train, incompatible (cell, why)) over every row x column group with one override set."""
    apply_tuned(table, out, preset)  # tuned rows train at their study's best values
    if table.kind == "checks":
        groups = record_cells(table)
    else:
        groups = {}
        for row in table.rows:
            for col in table.columns:
                groups.setdefault((row.model, tuple(table.cell_set(row, col))), []).append(col.task)
    todo, incompatible = [], []
    if table.kind == "cost":  # measured, not trained: measure_cost
        return todo, incompatible
    for (model, overrides), tasks in groups.items():
        grid = plan_grid(registry, [model], list(dict.fromkeys(tasks)), table.seeds, preset, list(overrides), Path(out), rerun=rerun)
        todo += grid.todo
        incompatible += grid.incompatible
    return todo, incompatible


# ---- command --------------------------------------------------------------------------------

def list_tables(out: Path, folder: Path = TABLES_DIR, registry=None) -> list[list[str]]:
    """One line per table: name, preset, cells with records (made with today's settings, when a
    registry is given; cells holding only stale records are counted apart), title."""
    rows = []
    for name in table_names(folder):
        table = load_table(name, folder=folder)
        if table.kind == "checks":
            have = checks_summary(table, out, table.preset)
        elif table.kind == "cost":
            have = "measured" if cost_table.build(table, table.preset, output_stem(out, table, table.preset))["measured"] else "not measured"
        else:
            apply_tuned(table, out, table.preset)
            cells = build(table, out, table.preset, registry)["cells"]
            current = sum(1 for c in cells if c["n"] and not c["stale"])
            old = sum(1 for c in cells if c["n"] and c["stale"])
            have = f"{current}/{len(cells)} cells" + (f" (+{old} {STALE} stale only)" if old else "")
        rows.append([name, table.preset, have, table.title])
    return rows


def select_table(name: str, registry, preset: str | None = None, models: list[str] | None = None, seeds: list[int] | None = None,
                 overrides: list[str] | None = None) -> tuple[Table, str]:
    """The table ``name`` as ``bench reproduce`` uses it, and the preset it is read at: only the rows
    of ``models``, ``seeds`` instead of the table's, ``overrides`` after the table's own (the user's
    win). Every name, preset and override is checked here: one UserError line, before anything is
    read or trained."""
    if preset and preset not in PRESETS:
        raise UserError(f"unknown preset {preset!r}; {suggest(preset, list(PRESETS))}")
    table = load_table(name, preset)
    preset = preset or table.preset
    check_names(table, registry)
    if models:
        rows = [r.model for r in table.rows]
        bad = next((m for m in models if m not in rows), None)
        if bad:
            raise UserError(f"--models: {bad!r} is not a row of {table.name}; {suggest(bad, rows)}")
        table.rows = [r for r in table.rows if r.model in models]
    if seeds is not None:
        table.seeds = list(seeds)
    if overrides:
        table.set = [*table.set, *overrides]
        if table.kind == "checks":
            parse_overrides(overrides)
        else:
            resolve_run(registry, table.rows[0].model, table.columns[0].task, preset, table.cell_set(table.rows[0], table.columns[0]))
    for task in dict.fromkeys(c.task for c in table.columns):
        registry.preset(task, preset)  # one line naming the task when it lacks the preset
    return table, preset


def reproduce(table: Table, registry, preset: str, out: Path, command: str, overrides: list[str] | None = None) -> dict:
    """The table from the records under ``out``, written to OUT/reproduce/ (Markdown, CSV, a plot;
    the claims when the table has some). Returns what to show: title, headers, rows, note, claims
    (None or its headers, rows and rule) and the paths written."""
    out = Path(out)
    stem = output_stem(out, table, preset, overrides or [])
    claims = None
    if table.kind == "cost":
        result = cost_table.build(table, preset, stem)
        claims = run_claims(table, result["values"], result["depths"], over="timed repeats") if table.claims else None
        claims = claims if claims and claims["rows"] else None
        paths = write_outputs(stem, table.title, command, result["note"], result["headers"], result["rows"], result["cells"], claims)
        paths += [cost_table.measured_path(stem)] if result["measured"] else []
    elif table.kind == "checks":
        result = run_checks(table, out, preset, registry)
        paths = write_outputs(stem, table.title, command, result["note"], result["headers"], result["rows"], result["csv"])
    else:
        apply_tuned(table, out, preset)
        result = build(table, out, preset, registry)
        result["headers"], result["rows"] = with_tuned_column(table, result["headers"], result["rows"])
        tuned = f"tuned: rows at the best setting of study {', '.join(table.tuned)} (bench tune)" if table.tuned else ""
        result["note"] = "; ".join(part for part in (note(table, preset, result["present"], result["expected"], out), result["stale"],
                                                     result["chance"], result["other_code"], tuned) if part)
        claims = run_claims(table, result["values"], at_chance=result["at_chance"], outcomes=result["outcomes"]) if table.claims else None
        claims = claims if claims and claims["rows"] else None
        paths = write_outputs(stem, table.title, command, result["note"], result["headers"], result["rows"], result["cells"], claims)
        png = plot(stem, table, result["cells"], preset)
        paths += [png] if png else []
    if stem.with_suffix(".md") in paths:  # the write-ups beside the records (results/*.md) show what was just written
        paths += writeup.fill_writeups(out, {stem.name: stem.with_suffix(".md").read_text()})
    return {"title": table.title, "headers": result["headers"], "rows": result["rows"], "note": result["note"], "claims": claims,
            "paths": paths}


def measure_cost(table: Table, registry, preset: str, out: Path, overrides: list[str] | None = None, progress=None) -> Path:
    """``--run`` for a cost table: time every cell now (bench/report/cost_table.py)."""
    return cost_table.measure(table, registry, preset, output_stem(Path(out), table, preset, overrides or []), progress)


def command_text(table: Table, out: Path, preset: str | None, models: str | None, seeds: str | None, overrides: list[str] | None) -> str:
    """The ``bench reproduce`` command written at the top of the Markdown (how to make it again)."""
    return " ".join(["bench reproduce", table.name, f"--out {out}", *([f"--preset {preset}"] if preset else []),
                     *([f"--models {models}"] if models else []), *([f"--seeds {seeds}"] if seeds else []),
                     *(f"--set {shlex.quote(item)}" for item in overrides or [])])
