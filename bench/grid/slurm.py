"""The SLURM launcher: the grid's cells as one submitit job array (``--launcher slurm``).

Each array job runs a chunk of ``cells_per_job`` cells one after another, each exactly ``bench
run`` for one seed in its own process (as the local launcher does: a cell starts with fresh
global state, its output goes to its own log, and it stops cleanly on SIGTERM: bench checkpoints
after the current batch and exits 143). Records go to the shared ``--out``; the submitting
command waits and prints one line per finished cell.

Requeueing has one owner, submitit. SLURM signals the job (USR2, ``signal_delay_s`` before its
time limit, or at preemption); submitit calls ``CellChunk.checkpoint``, which stops the running
cell (it writes its last checkpoint) and hands back the cells still to do; submitit requeues the
job, which then resumes the interrupted cell from its checkpoint. Lightning must not requeue as
well: the cell process is started by the job, not by srun, so it is told so the way Lightning
documents (``SLURM_JOB_NAME=interactive`` turns its SLURM detection off) and trains under its
plain environment, with no requeue handler (the same effect as ``SLURMEnvironment(auto_requeue=False)``,
with no change to the run lifecycle; a cell on several GPUs then launches its own ranks).

``executor: local`` runs the same jobs through submitit's LocalExecutor on this machine: the
tests use it, and it tries a profile out without a cluster. Needs ``pip install "bench[slurm]"``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..cpus import available_cpus
from ..errors import UserError
from ..grid_cell import Cell
from ..records import read_record, record_path, run_folder
from ..schema import Schema
from .common import Progress, Stopped, log, log_folder


def _setting(default, meaning: str):
    return dataclasses.field(default=default, metadata={"help": meaning})


@dataclasses.dataclass
class SlurmProfile(Schema):
    """The profile's settings, their types, defaults and meaning; docs/cluster.md shows an example."""

    UNKNOWN = "unknown setting {first}"
    executor: str = _setting("slurm", "slurm, or local (submitit's LocalExecutor: this machine, no cluster)")
    partition: str | None = _setting(None, "SLURM partition (default: the cluster's)")
    account: str | None = _setting(None, "SLURM account")
    qos: str | None = _setting(None, "SLURM quality of service")
    constraint: str | None = _setting(None, "SLURM node features, e.g. a100")
    timeout_min: int | float = _setting(60, "time limit of one job, in minutes (a chunk longer than this is requeued and resumed)")
    gpus_per_cell: int = _setting(1, "GPUs per cell, i.e. per job (0 on CPU partitions)")
    cpus_per_cell: int | None = _setting(None, "CPU cores per cell; also its torch threads (default: the cores the job may use)")
    mem_gb: int | float | None = _setting(None, "memory per job in GB")
    array_parallelism: int | None = _setting(None, "jobs of the array running at once (slurm default 256; local default 1)")
    cells_per_job: int = _setting(1, "cells one job runs one after another (more amortise scheduling for short cells)")
    max_num_timeout: int = _setting(3, "times a job may be requeued after hitting its time limit (preemptions do not count)")
    signal_delay_s: int | None = _setting(None, "seconds between the requeue signal and the time limit (submitit: 90 slurm, 30 local)")
    setup: list | None = _setting(None, "shell lines run in each job before it starts (module load ..., source .../activate)")
    sbatch: dict | None = _setting(None, "any other sbatch option, e.g. {exclusive: true, mail-type: END}")
    job_name: str = _setting("bench", "job name shown by squeue")
    folder: str | None = _setting(None, "submitit's job files and logs (default OUT/slurm; must be shared with the nodes)")
    cell_command: str | None = _setting(None, "the command that runs one cell (default: the job's python -m bench)")


POLL_S = 2.0
HEADER = "== bench slurm launcher "  # starts the line a job writes to a cell's log before each attempt
#: after a cell was stopped by a signal from outside (scancel, preemption), the job waits this
#: long for the scheduler to requeue or end it, before it reports the cell as failed
SCHEDULER_GRACE_S = 300


