"""Results tables (``kind: results``, the default): a paper's table, our run records beside the
paper's numbers. Rows are the table's rows; per column (task, split) our value (mean ± the
half-width of its 95% t interval over seeds, n seeds, the test set's binomial standard error;
``—`` when no record exists, never 0), the paper's and the difference.

Records are read from ``OUT/runs/<task>/<preset>/<model>/seed<N>[-<tag>].json``, the tag being
the hash of the cell's learning-relevant overrides (table + row + column ``set``, and the tuned
values of bench/report/tuned.py). The cells read what the records hold (their metrics and
resolved ``config``): building a table resolves no run and imports no model class. A cell counts
the records made with its run's newest settings (bench/report/cells.py: newest_settings; a seed
trained before a preset edit, beside seeds trained again after it, is left out). Given the stale
check's answer instead (``stale``, bench/report/stale.py, ``bench reproduce --check-stale``:
records made with settings the registry no longer resolves to), a cell leaves those records out
where it has current ones and is marked † where they are all it has, and the note names the
differences. A cell of accuracies whose records carry the split's majority-class share (classification tasks)
and whose mean is within 2 standard errors of it is marked ~ (at chance;
bench/report/cells.py:at_chance). Its claims are judged over the per-seed values
(bench/report/claims.py), paired on per-example outcomes where every record has them. Besides
NAME.md and NAME.csv it writes NAME.png: ours against the paper per cell.

A table of our own runs without any paper number (probes-cpu) prints ours only, one column per
(task, split). A column may read its own ``metric`` (``length_avg_token_acc``: bench/report/cells.py:
record_value); ``state: [task, ...]`` adds a column per task with each row's streaming state bytes
from its records (bench/budget.py: state_column, as ``bench compare --state``).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from ..errors import UserError
from ..records import other_code
from . import stats
from .cells import (
    CHANCE,
    CHANCE_ROW,
    CHANCE_RULE,
    LEARNED_RULE,
    LENGTH_AVERAGED,
    MISSING,
    NOT_REPORTED,
    OTHER_CODE,
    OTHER_CODE_RULE,
    STALE,
    TOKEN_CHANCE_RULE,
    at_chance,
    cell_records,
    cell_scores,
    chance_level,
    chance_text,
    learned,
    newest_settings,
    record_value,
    troubled_seeds,
)
from .claims import run_claims
from .leaderboard import cell_percent
from .stats import mean_std
from .table_kind import TableKind
from .table_parts import Column, Row, Table, load_cells, load_claims
from .tuned import apply_tuned, waiting_cells, with_tuned_column

log = logging.getLogger(__name__)
PROXY_PRESETS = ("smoke", "small")
NEEDS_DATA = "needs data"  # a cell without records whose task reads files you supply (a column's needs_data)
BINOMIAL_METRICS = ("acc", "last_acc")  # one 0/1 outcome per example: a binomial standard error applies
TROUBLE_RULE = (
    "k collapsed / diverged / stuck = seeds whose run went wrong (their records' trouble, bench/runner/health.py): "
    "collapsed, the tested weights predict one class on every split; diverged, the training loss ended above its "
    "first value; stuck, it fell by less than 2% of it; the CSV's trouble column names the seeds"
)
LOST = "§"
LOST_RULE = (
    f"{LOST} = some of the cell's records name a per-example outcomes file that is not in the results tree ({{cells}} cells): "
    "its claims' pairs are not tested (no paired test is possible, and Welch's on the seed means is not calibrated where "
    "the shared test set dominates); train those runs again at their records' commit to recover them"
)


# ---- cells ----------------------------------------------------------------------------------


def _summary(values: list[float], stat: str) -> float | None:
    vals = sorted(values)
    if not vals:
        return None
    if stat == "median":
        mid = len(vals) // 2
        return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
    return sum(vals) / len(vals)


def _ours_text(
    values: list[float],
    center: float | None,
    table: Table,
    examples: int | None = None,
    metric: str | None = None,
    learned_seeds: int | None = None,
    troubled: dict | None = None,
) -> str:
    """values as recorded (fractions, or minutes): the mean ± the half-width of its 95% t interval
    over seeds (stats.mean_ci), or the median, with n and, where the metric has a chance level,
    how many seeds learned (``learned_seeds``: cells.learned), how many seeds' runs went wrong
    (``troubled``: {collapsed | diverged | stuck: seeds}, the records' ``trouble``); beside an
    accuracy, the test set's binomial standard error of one run (``examples``: the split's size)."""
    if center is None:
        return MISSING
    scale, digits = (100.0, 1) if table.unit == "%" else (1.0, 2)
    if table.stat == "median":
        text = cell_percent(values, "median") if table.unit == "%" else f"{center:.2f}"
        return f"{text} ({len(values)})"
    mean, half = stats.mean_ci(values)
    text = f"{scale * mean:.{digits}f}" + ("" if half is None else f" ± {scale * half:.{digits}f}") + f" ({len(values)}"
    if learned_seeds is not None:
        text += f", {learned_seeds} learned"
    if troubled:
        text += "".join(f", {k} {kind}" for kind, k in troubled.items())
    if examples and (metric or table.metric) in BINOMIAL_METRICS:
        text += f", se {scale * stats.binomial_se(min(max(mean, 0.0), 1.0), examples):.{digits}f}"
    return text + ")"


def _examples(records: list[dict], split: str) -> int | None:
    """The split's number of examples (the smallest over the records), None when not recorded."""
    sizes = [r.get("metrics", {}).get(split, {}).get("n") for r in records]
    return min(sizes) if sizes and all(sizes) else None


