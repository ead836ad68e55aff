"""``bench data check``: which layout of a task's files is under a folder, or what is missing."""

from __future__ import annotations

from ..base import TaskError
from .image import LRAImage
from .listops import LRAListOps
from .retrieval import LRARetrieval
from .text import LRAText

FILE_TASKS = {cls.name: cls for cls in (LRAText, LRARetrieval, LRAImage)}  # the tasks that need your files
CHECKABLE = {**FILE_TASKS, "lra-listops": LRAListOps}  # lra-listops reads the release's files only when asked (data_dir)


def check_data(task: str, root: str) -> str:
    """One line: which layout of ``task``'s files is under ``root`` and what it holds; TaskError
    (one line) naming what is missing or malformed (``bench data check``)."""
    if task not in CHECKABLE:
        raise TaskError(f"no files to check for task {task!r}: the tasks that read your files are {', '.join(CHECKABLE)}")
    t = CHECKABLE[task](data_dir=root)
    found = t.found
    return f"{task}: ok: {found.layout.name} in {found.base} ({t.check(found)})"