def load_profile(source: str | os.PathLike | dict | None = None, overrides: list[str] | tuple = ()) -> dict:
    """The profile's settings over the defaults: ``source`` is a YAML file (``--slurm-profile``) or
    a mapping; ``overrides`` are ``KEY=VALUE`` strings (YAML values) applied on top. Every key and
    type is checked here; a problem is one UserError line."""
    from ..schema import load_yaml

    where = "slurm profile"
    raw = source if isinstance(source, dict) else {}
    if source is not None and not isinstance(source, dict):
        where = f"slurm profile {str(source)!r}"
        raw = load_yaml(Path(source), where)
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise UserError(f"{where} must be a mapping of settings (partition: ..., timeout_min: ...), got {type(raw).__name__}")
    raw = dict(raw)
    for item in overrides:
        key, eq, value = str(item).partition("=")
        if not eq:
            raise UserError(f"slurm setting {item!r} must look like KEY=VALUE, e.g. partition=gpu")
        raw[key.strip()] = load_yaml(value, f"slurm setting {item!r}")
    profile = dataclasses.asdict(SlurmProfile.from_mapping({k: v for k, v in raw.items() if v is not None}, where))
    if profile["executor"] not in ("slurm", "local"):
        raise UserError(f"{where}: executor must be slurm or local, got {profile['executor']!r}")
    for key in ("timeout_min", "cells_per_job", "array_parallelism", "cpus_per_cell", "mem_gb", "signal_delay_s"):
        if profile[key] is not None and profile[key] <= 0:
            raise UserError(f"{where}: {key} must be greater than 0, got {profile[key]!r}")
    for key in ("gpus_per_cell", "max_num_timeout"):
        if profile[key] < 0:
            raise UserError(f"{where}: {key} must be 0 or more, got {profile[key]!r}")
    if profile["executor"] == "slurm" and profile["timeout_min"] != int(profile["timeout_min"]):
        raise UserError(f"{where}: timeout_min must be whole minutes on SLURM, got {profile['timeout_min']!r}")
    if profile["setup"] is not None and not all(isinstance(line, str) for line in profile["setup"]):
        raise UserError(f"{where}: setup must be a list of shell lines (strings)")
    return profile


def run_slurm(
    cells: list[Cell], out: Path, registry_path: str | None, *, trainer_args: dict, rerun: bool, profile: str | os.PathLike | dict | None
) -> list[tuple[Cell, str]]:
    """Train the cells as a submitit job array and wait for them; returns the failed ones with a
    one-line reason. Ctrl-C / SIGTERM cancel the jobs: running cells checkpoint and stop, and the
    same command resumes them."""
    from ..runner.guards import world_size_of  # lazy: Lightning, which loading a profile does not need

    prof, out, folder, executor = slurm_executor(profile, out)
    logs = log_folder(out, "slurm")
    chunk_fn = CellChunk(
        out=str(out),
        registry_path=registry_path,
        trainer_args=dict(trainer_args),
        logs=str(logs),
        threads=prof["cpus_per_cell"],
        world_size=world_size_of(dict(trainer_args)),
        fresh=frozenset(cells) if rerun else frozenset(),
        cell_command=prof["cell_command"],
    )
    n = prof["cells_per_job"]
    chunks = [cells[i : i + n] for i in range(0, len(cells), n)]
    limit = len(chunks) if prof["executor"] == "slurm" else (prof["array_parallelism"] or 1)
    progress, reported = Progress(len(cells), limit), set()
    waiting, running, started = list(chunks), [], time.time()

    def submit(batch: list[list[Cell]]) -> None:
        try:
            jobs = executor.map_array(chunk_fn, batch)
        except Exception as exc:  # noqa: BLE001 - sbatch's refusal (unknown partition, ...) in submitit's words
            raise UserError(f"submitting to {prof['executor']} failed: {_one_line(str(exc))}") from None
        running.extend(zip(jobs, batch))
        if prof["executor"] == "slurm":
            what = f"job array {jobs[0].job_id.split('_')[0]} ({len(batch)} jobs" if len(batch) > 1 else f"job {jobs[0].job_id} (1 job"
            log.info(f"submitted {what}, {sum(map(len, batch))} cell(s)); job logs in {folder}, cell logs in {logs}")

    def stop(signum, frame):
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    quiet = logging.getLogger("submitit")  # its job-state polling warns on every hiccup of sacct
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        while waiting or running:
            if waiting and len(running) < limit:
                submit([waiting.pop(0) for _ in range(min(limit - len(running), len(waiting)))])
            for job, chunk in list(running):
                _report_records(chunk, progress, reported, out, chunk_fn.world_size, started)
                if job.done():
                    _report_job(job, chunk, progress, reported)
                    running.remove((job, chunk))
            time.sleep(POLL_S if running else 0)
    except KeyboardInterrupt:
        for job, _ in running:
            job.cancel(check=False)  # scancel: each cell gets SIGTERM and checkpoints
        raise  # the CLI says how to resume
    finally:
        signal.signal(signal.SIGTERM, previous)
        quiet.setLevel(level)
    return progress.failed