def _paper_text(paper) -> str:
    if paper is None:
        return NOT_REPORTED
    mean, std = paper
    return f"{round(mean, 2):g}" + ("" if std is None else f" ± {round(std, 2):g}")


def _delta(ours: float | None, paper, how: str) -> float | None:
    """ours - the paper's mean (``how`` points), or ours / it (``how`` ratio); None without both."""
    if ours is None or paper is None:
        return None
    if how == "ratio":
        return ours / paper[0] if paper[0] else None
    return ours - paper[0]


def _delta_text(d: float | None, how: str) -> str:
    if d is None:
        return MISSING
    return f"×{d:.2f}" if how == "ratio" else f"{round(d, 1) or 0.0:+.1f}"  # no "-0.0"


def _fresh_records(table: Table, row: Row, col: Column, out: Path, preset: str, stale: dict | None, stale_runs: dict) -> tuple:
    """(the cell's finished records that count; its failed runs; its records in all; the stale mark
    or ""). Without the stale check (``stale`` None) the records that count are those made with
    the settings of the run's newest record (cells.newest_settings: read from the records alone).
    With its answer (``stale``: {run: {seed: the changed settings}}, bench/report/stale.py) they
    are those made with today's settings where the cell has any, else all of them, marked STALE;
    ``stale_runs`` gathers, per run (model, task, overrides), each seed's reason to be stale (None
    when current)."""
    run = (row.model, col.task, tuple(sorted(table.cell_set(row, col))))
    recs = cell_records(out, row.model, col.task, preset, table.cell_set(row, col), table.seeds)
    ok = [r for r in recs if r.get("status") == "ok"]
    failed = sum(r.get("status") == "failed" for r in recs)  # pruned tuning trials: not finished, not failed
    mark = ""
    if stale is None:
        ok = newest_settings(ok)
    elif ok:
        if run not in stale_runs:
            stale_runs[run] = {r["seed"]: stale.get(run, {}).get(r["seed"]) for r in ok}
        fresh = [r for r in ok if not stale_runs[run][r["seed"]]]
        ok, mark = (fresh, "") if fresh else (ok, f" {STALE}")
    return ok, failed, len(recs), mark


def _raw(table: Table, col: Column, ok: list[dict]) -> list[float]:
    """The records' values of the cell's metric, as recorded (fractions, or minutes); none missing or NaN."""
    return [v for v in (record_value(r, col.split, table.metric_of(col)) for r in ok) if v is not None and not math.isnan(v)]


