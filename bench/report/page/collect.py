"""What the report shows, gathered from a results folder: every table written under
``OUT/reproduce/`` rebuilt from its records by the command its Markdown names (the same build and
claims as ``bench reproduce``, bench/report/table_kind.py), each cell with the records it read;
the ``bench cost`` rows under ``OUT/cost/``; and every record a cell read, with its per-example
outcomes (bench.metrics.load_outcomes) packed one bit an example.

Nothing here formats HTML (bench/report/page/html.py does); the numbers are the tables' own.
"""
from __future__ import annotations

import argparse
import base64
import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import UserError
from ...metrics import _bin_start
from ...parsing import parse_names, parse_seeds
from ...records import Record, RecordError, record_path
from .. import reproduce
from ..cells import majority_share
from ..outputs import command_of, output_stem
from ..results_table import _fresh_records
from ..tables import kind_of

TUNED_SUFFIX = "-tuned"  # the overlays' models (bench/report/tuned.py): the family of transformer-tuned is transformer


def family_of(model: str) -> str:
    """The family a table row's model belongs to: the registry model, a tuned overlay's suffix removed."""
    return model.removesuffix(TUNED_SUFFIX)


@dataclass
class RecordView:
    """One run record a cell read: its path under OUT, the record, and its outcomes per split
    ({split: (base64 of the packed correct bits, examples, correct)}; empty when not kept)."""
    id: str
    path: str
    rec: dict
    outcomes: dict = field(default_factory=dict)

    def rerun(self, out: str) -> str:
        """The command that trains this one run again (same model, task, preset, seed and overrides)."""
        r = self.rec
        sets = " ".join(f"--set {shlex.quote(s)}" for s in r.get("overrides") or [])
        return (f"bench run --model {r['model']} --task {r['task']} --preset {r['preset']} --seed {r['seed']} "
                f"{sets + ' ' if sets else ''}--out {out} --rerun")


@dataclass
class CellView:
    """One cell of a table: the kind's CSV line (every key it carries), its row's model and
    family, and the ids of the records it read."""
    id: str
    line: dict
    row: str
    column: str
    model: str
    task: str | None
    split: str | None
    records: list[str] = field(default_factory=list)


@dataclass
class ClaimView:
    """One judged claim: the claims CSV line and the cells its pairs compare ((better, than) cell ids)."""
    line: dict
    pairs: list[tuple[str, str, str, str]]  # (better cell id, its "row / column", than cell id, its "row / column")
    better: list[str]  # families on the side the claim says is better
    than: list[str]


@dataclass
class TableView:
    """One table as written under OUT/reproduce/ (its file stem), rebuilt from the records."""
    stem: str
    name: str
    title: str
    kind: str
    preset: str
    unit: str
    command: str
    note: str
    headers: list
    rows: list
    columns: list  # [(label, task, split)] of a table with cells
    row_labels: list  # [(label, model)]
    cells: list[CellView]
    claims: list[ClaimView]
    rule: str
    curves: dict  # {task: {row label: {"x": [...], "y": [...]}, "_chance": {"x", "y"} or None, "_splits": [...]}}
    source_files: list[str]


@dataclass
class Report:
    out: str
    tables: list[TableView]
    records: dict[str, RecordView]  # by id
    cost_rows: list[dict]  # the bench cost rows, each with its file and header
    families: list[str]


def _command_args(command: str) -> argparse.Namespace:
    """The options of a ``bench reproduce ...`` command line written at the top of a table's Markdown."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("table")
    for option in ("--out", "--preset", "--models", "--seeds"):
        p.add_argument(option)
    p.add_argument("--set", action="append")
    words = shlex.split(command)
    known, _ = p.parse_known_args(words[2:])
    return known


def check_records(out: Path) -> int:
    """Every record under OUT/runs readable as a run record; the first that is not: one UserError line."""
    paths = sorted((Path(out) / "runs").glob("*/*/*/seed*.json"))
    if not paths:
        raise UserError(f"no run records under {out}/runs; give the results folder that holds them (e.g. --out results), "
                        f"or train some (bench reproduce NAME --run --out {out})")
    for path in paths:
        try:
            Record.read(path, required=("model", "task"))
        except (RecordError, OSError) as exc:
            problem = getattr(exc, "problem", None) or getattr(exc, "strerror", None) or type(exc).__name__
            raise UserError(f"record {str(path)!r} cannot be read ({problem}); restore it (git checkout -- {path}) "
                            "or remove it, then build the report again") from None
    return len(paths)


def table_stems(out: Path, only: list[str] | None = None) -> list[Path]:
    """The tables' Markdown under OUT/reproduce/ that name the command which made them; ``only``:
    those of the listed names, each a file stem (that file alone) or a table name (every file of it)."""
    named = {}
    for md in sorted((Path(out) / "reproduce").glob("*.md")):
        command = command_of(md.read_text(encoding="utf-8", errors="replace"))
        if command:
            named[md] = _command_args(command).table
    if only is None:
        return list(named)
    found = []
    for want in only:
        hits = [md for md in named if md.stem == want] or [md for md, name in named.items() if name == want]
        if not hits:
            raise UserError(f"--tables: {want!r} is not a table written under {out}/reproduce (give a table name or a "
                            f"file stem there, e.g. {next(iter(named), Path('rsa-table2')).stem})")
        found += [md for md in hits if md not in found]
    return found


def _outcome_bits(path: Path, rec: dict) -> dict:
    """{split: (base64 packed bits of ``correct``, examples, correct)} from a record's outcomes (none kept: {})."""
    if "outcomes" not in rec:
        return {}
    from ...metrics import load_outcomes

    try:
        outcomes = load_outcomes(path)
    except UserError:
        return {}
    packed = {}
    for split, arrays in outcomes.items():
        correct = np.asarray(arrays["correct"], dtype=bool)
        order = np.argsort(np.asarray(arrays["index"]), kind="stable")  # by the example's index in the split
        packed[split] = (base64.b64encode(np.packbits(correct[order]).tobytes()).decode("ascii"), int(correct.size),
                         int(correct.sum()))
    return packed


