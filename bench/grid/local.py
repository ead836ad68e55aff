"""The local launcher: cells as separate processes, ``jobs`` at a time, each ``bench.runner.run_cell``.

On the CPU a cell is forked from a fork server that has imported the libraries once (a small
cell starts in milliseconds, not seconds; the server never ran a torch op, so forking is safe
even when this process has started OpenMP threads) and calls ``run_cell`` with the cell's spec;
the CPU threads are divided among the jobs (``train.num_threads``, not part of a run's identity).
On a GPU machine a cell is a fresh ``python -m bench run`` process (CUDA does not survive a fork;
``bench run`` calls ``run_cell``) that sees one GPU through CUDA_VISIBLE_DEVICES; ``runs_per_gpu``
cells may share one. Each cell's output (its notes and progress, as ``bench run`` writes them)
goes to a log file; the grid logs one line per finished cell. Ctrl-C / SIGTERM reach the running cells,
which checkpoint and stop; the grid logs one line per stopped cell, and the same command later resumes them.

A forked cell sends its exit status to the grid through a pipe of its own, not only through the
fork server: a SIGTERM to the grid's process group (``kill -- -PGID``, ``timeout``, a batch
system) also ends the fork server, after which multiprocessing reports every cell it forked as
exit status 255 at once, while the cells (in sessions of their own) are still checkpointing.
The pipe stays open until the cell itself ends, so the grid waits for it and reads what it said.

A cell never outlives the grid (``die_with_grid``): however the grid ends, SIGKILL of its process
group included (``timeout -s KILL``, a scheduler's hard stop), each cell gets SIGTERM, checkpoints
and stops, SIGKILL after ``ORPHAN_GRACE_S`` at the latest: Linux's parent-death signal
(``prctl(PR_SET_PDEATHSIG)``: the fork server, or the grid for a fresh process, is its parent), and a
watchdog thread that checks every second that the grid's process is still there (any OS, and the
case of a fork server that outlives the grid). A stopped grid's last line says what it wrote.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..cpus import available_cpus
from ..errors import RunInterrupted, UserError
from ..grid_cell import Cell
from ..records import record_path, run_folder
from ..registry import Registry
from .common import Progress, Stopped, log_folder

ORPHAN_GRACE_S = 60.0  # a cell whose grid is gone is SIGKILLed this long after its SIGTERM if still running
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def parent_death_signal(signum: int = signal.SIGTERM) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent ends (prctl, through ctypes);
    False where there is no prctl (not Linux) or it refused."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_grid(grid_pid: int, parent_pid: int) -> None:
    """This cell ends with the grid (see the module's note): the parent-death signal, then a check
    that the parent has not already gone (before the signal was asked for), then the watchdog."""
    parent_death_signal()
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=_watch_grid, args=(grid_pid,), name="bench-grid-watchdog", daemon=True).start()


def _watch_grid(grid_pid: int) -> None:
    while True:
        time.sleep(1.0)
        try:
            os.kill(grid_pid, 0)
            continue
        except PermissionError:  # a process of another user took the pid: ours is gone
            pass
        except ProcessLookupError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)  # the cell checkpoints and stops (GracefulStop)
        time.sleep(ORPHAN_GRACE_S)
        os.kill(os.getpid(), signal.SIGKILL)


def device_slots(jobs: int, runs_per_gpu: int) -> tuple[list[dict], bool]:
    """Environment additions for each concurrent slot, and whether cells need fresh processes:
    a GPU each (shared by runs_per_gpu), or an equal share of the CPU threads."""
    import torch

    if torch.cuda.is_available():
        slots = [{"CUDA_VISIBLE_DEVICES": str(g)} for g in range(torch.cuda.device_count()) for _ in range(runs_per_gpu)]
        return slots[:jobs], True
    threads = max(1, available_cpus() // jobs)
    return [{"BENCH_THREADS": str(threads)} for _ in range(jobs)], False


# What a forked cell that ended without saying its status (killed) exits with, when the fork
# server that would have relayed its real status has died too: multiprocessing's own stand-in.
UNKNOWN_STATUS = 255


def stopped_status(code: int | None) -> bool:
    """Whether a cell's exit status says it was stopped by SIGINT / SIGTERM (it checkpointed, or
    was ended before it started training): 130 / 143 as ``bench run`` exits, -2 / -15 as
    multiprocessing reports a process a signal ended."""
    return code in (128 + signal.SIGINT, 128 + signal.SIGTERM, -signal.SIGINT, -signal.SIGTERM)


def _forked_cell(
    cell: Cell,
    out: str,
    registry_path: str | None,
    trainer_args: dict,
    rerun: bool,
    threads: int | None,
    env: dict,
    log: str,
    status=None,
    grid_pid: int | None = None,
) -> None:
    """The body of a forked cell: its own session (the grid forwards Ctrl-C once), ended with the
    grid (``die_with_grid``), output to its log, then ``run_cell``; it exits with ``bench run``'s
    status (0 trained, 1 failed, 2 bad input, 130 / 143 stopped by a signal), which it first sends
    on ``status`` (the write end of the grid's pipe, see the module's note)."""
    parent = os.getppid()  # the fork server
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before the watchdog can send one
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    if grid_pid is not None:
        die_with_grid(grid_pid, parent)
    os.environ.update(env)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    handler = logging.StreamHandler(sys.stderr)  # this process is the cell's: its notes go to its log
    handler.setFormatter(logging.Formatter("%(message)s"))
    notes = logging.getLogger("bench")
    notes.addHandler(handler)
    notes.setLevel(logging.INFO)
    # the record's command: how to train this cell again by hand
    sys.argv = ["bench", *cell.argv(Path(out), registry_path, trainer_args, rerun), *cell.threads_argv(threads)]
    code = cell_status(cell, out, registry_path, trainer_args, rerun, threads, notes)
    sys.stdout.flush()
    if status is not None:
        try:
            status.send(code)
        except OSError:  # the grid is gone: nobody to tell
            pass
    sys.exit(code)


def cell_status(
    cell: Cell, out: str, registry_path: str | None, trainer_args: dict, rerun: bool, threads: int | None, notes: logging.Logger
) -> int:
    """Train the cell with ``run_cell`` and return ``bench run``'s exit status, with its last line
    saying what happened (the grid's FAIL line quotes it)."""
    from ..runner import run_cell  # here, not at the top: bench.grid is imported without Lightning (bench reproduce --list)
    from ..runner.callbacks import GracefulStop

    GracefulStop.ignore_late_signals = True  # this process ends with the cell: a late SIGTERM must not cut its last line

    def announce(plan):
        notes.info(f"bench: {plan.model} on {plan.task}, preset {plan.preset}, seed {plan.seed}: training into {plan.folder}")

    try:
        rec = run_cell(
            cell, out, registry=Registry(registry_path), trainer_kwargs=trainer_args, rerun=rerun, threads=threads, on_start=announce
        )
    except UserError as exc:
        notes.error(f"bench: error: {exc}")
        return 2
    except RunInterrupted as exc:
        notes.error(f"bench: stopped by {exc}")
        return exc.exit_status
    except KeyboardInterrupt:
        notes.error("bench: interrupted; run the same command again to resume from the last checkpoints")
        return 130
    notes.info(f"record: {rec['path']}")
    if rec["status"] != "ok":
        notes.error(f"bench: the run failed: {rec.get('error', '')}")
        return 1
    return 0


# what the fork server imports once for every cell it forks: the runner's modules that train (Lightning with
# them); the package ``bench.runner`` alone would load nothing (its names load on first use)
PRELOAD = ("bench.registry", "bench.runner.cell", "bench.runner.lifecycle", "bench.grid.local")


def _fork_server():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def start_fork_server() -> None:
    """Start the server early (it imports the libraries while the grid prepares its data)."""
    import multiprocessing.forkserver

    _fork_server()
    multiprocessing.forkserver.ensure_running()


class CellProcess:
    """One running cell: a fork (CPU) calling ``run_cell``, or a fresh interpreter (GPU) running
    ``bench run``, with one interface."""

    def __init__(
        self,
        cell: Cell,
        out: Path,
        registry_path: str | None,
        trainer_args: dict,
        rerun: bool,
        threads: int | None,
        env: dict,
        log: Path,
        fresh: bool,
    ):
        self.log = log
        if fresh:
            argv = cell.argv(out, registry_path, trainer_args, rerun) + (cell.threads_argv(threads) if threads else [])
            with open(log, "w") as f:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "bench", *argv],
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **env},
                    start_new_session=True,
                    preexec_fn=parent_death_signal,
                )
            self.pid = self.proc.pid
        else:
            context = _fork_server()
            self.status, status_w = context.Pipe(duplex=False)
            self.proc = context.Process(
                target=_forked_cell,
                args=(cell, str(out), registry_path, trainer_args, rerun, threads, env, str(log), status_w, os.getpid()),
            )
            self.proc.start()
            status_w.close()  # the cell holds the only write end now: EOF on it means the cell has ended
            self.pid = self.proc.pid
        self.code = None

    def poll(self) -> int | None:
        """The cell's exit status, or None while it runs. A forked cell's comes from its status
        pipe (what it sent, or, if it ended without sending, what the fork server relays:
        ``UNKNOWN_STATUS`` when the fork server is gone too)."""
        if isinstance(self.proc, subprocess.Popen):
            return self.proc.poll()
        if self.code is None and self.status.poll():  # data, or EOF: the cell has ended (or is ending)
            try:
                self.code = self.status.recv()
            except (EOFError, OSError):
                self.proc.join(5)
                self.code = UNKNOWN_STATUS if self.proc.exitcode is None else self.proc.exitcode
            self.status.close()
            self.proc.join(5)  # it exits right after sending; don't leave a zombie behind
        return self.code

    def signal(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass


def run_local(
    cells: list[Cell], out: Path, registry_path: str, *, jobs: int, runs_per_gpu: int, trainer_args: dict, rerun: bool
) -> list[tuple[Cell, str]]:
    slots, fresh = device_slots(jobs, runs_per_gpu)
    logs = log_folder(out, "grid")
    progress = Progress(len(cells), len(slots))
    todo, running, free = list(cells), {}, list(range(len(slots)))
    stop = {"signum": 0}
    told: set[int] = set()  # pids of the cells the stop was forwarded to

    def forward(signum, frame):
        stop["signum"] = stop["signum"] or signum
        for pid, (proc, *_) in running.items():
            told.add(pid)
            proc.signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while (todo and not stop["signum"]) or running:
            while todo and free and not stop["signum"]:
                cell, slot = todo.pop(0), free.pop(0)
                env = {k: v for k, v in slots[slot].items() if k != "BENCH_THREADS"}
                threads = int(slots[slot]["BENCH_THREADS"]) if "BENCH_THREADS" in slots[slot] else None
                log = logs / f"{cell.task}--{cell.model}--seed{cell.seed}.log"
                proc = CellProcess(cell, out, registry_path, trainer_args, rerun, threads, env, log, fresh)
                running[proc.pid] = (proc, cell, slot, log, time.perf_counter())
                if stop["signum"] and proc.pid not in told:  # the stop came while this cell was starting
                    told.add(proc.pid)
                    proc.signal(stop["signum"])
            time.sleep(0.05)
            for pid, (proc, cell, slot, log, t0) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                del running[pid]
                free.append(slot)
                if stop["signum"] and (stopped_status(code) or code == UNKNOWN_STATUS):  # stopped on request: it resumes next time
                    ckpt = run_folder(record_path(out, cell.model, cell.task, cell.preset, cell.seed, list(cell.overrides))) / "ckpt"
                    progress.interrupted(cell, time.perf_counter() - t0, ckpt / "last.ckpt" if (ckpt / "last.ckpt").is_file() else None)
                    continue
                detail = "" if code == 0 else f"exit status {code}; last line: {_last_line(log)} (log: {log})"
                progress.finished(cell, code == 0, time.perf_counter() - t0, detail)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop["signum"]:
        raise Stopped(stop["signum"], progress.stop_summary(stop["signum"], logs))  # the CLI's last line; exit 130 / 143
    return progress.failed


def _last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []
    return lines[-1].strip() if lines else "(no output)"
