"""Cost tables (``kind: cost`` in bench/tables/*.yaml, e.g. halt-table5-cpu): a paper's runtime table
measured with ``bench cost``'s machinery (bench/cost/) instead of read from training records.

Each cell (row x column) is one training step (forward, head + loss, backward, clipping, the
preset's optimizer) of the row's registry model with the cell's overrides (table + row + column
``set``), at the table's ``cost`` shapes (batch x length, random tokens), timed ``repeats`` times
interleaved across the cells after ``warmup`` untimed steps (bench/cost/training.py: measure_steps).
``bench reproduce NAME --run`` measures every cell and writes the measurements to
``OUT/reproduce/NAME[...]--measured.json`` (device, threads, torch, commit, per-repeat times,
halting depth); ``bench reproduce NAME`` rebuilds the table from that file, as a results table
is rebuilt from its records.

What is compared with the paper: each cell's time divided by the ``reference`` row's in the same
column (HALT Table 5: GUT No Halt Upperbound at the same bound), beside the paper's minutes
divided by its reference's. That ratio is comparable across hardware; the absolute minutes per
epoch (the median step time x the preset's steps per epoch, ``ceil(n_train / batch)``) are
shown with the device that measured them, never compared with the paper's GPU. Claims are judged
on the per-repeat values (bench/report/claims.py: RULE, and RATIO_RULE for ``ratio_at_most``); the
ratio to the reference is the ratio of the repeats' geometric means with its 95% CI
(bench/report/stats.py: ratio_ci), the same statistic the ratio claims test.

``CostTable`` is the kind: a results table's file (rows, columns, the paper's minutes, claims)
with a ``cost`` entry (``CostEntry``), whose ``--run`` measures (``measure``) and whose rows are
built from the measurements (``build``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import UserError
from ..records import write_atomic
from ..schema import Schema
from . import stats
from .cells import MISSING, NOT_REPORTED
from .claims import run_claims
from .cost_weights import cell_runs, describe
from .outputs import output_stem
from .results_table import ResultsTable
from .table_parts import row_label


@dataclass
class CostEntry(Schema):
    """A cost table's measurement: every cell a training step at batch x length (bench/cost/);
    ``reference`` is the row every cell's time is divided by, in the same column."""

    length: int
    reference: str
    batch: int | None = None  # None: the preset's train.batch_size
    repeats: int = 3
    warmup: int = 1
    threads: int = 1
    device: Literal["cpu", "cuda"] = "cpu"
    weights: dict | None = None  # {seed, set}: time trained weights, not fresh ones (bench/report/cost_weights.py)


HEADERS = [
    "row",
    "column",
    "ms/step",
    "spread",
    "halt depth",
    "ours min/epoch",
    "paper min/epoch",
    "ours × ref",
    "paper × ref",
    "Δ (ours ÷ paper, × ref)",
]


def measured_path(stem: Path) -> Path:
    return stem.with_name(stem.name + "--measured.json")


def _key(i: int, j: int) -> str:
    return f"{i}:{j}"


def spec(table, preset: str) -> dict:
    """What a measurement depends on (a file made with another spec is not read: --run again)."""
    made = {
        "preset": preset,
        "cost": {k: v for k, v in table.cost.items() if k != "weights" or v},
        "cells": {
            _key(i, j): [row.model, *table.cell_set(row, col)] for i, row in enumerate(table.rows) for j, col in enumerate(table.columns)
        },
    }
    if table.cost.get("weights"):  # trained weights: each cell's run (cost_weights.py)
        made["weights"] = cell_runs(table, preset)
    return made


def _task(table) -> str:
    tasks = list(dict.fromkeys(c.task for c in table.columns))
    if len(tasks) != 1:
        raise UserError(f"tables/{table.name}.yaml: a cost table measures one task; its columns name {', '.join(tasks)}")
    return tasks[0]


