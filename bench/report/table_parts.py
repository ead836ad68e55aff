"""The parts of a table as its YAML file writes them (one schema per entry, bench/schema.py) and
as ``bench reproduce`` uses them (``Table``, its ``Column``s, ``Row``s and ``Claim``s), and the
parsing from one to the other that every kind of table with cells shares (``load_cells``). The
file schema itself and loading by name: bench/report/tables.py."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..schema import Schema, suggest

PAPER_UNITS = {"percent": 1.0, "fraction": 100.0, "minutes": 1.0}  # factor to our display unit (%, or minutes)


# ---- the entries as written ------------------------------------------------------------------


@dataclass
class ColumnEntry(Schema):
    task: str
    split: str = ""
    label: str | None = None
    set: list[str] | None = None
    metric: str | None = None
    needs_data: str | None = None


@dataclass
class RowEntry(Schema):
    model: str
    label: str | None = None
    set: list[str] | None = None
    paper: Any = None


@dataclass
class ClaimEntry(Schema):
    text: Any
    source: Any
    better: Any
    than: Any
    split: str | None = None
    splits: list[str] | None = None
    lower_is_better: bool | None = None
    ratio_at_most: float | None = None
    halt_depth_below: float | None = None
    fails_less: bool | None = None


@dataclass
class SideEntry(Schema):
    model: str | None = None
    models: list[str] | None = None
    split: str | None = None
    splits: list[str] | None = None


# ---- the tables as used -----------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column: a task's split, its printed label, and the overrides of its cells."""

    task: str
    split: str
    label: str
    set: tuple[str, ...] = ()
    metric: str | None = None  # this column's metric, when not the table's
    needs_data: str | None = None  # the task reads files you supply: the command that checks them (cells without records say so)


@dataclass(frozen=True)
class Row:
    """One row: a registry model, its printed label, its overrides and the paper's numbers."""

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
    """One of the paper's findings over the table's cells, as the pairs of cells it compares."""

    text: str
    source: str
    comparisons: tuple[Comparison, ...]
    lower_is_better: bool = False
    ratio_at_most: float | None = None  # a ratio claim: better / than <= this (stats.py: ratio_test)
    halt_depth_below: float | None = None  # its premise: the better cell's mean halting depth below this
    question: bool = False  # an open question: the test's numbers printed as measured, no verdict
    fails_less: bool = False  # a reliability claim: better's seeds learn more often than than's (stats.py: fisher_learned)


@dataclass
class Table:
    """A table as ``bench reproduce`` uses it; ``kind`` names the class that loaded it and does the
    rest (bench/report/tables.py: KINDS); the fields a kind does not use keep their defaults."""

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
    tuned_sets: dict = field(default_factory=dict)  # (row label, column label) -> the study's best values as overrides (apply_tuned)
    tuned_text: dict = field(default_factory=dict)  # row label -> its tuned setting, or why it has none
    tuned_pending: dict = field(default_factory=dict)  # a study named by ``tuned:`` without a best.json (not finished) ->
    # (its task, its models) from its study.json, or None (unknown)
    overlays: tuple[str, ...] = ()  # the studies whose registry overlays (tuned.yaml) give rows their models (``overlays:``)
    paper_seeds: int | None = None  # runs behind each of the paper's mean ± std
    state: tuple[str, ...] = ()  # tasks whose streaming state bytes are printed as a column (``state:``)

    @property
    def unit(self) -> str:
        """The display unit of the cells: % (accuracies), or min (minutes per epoch)."""
        return "min" if self.metric == "minutes_per_epoch" else "%"

    def metric_of(self, col: Column) -> str:
        """The metric a column's cells read: its own, else the table's."""
        return col.metric or self.metric

    def cell_set(self, row: Row, col: Column) -> list[str]:
        """The overrides of one cell: the table's, the row's, the column's, then the row's tuned values."""
        return [*self.set, *row.set, *col.set, *self.tuned_sets.get((row.label, col.label), ())]


# ---- parsing ----------------------------------------------------------------------------------


def _study_names(value, what: str, where: str) -> tuple[str, ...]:
    """A key naming bench tune studies (``tuned:``, ``overlays:``): a name or a list of names."""
    names = [value] if isinstance(value, str) else value or []
    if not isinstance(names, list) or not all(isinstance(t, str) and t and "/" not in t for t in names):
        raise UserError(f"{where}: {what} (OUT/studies/NAME): a name or a list of names, got {value!r}")
    return tuple(names)