def _cell(
    table: Table, row: Row, col: Column, paper, ok: list[dict], counts: tuple[int, int], mark: str, level, chance: bool
) -> tuple[list[str], dict]:
    """One cell's (ours, paper, Δ) texts and its CSV line, from its records (``counts``: its failed
    runs and its records in all; ``level``: the split's chance level (cells.Chance) or None;
    ``chance``: whether the cell is at chance)."""
    failed, n_recs = counts
    scale = 100.0 if table.unit == "%" else 1.0
    raw = _raw(table, col, ok)
    values = [v * scale for v in raw]
    center = _summary(values, table.stat)
    d = _delta(center, paper, table.delta)
    examples = _examples(ok, col.split) if raw else None
    learned_seeds = learned(raw, level) if level and raw else None
    troubled = troubled_seeds(ok)
    text = (
        "FAIL"
        if failed and not ok
        else NEEDS_DATA
        if col.needs_data and not n_recs
        else _ours_text(raw, center, table, examples, table.metric_of(col), learned_seeds, troubled) + mark
    )
    text += f" {CHANCE}" if chance else ""
    text += f" {OTHER_CODE}" if any(other_code(r) for r in ok) else ""
    if failed and ok:
        text += f" (FAIL {failed}/{n_recs})"
    line = {
        "row": row.label,
        "model": row.model,
        "task": col.task,
        "split": col.split,
        "column": col.label,
        "n": len(values),
        "failed": failed,
        "ours": center,
        "ours_std": mean_std(values)[1] if values else None,
        "ours_ci95": stats.mean_ci(values)[1] if values else None,
        "examples": examples,
        "binomial_se": (
            scale * stats.binomial_se(min(max(sum(raw) / len(raw), 0.0), 1.0), examples)
            if examples and raw and table.metric_of(col) in BINOMIAL_METRICS
            else None
        ),
        "paper": None if paper is None else paper[0],
        "paper_std": None if paper is None else paper[1],
        "delta": d,
        "stale": bool(mark),
        "chance_level": None if level is None else level.level * scale,
        "chance_strategy": None if level is None else level.strategy,
        "at_chance": chance,
        "learned": learned_seeds,
        "trouble": "; ".join(f"seed {r['seed']}: {', '.join(r['trouble'])}" for r in ok if r.get("trouble")) or None,
        "troubled": ", ".join(f"{k} {kind}" for kind, k in troubled.items()) or None,
        "outcomes_missing": None,
    }
    return [text, _paper_text(paper), _delta_text(d, table.delta)], line


