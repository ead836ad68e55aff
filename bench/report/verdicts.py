"""Two tables' verdicts on the same claims, side by side: a table at fixed settings and its copy at
each row's tuned learning rate (``halt-table3-cpu`` and ``halt-table3-cpu-tuned``), the block
``<!-- bench:verdicts FIXED TUNED -->`` of a write-up (bench/report/writeup.py).

Each side is read from what ``bench reproduce`` wrote for that table under OUT/reproduce/: its
claims (NAME--claims.csv: the verdict and the deciding pair's effect, 90% CI and p of
bench/report/claims.py, printed here as the claims printer prints them) and its cells (NAME.csv:
the records behind each cell). A side whose claim compares a cell without records, or with one
(no test has two values a side), is "not judged" (its verdict would be that of missing data); the
verdict of a side whose cells have fewer seeds than its table plans says "provisional" and how
many it has (the claims CSV's ``provisional``). The
last column says whether the verdict
changed, stayed the same, or is not judged. Claims are matched by their text: the two tables
must carry the same claims.
"""

from __future__ import annotations

import csv
from pathlib import Path

from tabulate import tabulate

from ..errors import UserError
from .claims import PROVISIONAL, digits_of, effect_text
from .outputs import command_of, generated_table
from .stats import FAILS
from .table_parts import Table
from .tables import table_of

NOT_JUDGED = "not judged"


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _side(out: Path, name: str, where: str) -> tuple[dict, dict, str]:
    """({claim text: its claims-CSV line}, {(row, column): records}, the command that made it) of one table."""
    md = generated_table(out, name, where)
    cells = {
        (c.get("row"), c.get("column")): int(c.get("n") or c.get("repeats") or 0)  # records (a cost table: timed repeats)
        for c in _read_csv(md.with_suffix(".csv"))
    }
    claims_csv = md.with_name(f"{name}--claims.csv")
    claims = {c["claim"]: c for c in _read_csv(claims_csv)} if claims_csv.is_file() else {}
    return claims, cells, command_of(md.read_text())


def _verdict_text(table: Table, claim, line: dict | None, cells: dict) -> tuple[str, str | None]:
    """(what a side says of a claim, its verdict or None when not judged)."""
    compared = list(dict.fromkeys(cell for pair in claim.comparisons for cell in (pair.better, pair.than)))
    empty = [cell for cell in compared if not cells.get(cell)]
    if empty:
        return f"{NOT_JUDGED} (no records for {len(empty)} of {len(compared)} cells)", None
    single = [cell for cell in compared if cells.get(cell) == 1]
    if single:  # no test is possible on such a pair: its "inconclusive" would be that of missing data too
        return f"{NOT_JUDGED} (one record in {len(single)} of {len(compared)} cells)", None
    if line is None:
        return f"{NOT_JUDGED} (not in the table's claims)", None
    verdict = line["ours"]
    shown = f"{verdict} ({PROVISIONAL}: {line['provisional']})" if line.get("provisional") else verdict
    if line["effect"] == "":
        return f"{shown} (no test)", verdict
    numbers = effect_text(
        float(line["effect"]),
        (float(line["ci_low"]), float(line["ci_high"])),
        float(line["p"]),
        digits_of(table),
        claim.ratio_at_most,
        reverse=verdict == FAILS,
    )
    return f"{shown}: {numbers}", verdict


def compared_tables(spec: str, where: str) -> tuple[list[str], list[Table]]:
    """The two generated tables' names a ``bench:verdicts`` block's ``spec`` names, and the tables;
    UserError (``where``: the block's file and line) unless they are two tables with the same claims."""
    names = spec.split()
    if len(names) != 2:
        raise UserError(
            f"{where}: bench:verdicts takes two generated tables with the same claims, e.g. "
            f"'halt-table3-cpu halt-table3-cpu-tuned'; got {spec!r}"
        )
    tables = [table_of(name, where) for name in names]
    texts = [[c.text for c in t.claims] for t in tables]
    if not texts[0]:
        raise UserError(f"{where}: bench:verdicts names {names[0]!r}, which has no claims to judge")
    only = next((t for t in texts[0] + texts[1] if (t in texts[0]) != (t in texts[1])), None)
    if only is not None:
        which = names[0] if only in texts[0] else names[1]
        raise UserError(
            f"{where}: bench:verdicts compares {names[0]!r} and {names[1]!r}, whose claims differ: "
            f"{only!r} is only in {which!r}; name two tables with the same claims (a table and its tuned copy)"
        )
    return names, tables


def verdict_tables(spec: str, where: str) -> list[str]:
    """The two generated tables a ``bench:verdicts`` block's ``spec`` names (checked: compared_tables)."""
    return compared_tables(spec, where)[0]


def verdicts_block(out: Path, spec: str, where: str) -> str:
    """The Markdown a ``bench:verdicts FIXED TUNED`` block shows: one line per claim, each table's
    verdict with its effect [90% CI] and p, and whether it changed."""
    names, tables = compared_tables(spec, where)
    sides = [_side(out, name, where) for name in names]
    rows = []
    for claim in tables[0].claims:
        said = [
            _verdict_text(t, next(c for c in t.claims if c.text == claim.text), claims.get(claim.text), cells)
            for t, (claims, cells, _) in zip(tables, sides)
        ]
        verdicts = [v for _, v in said]
        change = NOT_JUDGED if None in verdicts else "same" if verdicts[0] == verdicts[1] else "changed"
        rows.append([claim.text, said[0][0], said[1][0], change])
    commands = " and ".join(f"`{command}`" for _, _, command in sides)
    head = (
        f"Verdicts of {commands} (bench/report/claims.py), claims matched by their text; a side is {NOT_JUDGED} "
        "while a cell its claim compares has fewer than two records."
    )
    table = tabulate(rows, headers=["claim", names[0], names[1], "change"], tablefmt="github", disable_numparse=True)
    return f"\n\n{head}\n\n{table}\n\n"
