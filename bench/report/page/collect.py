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
import csv
import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import UserError
from ...metrics import _bin_start
from ...parsing import parse_names, parse_seeds
from ...records import Record, RecordError, overrides_tag, read_record, record_path, warn
from .. import claims as claims_mod
from .. import reproduce, stats
from ..cells import chance_level
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
        """The command that trains this one run again (same model, task, preset, seed and overrides,
        and the registry files the command that made it named: a tuned overlay's models live there)."""
        r = self.rec
        sets = " ".join(f"--set {shlex.quote(s)}" for s in r.get("overrides") or [])
        try:
            words = shlex.split(str(r.get("command") or ""))
        except ValueError:
            words = []
        registry = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--registry"), None)
        registry = next((w.split("=", 1)[1] for w in words if w.startswith("--registry=")), registry)
        where = f"--registry {shlex.quote(registry)} " if registry else ""
        return (
            f"bench {where}run --model {r['model']} --task {r['task']} --preset {r['preset']} --seed {r['seed']} "
            f"{sets + ' ' if sets else ''}--out {out} --rerun"
        )


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
class PairView:
    """One pair of cells a claim compares, with its own test (the one the claim's verdict combines):
    ``verdict`` holds (p < alpha), does not hold (its reverse p < alpha after Holm over the claim's
    pairs), inconclusive, or no test (fewer than 2 values a side, both cells at chance)."""

    better: str  # cell id
    better_label: str  # "row / column"
    than: str
    than_label: str
    better_family: str
    than_family: str
    verdict: str
    effect: float | None = None  # oriented as the claim says (> 0: the better side better), a ratio in a ratio claim
    ci: tuple | None = None
    p: float | None = None  # of the verdict: the one-sided p, or where reversed the Holm-adjusted reverse p
    ratio: bool = False


@dataclass
class ClaimView:
    """One judged claim: the claims CSV line and its pairs of cells, each with its own test."""

    line: dict
    pairs: list[PairView]
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
    metrics: dict  # {column label: the metric its cells read}
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
    skipped: list = field(default_factory=list)  # [(table Markdown, why it could not be rebuilt)]


