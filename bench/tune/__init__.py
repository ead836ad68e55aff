"""``bench tune``: per (model, task, preset) an Optuna study whose trials are bench runs, selected
on the validation split, pruned on their validation curves, shared by local and SLURM workers
through a journal file, and summarised as a registry overlay of the best settings.

    space.py    --space / --grid items -> Optuna distributions, checked as --set values are
    study.py    the study's folder and journal; Worker runs trials (a trial = a run)
    overlay.py  tuned.yaml: each model at its best values, as a registry layer
    report.py   expected best validation against trials (Dodge et al. 2019), score against lr

    protocol.py the tuning protocol's rules (objective, rungs, noise, contention, grid edge)
    sync.py     --pruner sync: the protocol's synchronous brackets, run by the workers

Workers: ``launch`` runs one in this process (``jobs=1``), ``jobs`` local processes
(``python -m bench.tune``), or ``jobs`` SLURM jobs through submitit (each the same command).
Local workers stay in the command's process group and get SIGTERM when the command's process
dies (Linux ``PR_SET_PDEATHSIG``): a SIGKILL of the group, or of the command alone, leaves no
worker training; Ctrl-C / SIGTERM reach every worker, which stops after a checkpoint.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..grid.common import Stopped
from .study import Worker, read_meta, study_folder

log = logging.getLogger("bench.tune")

__all__ = ["Worker", "launch", "live_workers", "study_folder", "worker_class", "written_since"]


def worker_class(out: Path, name: str):
    """The worker a study needs: SyncWorker for --pruner sync, else Worker (Optuna's pruners)."""
    from .sync import SyncWorker

    return SyncWorker if read_meta(study_folder(out, name)).get("pruner") == "sync" else Worker


def live_workers(out: Path, name: str) -> int:
    """How many workers hold the study now (their lock in workers/ is taken: a live process)."""
    from filelock import FileLock, Timeout

    live = 0
    for path in sorted((study_folder(out, name) / "workers").glob("*.lock")):
        lock = FileLock(str(path))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            live += 1
            continue
        lock.release()
    return live


def written_since(out: Path, t0: float) -> tuple[int, int]:
    """(run records, resume checkpoints) written under OUT/runs since ``t0`` (what a stopped tune left)."""
    runs = Path(out) / "runs"
    records = sum(1 for p in runs.rglob("*.json") if p.stat().st_mtime >= t0) if runs.is_dir() else 0
    ckpts = sum(1 for p in runs.rglob("last.ckpt") if p.stat().st_mtime >= t0) if runs.is_dir() else 0
    return records, ckpts


def _die_with_parent(parent: int) -> None:
    """In a worker, before exec: SIGTERM when the process that started it dies (Linux prctl
    PR_SET_PDEATHSIG; elsewhere nothing: the worker shares the command's process group). A
    parent already gone before the prctl (the race it leaves) ends the worker at once."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(143)


def worker_argv(out: Path, name: str, registry_path: str | None, index: int, threads: int | None) -> list[str]:
    """The command of one worker process: ``python -m bench.tune OUT STUDY --index I ...``, told the
    ``bench tune`` command that started it (its trials' records name that one)."""
    argv = [sys.executable, "-m", "bench.tune", str(out), name, "--index", str(index), "--command", shlex.join(sys.argv)]
    if threads:
        argv += ["--threads", str(threads)]
    if registry_path:
        argv += ["--registry", str(registry_path)]
    return argv


def launch(out: Path, name: str, registry, jobs: int = 1, launcher: str = "local", profile: dict | None = None) -> None:
    """Run the study's workers until every model has its trials (or the workers stop)."""
    registry_path = registry.user_spec
    if launcher == "slurm":
        return _slurm(out, name, registry_path, jobs, profile)
    if jobs == 1:
        worker_class(out, name)(out, name, registry).run()
        return None
    return _local(out, name, registry_path, jobs)


def _local(out: Path, name: str, registry_path: str | None, jobs: int) -> None:
    from ..cpus import available_cpus

    logs = study_folder(out, name) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    threads = max(1, available_cpus() // jobs)
    procs, parent = [], os.getpid()
    for i in range(jobs):
        with open(logs / f"worker-{i}.log", "a") as f:
            procs.append(
                subprocess.Popen(
                    worker_argv(out, name, registry_path, i, threads),
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    preexec_fn=lambda: _die_with_parent(parent),
                )
            )  # the command's group: a kill of the group ends it
    log.info(f"tune: {jobs} workers started (logs in {logs})")

    def stop(signum, frame):
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        while any(p.poll() is None for p in procs):
            time.sleep(0.2)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: each worker's run checkpoints and its trial is re-queued
        for p in procs:
            if p.poll() is None:
                p.send_signal(getattr(exc, "signum", signal.SIGINT))
        for p in procs:
            p.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    bad = [(i, p.returncode) for i, p in enumerate(procs) if p.returncode != 0]
    for i, code in bad:
        log.warning(f"tune: worker {i} exited with status {code} (log: {logs / f'worker-{i}.log'})")


@dataclass
class SlurmWorker:
    """One SLURM job of a study: a worker process on the shared study (submitit pickles this)."""

    out: str
    name: str
    registry_path: str | None
    threads: int | None

    def __call__(self, index: int) -> int:
        log_path = study_folder(Path(self.out), self.name) / "logs" / f"slurm-worker-{index}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "a") as f:
            return subprocess.run(
                worker_argv(Path(self.out), self.name, self.registry_path, index, self.threads),
                stdout=f,
                stderr=subprocess.STDOUT,
                env=dict(os.environ),
                check=False,
            ).returncode


def _slurm(out: Path, name: str, registry_path: str | None, jobs: int, profile: dict | None) -> None:
    from ..grid.slurm import slurm_executor

    prof, out, folder, executor = slurm_executor(profile, out)
    try:
        handles = executor.map_array(SlurmWorker(str(out), name, registry_path, prof["cpus_per_cell"]), list(range(jobs)))
    except Exception as exc:  # noqa: BLE001 - sbatch's refusal in submitit's words
        raise UserError(f"submitting to {prof['executor']} failed: {str(exc).strip().splitlines()[-1][:300]}") from None
    log.info(f"tune: {jobs} {prof['executor']} job(s) submitted ({handles[0].job_id.split('_')[0]}); job logs in {folder}")
    try:
        for i, job in enumerate(handles):
            try:
                code = job.result()
            except Exception as exc:  # noqa: BLE001 - submitit's FailedJobError / UncompletedJobError
                log.warning(f"tune: job {job.job_id} failed: {str(exc).strip().splitlines()[-1][:300]}")
                continue
            if code != 0:
                log.warning(f"tune: worker {i} (job {job.job_id}) exited with status {code}")
    except KeyboardInterrupt:
        for job in handles:
            job.cancel(check=False)
        raise