def build(table: Table, out: Path, preset: str, stale: dict | None = None) -> dict:
    """Headers, rows, per-cell numbers, and the runs found / expected (a run is a model, task,
    override set and seed: one run fills every column of its task), from what the records hold:
    a cell counts the records made with its run's newest settings (cells.newest_settings).
    With the stale check's answer instead (``stale``: {run: {seed: the changed settings}},
    bench/report/stale.py), records made with settings the registry no longer gives are left out
    of a cell that has current ones, and marked STALE where they are all it has. A cell at chance (``at_chance``: its mean
    accuracy near the split's majority-class share) is marked CHANCE; ``at_chance`` maps it to
    that share in display units, for the claims.

    Layout: one row per table row and (ours, paper, Δ) per column; a table of several tasks
    with several splits each (RSA Table 2) is printed long instead, one row per (task, row)
    and (ours, paper, Δ) per split, as the papers print it."""
    texts, cells, present, expected, stale_runs, values_by_cell, chance_by_cell, outcomes = {}, [], set(), set(), {}, {}, {}, {}
    lost_cells = 0  # cells with a record whose outcomes file is missing
    learned_by_cell = {}  # (row, column) -> (seeds that learned, seeds), where the metric has a chance level
    levels = {}  # column -> the chance levels of its cells (cells.Chance)
    records = {}  # (model, task) -> the ok records of its cells (the state column reads them)
    token_chance = False  # a cell of a token accuracy is at chance (the rule then says what p is for it)
    scale = 100.0 if table.unit == "%" else 1.0
    for row in table.rows:
        for col, paper in zip(table.columns, row.paper):
            run = (row.model, col.task, tuple(sorted(table.cell_set(row, col))))
            ok, failed, n_recs, mark = _fresh_records(table, row, col, out, preset, stale, stale_runs)
            records.setdefault((row.model, col.task), ok)
            expected.add(run)
            present.update((*run, r["seed"]) for r in ok if not mark)
            raw = _raw(table, col, ok)
            values_by_cell[row.label, col.label] = ([v * scale for v in raw], bool(mark))
            level = chance_level(ok, col.split, table.metric_of(col)) if raw else None
            chance = bool(level) and at_chance(sum(raw) / len(raw), level)
            if level:
                learned_by_cell[row.label, col.label] = (learned(raw, level), len(raw))
                levels.setdefault(col.label, []).append(level)
            if chance:
                chance_by_cell[row.label, col.label] = level._replace(level=level.level * scale)
                token_chance = token_chance or table.metric_of(col).startswith(LENGTH_AVERAGED)
            per_seed = cell_scores(out, table, row, col, preset, ok) if raw else None
            if per_seed:
                outcomes[row.label, col.label] = per_seed
            texts[row.label, col.label], line = _cell(table, row, col, paper, ok, (failed, n_recs), mark, level, chance)
            if per_seed and "missing" in per_seed:
                texts[row.label, col.label][0] += f" {LOST}"
                line["outcomes_missing"] = per_seed["missing"]
                lost_cells += 1
            cells.append(line)
    chance_row = _chance_row(table, levels, scale)
    headers, rows = _layout(table, texts, chance_row)
    only_stale = [run for run, by_seed in stale_runs.items() if all(by_seed.values())]
    reasons = sorted({why for run in only_stale for why in stale_runs[run].values() if why})
    return {
        "headers": headers,
        "rows": rows,
        "cells": cells,
        "values": values_by_cell,
        "records": records,
        "at_chance": chance_by_cell,
        "outcomes": outcomes,
        "learned": learned_by_cell,
        "learned_rule": LEARNED_RULE if learned_by_cell else "",
        "chance": CHANCE_RULE + (TOKEN_CHANCE_RULE if token_chance else "") if chance_by_cell else "",
        "present": len(present),
        "expected": len(expected) * len(table.seeds),
        "other_code": OTHER_CODE_RULE if any(f" {OTHER_CODE}" in t[0] for t in texts.values()) else "",
        "lost": LOST_RULE.format(cells=lost_cells) if lost_cells else "",
        "trouble": TROUBLE_RULE if any(troubled_seeds(recs) for recs in records.values()) else "",
        "stale": (
            f"{STALE} = only records made with settings the registry no longer gives for that cell "
            f"({len(only_stale)} of {len(expected)} (model, task) cells; {'; '.join(reasons[:3])}): "
            "rerun them to compare the current setting; they do not count as present"
        )
        if reasons
        else "",
    }


def _chance_row(table: Table, levels: dict, scale: float) -> dict:
    """{column label: the chance level's text}: the best trivial strategy's score on the column's
    split and its name ("—" where no record holds a level); empty when no column has one."""
    if not levels:
        return {}
    texts = {}
    for col in table.columns:
        found = levels.get(col.label)
        if not found:
            texts[col.label] = MISSING
            continue
        texts[col.label] = chance_text([(scale * c.level, c.strategy) for c in found])
    return texts


