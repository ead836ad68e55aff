"""What the grid and its launchers share: the grid's progress lines, its stop by a signal and its
process's own log folder."""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from ..grid_cell import Cell
from ..logs import eta_text

log = logging.getLogger("bench.grid")


class Stopped(KeyboardInterrupt):
    """A grid stopped by SIGINT or SIGTERM (its running cells checkpointed): the CLI exits with
    128 + the signal's number, 130 or 143, as a shell reports a process the signal ended."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class Progress:
    """One line per finished cell, with the grid's progress, elapsed time and ETA (logged to
    ``bench.grid``: the CLI writes it on stderr, as progress, not results)."""

    def __init__(self, total: int, jobs: int):
        self.total, self.jobs, self.done, self.failed = total, max(1, jobs), 0, []
        self.t0 = time.perf_counter()

    def finished(self, cell: Cell, ok: bool, seconds: float, detail: str = "") -> None:
        self.done += 1
        if not ok:
            self.failed.append((cell, detail))
        elapsed = time.perf_counter() - self.t0
        remaining = self.total - self.done
        status = "ok  " if ok else "FAIL"
        line = f"[{self.done}/{self.total}] {status} {cell.name} ({seconds:.0f}s)"
        line += f"  | elapsed {elapsed:.0f}s, {eta_text(elapsed, self.done, remaining)}" if remaining else f"  | elapsed {elapsed:.0f}s"
        if detail and not ok:
            line += f"\n       {detail}"
        (log.info if ok else log.warning)(line)

    def interrupted(self, cell: Cell, seconds: float) -> None:
        """One line for a cell stopped by SIGINT / SIGTERM: not finished, not failed (it checkpointed;
        the same command resumes it)."""
        log.info(f"[-/{self.total}] stopped {cell.name} ({seconds:.0f}s): interrupted; the same command resumes it")


def log_folder(out: Path, kind: str) -> Path:
    """This grid process's own folder for its cells' logs, ``OUT/logs/<kind>-<date>-<time>-<pid>``,
    created here: two grids on one --out, even started in the same second, never share one."""
    stem = Path(out) / "logs" / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    for attempt in range(100):
        folder = stem.with_name(stem.name + (f"-{attempt}" if attempt else ""))
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"no free log folder beside {stem}")
