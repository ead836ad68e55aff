"""The files ``bench reproduce`` writes for a table, whatever its kind: under
``OUT/reproduce/NAME[--PRESET][--set-TAG]``, NAME.md (the command that made it, the note, the
table and the claims), NAME.csv (one line per cell or check) and NAME--claims.csv; and how a
write-up finds them again (``generated_table``, ``command_of``)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from tabulate import tabulate

from ..errors import UserError
from ..records import overrides_tag, write_atomic
from .table_parts import Table


def output_stem(out: Path, table: Table, preset: str, overrides: list[str] = ()) -> Path:
    """OUT/reproduce/<table>[--<preset>][--set-<tag>]: a proxy preset or extra overrides never
    overwrite the table at its own settings."""
    tag = overrides_tag(list(overrides))
    return Path(out) / "reproduce" / (table.name + (f"--{preset}" if preset != table.preset else "") + (f"--set-{tag}" if tag else ""))


def csv_text(csv_rows: list[dict]) -> str:
    """CSV of dicts with the first one's keys as the header; "" for none."""
    buf = io.StringIO()
    if csv_rows:
        writer = csv.DictWriter(buf, fieldnames=list(csv_rows[0]))
        writer.writeheader()
        writer.writerows(csv_rows)
    return buf.getvalue()


def write_outputs(
    stem: Path,
    title: str,
    command: str,
    note_text: str,
    headers: list[str],
    rows: list[list],
    csv_rows: list[dict],
    claims: dict | None = None,
) -> list[Path]:
    """NAME.md (the table, and the claims when given) and NAME.csv; the claims also to NAME--claims.csv."""
    md, csv_path = stem.with_suffix(".md"), stem.with_suffix(".csv")
    text = f"# {title}\n\n`{command}`\n\n{note_text}.\n\n{tabulate(rows, headers=headers, tablefmt='github', disable_numparse=True)}\n"
    if claims:
        text += (
            f"\n## The paper's claims\n\nRule: {claims['rule']}.\n\n"
            f"{tabulate(claims['rows'], headers=claims['headers'], tablefmt='github', disable_numparse=True)}\n"
        )
    write_atomic(md, text)
    write_atomic(csv_path, csv_text(csv_rows))
    paths = [md, csv_path]
    if claims:
        paths.append(stem.with_name(stem.name + "--claims.csv"))
        write_atomic(paths[-1], csv_text(claims["csv"]))
    return paths


def generated_table(out: Path, name: str, where: str) -> Path:
    """OUT/reproduce/NAME.md, the file a table block is filled from (UserError when there is none)."""
    path = Path(out) / "reproduce" / f"{name}.md"
    if not path.is_file():
        raise UserError(
            f"{where} names table {name!r}, but there is no {path}: make it with "
            f"'bench reproduce {name.split('--')[0]} --out {out}' (with the --preset / --set it was made with)"
        )
    return path


def command_of(markdown: str) -> str:
    """The ``bench reproduce ...`` command a generated table's Markdown names under its title."""
    m = re.search(r"^`(bench reproduce [^`]*)`$", markdown, re.MULTILINE)
    return m[1] if m else ""