def _layout(table: Table, texts: dict, chance_row: dict | None = None) -> tuple[list[str], list[list[str]]]:
    """The printed table: ``texts`` per (row, column) as (ours, paper, Δ), and last the chance row
    (``chance_row``: {column label: text}) where any column has a chance level."""
    chance_row = chance_row or {}
    tasks = list(dict.fromkeys(c.task for c in table.columns))
    if not any(p is not None for r in table.rows for p in r.paper):  # no paper numbers (our own table): ours per column
        rows = [[r.label, *(texts[r.label, c.label][0] for c in table.columns)] for r in table.rows]
        if chance_row:
            rows.append([CHANCE_ROW, *(chance_row[c.label] for c in table.columns)])
        return ["row", *(c.label for c in table.columns)], rows
    if len(tasks) == 1 or len(table.columns) == len(tasks):  # wide: a column per (task, split)
        headers = ["row"] + [f"{c.label} {what}" for c in table.columns for what in ("ours", "paper", "Δ")]
        rows = [[r.label] + [t for c in table.columns for t in texts[r.label, c.label]] for r in table.rows]
        if chance_row:
            rows.append([CHANCE_ROW] + [t for c in table.columns for t in (chance_row[c.label], "", "")])
        return headers, rows
    splits = list(dict.fromkeys(c.split for c in table.columns))
    label = {(c.task, c.split): c.label for c in table.columns}
    headers = ["task", "row"] + [f"{split} {what}" for split in splits for what in ("ours", "paper", "Δ")]
    rows = []
    for task in tasks:
        rows += [
            [task, r.label] + [t for split in splits for t in texts.get((r.label, label.get((task, split))), ["", "", ""])]
            for r in table.rows
        ]
        if chance_row:
            rows.append(
                [task, CHANCE_ROW]
                + [
                    t
                    for split in splits
                    for t in ((chance_row.get(label.get((task, split)), ""), "", "") if (task, split) in label else ("", "", ""))
                ]
            )
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
    paper = any(p is not None for r in table.rows for p in r.paper)
    return (
        f"{where}; {present}/{expected} runs present (seeds {','.join(map(str, table.seeds))} per cell){overrides}; "
        f"ours = {stat} {unit}, from records under {out}/runs; "
        + (f"paper: {table.source}; {delta}; " if paper else "")
        + f"{MISSING} = no record"
        + (f", {NOT_REPORTED} = not reported by the paper" if paper else "")
    )


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
        ax.errorbar(
            [c["paper"] for c in mine],
            [c["ours"] for c in mine],
            yerr=[c["ours_std"] or 0 for c in mine],
            fmt="o",
            capsize=2,
            label=label,
            alpha=0.8,
        )
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


def metrics_note(table: Table) -> str:
    """Which metric the columns with their own read (none: "")"""
    own = {}
    for c in table.columns:
        if c.metric and c.metric != table.metric:
            own.setdefault(c.metric, []).append(c.label)
    if not own:
        return ""
    avg = (
        f"; {LENGTH_AVERAGED}M = metric M averaged over the split's per-length bins (bench.tasks.chomsky.length_averaged)"
        if any(m.startswith(LENGTH_AVERAGED) for m in own)
        else ""
    )
    return f"metric {table.metric}, except " + "; ".join(f"{m} on {', '.join(labels)}" for m, labels in own.items()) + avg


def needs_data_note(table: Table) -> str:
    """What a "needs data" cell means and the commands that fill its column (none: "")."""
    cols = [c for c in table.columns if c.needs_data]
    if not cols:
        return ""
    return f"{NEEDS_DATA} = no record, and the task reads files you supply: " + "; ".join(f"{c.label}: {c.needs_data}" for c in cols)


STATE_NOTE = (
    "state = the bytes of the row's streaming state for one stream after the task's longest test length, at its "
    "width (the records' stream_state, bench/cost/state.py; * = measured now for records made before it was recorded)"
)


def with_state_columns(table: Table, registry, preset: str, records: dict, headers: list[str], rows: list[list]) -> tuple[list, list]:
    """The printed table with a column per task of ``state:``: each row's streaming state bytes
    (bench/budget.py: state_column, as ``bench compare --state`` prints it)."""
    from ..budget import state_column

    models = [r.model for r in table.rows]
    for task in table.state:
        col = next(c for c in table.columns if c.task == task)
        header, cells = state_column(registry, records, list(dict.fromkeys(models)), task, preset, [*table.set, *col.set])
        by_model = dict(zip(dict.fromkeys(models), cells))
        at = headers.index("row") if "row" in headers else 0
        by_label = {r.label: by_model[r.model] for r in table.rows}
        headers, rows = [*headers, header], [[*line, by_label.get(line[at], "")] for line in rows]
    return headers, rows


