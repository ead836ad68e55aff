"""The papers' tables as YAML (``bench/tables/*.yaml``, package data): the schema, loading with inheritance, and
the checks that a table names only registry models and tasks. ``bench reproduce``
(bench/report/reproduce.py) puts our records beside the numbers loaded here.

Schema of a results table (lm-evaluation-harness style: short entries, a shared base)::

    title: "[RSA Table 2] formal languages ..."   # one line, shown by --list
    source: "[RSA Table 2], fractions as printed"  # where the paper's numbers come from
    base: other-table        # optional: inherit that file's keys; this file's are merged on top
    preset: paper            # the registry preset matching the paper (--preset P: a proxy, said so)
    seeds: [0, 1, 2]         # seeds expected per cell; only these are read and trained
    paper_seeds: 3           # optional: runs behind each printed mean ± std (the claims test the paper's
                             # numbers with it; absent: the paper's numbers get no test)
    metric: acc              # a metric of the record's split (acc, token_acc, last_acc), or
                             # minutes_per_epoch (train_time_s / epochs_run / 60)
    stat: mean               # mean (± std, the default) | median: the paper's statistic
    paper_units: percent     # how the paper prints: percent | fraction | minutes
    delta: points            # points: ours - paper (default) | ratio: ours / paper
    set: [train.max_epochs=5]    # optional overrides for every cell
    tuned: flipflop-small    # optional: bench tune studies (a name or a list; OUT/studies/NAME/best.json):
                             # each row whose model a study tuned, on that study's task and preset, is
                             # read and trained at the study's best values (after every other set)
    tasks: [d2, d4]          # columns = every task x every split ...
    splits: [bin0, bin1]     #   ... or {paper: [...], small: [...]} when split names follow the preset
    columns:                 # ... or an explicit list instead of tasks x splits
      - {task: listops, split: test, label: "upper bound 10", set: [model.max_layers=10]}
    rows:
      - model: transformer   # a registry entry (prefer entries to `set`)
        label: "GUT Upperbound"      # optional, default the model name
        set: [model.mode=upperbound] # optional row overrides
        paper: [0.2, 0.2, 1, 0.08]   # in column order; or {task: [per split]}; a value may be
                                     # [mean, std]; null = not reported (the whole row may be null)
    claims:                  # optional: the paper's qualitative findings over cells (bench/report/checks.py
                             # judges each: holds / does not hold / inconclusive)
      - text: "TLB beats the Transformer on ListOps 500-600"
        source: "[HALT §6.4]"
        better: {model: tlb, split: len500_600}
        than: {model: transformer, split: len500_600}
      - text: "each GUT ablation loses to GUT near-IID"
        source: "[HALT §6.4]"
        split: test                  # claim-wide split(s), for sides that name none
        better: gut                  # a side: a model, a list (each of them), or {model(s), split(s)}
        than: [gut-no-global-halt, gut-no-gate, gut-no-transition]
        lower_is_better: false       # optional; true by default for minutes_per_epoch
      - text: "halting at bound 40 costs <= 0.6x no-halt when the model halts early"
        better: GUT                  # a ratio claim: better / than <= ratio_at_most (checks.py: RATIO_RULE)
        than: GUT No Halt Upperbound
        split: "upper bound 40"
        ratio_at_most: 0.6
        halt_depth_below: 20         # optional (cost tables): the better row's mean halting depth must
                                     # be below this, else the claim's premise is absent: inconclusive

A cost table (``kind: cost``; e.g. halt-table5-cpu) is measured, not trained: each cell is one
training step of the row's model with the cell's overrides, timed by bench/cost/ (the
machinery of ``bench cost``) at the shapes of its ``cost`` entry; ``bench reproduce NAME --run``
measures and writes the measurements beside the table (bench/report/cost_table.py)::

    kind: cost
    metric: minutes_per_epoch        # as the paper prints; paper_units: minutes
    cost: {length: 100, batch: 32, repeats: 5, warmup: 1, threads: 1, reference: "GUT No Halt Upperbound"}

A side's ``model`` is a row label, or the model of exactly one row; its ``split`` a column
label, or the split of exactly one column (a split named for another preset, in a table whose
splits follow the preset, maps by position: T512_p98 -> T128_p98 at the small preset). Every
model of ``better`` is compared with every model of ``than``, on each split pair (a list of
splits on both sides pairs by position; one split is used for every pair).
"""
from __future__ import annotations

