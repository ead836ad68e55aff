"""The checks and guards around one run: its lock, storage errors, the resume checkpoint, whether
its data fits in memory, the world size Lightning will run, and the finished record. Lightning is
imported only where a guard needs it (a run planned with bad input is refused before it loads)."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import torch
from filelock import FileLock, Timeout

from ..config import RunConfig, TrainConfig
from ..errors import UserError
from ..logs import quiet
from ..records import read_record
from ..sizes import CPU_MACS_PER_S, available_memory, check_fits, duration, forward_cost
from .plan import RunPlan

log = logging.getLogger(__name__)


def is_launching_rank() -> bool:
    """Whether this process started the run (the one that locks it): not a rank that Lightning,
    torchrun or srun started for a run on several devices (those share the launcher's lock)."""
    for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK"):
        if os.environ.get(var, "0") not in ("", "0"):
            return False
    return not (int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1 and os.environ.get("SLURM_PROCID", "0") != "0")


class run_lock:
    """The run's lock, held from before its record is read until after it is written; a second
    process waits (saying so once on stderr), then goes on as if started after the first."""

    def __init__(self, plan: RunPlan):
        self.plan, self.lock = plan, None

    def __enter__(self):
        if not is_launching_rank():
            return self
        self.plan.lock.parent.mkdir(parents=True, exist_ok=True)
        self.lock = FileLock(str(self.plan.lock))
        try:
            self.lock.acquire(timeout=0)
        except Timeout:
            log.info(
                f"bench: waiting: another process is running {self.plan.record} (lock {self.plan.lock}); this one goes on when it ends"
            )
            self.lock.acquire()
        return self

    def __exit__(self, *exc):
        if self.lock is not None:
            self.lock.release()
        return False


STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM, errno.EFBIG)


class storage_errors:
    """A full disk or a folder that stopped being writable mid-run, as one line naming the run's
    folder (the checkpoints are written by rename: the last good one is intact)."""

    def __init__(self, plan: RunPlan):
        self.plan, self.trainer = plan, None

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if not isinstance(exc, OSError) or exc.errno not in STORAGE_ERRNOS:
            return False
        from .checkpoint_io import inspect_checkpoint

        last = self.plan.last_ckpt
        step = inspect_checkpoint(last)[0] if last.is_file() else None
        kept = (
            f"the last good checkpoint {last} (step {step}) is kept; run the same command again to resume from it"
            if step is not None
            else "no checkpoint was written yet; run the same command again to start it"
        )
        at = f", at step {self.trainer.global_step}" if self.trainer is not None else ""
        raise UserError(f"cannot write in {self.plan.folder} ({exc.strerror or exc}{at}): make room or make it writable; {kept}") from None


def check_resume_point(plan: RunPlan) -> int | None:
    """The step of the checkpoint the run resumes from (None: none, it starts fresh); a damaged
    one (truncated, not a checkpoint) stops the run here, with nothing changed."""
    from .checkpoint_io import inspect_checkpoint

    if not plan.last_ckpt.is_file():
        return None
    step, problem = inspect_checkpoint(plan.last_ckpt)
    if problem:
        raise UserError(
            f"the resume checkpoint {plan.last_ckpt} is damaged ({problem}); nothing was changed: "
            "pass --rerun to start this run over (its checkpoints are discarded)"
        )
    return step


#: the least memory one token position of a generated split takes: its token and its target as
#: int64 (generation takes more: about 110 bytes per position on parity, in Python lists)
BYTES_PER_TOKEN = 16


def _built_task(config: RunConfig):
    """The task the run will build (constructors only store their settings), or None where its
    settings are refused: the run's own build then says why, in one line."""
    from bench.tasks.base import TaskError

    try:
        return config.task.cls.build(config.task.name, config.task.params)
    except (TaskError, ValueError, TypeError):
        return None


def task_values(config: RunConfig, task=None) -> dict:
    """The task's settings as the run will use them: a setting left None for the constructor to
    fill in (flip-flop's test_lens: [512, 1024]) is read from the built task."""
    values = dict(config.task.values)
    unset = [k for k, v in values.items() if v is None]
    if unset:
        task = task if task is not None else _built_task(config)
        values.update({k: getattr(task, k) for k in unset if task is not None and getattr(task, k, None) is not None})
    return values


def data_estimate(config: RunConfig, task=None) -> tuple[int, int, int]:
    """(bytes, examples, longest length): the least memory generating the largest split
    (n_train, n_val or n_test examples) takes at the longest length any *len* parameter allows;
    splits are generated one at a time. *task*: the built task, where the caller has it."""
    values = task_values(config, task)
    lengths = [
        v
        for key, value in values.items()
        if "len" in key
        for v in (value if isinstance(value, (list, tuple)) else [value])
        if isinstance(v, int) and not isinstance(v, bool)
    ]
    if not lengths:
        return 0, 0, 0
    examples = max([values[k] for k in ("n_train", "n_val", "n_test") if isinstance(values.get(k), int)] or [0])
    return examples * max(lengths) * BYTES_PER_TOKEN, examples, max(lengths)