def _command_args(command: str) -> argparse.Namespace:
    """The options of a ``bench reproduce ...`` command line written at the top of a table's Markdown."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("table")
    for option in ("--out", "--preset", "--models", "--seeds"):
        p.add_argument(option)
    p.add_argument("--set", action="append")
    p.add_argument("--check-stale", action="store_true")
    words = shlex.split(command)
    known, _ = p.parse_known_args(words[2:])
    return known


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
            raise UserError(
                f"--tables: {want!r} is not a table written under {out}/reproduce (give a table name or a "
                f"file stem there, e.g. {next(iter(named), Path('rsa-table2')).stem})"
            )
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
        packed[split] = (base64.b64encode(np.packbits(correct[order]).tobytes()).decode("ascii"), int(correct.size), int(correct.sum()))
    return packed


def _curves(table, cells: list[CellView], records: dict[str, RecordView]) -> dict:
    """Per task of the table, per row: the metric per length bin pooled over the task's columns'
    splits and the cell's records (weighted by the bin's examples; x = the bin's first length),
    and the chance level per bin pooled the same way where every record's bin carries it (its
    best trivial strategy's score, or for older records its majority share), else the split's
    (bench/report/cells.py: chance_level)."""
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
            split_chance = chance_level(recs, split, metric)
            for rec in recs:
                for key, b in (rec.get("metrics", {}).get(split, {}).get("by_length") or {}).items():
                    value, n = b.get(metric), b.get("n") or 0
                    if value is None or not n:
                        continue
                    x = _bin_start(str(key))
                    total = sums.setdefault(x, [0.0, 0])
                    total[0], total[1] = total[0] + value * n, total[1] + n
                    share = (b.get("chance") or {}).get(metric)
                    share = share if share is not None else b.get({"acc": "majority", "token_acc": "token_majority"}.get(metric, ""))
                    share = share if share is not None else split_chance.level if split_chance else None
                    if share is not None:
                        c = by_task["_chance_sums"].setdefault(x, [0.0, 0])
                        c[0], c[1] = c[0] + share * n, c[1] + n
    result = {}
    for task, by_task in curves.items():
        lines = {
            row: {"x": sorted(sums), "y": [100.0 * sums[x][0] / sums[x][1] for x in sorted(sums)]}
            for row, sums in by_task["_sums"].items()
            if sums
        }
        if lines:
            result[task] = {
                **lines,
                "_splits": by_task["_splits"],
                "_metric": by_task["_metric"],
                "_chance": {x: 100.0 * s / n for x, (s, n) in by_task["_chance_sums"].items() if n},
            }
    return result


def table_columns(table) -> list[tuple[str, str, str]]:
    return [(c.label, c.task, c.split) for c in table.columns]


def _pair_tests(table, claim, pairs, built: dict, cost: bool) -> list[tuple[str, object]]:
    """(verdict, test or None, the verdict's p) of each pair, by the test the table's claims use (claims._judge_pair)
    and the rule that combines them (stats.decide: a pair holds at p < ALPHA, is reversed at a
    Holm-adjusted reverse p < ALPHA over the claim's pairs)."""
    digits, scale = claims_mod.digits_of(table), 1.0 if table.unit == "min" else 100.0
    tests = [
        claims_mod._judge_pair(
            p,
            claim,
            built.get("values", {}),
            built.get("depths") or {},
            {} if cost else built.get("at_chance") or {},
            {} if cost else built.get("outcomes") or {},
            digits,
            scale,
            "timed repeats" if cost else "seeds",
        )[0]
        for p in pairs
    ]
    reverse = stats.holm([1.0 if t is None else t.p_reverse for t in tests])
    return [
        ("no test", None, None)
        if t is None
        else (stats.HOLDS, t, t.p)
        if t.p < stats.ALPHA
        else (stats.FAILS, t, float(reverse[i]))
        if reverse[i] < stats.ALPHA
        else (stats.UNSURE, t, t.p)
        for i, t in enumerate(tests)
    ]


def _claims(table, claims: dict | None, built: dict, cell_ids: dict) -> list[ClaimView]:
    """The judged claims (run_claims' CSV lines), each with its pairs of cells and their tests:
    run_claims skips the claims with no pair of present cells, in file order, and so does this."""
    if not claims:
        return []
    values = built.get("values", {})
    used = [c for c in table.claims if any(p.better in values and p.than in values for p in c.comparisons)]
    row_model = {r.label: r.model for r in table.rows}
    fam = lambda side: family_of(row_model.get(side[0], side[0]))  # noqa: E731
    views = []
    for claim, line in zip(used, claims["csv"]):
        pairs = [p for p in claim.comparisons if p.better in values and p.than in values]
        tested = _pair_tests(table, claim, pairs, built, table.kind == "cost")
        views.append(
            ClaimView(
                line=line,
                pairs=[
                    PairView(
                        better=cell_ids.get(p.better, ""),
                        better_label=" / ".join(p.better),
                        than=cell_ids.get(p.than, ""),
                        than_label=" / ".join(p.than),
                        better_family=fam(p.better),
                        than_family=fam(p.than),
                        verdict=verdict,
                        effect=None if t is None else t.effect,
                        ci=None if t is None else tuple(t.ci),
                        p=pv,
                        ratio=claim.ratio_at_most is not None,
                    )
                    for p, (verdict, t, pv) in zip(pairs, tested)
                ],
                better=sorted({fam(p.better) for p in pairs}),
                than=sorted({fam(p.than) for p in pairs}),
            )
        )
    return views


class RunIndex:
    """The run records under OUT/runs found by one walk, {(task, preset, model, tag): {seed: path}},
    each read once, all of them checked first: none, or one that is not a readable run record, is
    one UserError line naming it (the page is not built from part of the records)."""

    def __init__(self, out: Path):
        self.paths: dict = {}
        self._records: dict = {}
        self._tags: dict = {}
        found = sorted((Path(out) / "runs").glob("*/*/*/seed*.json"))
        if not found:
            raise UserError(
                f"no run records under {out}/runs; give the results folder that holds them (e.g. --out results), "
                f"or train some (bench reproduce NAME --run --out {out})"
            )
        for path in found:
            try:
                self._records[path] = Record.read(path, required=("model", "task")).data
            except (RecordError, OSError) as exc:
                problem = getattr(exc, "problem", None) or getattr(exc, "strerror", None) or type(exc).__name__
                raise UserError(
                    f"record {str(path)!r} cannot be read ({problem}); restore it (git checkout -- {path}) "
                    "or remove it, then build the report again"
                ) from None
            seed, _, tag = path.stem.removeprefix("seed").partition("-")
            if seed.isdigit():
                self.paths.setdefault((path.parts[-4], path.parts[-3], path.parts[-2], tag), {})[int(seed)] = path

    def tag(self, overrides: list[str]) -> str:
        key = tuple(overrides)
        if key not in self._tags:
            self._tags[key] = overrides_tag(list(overrides))
        return self._tags[key]

    def cell(self, model: str, task: str, preset: str, overrides: list[str], seeds: list[int]) -> list[tuple[Path, dict]]:
        """(path, record) of the finished runs of one cell, for the seeds asked, by seed."""
        found = self.paths.get((task, preset, model, self.tag(overrides)), {})
        pairs = []
        for seed in sorted(s for s in found if s in seeds):
            path = found[seed]
            if path not in self._records:
                self._records[path] = read_record(path, quiet=True)
            if self._records[path] and self._records[path].get("status") == "ok":
                pairs.append((path, self._records[path]))
        return pairs


def _cell_records(table, row, col, out: Path, preset: str, stale: dict | None, line: dict, runs: RunIndex, stale_runs: dict) -> list:
    """(path, record) of the records a results cell read: its finished runs, unless the table left
    some out (stale ones beside current ones, where its command checked, or values missing), then
    those it kept (_fresh_records)."""
    cset = table.cell_set(row, col)
    found = runs.cell(row.model, col.task, preset, cset, table.seeds)
    if len(found) == line.get("n"):
        return found
    kept = _fresh_records(table, row, col, out, preset, stale, stale_runs)[0]
    return [(record_path(out, r["model"], r["task"], preset, r["seed"], cset), r) for r in kept]


def _checks(table, stem: Path) -> dict:
    """A table of checks as bench reproduce last wrote it (its CSV): computed checks build models, so
    the page shows what was written; bench reproduce NAME computes them again."""
    path = stem.with_suffix(".csv")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(
            f"{path} cannot be read ({getattr(exc, 'strerror', None) or exc}); bench reproduce {table.name} writes it again"
        ) from None
    headers = list(lines[0]) if lines else []
    return {
        "headers": headers,
        "rows": [[line[h] for h in headers] for line in lines],
        "csv": lines,
        "note": f"the checks as bench reproduce wrote them ({path}); bench reproduce {table.name} computes them again",
    }


def collect_table(md: Path, out: Path, registry, records: dict[str, RecordView], index: int, runs: RunIndex) -> TableView:
    """One table rebuilt from its records by the command its Markdown names (read under ``out``;
    the stale check runs where that command asks for it: --check-stale)."""
    command = command_of(md.read_text(encoding="utf-8"))
    args = _command_args(command)
    models = parse_names(args.models, "models") if args.models else None
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    table, preset, own = reproduce.select_table(args.table, registry, args.preset, models, seeds, args.set, out)
    kind = kind_of(table)
    stem = output_stem(out, table, preset, args.set or [])
    stale = reproduce.stale_records(table, own, preset, out) if args.check_stale and table.kind == "results" else None
    built = _checks(table, stem) if table.kind == "checks" else kind.build(table, own, preset, out, stem, stale)
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
        cell = CellView(
            id=cell_id,
            line=line,
            row=line["row"],
            column=line["column"],
            model=row_model.get(line["row"], line.get("model", "")),
            task=col.task if col else None,
            split=col.split if col else None,
        )
        if table.kind == "results" and col is not None and line["row"] in rows:
            for path, rec in _cell_records(table, rows[line["row"]], col, out, preset, stale, line, runs, stale_runs):
                key = str(path)
                if key not in records:
                    records[key] = RecordView(id=f"r{len(records)}", path=key, rec=rec, outcomes=_outcome_bits(path, rec))
                cell.records.append(records[key].id)
        cells.append(cell)
        cell_ids[line["row"], line["column"]] = cell_id
    files = [
        str(p)
        for p in sorted(md.parent.glob(f"{md.stem}*"))
        if p.name.startswith(md.stem + ".") or p.name.startswith(md.stem + "--claims") or p.name.startswith(md.stem + "--measured")
    ]
    view = TableView(
        stem=md.stem,
        name=table.name,
        title=table.title,
        kind=table.kind,
        preset=preset,
        unit=getattr(table, "unit", ""),
        command=command,
        note=built.get("note", ""),
        headers=list(built.get("headers") or []),
        rows=[list(r) for r in built.get("rows") or []],
        columns=table_columns(table),
        metrics={c.label: table.metric_of(c) for c in table.columns},
        row_labels=[(r.label, r.model) for r in table.rows],
        cells=cells,
        claims=_claims(table, claims, built, cell_ids),
        rule=(claims or {}).get("rule", ""),
        curves={},
        source_files=files,
    )
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
        for row in data["rows"]:
            if isinstance(row, dict) and row.get("model") and row.get("status", "ok") == "ok":
                rows.append(
                    {
                        **row,
                        "_file": str(path),
                        "_id": f"k{len(rows)}",
                        "_task": header.get("task"),
                        "_preset": header.get("preset"),
                        "_measurement": header.get("measurement"),
                        "_device": header.get("device"),
                        "_commit": header.get("commit"),
                        "_date": header.get("date", ""),
                    }
                )
    rows.sort(key=lambda r: r["_date"], reverse=True)
    return rows


def collect(out: Path, registry, only: list[str] | None = None) -> Report:
    """Everything the report shows from the results folder ``out`` (the tables ``only``, default all)."""
    out = Path(out)
    if not out.is_dir():
        raise UserError(f"results folder {str(out)!r} does not exist; give the folder holding runs/ and reproduce/ (e.g. --out results)")
    runs = RunIndex(out)  # every record checked before anything is built
    mds = table_stems(out, only)
    if not mds:
        raise UserError(
            f"no tables under {out}/reproduce (Markdown written by bench reproduce); write one with bench reproduce NAME --out {out}"
        )
    records: dict[str, RecordView] = {}
    tables, skipped = [], []
    for md in mds:
        try:
            tables.append(collect_table(md, out, registry, records, len(tables), runs))
        except UserError as exc:  # one table that cannot be rebuilt (a table file since removed): the others still show
            skipped.append((str(md), str(exc)))
    if not tables:
        raise UserError(f"no table under {out}/reproduce could be rebuilt ({skipped[0][0]}: {skipped[0][1]})")
    for md, why in skipped:
        warn(f"{md} left out of the report: {why}")
    families = sorted({family_of(c.model) for t in tables for c in t.cells if c.model})
    return Report(
        out=str(out),
        tables=tables,
        records={v.id: v for v in records.values()},
        cost_rows=cost_rows(out),
        families=families,
        skipped=skipped,
    )


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


__all__ = [
    "CellView",
    "ClaimView",
    "RecordView",
    "Report",
    "RunIndex",
    "TableView",
    "collect",
    "cost_rows",
    "family_of",
    "finite",
    "table_stems",
]
