"""Every row of a table against one baseline row, column by column: where a family is above the
baseline, where below, where the seeds cannot tell. The block
``<!-- bench:against TABLE BASELINE [ROWS] -->`` of a write-up (bench/report/writeup.py), e.g.
``<!-- bench:against probes-cpu transformer -->`` (every other row) or
``<!-- bench:against probes-cpu xl rsa-xl -->`` (ROWS: a comma-separated list, e.g. a mechanism
against its host): where each kind of recurrence helped, said by the table's test rather than by
prose. ``<!-- bench:against TABLE @OTHER [ROWS] -->`` compares each row with the same row of another
table instead (``versus_block``: e.g. ``halt-table1-cpu-reference @halt-table1-cpu-tuned2``, what the
reference code's rules change).

Read from what ``bench reproduce`` wrote for the table under OUT/reproduce/ (NAME.csv: each
cell's mean, sample std and number of seeds). Per cell, Welch's t-test of the row against the
baseline over seeds (two-sided: p = 2 x the smaller one-sided p of bench/report/stats.py), the
effect Δ = mean_row - mean_baseline with its 95% CI; per row, Holm's correction over its tested
columns; a cell is **above** / **below** when its adjusted p < 0.05, else inconclusive. A pair
with < 2 seeds a side, with both cells at chance, or with a cell whose records lost their outcome
files (``§``: bench/report/results_table.py), has no test. The block prints the Δ table
(▲ above, ▼ below) and, per row, one generated sentence naming the columns of each kind, every
tested one (inconclusive too) with its effect, CI and adjusted p.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tabulate import tabulate

from ..errors import UserError
from . import stats
from .claims import digits_of, effect_text, paired_scores
from .outputs import command_of, generated_table
from .tables import table_of

ABOVE, BELOW, UNSURE, NO_TEST = "above", "below", "inconclusive", "no test"
MARKS = {ABOVE: " ▲", BELOW: " ▼", UNSURE: "", NO_TEST: ""}


@dataclass(frozen=True)
class Compared:
    """One cell against the baseline's: its verdict, and (when tested) Δ, 95% CI, adjusted p."""

    verdict: str
    effect: float | None = None
    ci: tuple[float, float] | None = None
    p: float | None = None  # Holm-adjusted two-sided p
    why: str = ""  # why there is no test
    differ: str = ""  # the two cells' seeds learned in different shares: "1 of 5 (4 collapsed) vs 5 of 5"


def _number(text: str) -> float | None:
    return float(text) if text not in ("", "None", "nan") else None


def _cells(md: Path) -> dict[tuple[str, str], dict]:
    with open(md.with_suffix(".csv"), newline="") as f:
        return {(c["row"], c["column"]): c for c in csv.DictReader(f)}


def _pair(a: dict | None, b: dict | None) -> tuple[np.ndarray, ...] | str:
    """(mean, variance, n) of each side for Welch, or why the pair has no test."""
    sides = []
    for c in (a, b):
        n = int(c["n"]) if c and c["n"] else 0
        mean, std = (_number(c["ours"]), _number(c["ours_std"])) if c else (None, None)
        if n < 2 or mean is None or std is None:
            return "< 2 seeds a side"
        sides.append((mean, std**2, n))
    if a.get("at_chance") == "True" and b.get("at_chance") == "True":
        return "both at chance"
    if a.get("outcomes_missing") or b.get("outcomes_missing"):
        return "outcomes files missing"
    return sides[0] + sides[1]


def _learned(c: dict | None) -> tuple[int, int, str] | None:
    """(seeds that learned, seeds, their troubles' text) of a cell's CSV line; None without a count."""
    if not c or c.get("learned") in (None, "", "None") or not c.get("n"):
        return None
    return int(float(c["learned"])), int(c["n"]), c.get("troubled") or ""


def _differ(a: dict | None, b: dict | None) -> str:
    """ "1 of 5 (4 collapsed) vs 5 of 5" where the two cells' seeds learned in different shares, else ""."""
    la, lb = _learned(a), _learned(b)
    if la is None or lb is None or la[0] * lb[1] == lb[0] * la[1]:
        return ""
    return " vs ".join(f"{k} of {n}" + (f" ({t})" if t else "") for k, n, t in (la, lb))


def _paired_test(a: dict | None, b: dict | None, scale: float) -> tuple[float, float, float, float] | None:
    """(Δ, 95% CI low, high, two-sided p) of two cells by the paired test (stats.paired_two_sided)
    where both kept per-example scores on the same data (cells.cell_scores), else None."""
    both = paired_scores(a, b)
    if both is None:
        return None
    unit, xa, xb = both
    found = stats.paired_two_sided(xa, xb, unit=unit)
    if found is None:
        return None
    effect, lo, hi, p = found
    return effect * unit * scale, lo * unit * scale, hi * unit * scale, p