def _curves(table, cells: list[CellView], records: dict[str, RecordView]) -> dict:
    """Per task of the table, per row: the metric per length bin pooled over the task's columns'
    splits and the cell's records (weighted by the bin's examples; x = the bin's first length),
    and the chance level per bin pooled the same way where every record's bin carries it (its
    majority share), else the split's majority share (bench/report/cells.py: majority_share)."""
    curves = {}
    for col_label, task, split in table_columns(table):
        metric = table.metric_of(next(c for c in table.columns if c.label == col_label))
        if metric not in ("acc", "token_acc", "last_acc"):
            continue
        by_task = curves.setdefault(task, {"_splits": [], "_sums": {}, "_chance_sums": {}, "_metric": metric})
        if split in by_task["_splits"] or by_task["_metric"] != metric:
            continue
        by_task["_splits"].append(split)
        for cell in (c for c in cells if c.column == col_label):
            recs = [records[r].rec for r in cell.records]
            if not recs:
                continue
            sums = by_task["_sums"].setdefault(cell.row, {})
            split_chance = majority_share(recs, split, metric)
            for rec in recs:
                for key, b in (rec.get("metrics", {}).get(split, {}).get("by_length") or {}).items():
                    value, n = b.get(metric), b.get("n") or 0
                    if value is None or not n:
                        continue
                    x = _bin_start(str(key))
                    total = sums.setdefault(x, [0.0, 0])
                    total[0], total[1] = total[0] + value * n, total[1] + n
                    share = b.get({"acc": "majority", "token_acc": "token_majority"}.get(metric, ""))
                    share = share if share is not None else split_chance[0] if split_chance else None
                    if share is not None:
                        c = by_task["_chance_sums"].setdefault(x, [0.0, 0])
                        c[0], c[1] = c[0] + share * n, c[1] + n
    result = {}
    for task, by_task in curves.items():
        lines = {row: {"x": sorted(sums), "y": [100.0 * sums[x][0] / sums[x][1] for x in sorted(sums)]}
                 for row, sums in by_task["_sums"].items() if sums}
        if lines:
            result[task] = {**lines, "_splits": by_task["_splits"], "_metric": by_task["_metric"],
                            "_chance": {x: 100.0 * s / n for x, (s, n) in by_task["_chance_sums"].items() if n}}
    return result


def table_columns(table) -> list[tuple[str, str, str]]:
    return [(c.label, c.task, c.split) for c in table.columns]


def _claims(table, claims: dict | None, built: dict, cell_ids: dict) -> list[ClaimView]:
    """The judged claims (run_claims' CSV lines), each with the cells its pairs compare: run_claims
    skips the claims with no pair of present cells, in file order, and so does this."""
    if not claims:
        return []
    values = built.get("values", {})
    used = [c for c in table.claims if any(p.better in values and p.than in values for p in c.comparisons)]
    row_model = {r.label: r.model for r in table.rows}
    views = []
    for claim, line in zip(used, claims["csv"]):
        pairs = [p for p in claim.comparisons if p.better in values and p.than in values]
        views.append(ClaimView(
            line=line,
            pairs=[(cell_ids.get(p.better, ""), " / ".join(p.better), cell_ids.get(p.than, ""), " / ".join(p.than)) for p in pairs],
            better=sorted({family_of(row_model.get(p.better[0], p.better[0])) for p in pairs}),
            than=sorted({family_of(row_model.get(p.than[0], p.than[0])) for p in pairs}),
        ))
    return views


