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

    def __init__(self, signum: int, summary: str | None = None):
        super().__init__(signum)
        self.signum = signum
        self.summary = summary  # the CLI's last line when given: what the stopped command wrote


class Progress:
    """One line per finished cell, with the grid's progress, elapsed time and ETA (logged to
    ``bench.grid``: the CLI writes it on stderr, as progress, not results)."""

    def __init__(self, total: int, jobs: int):
        self.total, self.jobs, self.done, self.failed = total, max(1, jobs), 0, []
        self.stopped: list[tuple[Cell, bool]] = []  # (cell, whether it has a checkpoint to resume from)
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

    def interrupted(self, cell: Cell, seconds: float, checkpoint: Path | None = None) -> None:
        """One line for a cell stopped by SIGINT / SIGTERM: not finished, not failed; ``checkpoint``,
        when given, is where it resumes from (None: stopped before its first checkpoint)."""
        self.stopped.append((cell, checkpoint is not None))
        where = f"from {checkpoint}" if checkpoint else "from the start: stopped before its first checkpoint"
        log.info(f"[-/{self.total}] stopped {cell.name} ({seconds:.0f}s): interrupted; the same command resumes it ({where})")

    def stop_summary(self, signum: int, logs: Path) -> str:
        """The last line of a stopped grid: what it wrote (records of finished cells, checkpoints of
        stopped ones), what it did not, and how to go on."""
        import signal

        ok = self.done - len(self.failed)
        resumable = sum(1 for _, has in self.stopped if has)
        parts = [
            f"{ok} run(s) finished (their records written)",
            *([f"{len(self.failed)} failed"] if self.failed else []),
            f"{resumable} stopped at a checkpoint",
            *(
                [f"{len(self.stopped) - resumable} stopped before any checkpoint (nothing of them kept)"]
                if len(self.stopped) > resumable
                else []
            ),
            f"{self.total - self.done - len(self.stopped)} not started",
        ]
        return (
            f"bench: stopped by {signal.Signals(signum).name}: of {self.total} cell(s), "
            + ", ".join(parts)
            + f"; cell logs in {logs}; run the same command again to resume"
        )


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