def load_cells(table: Table, spec, raw: dict, preset: str, where: str) -> None:
    """The parts of a table of cells (rows x columns) from its file: metric, statistic, overrides,
    tuned studies, columns for ``preset``, rows with the paper's numbers (``spec``: the file's
    checked keys, ``raw``: the same as a mapping)."""
    table.metric, table.stat, table.delta, table.set = spec.metric, spec.stat, spec.delta, tuple(spec.set or ())
    table.tuned = _study_names(spec.tuned, "tuned names bench tune studies", where)
    table.overlays = _study_names(spec.overlays, "overlays names bench tune studies whose tuned.yaml gives rows their models", where)
    if spec.paper_seeds is not None and spec.paper_seeds < 2:
        raise UserError(f"{where}: paper_seeds is the number of runs behind the paper's mean ± std, >= 2")
    table.paper_seeds = spec.paper_seeds
    units = spec.paper_units
    if (units == "minutes") != (table.metric == "minutes_per_epoch"):
        raise UserError(f"{where}: paper_units minutes goes with metric minutes_per_epoch, and only with it")
    table.columns = parse_columns(raw, preset, where)
    if any(c.metric == "minutes_per_epoch" for c in table.columns) and table.metric != "minutes_per_epoch":
        raise UserError(f"{where}: a column's metric minutes_per_epoch needs the table's metric minutes_per_epoch (one unit per table)")
    state = raw.get("state") or []
    tasks = list(dict.fromkeys(c.task for c in table.columns))
    if not isinstance(state, list) or any(t not in tasks for t in state):
        raise UserError(f"{where}: state lists column tasks whose streaming state bytes are printed ({', '.join(tasks)}), got {state!r}")
    table.state = tuple(state)
    if not raw.get("rows"):
        raise UserError(f"{where}: 'rows' must list at least one row")
    table.rows = [parse_row(r, table.columns, PAPER_UNITS[units], where) for r in raw["rows"]]


def load_claims(table: Table, raw: dict, preset: str, where: str) -> None:
    """The table's claims and open questions (after its rows and columns, which they name)."""
    table.claims = [parse_claim(c, i + 1, table, raw.get("splits"), preset, where) for i, c in enumerate(raw.get("claims") or [])]
    table.claims += [
        parse_claim(q, i + 1, table, raw.get("splits"), preset, where, question=True) for i, q in enumerate(raw.get("questions") or [])
    ]


def parse_columns(raw: dict, preset: str, where: str) -> list[Column]:
    if raw.get("columns"):
        cols = []
        for entry in raw["columns"]:
            c = ColumnEntry.from_mapping(entry, where, "a column is {task, split, label, set}")
            cols.append(Column(c.task, c.split, c.label or f"{c.task}:{c.split}", tuple(c.set or ()), c.metric, c.needs_data))
        return cols
    tasks, splits = raw.get("tasks"), raw.get("splits")
    if not tasks or not splits:
        raise UserError(f"{where}: give 'tasks' and 'splits', or 'columns'")
    if isinstance(splits, dict):
        if preset not in splits:
            raise UserError(f"{where}: no splits for preset {preset!r} (it has: {', '.join(splits)}); split names follow the preset here")
        splits = splits[preset]
    return [Column(t, s, f"{t}:{s}" if len(tasks) > 1 else s) for t in tasks for s in splits]


def parse_row(entry: dict, columns: list[Column], factor: float, where: str) -> Row:
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


def row_label(name: str, table: Table, what: str) -> str:
    labels = [r.label for r in table.rows]
    if name in labels:
        return name
    matches = [r.label for r in table.rows if r.model == name]
    if len(matches) == 1:
        return matches[0]
    why = f"names the model of {len(matches)} rows (use a row label)" if matches else suggest(name, labels)
    raise UserError(f"{what}: {name!r} is not a row of the table; {why}")


def column_label(name: str, table: Table, raw_splits, preset: str, what: str) -> str:
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


def parse_claim(c, i: int, table: Table, raw_splits, preset: str, where: str, question: bool = False) -> Claim:
    """One claim (or, ``question``, one open question: its test printed as measured, not judged)."""
    what = f"{where}, {'question' if question else 'claim'} {i}"
    c = dataclasses.asdict(ClaimEntry.from_mapping(c, what, "a claim is {text, source, better, than} (optional split(s), lower_is_better)"))
    default = c["splits"] if c["splits"] is not None else c["split"]
    (better, b_splits), (than, t_splits) = _side(c["better"], default, f"{what}, better"), _side(c["than"], default, f"{what}, than")
    if len(b_splits) != len(t_splits) and 1 not in (len(b_splits), len(t_splits)):
        raise UserError(f"{what}: better has {len(b_splits)} splits and than {len(t_splits)}: give the same number, or one on a side")
    n = max(len(b_splits), len(t_splits))
    b_splits, t_splits = (s * n if len(s) == 1 else s for s in (b_splits, t_splits))
    rows = {m: row_label(m, table, what) for m in better + than}
    cols = {s: column_label(s, table, raw_splits, preset, what) for s in b_splits + t_splits}
    pairs = tuple(
        Comparison((rows[a], cols[sa]), (rows[b], cols[sb]))
        for sa, sb in zip(b_splits, t_splits)
        for a in better
        for b in than
        if (rows[a], cols[sa]) != (rows[b], cols[sb])
    )
    if not pairs:
        raise UserError(f"{what}: compares nothing (better and than name the same cells)")
    lower = c["lower_is_better"] if c["lower_is_better"] is not None else table.metric == "minutes_per_epoch"
    ratio, depth = c["ratio_at_most"], c["halt_depth_below"]
    if (ratio is not None and ratio <= 0) or (depth is not None and ratio is None):
        raise UserError(f"{what}: ratio_at_most is a number > 0, and halt_depth_below goes with it")
    if question and ratio is not None:
        raise UserError(f"{what}: an open question compares cells; ratio_at_most belongs to a claim")
    fails_less = bool(c["fails_less"])
    if fails_less and ratio is not None:
        raise UserError(f"{what}: fails_less (a reliability claim on the seeds that learned) and ratio_at_most do not go together")
    return Claim(str(c["text"]), str(c["source"]), pairs, lower, ratio, depth, question, fails_less)
