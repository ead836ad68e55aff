"""``bench data check``: whether the files a task reads (the LRA Text, Retrieval and Image sets you
supply) are where the task looks, in one of the layouts it reads (each task's ``layouts``, bench/tasks/lra/)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UserError


def cmd_data(args, registry) -> int:
    from ..tasks.base import TaskError
    from ..tasks.lra import CHECKABLE, FILE_TASKS, check_data

    tasks = list(FILE_TASKS) if args.task == "lra" else [args.task]
    if args.task != "lra" and args.task not in CHECKABLE:
        raise UserError(f"--task {args.task!r} reads no files of yours; choose {', '.join(CHECKABLE)}, or lra for the first three")
    root = Path(args.root).expanduser()
    if not root.is_dir():  # one line for the folder, not one per task reading it
        there = "a file" if root.exists() else "not there"
        raise UserError(
            f"--root {str(root)!r} is {there}; give the folder you downloaded the files to (the one you give as $BENCH_LRA_DIR)"
        )
    problems = []
    for task in tasks:
        try:
            print(check_data(task, args.root))
        except TaskError as exc:
            problems.append(str(exc))
    for problem in problems:  # one line per task whose files are missing or malformed
        print(f"bench: error: {problem}", file=sys.stderr)
    return 2 if problems else 0