def compare_rows(
    cells: dict, rows: list[str], columns: list[str], baseline: str, outcomes: dict | None = None, scale: float = 100.0
) -> dict[str, list[Compared]]:
    """Each row but the baseline -> its cells against the baseline's, in column order (the test
    of the module's note: the paired test where both cells kept per-example outcomes, ``outcomes``
    {(row, column): cells.cell_scores}, else Welch's; Holm over each row's tested
    columns); each result says where the two cells' seeds learned in different shares (``differ``)."""
    outcomes = outcomes or {}
    found = {}
    for row in (r for r in rows if r != baseline):
        pairs = [_pair(cells.get((row, col)), cells.get((baseline, col))) for col in columns]
        differ = [_differ(cells.get((row, col)), cells.get((baseline, col))) for col in columns]
        tested = [i for i, p in enumerate(pairs) if not isinstance(p, str)]
        results = [Compared(NO_TEST, why=p, differ=d) if isinstance(p, str) else None for p, d in zip(pairs, differ)]
        if tested:
            effect, lo, hi, p_up, p_down = stats.welch_arrays(*np.array([pairs[i] for i in tested]).T)
            two_sided = np.minimum(1.0, 2 * np.minimum(p_up, p_down))
            for k, i in enumerate(tested):
                paired = _paired_test(outcomes.get((row, columns[i])), outcomes.get((baseline, columns[i])), scale)
                if paired is not None:
                    effect[k], lo[k], hi[k], two_sided[k] = paired
            adjusted = stats.holm(two_sided)
            for k, i in enumerate(tested):
                verdict = UNSURE if adjusted[k] >= stats.ALPHA else ABOVE if effect[k] > 0 else BELOW
                results[i] = Compared(verdict, float(effect[k]), (float(lo[k]), float(hi[k])), float(adjusted[k]), differ=differ[i])
        found[row] = results
    return found


_SCORES: dict = {}  # (out, table, its Markdown's mtime) -> its cells' per-example scores


def table_outcomes(out: Path, name: str, md: Path, where: str) -> dict:
    """{(row, column): per-example scores} of a generated table's cells, where its records kept
    outcomes (bench/report/results_table.py, built once per table file); {} for a table made with
    options beyond its name (its command names --set, --models, ...: the cells are not rebuilt)."""
    import shlex

    from .results_table import build
    from .tuned import apply_tuned

    key = (str(Path(out).resolve()), name, md.stat().st_mtime_ns)
    if key not in _SCORES:
        words = shlex.split(command_of(md.read_text()))
        plain = words[:3] == ["bench", "reproduce", name] and len(words) in (3, 5) and words[3:4] in ([], ["--out"])
        found = {}
        if plain:
            table = table_of(name, where)
            apply_tuned(table, out, table.preset)
            found = build(table, Path(out), table.preset)["outcomes"]
        _SCORES[key] = found
    return _SCORES[key]


TEST_TEXT = (
    "the paired test over seeds and examples where both cells kept per-example outcomes (bench/report/stats.py: "
    "paired_t), else Welch t over seeds"
)
DIFFER_MARK = " *"
DIFFER_RULE = "; * = the two cells' seeds learned in different shares (the row's line names them, with the seeds whose run went wrong)"


def _grid(found: dict[str, list[Compared]], digits: int) -> list[list[str]]:
    return [
        [
            row,
            *(
                ("—" if r.effect is None else f"{r.effect:+.{digits}f}") + MARKS[r.verdict] + (DIFFER_MARK if r.differ else "")
                for r in results
            ),
        ]
        for row, results in found.items()
    ]


def _sentence(row: str, baseline: str, columns: list[str], results: list[Compared], digits: int) -> str:
    parts = []
    for verdict in (ABOVE, BELOW, UNSURE):
        named = [
            f"{col} ({effect_text(r.effect, r.ci, r.p, digits, p_label='Holm p', level=stats.LEVEL)})"
            for col, r in zip(columns, results)
            if r.verdict == verdict
        ]
        if named:
            parts.append(f"{verdict} on {'; '.join(named)}" if verdict == UNSURE else f"{verdict} {baseline} on {'; '.join(named)}")
    reasons = dict.fromkeys(r.why for r in results if r.verdict == NO_TEST)
    for why in reasons:
        parts.append(f"no test on {', '.join(col for col, r in zip(columns, results) if r.why == why)} ({why})")
    differ = [f"{col} {r.differ}" for col, r in zip(columns, results) if r.differ]
    if differ:
        parts.append(f"learned seeds differ ({row} vs {baseline}): " + "; ".join(differ))
    return f"- **{row}**: " + "; ".join(parts) + "."


def against_tables(spec: str, where: str) -> list[str]:
    """The generated tables a ``bench:against`` block's ``spec`` names: its table, and the other
    table of a versus block (``@OTHER``)."""
    parts = spec.split()
    return parts[:1] + ([parts[1][1:]] if len(parts) > 1 and parts[1].startswith("@") else [])


