"""Write the data generator's version into run records made before records carried it.

A record's ``config.task.version`` says which version of its task's generator made the data
(``Task.version``; a bump means other data, so ``bench compare --run`` / ``bench reproduce --run``
retrain records of an older version). Records written before that field existed lack it and
count as version "1". This script reads the version each such record was really made with from
the task's source file *at the record's own commit* (``git show <commit>:bench/tasks/<module>.py``, ``tasks/<module>.py`` before the move to bench/):
the one ``version = "N"`` assignment there, or "1" when the file has none. Records whose commit
is unknown, not a fixed revision, or lacks the file (made from uncommitted code) are left alone,
and so are files with several different versions.

    python scripts/history/backfill_data_version.py results/runs            # prints what it would write
    python scripts/history/backfill_data_version.py results/runs --write
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from bench.records import write_json_atomic  # noqa: E402
from scripts._bench_util import backfill_args, run_records  # noqa: E402

VERSION = re.compile(r'^\s+version(?:\s*:\s*ClassVar\[str\])?\s*=\s*"([^"]+)"', re.M)


def version_at(commit: str, target: str, cache: dict) -> str | None:
    """The generator version of ``target`` ('bench.tasks.logic:LogicalInference', or 'tasks.logic:...'
    in records made before the move to bench/) at ``commit``; None if unknown."""
    module = target.partition(":")[0]
    key = (commit, module)
    if key not in cache:
        # the task packages moved from tasks/ to bench/tasks/: a commit has one or the other
        short = module.removeprefix("bench.")
        for path in (f"{short.replace('.', '/')}.py", f"bench/{short.replace('.', '/')}.py"):
            shown = subprocess.run(["git", "show", f"{commit}:{path}"], capture_output=True, text=True)
            if not shown.returncode:
                break
        if shown.returncode:
            cache[key] = None
        else:
            found = set(VERSION.findall(shown.stdout)) - {"1"} if short != "tasks.base" else set()
            cache[key] = found.pop() if len(found) == 1 else ("1" if not found else None)
    return cache[key]


def main() -> int:
    args = backfill_args(__doc__)
    cache: dict = {}
    for path, rec in run_records(args.folders):
        task = (rec.get("config") or {}).get("task")
        commit = (rec.get("git") or {}).get("commit")
        if not isinstance(task, dict) or "version" in task or "target" not in task:
            continue
        if not re.fullmatch(r"[0-9a-f]{7,40}", commit or ""):  # e.g. "HEAD" from a copy without history
            print(f"skipped {path}: commit {commit!r} names no fixed revision")
            continue
        version = version_at(commit, task["target"], cache)
        if version is None:
            print(f"skipped {path}: no version readable at commit {commit[:7]}")
            continue
        print(f"{path}: data version {version} (commit {commit[:7]})")
        if args.write:
            task["version"] = version
            write_json_atomic(path, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
