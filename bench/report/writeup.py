"""Write-ups whose numbers are generated: the Markdown files directly in OUT (``results/*.md``)
carry marked blocks that ``bench reproduce`` fills from the records.

A table, by the name of its generated file under OUT/reproduce/ (``table[--preset][--set-TAG]``)::

    <!-- bench:table halt-table1-cpu -->
    (the Markdown `bench reproduce` wrote to reproduce/halt-table1-cpu.md, less its title:
    the command, the note, the cells and the verdict lines)
    <!-- /bench -->

A single number, inline, from one record (a path under OUT, a dotted key, a format)::

    training took <!-- bench:value runs/flipflop/paper/transformer/seed1.json train_time_s .0f -->264<!-- /bench --> s

The format is a Python format spec (``.1f``, ``,.0f``), or ``pct`` (a fraction printed in %
with one decimal) or ``min`` (seconds printed in minutes with one decimal).

Two tables' verdicts on the same claims, one line per claim, and whether each changed (a table
and its tuned copy; bench/report/verdicts.py), from what ``bench reproduce`` wrote for each::

    <!-- bench:verdicts halt-table3-cpu halt-table3-cpu-tuned -->
    (claim | verdict, effect [90% CI], p in each | changed / same / not judged)
    <!-- /bench -->

Every row of a table against one of its rows, column by column (above / below / inconclusive by
Welch's test with Holm's correction; bench/report/against.py)::

    <!-- bench:against probes-cpu transformer -->      (or: probes-cpu xl rsa-xl, the rows named)
    (the Δ table and one generated sentence per row)
    <!-- /bench -->

or each row against the same row of another table (``@``: a table and its copy at other settings)::

    <!-- bench:against halt-table1-cpu-reference @halt-table1-cpu-tuned2 -->

Text outside the blocks is never changed. ``bench reproduce NAME`` fills the blocks of the table
it just wrote, every value, verdicts and against block; ``bench reproduce --writeups --out results`` rebuilds every table a
write-up names and fills them all. A value from a record made from code its commit does not
give (``bench.records.other_code``) is marked ‡, as the tables mark it.

This module knows the blocks' syntax and fills table and value blocks itself; the bodies of the
other kinds come from the modules that stand beside it (verdicts.py, against.py), handed in as
``BlockKind``s by the command that fills the write-ups (bench/report/reproduce.py: ``WRITEUP_BLOCKS``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ..errors import UserError
from ..records import other_code, read_record, write_atomic
from .cells import OTHER_CODE
from .outputs import generated_table

#: a block: its opening marker (kind and argument), its generated content, its closing marker
BLOCK = re.compile(r"<!-- bench:(?P<kind>table|value|verdicts|against) (?P<arg>[^>]*?) -->(?P<body>.*?)<!-- /bench -->", re.DOTALL)
FORMATS = {"pct": (100.0, ".1f"), "min": (1 / 60, ".1f")}


class BlockKind(NamedTuple):
    """A kind of block filled from generated tables (verdicts, against): ``tables(arg, where)``, the
    generated tables its argument names (checked: a UserError line naming ``where`` when malformed);
    ``body(out, arg, where)``, the Markdown it shows."""

    tables: Callable[[str, str], list[str]]
    body: Callable[[Path, str, str], str]


def writeups(out: Path) -> list[Path]:
    """The write-ups of a results folder: its own *.md files (not those under runs/ or reproduce/)."""
    return sorted(Path(out).glob("*.md"))


def place(text: str, block: re.Match, where: str) -> str:
    """``where`` (a write-up's path) and the line of ``text`` that ``block`` starts on, for its errors."""
    return f"{where}:{text.count(chr(10), 0, block.start()) + 1}"


def table_names(text: str, kinds: dict[str, BlockKind], where: str = "") -> dict[str, str]:
    """The tables a write-up's blocks name (table blocks, and those of ``kinds``: their ``tables``,
    which check the arguments), in order, once each -> the file and line of the first block naming it."""
    found = {}
    for m in BLOCK.finditer(text):
        here = place(text, m, where)
        if m["kind"] == "table":
            found.setdefault(m["arg"].strip(), here)
        elif m["kind"] in kinds:
            for name in kinds[m["kind"]].tables(m["arg"], here):
                found.setdefault(name, here)
    return found


def table_block(markdown: str) -> str:
    """A generated table's Markdown as a block shows it: without its ``# title`` line, and its own
    ``## `` headings as bold lines (a block sits inside a write-up's sections)."""
    lines = markdown.strip("\n").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    lines = [f"**{line[3:]}**" if line.startswith("## ") else line for line in lines]
    return "\n\n" + "\n".join(lines).strip("\n") + "\n\n"  # blank lines: the Markdown around it stays apart


def record_value(out: Path, spec: str, where: str) -> str:
    """The value a ``bench:value PATH KEY [FORMAT]`` block shows, from the record at OUT/PATH (KEY
    dotted, a number in it an index into a list)."""
    parts = spec.split()
    if len(parts) not in (2, 3):
        raise UserError(
            f"{where}: bench:value takes a record path under the results folder, a dotted key and an optional "
            f"format, e.g. 'runs/d2/paper/nope/seed0.json metrics.bin1.acc pct'; got {spec!r}"
        )
    path, key, fmt = parts[0], parts[1], parts[2] if len(parts) == 3 else ""
    rec = read_record(Path(out) / path, quiet=True)
    if not rec:
        raise UserError(f"{where}: bench:value names {path}, which is not a run record under {out}")
    value = rec
    for step in key.split("."):  # a number steps into a list: val_history.0.acc is the first validation's acc
        if isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        elif isinstance(value, dict) and step in value:
            value = value[step]
        else:
            raise UserError(f"{where}: record {path} has no {key!r} (stopped at {step!r})")
    scale, spec_ = FORMATS.get(fmt, (1.0, fmt))
    mark = f" {OTHER_CODE}" if other_code(rec) else ""  # made from code its commit does not give: marked as in the tables
    try:
        return format(value * scale if scale != 1.0 else value, spec_) + mark
    except (TypeError, ValueError):
        raise UserError(
            f"{where}: {key} of {path} is {value!r}, which format {fmt!r} cannot print (a Python format spec such as .1f, or pct, or min)"
        ) from None


def fill(text: str, tables: dict[str, str] | None, out: Path, where: str, kinds: dict[str, BlockKind]) -> str:
    """``text`` with its table blocks named in ``tables`` (name -> generated Markdown) refilled, and
    every value block refilled from its record and every block of ``kinds`` (verdicts, against)
    from its tables' generated files under OUT/reproduce/; everything outside the blocks as it was."""

    def one(m: re.Match) -> str:
        kind, arg = m["kind"], m["arg"].strip()
        here = place(text, m, where)
        if kind == "value":
            body = record_value(out, arg, here)
        elif kind in kinds:
            body = kinds[kind].body(out, arg, here)
        elif kind == "table" and tables is not None and arg in tables:
            body = table_block(tables[arg])
        else:
            return m[0]
        return f"<!-- bench:{kind} {arg} -->{body}<!-- /bench -->"

    return BLOCK.sub(one, text)


def fill_writeups(out: Path, kinds: dict[str, BlockKind], tables: dict[str, str] | None = None) -> list[Path]:
    """Fill the blocks of every write-up in ``out`` (``tables``: name -> generated Markdown;
    ``kinds``: the block kinds besides tables and values); write the files that change, after all
    of them are filled (a bad block writes none). Returns them."""
    changed = {}
    for path in writeups(out):
        text = path.read_text()
        new = fill(text, tables, out, str(path), kinds)
        if new != text:
            changed[path] = new
    for path, new in changed.items():
        write_atomic(path, new)
    return list(changed)


def blocks_tables(out: Path, kinds: dict[str, BlockKind]) -> dict[str, Path]:
    """Every table the write-ups in ``out`` name (``kinds``: as for ``table_names``) -> the generated file it is filled from."""
    found = {}
    for path in writeups(out):
        for name, here in table_names(path.read_text(), kinds, str(path)).items():
            found.setdefault(name, generated_table(out, name, here))
    return found