def slurm_executor(profile: str | os.PathLike | dict | None, out: Path) -> tuple[dict, Path, Path, object]:
    """For ``--launcher slurm`` (grids and tune workers alike): the loaded profile, ``out``
    resolved, the folder of the jobs' logs and the submitit executor; one line if submitit is missing."""
    try:
        import submitit
    except ImportError:
        raise UserError('--launcher slurm needs submitit: pip install "bench[slurm]"') from None
    prof = load_profile(profile)
    out = Path(out).resolve()
    folder = Path(prof["folder"]).resolve() if prof["folder"] else out / "slurm"
    return prof, out, folder, _executor(submitit, prof, folder)


def _executor(submitit, prof: dict, folder: Path):
    """submitit's SlurmExecutor or LocalExecutor with the profile's parameters (the concrete
    executors, not AutoExecutor: its shared layer takes whole minutes only and hides the local
    executor's signal delay)."""
    try:
        if prof["executor"] == "local":
            executor = submitit.LocalExecutor(folder, max_num_timeout=prof["max_num_timeout"])
            params = {"timeout_min": prof["timeout_min"], "gpus_per_node": prof["gpus_per_cell"], "setup": prof["setup"] or ()}
        else:
            executor = submitit.SlurmExecutor(folder, max_num_timeout=prof["max_num_timeout"])
            params = {
                "time": int(prof["timeout_min"]),
                "gpus_per_node": prof["gpus_per_cell"] or None,
                "ntasks_per_node": 1,
                "cpus_per_task": prof["cpus_per_cell"],
                "mem": f"{int(prof['mem_gb'] * 1024)}MB" if prof["mem_gb"] else None,
                "partition": prof["partition"],
                "account": prof["account"],
                "qos": prof["qos"],
                "constraint": prof["constraint"],
                "job_name": prof["job_name"],
                "setup": prof["setup"],
                "additional_parameters": prof["sbatch"],
                "array_parallelism": prof["array_parallelism"],
            }
        params["signal_delay_s"] = prof["signal_delay_s"]
        executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
    except RuntimeError as exc:  # SlurmExecutor without srun on PATH
        raise UserError(f"--launcher slurm: {exc} (set executor: local in the profile to try it on this machine)") from None
    except ValueError as exc:  # submitit refuses a parameter
        raise UserError(f"slurm profile: submitit refuses it: {_one_line(str(exc))}") from None
    return executor


def _report_records(chunk: list[Cell], progress: Progress, reported: set, out: Path, world_size: int, since: float) -> None:
    """A line for each cell of a still running job whose record was written by this grid."""
    for cell in chunk:
        if cell in reported:
            continue
        path = record_path(out, cell.model, cell.task, cell.preset, cell.seed, list(cell.overrides), world_size)
        try:
            if path.stat().st_mtime < since:
                continue
        except OSError:
            continue
        rec = read_record(path, quiet=True)  # being written, or malformed: looked at again next poll
        if rec.get("status") in ("ok", "failed"):
            reported.add(cell)
            progress.finished(cell, rec["status"] == "ok", rec.get("wall_time_s") or 0.0, rec.get("error", ""))


def _report_job(job, chunk: list[Cell], progress: Progress, reported: set) -> None:
    """Lines for the cells of a finished job not reported yet: from its result, or its failure."""
    try:
        outcomes = {cell: (code, seconds, detail) for cell, code, seconds, detail in job.result()}
        reason = "the job ended before this cell"
    except Exception as exc:  # noqa: BLE001 - submitit's FailedJobError / UncompletedJobError
        outcomes, reason = {}, f"job {job.job_id} failed: {_one_line(str(exc))} (log: {job.paths.stderr})"
    for cell in chunk:
        if cell not in reported:
            code, seconds, detail = outcomes.get(cell, (None, 0.0, reason))
            reported.add(cell)
            progress.finished(cell, code == 0, seconds, detail)


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "(no message)")[:300]