def measure(table, registry, preset: str, stem: Path, progress=None) -> Path:
    """Time every cell (bench/cost/) and write ``stem--measured.json``; returns its path."""
    import torch

    from ..cost import Row, Setup, build_steps, header, measure_steps, resolve_rows

    c = table.cost
    torch.set_num_threads(c["threads"])
    setup = Setup(
        task=_task(table),
        preset=preset,
        lengths=[c["length"]],
        batch=c["batch"],
        device=c["device"],
        repeats=c["repeats"],
        warmup=c["warmup"],
    )
    setup.check()
    made = spec(table, preset)
    cells, runs = made["cells"], made.get("weights")
    configs, raised = resolve_rows(registry, [Row(model, tuple(overrides), cell=key) for key, (model, *overrides) in cells.items()], setup)
    steps = build_steps(configs, setup)
    if runs:  # stem is OUT/reproduce/NAME: the runs' records are under OUT/runs
        from ..cost.weights import load_cells

        loaded = load_cells(runs, stem.parent.parent, preset, {cell.cell: step for cell, step in steps.items()})
    measured = measure_steps(steps, setup, setup.lengths, progress)
    first = next(iter(steps.values()))
    n_train = first.task.params.get("n_train")
    rows = []
    for cell, row in measured:
        key = cell.cell
        del row["model"]
        i, j = map(int, key.split(":"))
        row.update(cell=key, row=table.rows[i].label, column=table.columns[j].label, model=table.rows[i].model, overrides=list(cell.sets))
        if runs:
            row["weights"] = loaded[key]
        if row["status"] == "ok" and isinstance(n_train, int):
            row["steps_per_epoch"] = math.ceil(n_train / row["batch"])
        rows.append(row)
    head = header(
        f"cost table {table.name}", sorted({r["model"] for r in rows}), setup, rows, {"n_train": n_train, "threads": c["threads"]}, raised
    )
    path = measured_path(stem)
    write_atomic(path, json.dumps({"spec": spec(table, preset), "header": head, "rows": rows}, indent=1, default=str) + "\n")
    return path


def _minutes(row: dict) -> list[float]:
    """Per-repeat minutes per epoch (step time x steps per epoch)."""
    per = row.get("steps_per_epoch")
    return [t * per / 60 for t in row.get("step_times_s", [])] if per else []


def build(table, preset: str, stem: Path) -> dict:
    """The table from ``stem--measured.json``: headers, rows (one per cell), cells (CSV),
    values and depths (for the claims), the note."""
    path = measured_path(stem)
    data = json.loads(path.read_text()) if path.is_file() else None
    why_not = "" if data else f"not measured yet: bench reproduce {table.name} --run measures it (a few minutes)"
    if data and data.get("spec") != json.loads(json.dumps(spec(table, preset))):
        why_not, data = f"{path.name} was measured with other settings (the table or its --set changed): --run measures it again", None
    measured = {r["cell"]: r for r in (data or {}).get("rows", [])}
    ref = table.cost["reference"]
    ref_i = next(i for i, r in enumerate(table.rows) if r.label == ref)
    rows, cells, values, depths = [], [], {}, {}
    for i, row in enumerate(table.rows):
        for j, col in enumerate(table.columns):
            m, r_m = measured.get(_key(i, j)), measured.get(_key(ref_i, j))
            ok = bool(m) and m["status"] == "ok"
            step = m["step_s"] if ok else None
            ratio = step / r_m["step_s"] if ok and r_m and r_m["status"] == "ok" and r_m["step_s"] else None
            ci = stats.ratio_ci(m["step_times_s"], r_m["step_times_s"]) if ratio is not None and i != ref_i else None
            if ci:  # the ratio of geometric means over the repeats, with its 95% CI (as the ratio claims)
                ratio = ci[0]
            paper, paper_ref = row.paper[j], table.rows[ref_i].paper[j]
            paper_ratio = paper[0] / paper_ref[0] if paper and paper_ref and paper_ref[0] else None
            delta = ratio / paper_ratio if ratio is not None and paper_ratio else None
            minutes = _minutes(m) if ok else []
            depth = m.get("halt_depth") if ok else None
            values[row.label, col.label] = (minutes, False)
            if depth is not None:
                depths[row.label, col.label] = depth
            spread = ""
            if ok and m.get("repeats", 0) >= 2:
                spread = f"±{100 * (m['step_max_s'] - m['step_min_s']) / 2 / m['step_s']:.0f}%"
            rows.append(
                [
                    row.label,
                    col.label,
                    f"{1000 * step:,.1f}" if ok else (m["status"] if m else MISSING),
                    spread,
                    MISSING if depth is None else f"{depth:.2f}",
                    f"{statistics.median(minutes):.2f}" if minutes else MISSING,
                    NOT_REPORTED if not paper else f"{paper[0]:.2f}",
                    MISSING if ratio is None else f"{ratio:.2f}" + (f" [{ci[1]:.2f}, {ci[2]:.2f}]" if ci else ""),
                    NOT_REPORTED if paper_ratio is None else f"{paper_ratio:.2f}",
                    MISSING if delta is None else f"×{delta:.2f}",
                ]
            )
            cells.append(
                {
                    "row": row.label,
                    "model": row.model,
                    "column": col.label,
                    "overrides": " ".join(table.cell_set(row, col)),
                    "step_s": step,
                    "step_min_s": m.get("step_min_s") if ok else None,
                    "step_max_s": m.get("step_max_s") if ok else None,
                    "repeats": m.get("repeats") if ok else 0,
                    "halt_depth": depth,
                    "ops": m.get("ops") if ok else None,
                    "syncs": m.get("syncs") if ok else None,
                    "ours_min_per_epoch": statistics.median(minutes) if minutes else None,
                    "paper_min_per_epoch": paper[0] if paper else None,
                    "ratio_to_ref": ratio,
                    "ratio_ci95_low": ci[1] if ci else None,
                    "ratio_ci95_high": ci[2] if ci else None,
                    "paper_ratio_to_ref": paper_ratio,
                    "delta": delta,
                }
            )
    head = (data or {}).get("header", {})
    c = table.cost
    if data:
        where = (
            f"measured {head.get('date', '?')} on {head.get('device', '?')} (torch {head.get('torch', '?')}, commit "
            f"{head.get('commit', '?')}), {path.name}"
        )
    else:
        where = why_not
    runs = spec(table, preset).get("weights")
    note = (
        f"preset {preset}; one training step (forward, loss, backward, clipping, optimizer) at batch {c['batch'] or 'the preset'}"
        f" x length {c['length']}, random tokens, {describe(runs) if runs else 'fresh weights'}; "
        f"median of {c['repeats']} timed repeats after {c['warmup']} "
        f"warm-up step(s), interleaved across cells, spread = half the range; {where}; × ref = time / {ref}'s in the same column, "
        f"the ratio of the repeats' geometric means with its 95% CI (Welch on log times) "
        f"(paper: its minutes / its {ref} minutes): the comparison across hardware; ours min/epoch = median step x "
        f"ceil(n_train {head.get('n_train', '?')} / batch) on this device, not comparable with the paper's GPU minutes; "
        f"paper: {table.source}; {MISSING} = not measured, {NOT_REPORTED} = not reported by the paper"
    )
    return {
        "headers": HEADERS,
        "rows": rows,
        "cells": cells,
        "values": values,
        "depths": depths,
        "note": note,
        "measured": data is not None,
    }