def collect_table(md: Path, out: Path, registry, records: dict[str, RecordView], index: int) -> TableView:
    """One table rebuilt from its records by the command its Markdown names (read under ``out``)."""
    command = command_of(md.read_text(encoding="utf-8"))
    args = _command_args(command)
    models = parse_names(args.models, "models") if args.models else None
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    table, preset, own = reproduce.select_table(args.table, registry, args.preset, models, seeds, args.set, out)
    kind = kind_of(table)
    stem = output_stem(out, table, preset, args.set or [])
    built = kind.build(table, own, preset, out, stem)
    claims = kind.judge(table, built)
    cells, cell_ids = [], {}
    row_model = {r.label: r.model for r in table.rows}
    cols = {c.label: c for c in table.columns}
    rows = {r.label: r for r in table.rows}
    stale_runs: dict = {}
    for i, line in enumerate(built.get("csv") or []):
        if "row" not in line or "column" not in line:  # a table of checks: lines, not cells
            continue
        cell_id = f"t{index}-c{i}"
        col = cols.get(line["column"])
        cell = CellView(id=cell_id, line=line, row=line["row"], column=line["column"],
                        model=row_model.get(line["row"], line.get("model", "")), task=col.task if col else None,
                        split=col.split if col else None)
        if table.kind == "results" and col is not None and line["row"] in rows:
            ok, *_ = _fresh_records(table, rows[line["row"]], col, out, preset, own, stale_runs)
            for rec in ok:
                path = record_path(out, rec["model"], rec["task"], preset, rec["seed"], table.cell_set(rows[line["row"]], col))
                key = str(path)
                if key not in records:
                    records[key] = RecordView(id=f"r{len(records)}", path=key, rec=rec, outcomes=_outcome_bits(path, rec))
                cell.records.append(records[key].id)
        cells.append(cell)
        cell_ids[line["row"], line["column"]] = cell_id
    files = [str(p) for p in sorted(md.parent.glob(f"{md.stem}*")) if p.name.startswith(md.stem + ".") or
             p.name.startswith(md.stem + "--claims") or p.name.startswith(md.stem + "--measured")]
    view = TableView(stem=md.stem, name=table.name, title=table.title, kind=table.kind, preset=preset,
                     unit=getattr(table, "unit", ""), command=command, note=built.get("note", ""),
                     headers=list(built.get("headers") or []), rows=[list(r) for r in built.get("rows") or []],
                     columns=table_columns(table), row_labels=[(r.label, r.model) for r in table.rows], cells=cells,
                     claims=_claims(table, claims, built, cell_ids), rule=(claims or {}).get("rule", ""), curves={},
                     source_files=files)
    if table.kind == "results":
        view.curves = _curves(table, cells, {v.id: v for v in records.values()})
    return view


def cost_rows(out: Path) -> list[dict]:
    """Every ``bench cost`` row under OUT/cost/ (its JSON files), with the file and the header's task,
    preset, measurement, device and commit; the newest file's row first for a (task, model, length)."""
    rows = []
    for path in sorted((Path(out) / "cost").rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not a cost file: the report lists what it can read
        header = data.get("header") if isinstance(data, dict) else None
        if not isinstance(header, dict) or not isinstance(data.get("rows"), list):
            continue
        for i, row in enumerate(data["rows"]):
            if isinstance(row, dict) and row.get("model") and row.get("status", "ok") == "ok":
                rows.append({**row, "_file": str(path), "_id": f"k{len(rows)}", "_task": header.get("task"),
                             "_preset": header.get("preset"), "_measurement": header.get("measurement"),
                             "_device": header.get("device"), "_commit": header.get("commit"), "_date": header.get("date", "")})
    rows.sort(key=lambda r: r["_date"], reverse=True)
    return rows


def collect(out: Path, registry, only: list[str] | None = None) -> Report:
    """Everything the report shows from the results folder ``out`` (the tables ``only``, default all)."""
    out = Path(out)
    if not out.is_dir():
        raise UserError(f"results folder {str(out)!r} does not exist; give the folder holding runs/ and reproduce/ (e.g. --out results)")
    check_records(out)
    mds = table_stems(out, only)
    if not mds:
        raise UserError(f"no tables under {out}/reproduce (Markdown written by bench reproduce); write one with "
                        f"bench reproduce NAME --out {out}")
    records: dict[str, RecordView] = {}
    tables = [collect_table(md, out, registry, records, i) for i, md in enumerate(mds)]
    families = sorted({family_of(c.model) for t in tables for c in t.cells if c.model})
    return Report(out=str(out), tables=tables, records={v.id: v for v in records.values()}, cost_rows=cost_rows(out), families=families)


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


__all__ = ["CellView", "ClaimView", "RecordView", "Report", "TableView", "check_records", "collect", "cost_rows", "family_of",
           "finite", "table_stems"]