def check_data_fits(config: RunConfig, task=None) -> None:
    """Refuse, before any data is generated, a sequence length whose data would not fit in memory."""
    need, examples, length = data_estimate(config, task)
    have = available_memory()
    if have is not None and need > have:
        raise UserError(
            f"the data would need at least {need / 2**30:.1f} GiB ({examples:,} examples of up to {length:,} tokens) and "
            f"{have / 2**30:.1f} GiB of memory is available; lower the data's lengths (e.g. data.max_len) or sizes (data.n_train)"
        )


def check_sizes(config: RunConfig, train: TrainConfig, what: str = "the run", on_cpu: bool = True) -> None:
    """Both checks above, before anything is generated or trained, on one build of the task."""
    task = _built_task(config)
    check_data_fits(config, task)
    check_forward_fits(config, train, what, on_cpu, task)


def runs_on_cpu(trainer_kwargs: dict) -> bool:
    """Whether Lightning will run on the CPU: asked for, or 'auto' with no GPU (CUDA or MPS) here."""
    accelerator = str(trainer_kwargs.get("accelerator", "auto")).lower()
    if accelerator != "auto":
        return accelerator == "cpu"
    return not (torch.cuda.is_available() or torch.backends.mps.is_available())


def check_forward_fits(config: RunConfig, train: TrainConfig, what: str = "the run", on_cpu: bool = True, task=None) -> None:
    """Refuse, before any data or training, a batch and length whose forward would not fit in
    memory (training at the longest training length, testing at the longest test length); on
    the CPU, note the work of testing when it is long. *task*: the built task, where the caller
    has it."""
    task = task if task is not None else _built_task(config)
    values, params = task_values(config, task), config.model.params
    tests = [
        v
        for key, value in values.items()
        if key.startswith("test_len")
        for v in (value if isinstance(value, (list, tuple)) else [value])
        if isinstance(v, int) and not isinstance(v, bool)
    ]
    lengths = [
        v
        for key, value in values.items()
        if "len" in key and not key.startswith("test_len")
        for v in (value if isinstance(value, (list, tuple)) else [value])
        if isinstance(v, int) and not isinstance(v, bool)
    ]
    hint = "lower the lengths (data.max_len, data.test_lengths) or the batch (train.batch_size, train.eval_batch_size)"
    if lengths:
        need, _ = forward_cost(params, train.batch_size, max(lengths), training=True)
        check_fits(f"{what}: training a batch of {train.batch_size} at length {max(lengths):,}", need, hint)
    longest = max(tests + lengths, default=0)
    if longest:
        need, macs = forward_cost(params, train.eval_batch_size, longest, training=False)
        check_fits(f"{what}: testing a batch of {train.eval_batch_size} at length {longest:,}", need, hint)
        n_test = values.get("n_test") if isinstance(values.get("n_test"), int) else train.eval_batch_size
        splits = len(task.test_splits()) if task is not None else len(tests)
        total = macs * max(1, -(-n_test // train.eval_batch_size)) * max(1, splits)
        if on_cpu and total / CPU_MACS_PER_S > 120:
            log.info(f"bench: note: testing at length {longest:,} is long work: about {duration(total)} on one CPU core (rough)")


def world_size_of(trainer_kwargs: dict) -> int:
    """The number of processes Lightning will run, without starting them (a Trainer's connector
    resolves 'auto', device lists and nodes exactly as the real run will)."""
    if not any(k in trainer_kwargs for k in ("accelerator", "devices", "num_nodes", "strategy")):
        return 1
    import lightning as L

    try:
        with quiet():  # a probe: no "GPU available: ..." notes
            probe = L.Trainer(
                **{"accelerator": "auto", "devices": 1, **trainer_kwargs},
                logger=False,
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
            )
    except Exception as exc:  # noqa: BLE001 - Lightning's MisconfigurationException, ValueError, ...
        raise trainer_refused(trainer_kwargs, exc) from None
    return probe.world_size


def trainer_refused(trainer_kwargs: dict, exc: Exception) -> UserError:
    """One line for device settings Lightning cannot honour (e.g. --accelerator gpu without a GPU)."""
    given = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in trainer_kwargs.items())
    hint = ""
    if str(trainer_kwargs.get("accelerator", "")) in ("gpu", "cuda") and not torch.cuda.is_available():
        hint = "; torch sees no CUDA device here: leave --accelerator out (or --accelerator cpu) to run on the CPU"
    return UserError(f"{given}: {str(exc).splitlines()[0]}{hint}")


def finished_record(path: Path) -> dict | None:
    rec = read_record(path)  # a malformed record: a warning, and the run starts over
    return rec if rec.get("status") == "ok" else None
