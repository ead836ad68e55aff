"""One-off migration: run records that name absolute paths of the machine they ran on
are rewritten to name none, and nothing else in them changes.

- ``checkpoint``: relative to the record's folder (``seed0/ckpt/best.ckpt``), as bench writes it
  now; readers (bench.records.record_checkpoint) look only in the record's own run folder anyway.
- ``command``: its first word (``/.../bench/__main__.py``) becomes ``bench``; an absolute path
  inside the checkout (the folder holding results/ or registry.yaml) becomes relative to it.
  Paths outside any checkout (e.g. an --out under /tmp) are kept: they are what the user typed.

    python scripts/history/relative_record_paths.py results/runs          # rewrite
    python scripts/history/relative_record_paths.py results/runs --check  # list what would change
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.records import run_folder, write_json_atomic  # noqa: E402

CHECKOUT = re.compile(r"^(/\S*?)/(results|registry\.yaml|tables)(?=/|$)")  # /work/main/results -> results


def relative_word(word: str) -> str:
    match = CHECKOUT.match(word)
    return word[len(match.group(1)) + 1 :] if match else word


def migrate(path: Path, rec: dict) -> dict:
    out = dict(rec)
    if rec.get("checkpoint"):
        out["checkpoint"] = str((run_folder(path) / "ckpt" / Path(rec["checkpoint"]).name).relative_to(path.parent))
    if isinstance(rec.get("command"), str) and rec["command"]:
        first, *rest = rec["command"].split(" ")
        out["command"] = " ".join(["bench" if first.startswith("/") or first.endswith("__main__.py") else first, *map(relative_word, rest)])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="a runs/ folder, e.g. results/runs")
    ap.add_argument("--check", action="store_true", help="only list the records that would change")
    args = ap.parse_args()
    changed = 0
    for path in sorted(Path(args.folder).rglob("seed*.json")):
        rec = json.loads(path.read_text())
        new = migrate(path, rec)
        if new != rec:
            changed += 1
            if args.check:
                print(path)
            else:
                write_json_atomic(path, new)
    print(f"{changed} record(s) {'would change' if args.check else 'rewritten'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