import dataclasses
import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from ..errors import UserError
from ..registry import deep_merge
from ..schema import Schema, load_yaml, suggest

#: the shipped tables (package data; bench is installed as files, never zipped)
TABLES_DIR = Path(str(importlib.resources.files("bench").joinpath("tables")))
PAPER_UNITS = {"percent": 1.0, "fraction": 100.0, "minutes": 1.0}  # factor to our display unit (%, or minutes)


# ---- the files as written: one schema per entry (bench/schema.py checks keys and types) -------

@dataclass
class TableFile(Schema):
    """A table file's keys (after its ``base`` is merged in: title, source, preset, seeds may come from it)."""
    title: str
    source: str
    preset: str
    seeds: list[int]
    base: Optional[str] = None
    kind: Literal["results", "checks", "cost"] = "results"
    paper_seeds: Optional[int] = None
    metric: str = "acc"
    stat: Literal["mean", "median"] = "mean"
    paper_units: Literal["percent", "fraction", "minutes"] = "percent"
    delta: Literal["points", "ratio"] = "points"
    set: Optional[list[str]] = None
    tasks: Optional[list[str]] = None
    splits: Any = None
    columns: Optional[list] = None
    rows: Optional[list] = None
    checks: Optional[list] = None
    claims: Optional[list] = None
    cost: Optional[dict] = None
    tuned: Any = None


@dataclass
class CostEntry(Schema):
    """A cost table's measurement: every cell a training step at batch x length (bench/cost/);
    ``reference`` is the row every cell's time is divided by, in the same column."""
    length: int
    reference: str
    batch: Optional[int] = None  # None: the preset's train.batch_size
    repeats: int = 3
    warmup: int = 1
    threads: int = 1
    device: Literal["cpu", "cuda"] = "cpu"
    weights: Optional[dict] = None  # {seed, set}: time trained weights, not fresh ones (bench/report/cost_weights.py)


@dataclass
class ColumnEntry(Schema):
    task: str
    split: str = ""
    label: Optional[str] = None
    set: Optional[list[str]] = None


@dataclass
class RowEntry(Schema):
    model: str
    label: Optional[str] = None
    set: Optional[list[str]] = None
    paper: Any = None


@dataclass
class ClaimEntry(Schema):
    text: Any
    source: Any
    better: Any
    than: Any
    split: Optional[str] = None
    splits: Optional[list[str]] = None
    lower_is_better: Optional[bool] = None
    ratio_at_most: Optional[float] = None
    halt_depth_below: Optional[float] = None


@dataclass
class SideEntry(Schema):
    model: Optional[str] = None
    models: Optional[list[str]] = None
    split: Optional[str] = None
    splits: Optional[list[str]] = None


# ---- the tables as used -----------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    task: str
    split: str
    label: str
    set: tuple[str, ...] = ()


@dataclass(frozen=True)
class Row:
    model: str
    label: str
    set: tuple[str, ...] = ()
    paper: tuple = ()  # per column: (mean, std or None) in our display unit, or None


@dataclass(frozen=True)
class Comparison:
    """One ordered pair of cells, by row and column label: ``better`` is claimed above ``than``."""
    better: tuple[str, str]  # (row label, column label)
    than: tuple[str, str]


@dataclass(frozen=True)
class Claim:
    text: str
    source: str
    comparisons: tuple[Comparison, ...]
    lower_is_better: bool = False
    ratio_at_most: float | None = None  # a ratio claim: better / than <= this (stats.py: ratio_test)
    halt_depth_below: float | None = None  # its premise: the better cell's mean halting depth below this


@dataclass
class Table:
    name: str
    title: str
    source: str
    preset: str
    seeds: list[int]
    kind: str = "results"
    metric: str = "acc"
    stat: str = "mean"
    delta: str = "points"
    set: tuple[str, ...] = ()
    columns: list[Column] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    cost: dict | None = None  # kind cost: the CostEntry's fields
    tuned: tuple[str, ...] = ()  # the studies named by ``tuned:``
    tuned_sets: dict = field(default_factory=dict)  # (model, task) -> the study's best values as overrides (apply_tuned)
    tuned_text: dict = field(default_factory=dict)  # row label -> its tuned setting, or why it has none
    paper_seeds: int | None = None  # runs behind each of the paper's mean ± std

    @property
    def unit(self) -> str:
        return "min" if self.metric == "minutes_per_epoch" else "%"

    def cell_set(self, row: Row, col: Column) -> list[str]:
        return [*self.set, *row.set, *col.set, *self.tuned_sets.get((row.model, col.task), ())]


