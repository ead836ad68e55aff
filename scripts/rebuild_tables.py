"""Rebuild every committed table under results/reproduce/ in place from the committed records, by
the command each table's Markdown names on its third line (what tests/test_rebuild.py checks, here
written into the checkout), then the write-ups those commands fill. Never trains (--run is refused).

    python scripts/rebuild_tables.py                 # every table
    python scripts/rebuild_tables.py probes-cpu      # the tables whose name starts with one of these
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.cli import main as bench  # noqa: E402


def commands(prefixes: list[str]) -> list[list[str]]:
    """The distinct `bench reproduce` commands of the committed tables (in name order)."""
    found = {}
    for md in sorted((ROOT / "results" / "reproduce").glob("*.md")):
        line = md.read_text().splitlines()[2].strip("`")
        args = shlex.split(line)
        if args[:2] != ["bench", "reproduce"] or "--run" in args:
            raise SystemExit(f"{md}: its third line is not a bench reproduce command without --run: {line}")
        if not prefixes or any(args[2].startswith(p) for p in prefixes):
            found.setdefault(line, args[1:])
    return list(found.values())


def run() -> int:
    os.chdir(ROOT)
    failed = 0
    for args in commands(sys.argv[1:]):
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            code = bench(args)
        failed += code != 0
        print(f"{'ok  ' if code == 0 else 'FAIL'} {time.perf_counter() - t0:5.1f} s  bench {shlex.join(args)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(run())