def against_block(out: Path, spec: str, where: str) -> str:
    """The Markdown a ``bench:against TABLE BASELINE [ROWS]`` block shows."""
    parts = spec.split()
    if len(parts) not in (2, 3):
        raise UserError(
            f"{where}: bench:against takes a generated table, the row to compare the others with and "
            f"optionally which rows (comma-separated), e.g. 'probes-cpu transformer' or 'probes-cpu xl rsa-xl'; "
            f"got {spec!r}"
        )
    name, baseline = parts[:2]
    if baseline.startswith("@"):
        return versus_block(out, name, baseline[1:], parts[2] if len(parts) == 3 else None, where)
    table = table_of(name, where)
    rows, columns = [r.label for r in table.rows], [c.label for c in table.columns]
    chosen = [r for r in parts[2].split(",") if r] if len(parts) == 3 else [r for r in rows if r != baseline]
    unknown = [r for r in [baseline, *chosen] if r not in rows]
    if unknown:
        raise UserError(f"{where}: bench:against: table {name!r} has no row {unknown[0]!r}; its rows are {', '.join(rows)}")
    if baseline in chosen or not chosen:
        raise UserError(f"{where}: bench:against: name the rows to compare with {baseline!r}, other than it; got {parts[2]!r}")
    if table.stat != "mean":
        raise UserError(f"{where}: bench:against tests means over seeds, and table {name!r} prints its cells' {table.stat}")
    md = generated_table(out, name, where)
    scale = 1.0 if table.unit == "min" else 100.0
    found = compare_rows(_cells(md), [baseline, *chosen], columns, baseline, table_outcomes(out, name, md, where), scale)
    digits = digits_of(table)
    grid = _grid(found, digits)
    head = (
        f"Each row against {baseline}, from `{command_of(md.read_text())}` (bench/report/against.py): Δ = row mean - "
        f"{baseline} mean in {table.unit or 'the metric'}, {TEST_TEXT}, two-sided, Holm over each row's columns; "
        f"▲ above / ▼ below at adjusted p < {stats.ALPHA}, unmarked: inconclusive; — no test (< 2 seeds a side, or both "
        "cells at chance)" + (DIFFER_RULE if any(r.differ for rs in found.values() for r in rs) else "") + "."
    )
    sentences = "\n".join(_sentence(row, baseline, columns, results, digits) for row, results in found.items())
    table_md = tabulate(grid, headers=["row", *columns], tablefmt="github", disable_numparse=True)
    return f"\n\n{head}\n\n{table_md}\n\n{sentences}\n\n"


def versus_block(out: Path, name: str, other: str, chosen: str | None, where: str) -> str:
    """``bench:against TABLE @OTHER [ROWS]``: each row of TABLE against the row of the same label in
    table OTHER (the same rows and columns at other settings: a table and its reference-code copy),
    column by column, by the test of ``against_block``; ROWS as there, by default every row the two
    share."""
    table, base = table_of(name, where), table_of(other, where)
    if table.stat != "mean" or base.stat != "mean":
        raise UserError(f"{where}: bench:against tests means over seeds; tables {name!r} and {other!r} must both print means")
    columns = [c.label for c in table.columns]
    if columns != [c.label for c in base.columns]:
        raise UserError(f"{where}: bench:against {name} @{other}: the tables' columns differ; compare tables with the same columns")
    theirs = {r.label for r in base.rows}
    shared = [r.label for r in table.rows if r.label in theirs]
    rows = [r for r in chosen.split(",") if r] if chosen else shared
    unknown = [r for r in rows if r not in shared]
    if unknown or not rows:
        raise UserError(
            f"{where}: bench:against {name} @{other}: {unknown[0] if unknown else 'no row'!r} is not a row of both "
            f"tables; they share {', '.join(shared) or 'none'}"
        )
    mine, base_md = generated_table(out, name, where), generated_table(out, other, where)
    a, b = _cells(mine), _cells(base_md)
    digits = digits_of(table)
    found = {}
    scale = 1.0 if table.unit == "min" else 100.0
    oa, ob = table_outcomes(out, name, mine, where), table_outcomes(out, other, base_md, where)
    for row in rows:  # the other table's row renamed, so compare_rows sees two rows of one table
        cells = {**{(row, c): a.get((row, c)) for c in columns}, **{(f"@{row}", c): b.get((row, c)) for c in columns}}
        scores = {**{(row, c): oa.get((row, c)) for c in columns}, **{(f"@{row}", c): ob.get((row, c)) for c in columns}}
        found[row] = compare_rows(cells, [f"@{row}", row], columns, f"@{row}", scores, scale)[row]
    grid = _grid(found, digits)
    head = (
        f"Each row of {name} (`{command_of(mine.read_text())}`) against the same row of {other} "
        f"(`{command_of(base_md.read_text())}`), bench/report/against.py: Δ = {name} mean - {other} mean in "
        f"{table.unit or 'the metric'}, {TEST_TEXT}, two-sided, Holm over each row's columns; ▲ above / ▼ below "
        f"at adjusted p < {stats.ALPHA}, unmarked: inconclusive; — no test (< 2 seeds a side, or both cells at chance)"
        + (DIFFER_RULE if any(r.differ for rs in found.values() for r in rs) else "")
        + "."
    )
    sentences = "\n".join(_sentence(row, other, columns, results, digits) for row, results in found.items())
    table_md = tabulate(grid, headers=["row", *columns], tablefmt="github", disable_numparse=True)
    return f"\n\n{head}\n\n{table_md}\n\n{sentences}\n\n"