# ---- loading --------------------------------------------------------------------------------

def table_names(folder: Path = TABLES_DIR) -> list[str]:
    return sorted(p.stem for p in Path(folder).glob("*.yaml"))


def _raw(name: str, folder: Path, chain: tuple = ()) -> dict:
    path = Path(folder) / f"{name}.yaml"
    if not path.is_file():
        raise UserError(f"unknown table {name!r}; {suggest(name, table_names(folder))} (see 'bench reproduce --list')")
    if name in chain:
        raise UserError(f"tables/{name}.yaml: base cycle {' -> '.join((*chain, name))}")
    raw = load_yaml(path, f"tables/{path.name}")
    TableFile.check_keys(raw, f"tables/{path.name}")
    if raw.get("base"):
        raw = deep_merge(_raw(raw["base"], folder, (*chain, name)), {k: v for k, v in raw.items() if k != "base"})
    return raw


def load_table(name: str, preset: str | None = None, folder: Path = TABLES_DIR) -> Table:
    """The table ``name`` with its columns for ``preset`` (default: the table's own)."""
    where = f"tables/{name}.yaml"
    spec = TableFile.from_mapping(_raw(name, folder), where)
    raw = dataclasses.asdict(spec)
    if not spec.seeds:
        raise UserError(f"{where}: seeds must be a list of integers, e.g. [0, 1, 2]")
    table = Table(name=name, title=spec.title, source=spec.source, preset=spec.preset, seeds=spec.seeds, kind=spec.kind)
    if table.kind == "checks":
        table.checks = list(spec.checks or [])
        if not table.checks:
            raise UserError(f"{where}: a checks table needs a non-empty 'checks' list")
        return table
    table.metric, table.stat, table.delta, table.set = spec.metric, spec.stat, spec.delta, tuple(spec.set or ())
    tuned = [spec.tuned] if isinstance(spec.tuned, str) else spec.tuned or []
    if not isinstance(tuned, list) or not all(isinstance(t, str) and t and "/" not in t for t in tuned):
        raise UserError(f"{where}: tuned names bench tune studies (OUT/studies/NAME): a name or a list of names, got {spec.tuned!r}")
    table.tuned = tuple(tuned)
    if spec.paper_seeds is not None and spec.paper_seeds < 2:
        raise UserError(f"{where}: paper_seeds is the number of runs behind the paper's mean ± std, >= 2")
    table.paper_seeds = spec.paper_seeds
    units = spec.paper_units
    if (units == "minutes") != (table.metric == "minutes_per_epoch"):
        raise UserError(f"{where}: paper_units minutes goes with metric minutes_per_epoch, and only with it")
    table.columns = _columns(raw, preset or table.preset, where)
    if not raw.get("rows"):
        raise UserError(f"{where}: 'rows' must list at least one row")
    table.rows = [_row(r, table.columns, PAPER_UNITS[units], where) for r in raw["rows"]]
    if table.kind == "cost":
        if table.metric != "minutes_per_epoch" or not raw.get("cost"):
            raise UserError(f"{where}: a cost table has metric minutes_per_epoch and a 'cost' entry (length, reference, ...)")
        table.cost = dataclasses.asdict(CostEntry.from_mapping(raw["cost"], f"{where}, cost",
                                                               "cost is {length, reference, batch, repeats, warmup, threads, device, weights}"))
        table.cost["reference"] = _row_label(table.cost["reference"], table, f"{where}, cost.reference")
        if min(table.cost["length"], table.cost["repeats"], table.cost["threads"], table.cost["batch"] or 1) < 1 or table.cost["warmup"] < 0:
            raise UserError(f"{where}: cost.length, batch, repeats and threads are >= 1, warmup >= 0")
    elif raw.get("cost"):
        raise UserError(f"{where}: 'cost' belongs to a table of kind cost")
    claims = raw.get("claims") or []
    table.claims = [_claim(c, i + 1, table, raw.get("splits"), preset or table.preset, where) for i, c in enumerate(claims)]
    return table