class CostTable(ResultsTable):
    """A results table whose cells are measured now rather than trained (the module docstring):
    its file has the cells of a results table, metric minutes_per_epoch and a ``cost`` entry."""

    name = "cost"
    measures = True

    def load_own(self, table, raw, where):
        if table.metric != "minutes_per_epoch" or not raw.get("cost"):
            raise UserError(f"{where}: a cost table has metric minutes_per_epoch and a 'cost' entry (length, reference, ...)")
        table.cost = dataclasses.asdict(
            CostEntry.from_mapping(
                raw["cost"], f"{where}, cost", "cost is {length, reference, batch, repeats, warmup, threads, device, weights}"
            )
        )
        table.cost["reference"] = row_label(table.cost["reference"], table, f"{where}, cost.reference")
        if (
            min(table.cost["length"], table.cost["repeats"], table.cost["threads"], table.cost["batch"] or 1) < 1
            or table.cost["warmup"] < 0
        ):
            raise UserError(f"{where}: cost.length, batch, repeats and threads are >= 1, warmup >= 0")

    def runs(self, table, out, preset):
        return {}  # measured, not trained

    def measure(self, table, registry, preset, stem, progress=None):
        return measure(table, registry, preset, stem, progress)

    def record_runs(self, table, out, preset):
        return []  # measured, not read from records

    def build(self, table, registry, preset, out, stem, stale=None):
        built = build(table, preset, stem)
        built["csv"], built["source"] = built["cells"], stem
        return built

    def judge(self, table, built):
        claims = run_claims(table, built["values"], built["depths"], over="timed repeats") if table.claims else None
        return claims if claims and claims["rows"] else None

    def files(self, table, built, stem, preset):
        return [measured_path(stem)] if built["measured"] and built["source"] == stem else []  # written where it was measured

    def summary(self, table, out, stale=None):
        return "measured" if build(table, table.preset, output_stem(out, table, table.preset))["measured"] else "not measured"