# ---- the kind -------------------------------------------------------------------------------


class ResultsTable(TableKind):
    """A paper's table beside our run records (the module docstring)."""

    name = "results"

    def load(self, table, spec, raw, preset, where):
        load_cells(table, spec, raw, preset, where)
        self.load_own(table, raw, where)
        load_claims(table, raw, preset, where)

    def load_own(self, table: Table, raw: dict, where: str) -> None:
        """The keys that belong to this kind only (checked after the cells, before the claims)."""
        if raw.get("cost"):
            raise UserError(f"{where}: 'cost' belongs to a table of kind cost")

    def runs(self, table, out, preset):
        apply_tuned(table, out, preset)  # tuned rows train at their study's best values
        waiting = waiting_cells(table)
        if waiting:
            studies = ", ".join(table.tuned_pending)
            which = f"studies {studies} have" if len(table.tuned_pending) > 1 else f"study {studies} has"
            by_column = {col: [r for r, c in waiting if c == col] for col in dict.fromkeys(c for _, c in waiting)}
            cells = "; ".join(f"{', '.join(rows)} on {col}" for col, rows in by_column.items())
            log.warning(
                f"bench: not training {cells}: {which} not finished (no best.json under {out}/studies) "
                f"and may tune them; finish bench tune, then run this command again"
            )
        groups: dict = {}
        for row in table.rows:
            for col in table.columns:
                if (row.label, col.label) not in waiting:
                    groups.setdefault((row.model, tuple(table.cell_set(row, col))), []).append(col.task)
        return groups

    def record_runs(self, table, out, preset):
        apply_tuned(table, out, preset)
        return [(row.model, col.task, table.cell_set(row, col)) for row in table.rows for col in table.columns]

    def build(self, table, registry, preset, out, stem, stale=None):
        apply_tuned(table, out, preset)
        built = build(table, out, preset, stale)
        if table.state:
            built["headers"], built["rows"] = with_state_columns(table, registry, preset, built["records"], built["headers"], built["rows"])
        built["headers"], built["rows"] = with_tuned_column(table, built["headers"], built["rows"])
        tuned = "; ".join(
            [
                *([f"tuned: rows at the best setting of study {', '.join(table.tuned)} (bench tune)"] if table.tuned else []),
                *([f"tuned: rows' models from the overlays of study {', '.join(table.overlays)} (bench tune)"] if table.overlays else []),
            ]
        )
        built["note"] = "; ".join(
            part
            for part in (
                note(table, preset, built["present"], built["expected"], out),
                metrics_note(table),
                needs_data_note(table),
                built["stale"],
                built["chance"],
                built["learned_rule"],
                built["other_code"],
                built["lost"],
                built["trouble"],
                tuned,
                STATE_NOTE if table.state else "",
            )
            if part
        )
        built["csv"] = built["cells"]
        return built

    def judge(self, table, built):
        claims = (
            run_claims(table, built["values"], at_chance=built["at_chance"], outcomes=built["outcomes"], learned=built["learned"])
            if table.claims
            else None
        )
        return claims if claims and claims["rows"] else None

    def files(self, table, built, stem, preset):
        png = plot(stem, table, built["cells"], preset)
        return [png] if png else []

    def summary(self, table, out, stale=None):
        apply_tuned(table, out, table.preset)
        cells = build(table, out, table.preset, stale)["cells"]
        current = sum(1 for c in cells if c["n"] and not c["stale"])
        old = sum(1 for c in cells if c["n"] and c["stale"])
        return f"{current}/{len(cells)} cells" + (f" (+{old} {STALE} stale only)" if old else "")