def _columns(raw: dict, preset: str, where: str) -> list[Column]:
    if raw.get("columns"):
        cols = []
        for entry in raw["columns"]:
            c = ColumnEntry.from_mapping(entry, where, "a column is {task, split, label, set}")
            cols.append(Column(c.task, c.split, c.label or f"{c.task}:{c.split}", tuple(c.set or ())))
        return cols
    tasks, splits = raw.get("tasks"), raw.get("splits")
    if not tasks or not splits:
        raise UserError(f"{where}: give 'tasks' and 'splits', or 'columns'")
    if isinstance(splits, dict):
        if preset not in splits:
            raise UserError(f"{where}: no splits for preset {preset!r} (it has: {', '.join(splits)}); split names follow the preset here")
        splits = splits[preset]
    return [Column(t, s, f"{t}:{s}" if len(tasks) > 1 else s) for t in tasks for s in splits]


def _row(entry: dict, columns: list[Column], factor: float, where: str) -> Row:
    r = dataclasses.asdict(RowEntry.from_mapping(entry, where, "a row is {model, label, set, paper}"))
    paper = r.get("paper")
    if paper is None:
        values = [None] * len(columns)
    elif isinstance(paper, dict):  # {task: [value per split of that task, in column order]}; a task left out: n/r
        per_task = {t: [c for c in columns if c.task == t] for t in dict.fromkeys(c.task for c in columns)}
        for task, given in paper.items():
            if task not in per_task or not isinstance(given, list) or len(given) != len(per_task[task]):
                raise UserError(f"{where}: row {r['model']}: paper.{task} must list one value per split of a column task")
        values = [paper[c.task][per_task[c.task].index(c)] if c.task in paper else None for c in columns]
    else:
        values = list(paper)
    if len(values) != len(columns):
        raise UserError(f"{where}: row {r['model']}: {len(values)} paper values for {len(columns)} columns")
    return Row(r["model"], r.get("label") or r["model"], tuple(r.get("set") or ()), tuple(_paper_value(v, factor, where) for v in values))


def _paper_value(v, factor: float, where: str):
    if v is None:
        return None
    mean, std = (v[0], v[1]) if isinstance(v, list) and len(v) == 2 else (v, None)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ([mean] if std is None else [mean, std])):
        raise UserError(f"{where}: a paper value is a number, [mean, std] or null, got {v!r}")
    return (mean * factor, None if std is None else std * factor)


def check_names(table: Table, registry) -> None:
    """Every model and task the table names is in the registry (else the registry's one-line error)."""
    if table.kind == "checks":
        from .checks import check_specs

        for spec in check_specs(table):
            for model in spec.get("models", []):
                registry.model_entry(model)
            for task in spec.get("tasks", []):
                registry.task_entry(task)
        return
    for row in table.rows:
        registry.model_entry(row.model)
    for col in table.columns:
        registry.task_entry(col.task)


# ---- tuned rows ------------------------------------------------------------------------------

TUNED_HEADER = "tuned"


def apply_tuned(table: Table, out: Path, preset: str) -> None:
    """Read the best values of the studies the table names (``OUT/studies/NAME/best.json``, written
    by bench tune): a row whose model a study tuned, on the study's task and at the preset read,
    gets the values as overrides in that task's cells (``cell_set``) and its text in the tuned
    column; every other row is marked not tuned, saying why."""
    import json

    table.tuned_sets, table.tuned_text = {}, {}
    if not table.tuned:
        return
    from ..config import canonical_text

    found, missing = [], []
    for name in table.tuned:
        try:
            found.append(json.loads((Path(out) / "studies" / name / "best.json").read_text()))
        except (OSError, ValueError):
            missing.append(name)
    for row in table.rows:
        texts = []
        for study in found:
            best = study.get("models", {}).get(row.model)
            if best is None or study.get("task") not in {c.task for c in table.columns}:
                continue
            if study.get("preset") != preset:
                texts.append(f"not tuned at preset {preset} (study {study['study']}: {study.get('preset')})")
                continue
            items = tuple(f"{k}={canonical_text(v)}" for k, v in sorted(best["values"].items()))
            table.tuned_sets[row.model, study["task"]] = items
            texts.append(f"{' '.join(items)} ({best['trials']} trials, val {100 * best['val']:.1f})")
        table.tuned_text[row.label] = "; ".join(texts) or ("not tuned" + (f" (no study {', '.join(missing)} under {out}/studies)"
                                                                          if missing else ""))