@dataclasses.dataclass
class CellChunk:
    """One array job: train its cells one after another, each as its own ``bench run`` process.

    A submitit Checkpointable: on the requeue signal ``checkpoint`` stops the running cell and
    returns the resubmission (the cells not finished yet, the outcomes so far). Cells of a
    ``--rerun`` grid are in ``fresh``: their record and checkpoints are removed when they start
    (what ``bench run --rerun`` does), so that a requeued job resumes them instead of starting over.
    """

    out: str
    registry_path: str | None
    trainer_args: dict
    logs: str
    threads: int | None
    world_size: int
    fresh: frozenset = frozenset()
    cell_command: str | None = None
    done: tuple = ()  # (cell, exit status, seconds, detail) of cells finished before a requeue

    def __call__(self, cells: list[Cell]) -> list[tuple]:
        self._outcomes, self._proc, self._cleared = list(self.done), None, set()
        Path(self.logs).mkdir(parents=True, exist_ok=True)
        finished = {o[0] for o in self._outcomes}
        for cell in cells:
            if cell not in finished:
                self._outcomes.append(self._train(cell))  # one append: a requeue signal sees it done or not
        return self._outcomes

    def _train(self, cell: Cell) -> tuple:
        from submitit import JobEnvironment

        if cell in self.fresh:
            record = record_path(Path(self.out), cell.model, cell.task, cell.preset, cell.seed, list(cell.overrides), self.world_size)
            record.unlink(missing_ok=True)
            shutil.rmtree(run_folder(record), ignore_errors=True)
            self._cleared.add(cell)
        threads = self.threads or available_cpus()
        argv = cell.argv(Path(self.out), self.registry_path, self.trainer_args, rerun=False) + cell.threads_argv(threads)
        command = shlex.split(self.cell_command) if self.cell_command else [sys.executable, "-m", "bench"]
        log = Path(self.logs) / f"{cell.task}--{cell.model}--seed{cell.seed}.log"
        t0 = time.perf_counter()
        with open(log, "a") as f:
            f.write(f"\n{HEADER}{time.strftime('%Y-%m-%d %H:%M:%S')} job {JobEnvironment().job_id}: {shlex.join(command + argv)}\n")
            f.flush()
            self._proc = subprocess.Popen(
                command + argv, stdout=f, stderr=subprocess.STDOUT, env=_cell_env(), preexec_fn=_ignoring(_requeue_signal())
            )
            try:
                code = self._proc.wait()
            except KeyboardInterrupt:  # the local executor cancels its jobs with SIGINT
                self._proc.send_signal(signal.SIGINT)
                raise
        if code in (130, 143):  # stopped from outside (scancel, preemption): the scheduler ends or requeues us
            time.sleep(SCHEDULER_GRACE_S)
        detail = "" if code == 0 else f"exit status {code}; last line: {_last_line(log)} (log: {log})"
        return (cell, code, time.perf_counter() - t0, detail)

    def checkpoint(self, cells: list[Cell]):
        """submitit calls this on the requeue signal: stop the running cell (bench writes its last
        checkpoint after the current batch) and resubmit what is left."""
        from submitit.helpers import DelayedSubmission

        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # not Popen.wait: the interrupted frame holds its lock
        outcomes = list(getattr(self, "_outcomes", self.done))
        finished = {o[0] for o in outcomes}
        left = dataclasses.replace(self, fresh=self.fresh - getattr(self, "_cleared", set()), done=tuple(outcomes))
        return DelayedSubmission(left, [c for c in cells if c not in finished])

    def __getstate__(self) -> dict:  # the process handles stay behind
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


def _cell_env() -> dict:
    """The cell's environment: inside a SLURM job, Lightning is told the process was not started by
    srun (its documented switch), so it installs no requeue handler of its own; its hint to use
    srun, which does not apply here, is silenced."""
    env = dict(os.environ)
    if "SLURM_JOB_ID" in env:
        env["SLURM_JOB_NAME"] = "interactive"
        hint = "ignore:The `srun` command is available on your system but is not used"
        env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"), hint]))
    return env


def _requeue_signal() -> signal.Signals:
    from submitit import JobEnvironment

    return getattr(signal, "SIG" + JobEnvironment.USR_SIG)  # USR2 unless $SUBMITIT_PREEMPT_SIGNAL says otherwise


def _ignoring(signum: int):
    """Run in the cell process before exec: the requeue signal is the job's (submitit's) to handle;
    by default it would kill the cell before it can checkpoint. An ignored signal stays ignored
    across exec."""
    return lambda: signal.signal(signum, signal.SIG_IGN)


def _last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip() and not ln.startswith(HEADER)]
    return lines[-1].strip() if lines else "(no output)"
