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
the hash of the cell's learning-relevant overrides (table + row + column ``set``); a table is built
from what they hold (no run is resolved, no model class imported). With ``--check-stale`` the stale
check (bench/report/stale.py) resolves every cell first: a cell whose records were made with
settings the registry no longer resolves to (a preset edited since) is marked † and the note
names the differences. A cell of accuracies whose records carry the split's
majority-class share (classification tasks) and whose mean is within 2 standard errors of it is
marked ~ (at chance; bench/report/cells.py:at_chance). A table's ``claims`` (the paper's findings
over its cells) are judged beside the numbers, printed and written to the Markdown and to
``...--claims.csv`` (bench/report/claims.py:run_claims).

This module is the command; what differs between kinds of table is the kind's class
(bench/report/tables.py: ``KINDS``): a results table (bench/report/results_table.py, the
default), a cost table measured instead of trained, whose ``--run`` times its cells
(bench/report/cost_table.py, HALT Table 5 on the CPU), a table of checks instead of cells
(bench/report/checks.py, nope-properties). The YAML schema: bench/report/tables.py. The
write-ups in OUT (``results/*.md``) show the tables in marked blocks, filled here from the
Markdown just written (bench/report/writeup.py).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ..errors import UserError
from ..grid_cell import Cell
from ..registry import PRESETS
from ..schema import suggest
from . import writeup
from .against import against_block, against_tables
from .cells import MISSING, NOT_REPORTED, STALE, cell_records, record_value
from .outputs import output_stem
from .results_table import build
from .stale import current_config, stale, stale_runs
from .table_parts import Table
from .tables import TABLES_DIR, check_names, kind_of, load_table, table_names
from .tuned import overlay_registry
from .verdicts import verdict_tables, verdicts_block

__all__ = [
    "MISSING",
    "NOT_REPORTED",
    "STALE",
    "build",
    "cell_records",
    "check_names",
    "current_config",
    "list_tables",
    "load_table",
    "measure_cost",
    "measures",
    "plan",
    "record_value",
    "reproduce",
    "select_table",
    "stale",
    "stale_records",
    "table_names",
]

#: the write-ups' blocks filled from generated tables besides table blocks (bench/report/writeup.py):
#: verdicts and comparisons, each from the module that makes it, standing beside writeup.py
WRITEUP_BLOCKS = {
    "verdicts": writeup.BlockKind(verdict_tables, verdicts_block),
    "against": writeup.BlockKind(against_tables, against_block),
}


def fill_writeups(out: Path, tables: dict[str, str] | None = None) -> list[Path]:
    """Every block of the write-ups in ``out`` filled (``tables``: name -> generated Markdown, the
    tables just written; writeup.fill_writeups); the files that changed."""
    return writeup.fill_writeups(out, WRITEUP_BLOCKS, tables)


def blocks_tables(out: Path) -> dict[str, Path]:
    """Every table the write-ups in ``out`` name -> the generated file it is filled from."""
    return writeup.blocks_tables(out, WRITEUP_BLOCKS)


def stale_records(table: Table, registry, preset: str, out: Path) -> dict:
    """The stale check of a table's records (bench/report/stale.py): {run: {seed: the settings its
    record was made with that the registry no longer gives}} over the runs its cells read; this
    resolves every such run (it imports the model classes)."""
    return stale_runs(registry, Path(out), preset, kind_of(table).record_runs(table, Path(out), preset), table.seeds)


# ---- training the missing cells -------------------------------------------------------------


def plan(table: Table, registry, preset: str, out: Path, rerun: bool = False) -> tuple[list, list]:
    """(cells to train, incompatible (cell, why)) over the runs the table's cells read, one grid
    per (model, override set) (none for a table measured rather than trained: measure_cost). The
    grid (and the runner beneath it) is imported here: building a table needs neither."""
    from ..grid import plan_grid

    todo, incompatible = [], []
    absent = absent_data(table, registry, preset)
    for (model, overrides), tasks in kind_of(table).runs(table, out, preset).items():
        tasks = list(dict.fromkeys(tasks))
        incompatible += [(Cell(model, t, preset, table.seeds[0], overrides), absent[t]) for t in tasks if t in absent]
        tasks = [t for t in tasks if t not in absent]
        if not tasks:
            continue
        grid = plan_grid(registry, [model], tasks, table.seeds, preset, list(overrides), Path(out), rerun=rerun)
        todo += grid.todo
        incompatible += grid.incompatible
    return todo, incompatible


def absent_data(table: Table, registry, preset: str) -> dict[str, str]:
    """{task: why} for the columns whose task reads files you supply (``needs_data``) and finds
    none (the task's ``data_problem()``): their cells are skipped, saying why, not failed."""
    from ..config import parse_overrides, resolve_task

    absent = {}
    for col in table.columns:
        if not col.needs_data or col.task in absent:
            continue
        spec = resolve_task(registry, col.task, preset, parse_overrides([o for o in (*table.set, *col.set) if o.startswith("data.")]))
        problem = getattr(spec.cls.build(spec.name, spec.params), "data_problem", lambda: None)()
        if problem:
            absent[col.task] = f"{problem} (then: {col.needs_data})"
    return absent


# ---- command --------------------------------------------------------------------------------


def list_tables(out: Path, folder: Path = TABLES_DIR, registry=None) -> list[list[str]]:
    """One line per table: name, preset, cells with records (made with today's settings, when a
    registry is given: the stale check runs; cells holding only stale records are counted apart), title."""
    rows = []
    for name in table_names(folder):
        try:
            table = load_table(name, folder=folder)
        except UserError as exc:  # one broken file: listed with its problem, the others as usual
            rows.append([name, "-", "BROKEN", str(exc)])
            continue
        try:
            own = overlay_registry(table, registry, out) if registry is not None else None
        except UserError:  # its overlays are not under OUT: no records of its rows either
            own = None
        found = stale_records(table, own, table.preset, out) if own is not None else None
        rows.append([name, table.preset, kind_of(table).summary(table, out, found), table.title])
    return rows


def select_table(
    name: str,
    registry,
    preset: str | None = None,
    models: list[str] | None = None,
    seeds: list[int] | None = None,
    overrides: list[str] | None = None,
    out: Path | None = None,
) -> tuple[Table, str, object]:
    """The table ``name`` as ``bench reproduce`` uses it, the preset it is read at and the registry
    it is read with (``registry``, plus the overlays of the studies under ``out`` that the table's
    ``overlays`` name: bench/report/tuned.py): only the rows of ``models``, ``seeds`` instead of the
    table's, ``overrides`` after the table's own (the user's win). Every name, preset and override
    is checked here: one UserError line, before anything is read or trained."""
    if preset and preset not in PRESETS:
        raise UserError(f"unknown preset {preset!r}; {suggest(preset, list(PRESETS))}")
    table = load_table(name, preset)
    preset = preset or table.preset
    registry = overlay_registry(table, registry, Path(out or "results"))
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
        kind_of(table).check_overrides(table, registry, preset, overrides)
    for task in dict.fromkeys(c.task for c in table.columns):
        registry.preset(task, preset)  # one line naming the task when it lacks the preset
    return table, preset, registry


def reproduce(
    table: Table,
    registry,
    preset: str,
    out: Path,
    command: str,
    overrides: list[str] | None = None,
    tables_out: Path | None = None,
    check_stale: bool = False,
) -> dict:
    """The table from what the records under ``out`` hold (a cost table: from its measurement
    there), written to TABLES_OUT/reproduce/ (default ``out``) by its kind (Markdown, CSV, the
    claims when the table has some, and the kind's own files), then the write-ups beside the tables
    (TABLES_OUT/*.md) that show it refilled. With ``check_stale`` the stale check runs first
    (``stale_records``) and the table marks † what it finds; without it no run is resolved.
    Returns what to show: title, headers, rows, note, claims (None or its headers, rows and rule)
    and the paths written."""
    out = Path(out)
    tables_out = Path(tables_out or out)
    stem = output_stem(tables_out, table, preset, overrides or [])
    source = output_stem(out, table, preset, overrides or [])
    found = stale_records(table, registry, preset, out) if check_stale else None
    result = kind_of(table).report(table, registry, preset, out, stem, command, source=source, stale=found)
    if stem.with_suffix(".md") in result["paths"]:  # the write-ups beside the tables (results/*.md) show what was just written
        result["paths"] += fill_writeups(tables_out, {stem.name: stem.with_suffix(".md").read_text()})
    return result


def measures(table: Table) -> bool:
    """Whether ``--run`` measures the table's cells now (measure_cost) rather than training runs (plan)."""
    return kind_of(table).measures


def measure_cost(table: Table, registry, preset: str, out: Path, overrides: list[str] | None = None, progress=None) -> Path:
    """``--run`` for a table whose kind ``measures`` (a cost table): measure every cell now; the file written."""
    return kind_of(table).measure(table, registry, preset, output_stem(Path(out), table, preset, overrides or []), progress)


def command_text(
    table: Table,
    out: Path,
    preset: str | None,
    models: str | None,
    seeds: str | None,
    overrides: list[str] | None,
    check_stale: bool = False,
) -> str:
    """The ``bench reproduce`` command written at the top of the Markdown (how to make it again)."""
    return " ".join(
        [
            "bench reproduce",
            table.name,
            f"--out {out}",
            *([f"--preset {preset}"] if preset else []),
            *([f"--models {models}"] if models else []),
            *([f"--seeds {seeds}"] if seeds else []),
            *(f"--set {shlex.quote(item)}" for item in overrides or []),
            *(["--check-stale"] if check_stale else []),
        ]
    )