def with_tuned_column(table: Table, headers: list[str], rows: list[list]) -> tuple[list[str], list[list]]:
    """The printed table with one more column: each row's tuned setting, or "not tuned"."""
    if not table.tuned:
        return headers, rows
    at = headers.index("row")
    return [*headers, TUNED_HEADER], [[*r, table.tuned_text.get(r[at], "not tuned")] for r in rows]


# ---- claims ---------------------------------------------------------------------------------

def _side(side, default_splits, what: str) -> tuple[list[str], list[str]]:
    """(models, splits) of one side of a claim: a model, a list of models, or a mapping."""
    if isinstance(side, (str, list)):
        side = {"models" if isinstance(side, list) else "model": side}
    shape = "a side is a model, a list of models, or {model | models, split | splits}"
    entry = SideEntry.from_mapping(side, what, shape)
    if (entry.model is None) == (entry.models is None):
        raise UserError(f"{what}: {shape}, got {side!r}")
    models = entry.models if entry.models is not None else entry.model
    splits = entry.splits if entry.splits is not None else (entry.split if entry.split is not None else default_splits)
    models, splits = ([x] if isinstance(x, str) else list(x or []) for x in (models, splits))
    if not models or not splits or not all(isinstance(x, str) for x in models + splits):
        raise UserError(f"{what} needs at least one model and one split (on the side or the claim), got {side!r}")
    return models, splits


def _row_label(name: str, table: Table, what: str) -> str:
    labels = [r.label for r in table.rows]
    if name in labels:
        return name
    matches = [r.label for r in table.rows if r.model == name]
    if len(matches) == 1:
        return matches[0]
    why = f"names the model of {len(matches)} rows (use a row label)" if matches else suggest(name, labels)
    raise UserError(f"{what}: {name!r} is not a row of the table; {why}")


def _column_label(name: str, table: Table, raw_splits, preset: str, what: str) -> str:
    labels = [c.label for c in table.columns]
    if name in labels:
        return name
    matches = [c.label for c in table.columns if c.split == name]
    if not matches and isinstance(raw_splits, dict):  # a split named for another preset: by position
        for other in raw_splits.values():
            if name in other and preset in raw_splits and other.index(name) < len(raw_splits[preset]):
                mapped = raw_splits[preset][other.index(name)]
                matches = [c.label for c in table.columns if c.split == mapped]
                break
    if len(matches) == 1:
        return matches[0]
    why = f"names the split of {len(matches)} columns (use a column label)" if matches else suggest(name, labels)
    raise UserError(f"{what}: {name!r} is not a column of the table; {why}")


def _claim(c, i: int, table: Table, raw_splits, preset: str, where: str) -> Claim:
    what = f"{where}, claim {i}"
    c = dataclasses.asdict(ClaimEntry.from_mapping(c, what, "a claim is {text, source, better, than} (optional split(s), lower_is_better)"))
    default = c["splits"] if c["splits"] is not None else c["split"]
    (better, b_splits), (than, t_splits) = _side(c["better"], default, f"{what}, better"), _side(c["than"], default, f"{what}, than")
    if len(b_splits) != len(t_splits) and 1 not in (len(b_splits), len(t_splits)):
        raise UserError(f"{what}: better has {len(b_splits)} splits and than {len(t_splits)}: give the same number, or one on a side")
    n = max(len(b_splits), len(t_splits))
    b_splits, t_splits = (s * n if len(s) == 1 else s for s in (b_splits, t_splits))
    rows = {m: _row_label(m, table, what) for m in better + than}
    cols = {s: _column_label(s, table, raw_splits, preset, what) for s in b_splits + t_splits}
    pairs = tuple(Comparison((rows[a], cols[sa]), (rows[b], cols[sb]))
                  for sa, sb in zip(b_splits, t_splits) for a in better for b in than if (rows[a], cols[sa]) != (rows[b], cols[sb]))
    if not pairs:
        raise UserError(f"{what}: compares nothing (better and than name the same cells)")
    lower = c["lower_is_better"] if c["lower_is_better"] is not None else table.metric == "minutes_per_epoch"
    ratio, depth = c["ratio_at_most"], c["halt_depth_below"]
    if (ratio is not None and ratio <= 0) or (depth is not None and ratio is None):
        raise UserError(f"{what}: ratio_at_most is a number > 0, and halt_depth_below goes with it")
    return Claim(str(c["text"]), str(c["source"]), pairs, lower, ratio, depth)
