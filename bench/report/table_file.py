"""A table file as written (``bench/tables/NAME.yaml``): where the shipped ones are, the keys a
file may have (``TableFile``), its names, and reading one with its ``base`` merged in. Light to
import (no torch, no scipy): ``bench reproduce --list`` reads the files through this module only;
the kinds that build a table from the file are in bench/report/tables.py."""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import UserError
from ..parsing import check_name
from ..registry import deep_merge
from ..schema import Schema, load_yaml, suggest

KIND_NAMES = ("results", "cost", "checks")  # bench/report/tables.py: KINDS, one class each
#: the shipped tables (package data; bench is installed as files, never zipped)
TABLES_DIR = Path(str(importlib.resources.files("bench").joinpath("tables")))


@dataclass
class TableFile(Schema):
    """A table file's keys (after its ``base`` is merged in: title, source, preset, seeds may come from it)."""

    title: str
    source: str
    preset: str
    seeds: list[int]
    base: str | None = None
    kind: str = "results"
    paper_seeds: int | None = None
    metric: str = "acc"
    stat: Literal["mean", "median"] = "mean"
    paper_units: Literal["percent", "fraction", "minutes"] = "percent"
    delta: Literal["points", "ratio"] = "points"
    set: list[str] | None = None
    tasks: list[str] | None = None
    splits: Any = None
    columns: list | None = None
    rows: list | None = None
    checks: list | None = None
    claims: list | None = None
    questions: list | None = None
    state: list[str] | None = None
    cost: dict | None = None
    tuned: Any = None
    overlays: Any = None


def table_names(folder: Path = TABLES_DIR) -> list[str]:
    return sorted(p.stem for p in Path(folder).glob("*.yaml"))


def _raw(name: str, folder: Path, chain: tuple = ()) -> dict:
    check_name(name, "table", f"tables/{chain[-1]}.yaml: base" if chain else "")  # a table is a file in folder, never a path
    path = Path(folder) / f"{name}.yaml"
    if not path.is_file():
        raise UserError(f"unknown table {name!r}; {suggest(name, table_names(folder))} (see 'bench reproduce --list')")
    if name in chain:
        raise UserError(f"tables/{name}.yaml: base cycle {' -> '.join((*chain, name))}")
    raw = load_yaml(path, f"tables/{path.name}")
    TableFile.check_keys(raw, f"tables/{path.name}")
    if raw.get("base") is not None and not isinstance(raw["base"], str):
        raise UserError(f"tables/{path.name}: base must be the name of another table (a file in bench/tables), got {raw['base']!r}")
    if raw.get("base"):
        raw = deep_merge(_raw(raw["base"], folder, (*chain, name)), {k: v for k, v in raw.items() if k != "base"})
    return raw


def read_table_file(name: str, folder: Path = TABLES_DIR, kinds: tuple[str, ...] = KIND_NAMES) -> TableFile:
    """The table file ``name`` with its base merged in, its keys and their types checked, its kind
    one of ``kinds`` (one UserError line naming the file otherwise); what its kind makes of it:
    bench/report/tables.py."""
    where = f"tables/{name}.yaml"
    spec = TableFile.from_mapping(_raw(name, folder), where)
    if not spec.seeds:
        raise UserError(f"{where}: seeds must be a list of integers, e.g. [0, 1, 2]")
    if spec.kind not in kinds:
        raise UserError(f"{where}: kind must be one of {', '.join(kinds)}, got {spec.kind!r}")
    return spec


def list_files(out: Path, folder: Path = TABLES_DIR) -> list[list[str]]:
    """One line per table file, fast (the files only: no record is read, nothing is built): name,
    preset, kind, whether OUT/reproduce/NAME.md is written (yes/no), title. A file that cannot be read is
    listed too, its problem in place of its title (``bench reproduce NAME`` says the same)."""
    rows = []
    for name in table_names(folder):
        try:
            spec = read_table_file(name, folder)
        except UserError as exc:
            rows.append([name, "-", "BROKEN", "-", str(exc)])
            continue
        written = (Path(out) / "reproduce" / f"{name}.md").is_file()
        rows.append([name, spec.preset, spec.kind, "yes" if written else "no", spec.title])
    return rows
