"""What a kind of table does, as one class: ``TableKind``. A table file names its kind
(``kind: results`` by default; bench/report/tables.py registers the kinds in ``KINDS``), and
``bench reproduce`` does everything that differs between kinds through it:

- ``load``: fill the kind's parts of a ``Table`` from the file (cells, checks, measurements);
- ``names``: the registry models and tasks the table names (checked before anything runs);
- ``check_overrides``: reject ``--set`` overrides the cells could not run with;
- ``runs``: the runs its cells read, as {(model, overrides): [task, ...]} (what ``--run``
  trains, through the grid), or ``measure`` when ``measures``: its cells are measured now;
- ``record_runs``: the runs whose records its cells read, as (model, task, overrides): what the
  stale check resolves (bench/report/stale.py);
- ``build``: its printed rows and the note from what the records hold (or the measurements), with
  the CSV lines and whatever ``judge`` needs; it resolves no run (the stale check's answer, when
  asked for, comes in as ``stale``);
- ``judge``: its claims over the built cells (bench/report/claims.py), or None;
- ``files``: what it writes besides NAME.md / .csv / --claims.csv (a plot, the measurements);
- ``summary``: one line for ``bench reproduce --list``.

``report`` strings these together for one table. A new kind of table is one subclass of
``TableKind`` (or of a kind it resembles) and one line in ``KINDS``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ..config import resolve_run
from .outputs import write_outputs
from .table_parts import Table


class TableKind:
    """One kind of table (see the module docstring); subclasses set ``name`` and override what differs."""

    name: ClassVar[str] = ""
    measures: ClassVar[bool] = False  # True: ``--run`` measures the cells now (``measure``) instead of training runs

    def __repr__(self) -> str:
        return f"<table kind {self.name}>"

    def load(self, table: Table, spec, raw: dict, preset: str, where: str) -> None:
        """Fills the kind's parts of ``table`` from its file (``spec``: the checked keys, ``raw``:
        the same as a mapping; ``preset``: the one the table is read at); UserError when malformed."""
        raise NotImplementedError

    def names(self, table: Table) -> tuple[list[str], list[str]]:
        """(models, tasks) the table names: its rows' models and its columns' tasks."""
        return [row.model for row in table.rows], [col.task for col in table.columns]

    def check_overrides(self, table: Table, registry, preset: str, overrides: list[str]) -> None:
        """One UserError line when ``--set`` ``overrides`` (already added to the table's ``set``)
        cannot run: the first cell is resolved with them."""
        row, col = table.rows[0], table.columns[0]
        resolve_run(registry, row.model, col.task, preset, table.cell_set(row, col))

    def runs(self, table: Table, out: Path, preset: str) -> dict:
        """{(model, overrides): [task, ...]}: the runs the table's cells read (none: nothing to train)."""
        return {}

    def record_runs(self, table: Table, out: Path, preset: str) -> list[tuple[str, str, list[str]]]:
        """(model, task, overrides) of every run whose records the table's cells read (none: nothing to check)."""
        return []

    def measure(self, table: Table, registry, preset: str, stem: Path, progress=None) -> Path:
        """``--run`` of a kind that ``measures``: measure every cell now, write the file ``build`` reads; its path."""
        raise NotImplementedError(f"tables of kind {self.name} are not measured")

    def build(self, table: Table, registry, preset: str, out: Path, stem: Path, stale: dict | None = None) -> dict:
        """The table from the records under ``out`` (or the measurements beside ``stem``): a dict
        with headers, rows, note and csv (one dict per CSV line), and what ``judge`` and ``files`` read.
        ``stale``: the stale check's answer for ``record_runs`` ({run: {seed: the changed settings}},
        bench/report/stale.py), None when not checked."""
        raise NotImplementedError

    def judge(self, table: Table, built: dict) -> dict | None:
        """The claims judged over the built cells (claims.run_claims' dict), None when there are none."""
        return None

    def files(self, table: Table, built: dict, stem: Path, preset: str) -> list[Path]:
        """The files the kind writes besides NAME.md, NAME.csv and NAME--claims.csv."""
        return []

    def summary(self, table: Table, out: Path, stale: dict | None = None) -> str:
        """What ``bench reproduce --list --records`` says the table has under ``out`` (``stale``: as for ``build``)."""
        raise NotImplementedError

    def report(
        self,
        table: Table,
        registry,
        preset: str,
        out: Path,
        stem: Path,
        command: str,
        source: Path | None = None,
        stale: dict | None = None,
    ) -> dict:
        """Build, judge and write one table at ``stem``: title, headers, rows, note, claims (None or
        the judged claims) and the paths written. ``source``: the stem under ``out`` whose files the
        kind reads (a measurement), when the table is written elsewhere; ``stale``: as for ``build``."""
        built = self.build(table, registry, preset, out, source or stem, stale)
        claims = self.judge(table, built)
        paths = write_outputs(stem, table.title, command, built["note"], built["headers"], built["rows"], built["csv"], claims)
        paths += self.files(table, built, stem, preset)
        return {
            "title": table.title,
            "headers": built["headers"],
            "rows": built["rows"],
            "note": built["note"],
            "claims": claims,
            "paths": paths,
        }
