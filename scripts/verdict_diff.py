"""Every committed table's verdicts and learned counts at a git revision against the working tree:
the claims whose verdict changed, and per table the cells whose "k learned" count or chance mark
changed, from the claims CSVs and cell CSVs under results/reproduce/ (what `bench reproduce`
writes; rebuild them first with scripts/rebuild_tables.py).

    python scripts/verdict_diff.py HEAD                       # Markdown on stdout
    python scripts/verdict_diff.py c598ac7 --out results/rejudged.md
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "results/reproduce"


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def at_revision(rev: str) -> dict[str, str]:
    """{file name: text} of the CSVs under results/reproduce at ``rev``."""
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", rev, FOLDER + "/"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {
        Path(n).name: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        for n in names
        if n.endswith(".csv")
    }


def now() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((ROOT / FOLDER).glob("*.csv"))}


def claims(files: dict[str, str]) -> dict[tuple[str, str], dict]:
    """{(table, claim): its CSV row} over the claims CSVs (open questions left out)."""
    out = {}
    for name, text in files.items():
        if name.endswith("--claims.csv"):
            for r in _rows(text):
                if r.get("ours") != "measured":
                    out[name[: -len("--claims.csv")], r["claim"]] = r
    return out


def cells(files: dict[str, str]) -> dict[tuple[str, str, str], dict]:
    """{(table, row, column): its CSV row} over the cell CSVs of results tables (those with a learned column)."""
    out = {}
    for name, text in files.items():
        if name.endswith("--claims.csv") or not name.endswith(".csv"):
            continue
        rows = _rows(text)
        if rows and "learned" in rows[0]:
            for r in rows:
                out[name[: -len(".csv")], r["row"], r["column"]] = r
    return out


def _int(x) -> int | None:
    return int(float(x)) if x not in (None, "") else None


def _learned_text(k: int | None, row: dict) -> str:
    return f"{k}{' ~' if row.get('at_chance') == 'True' else ''}"


def _p(row: dict) -> str:
    return "" if not row.get("p") else f"{float(row['p']):.3g}"


def report(rev: str) -> str:
    before, after = at_revision(rev), now()
    cb, ca = claims(before), claims(after)
    verdict_rows, counts = [], {"same": 0, "changed": 0}
    for key in sorted(set(cb) | set(ca)):
        b, a = cb.get(key, {}), ca.get(key, {})
        same = b.get("ours") == a.get("ours")
        counts["same" if same else "changed"] += 1
        verdict_rows.append(
            [key[0], key[1][:90], b.get("ours", "—"), _p(b), a.get("ours", "—"), _p(a), a.get("test", ""), "" if same else "changed"]
        )
    xb, xa = cells(before), cells(after)
    per_table: dict[str, list[int]] = {}
    changed_cells = []
    for key in sorted(set(xb) | set(xa)):
        b, a = xb.get(key, {}), xa.get(key, {})
        lb, la = _int(b.get("learned")), _int(a.get("learned"))
        t = per_table.setdefault(key[0], [0, 0, 0, 0, 0])  # cells, learned before, learned after, ~ before, ~ after
        t[0] += 1
        t[1] += lb or 0
        t[2] += la or 0
        t[3] += b.get("at_chance") == "True"
        t[4] += a.get("at_chance") == "True"
        if lb != la or b.get("at_chance") != a.get("at_chance"):
            level = a.get("chance_level") or ""
            changed_cells.append(
                [
                    key[0],
                    key[1],
                    key[2],
                    a.get("ours", "")[:6],
                    b.get("majority", "") and f"{float(b['majority']):.1f}",
                    level and f"{float(level):.1f}",
                    a.get("chance_strategy", ""),
                    _learned_text(lb, b),
                    _learned_text(la, a),
                ]
            )
    lines = [
        f"# Verdicts and learned counts: {rev} against the working tree",
        "",
        f"`python scripts/verdict_diff.py {rev}` (generated; the tables rebuilt by scripts/rebuild_tables.py)",
        "",
        f"Claims: {counts['changed']} of {counts['same'] + counts['changed']} verdicts changed. Learned flags: "
        f"{sum(t[1] for t in per_table.values())} before, {sum(t[2] for t in per_table.values())} after; cells at chance (~): "
        f"{sum(t[3] for t in per_table.values())} before, {sum(t[4] for t in per_table.values())} after, of "
        f"{sum(t[0] for t in per_table.values())} cells.",
        "",
        "## Every claim's verdict",
        "",
        tabulate(
            verdict_rows,
            headers=["table", "claim", "before", "p before", "after", "p after", "test after", ""],
            tablefmt="github",
            disable_numparse=True,
        ),
        "",
        "## Learned seeds and chance marks per table",
        "",
        tabulate(
            [[t, *v] for t, v in per_table.items()],
            headers=["table", "cells", "learned before", "learned after", "~ before", "~ after"],
            tablefmt="github",
        ),
        "",
        "## The cells whose learned count or chance mark changed",
        "",
        "before: the majority-class share as the chance level and 2 SE as the margin; after: the best trivial strategy's "
        "score and the margin max(2 SE, 0.1 x (1 - p)).",
        "",
        tabulate(
            changed_cells,
            headers=["table", "row", "column", "ours", "majority", "chance now", "strategy", "learned before", "learned after"],
            tablefmt="github",
            disable_numparse=True,
        ),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", help="the git revision to compare with (e.g. HEAD)")
    parser.add_argument("--out", help="write the Markdown here instead of stdout")
    args = parser.parse_args()
    text = report(args.rev)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
