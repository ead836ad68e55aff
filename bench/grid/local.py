"""The local launcher: cells as separate ``bench run`` processes, ``jobs`` at a time.

CPU threads are divided among the jobs (``train.num_threads``, not part of a run's identity);
on a GPU machine each running cell gets one GPU through CUDA_VISIBLE_DEVICES, and
``runs_per_gpu`` cells may share one. Each cell's output goes to a log file; the grid prints
one line per finished cell. Ctrl-C / SIGTERM reach the running cells, which checkpoint and
stop; the same command later resumes them.
"""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import Cell, Progress


def device_slots(jobs: int, runs_per_gpu: int) -> list[dict]:
    """Environment additions for each concurrent slot: a GPU each (shared by runs_per_gpu), or
    an equal share of the CPU threads."""
    import torch

    if torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        slots = [{"CUDA_VISIBLE_DEVICES": str(g)} for g in range(gpus) for _ in range(max(1, runs_per_gpu))]
        return slots[: max(1, jobs)] if jobs else slots
    threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
    return [{"BENCH_THREADS": str(threads)} for _ in range(max(1, jobs))]


def run_local(cells: list[Cell], out: Path, registry_path: str, *, jobs: int, runs_per_gpu: int, trainer_args: dict,
              rerun: bool) -> list[tuple[Cell, str]]:
    slots: queue.Queue = queue.Queue()
    for slot in device_slots(jobs, runs_per_gpu):
        slots.put(slot)
    workers = slots.qsize()
    logs = Path(out) / "logs" / time.strftime("grid-%Y%m%d-%H%M%S")
    logs.mkdir(parents=True, exist_ok=True)
    progress = Progress(len(cells), workers)
    running: set[subprocess.Popen] = set()
    lock = threading.Lock()
    stopping = threading.Event()

    def one(cell: Cell) -> None:
        if stopping.is_set():
            return
        slot = slots.get()
        try:
            argv = cell.argv(out, registry_path, trainer_args, rerun)
            env = {**os.environ, **{k: v for k, v in slot.items() if k != "BENCH_THREADS"}}
            if "BENCH_THREADS" in slot:
                argv += ["--set", f"train.num_threads={slot['BENCH_THREADS']}"]
            log = logs / f"{cell.task}--{cell.model}--seed{cell.seed}.log"
            t0 = time.perf_counter()
            with open(log, "w") as f:
                proc = subprocess.Popen([sys.executable, "-m", "bench", *argv], stdout=f, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)  # our handler forwards signals, once
                with lock:
                    running.add(proc)
                code = proc.wait()
                with lock:
                    running.discard(proc)
            if stopping.is_set() and code in (130, 143):
                return
            detail = "" if code == 0 else f"exit status {code}; last line: {_last_line(log)} (log: {log})"
            progress.finished(cell, code == 0, time.perf_counter() - t0, detail)
        finally:
            slots.put(slot)

    def forward(signum, frame):
        stopping.set()
        with lock:
            for proc in running:
                proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, cells))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopping.is_set():
        raise KeyboardInterrupt  # the CLI says how to resume
    return progress.failed


def _last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "(no output)"
