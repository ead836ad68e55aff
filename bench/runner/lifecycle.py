"""One run, in named steps: plan -> build -> fit (resumable) -> test -> record.

    plan      resolve the configuration and the run's folder; every check on user input
              happens here, before anything is written
    build     threads, seed, task data (cached), backbone, LightningModule
    fit       a Lightning Trainer with checkpoints beside the record (best on validation, last at
              every validation and every train.checkpoint_every_min minutes); the same command
              after a kill resumes from the last one
    test      the selected checkpoint (train.select: best_val | last) on every test split
    record    one JSON file, written by global rank 0 only

A run's folder, next to its record ``seed0.json``::

    seed0/ckpt/last.ckpt    resume point (weights, optimizer, LR schedule, callbacks, RNG, data position)
    seed0/ckpt/best.ckpt    best-on-validation weights
    seed0/metrics.csv       one row per validation (CSVLogger)
    .seed0.lock             held while a process works on the run (beside the record)

After a run finishes only the tested checkpoint and the curve are kept. The record names its
checkpoint relative to its own folder (``seed0/ckpt/best.ckpt``): a copied or moved results tree
uses its own checkpoints.

One run, one process at a time: the run's lock (``filelock``; released by the kernel when its
holder dies) is taken after planning. A second ``bench run`` of the same run waits for the
first, says so on stderr, and then finds its record finished (or resumes the checkpoint the
first left when it was stopped): it never trains the run twice nor resumes a live checkpoint,
so ``resumed_from`` lists real interruptions only. A SLURM requeue starts after the old job's
process has ended, so it takes the lock at once.

Failures are one line: a damaged resume checkpoint is found before anything is changed (the
run stops and says to pass --rerun); a full disk or a folder that turned read-only mid-run stops
the run with the folder named, the last good checkpoint intact (checkpoints are written by
rename), and the same command resumes from it.
"""
from __future__ import annotations

import contextlib
import csv
import errno
import importlib.util
import logging
import math
import os
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import lightning as L
import torch
from filelock import FileLock, Timeout
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from bench.tasks.base import TaskError

from ..config import RunConfig, resolve_run
from ..data import DATA_ENV, TaskData, cache_root
from ..cpus import default_threads
from ..errors import RunFailed, UserError
from ..logs import quiet
from ..records import (base_record, config_changes, device_info, ensure_writable, read_record, record_path, relative_checkpoint,
                       run_folder, write_json_atomic)
from .build import _registry, check_attention_backend, instantiate_model, instantiate_task
from .callbacks import GracefulStop, LineProgress, RNGState, RunInterrupted, ValidationHistory
from .checkpoint_io import AtomicCheckpointIO, inspect_checkpoint
from .module import TaskModule

__all__ = ["run", "RunInterrupted"]
log = logging.getLogger(__name__)

_QUIET_WARNINGS = (".*does not have many workers.*", ".*deterministic.*", ".*number of training batches.*", ".*LeafSpec.*",
                   ".*litlogger.*", ".*Checkpoint directory.*exists and is not empty.*", ".*Experiment logs directory.*",
                   ".*resuming from a checkpoint that ended before the epoch ended.*", ".*on_validation_end.*",
                   ".*sync_dist=True.*", ".*`srun` command is available.*")  # logged values are already gathered or reduced over ranks


@dataclass(frozen=True)
class RunPlan:
    model: str
    task: str
    preset: str
    seed: int
    overrides: list | dict | None
    config: RunConfig
    record: Path
    trainer_kwargs: dict
    world_size: int

    @property
    def train(self) -> dict:
        return self.config.train

    @property
    def folder(self) -> Path:
        return run_folder(self.record)

    @property
    def last_ckpt(self) -> Path:
        return self.folder / "ckpt" / "last.ckpt"

    @property
    def best_ckpt(self) -> Path:
        return self.folder / "ckpt" / "best.ckpt"

    @property
    def lock(self) -> Path:
        return self.record.parent / f".{self.record.stem}.lock"


def run(model: str, task: str, preset: str = "small", seed: int = 0, out: str | os.PathLike = "out",
        overrides: list[str] | dict | None = None, registry=None, trainer_kwargs: dict | None = None,
        progress: bool | str = "auto", logger: str = "csv", rerun: bool = False, callbacks: list | None = None,
        on_start=None) -> dict:
    """Train ``model`` on ``task`` (resuming from its last checkpoint when one exists), test the
    selected weights on every test split, write one JSON record and return it. A finished run
    (a record with status ok) is returned as it is, unless ``rerun``. Bad input raises UserError
    before anything is written; SIGINT / SIGTERM raise RunInterrupted after a checkpoint.
    ``on_start(plan)`` is called once everything is checked and built, just before training
    (the CLI names the run and its preset there)."""
    with quiet(), warnings.catch_warnings():  # Lightning's INFO lines and known warnings, for this run only
        for pattern in _QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern)
        try:
            return _run(model, task, preset, seed, out, overrides, registry, trainer_kwargs, progress, logger, rerun, callbacks, on_start)
        finally:
            if logger == "wandb":
                finish_wandb()


def finish_wandb() -> None:
    """End the run's W&B run now (not at exit), its closing notes on stderr: stdout holds results."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        with contextlib.redirect_stdout(sys.stderr):
            wandb.finish()


def _run(model, task, preset, seed, out, overrides, registry, trainer_kwargs, progress, logger, rerun, callbacks, on_start) -> dict:
    check_logger(logger)
    plan = plan_run(model, task, preset, seed, out, overrides, registry, trainer_kwargs)
    done = finished_record(plan.record)
    if done is not None and not rerun and not config_changes(done.get("config"), plan.config.public()):
        return {**done, "path": str(plan.record), "skipped": True}  # finished: nothing to build or lock
    built = build(plan)  # before the lock: a bad model or an unwritable data cache stops here, with nothing written
    with run_lock(plan):
        return _run_locked(plan, built, progress, logger, rerun, callbacks, on_start)


def _run_locked(plan: RunPlan, built, progress, logger, rerun, callbacks, on_start) -> dict:
    done = finished_record(plan.record)  # again: another process may have finished it while this one waited
    changed = config_changes(done.get("config"), plan.config.public()) if done else None
    if changed and not rerun:  # the registry changed since: the record is not this cell's result any more
        log.warning(f"bench: {plan.record} was made with other settings ({changed}); training it again")
        rerun = True
    if done is not None and not rerun:
        return {**done, "path": str(plan.record), "skipped": True}
    start_over = rerun or (plan.record.exists() and done is None)  # a rerun, or after a failed run
    if not start_over:
        check_resume_point(plan)
    task_obj, data, module = built
    if start_over:
        shutil.rmtree(plan.folder, ignore_errors=True)
    with storage_errors(plan) as storage:
        trainer = storage.trainer = make_trainer(plan, task_obj, data, progress, logger, callbacks or [])
        check_attention_backend(plan.config.model.params, trainer.strategy.root_device)
        if on_start is not None:
            on_start(plan)
        record = base_record(plan.model, plan.task, plan.preset, plan.seed, plan.overrides)
        record.update({"status": "running", "config": plan.config.public(), "param_count": sum(p.numel() for p in module.parameters()),
                       "primary_metric": task_obj.metric, "report_metrics": list(task_obj.report_metrics)})
        t0 = time.perf_counter()
        try:
            fit(plan, trainer, module, data)
        except RunFailed as exc:
            record.update({"status": "failed", "error": str(exc), "steps_run": trainer.global_step, "wall_time_s": time.perf_counter() - t0,
                           "device": device_info(trainer)})
            return write_record(plan, trainer, record)
        tested = test(plan, trainer, module, data, task_obj)
        record.update(summarize(plan, trainer, module, tested, wall=time.perf_counter() - t0))
        record = write_record(plan, trainer, record)
        keep_only_tested_checkpoint(plan, trainer)
    return record


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
            log.info(f"bench: waiting: another process is running {self.plan.record} (lock {self.plan.lock}); "
                     "this one goes on when it ends")
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
        last = self.plan.last_ckpt
        step = inspect_checkpoint(last)[0] if last.is_file() else None
        kept = (f"the last good checkpoint {last} (step {step}) is kept; run the same command again to resume from it"
                if step is not None else "no checkpoint was written yet; run the same command again to start it")
        at = f", at step {self.trainer.global_step}" if self.trainer is not None else ""
        raise UserError(f"cannot write in {self.plan.folder} ({exc.strerror or exc}{at}): "
                        f"make room or make it writable; {kept}") from None


def check_resume_point(plan: RunPlan) -> int | None:
    """The step of the checkpoint the run resumes from (None: none, it starts fresh); a damaged
    one (truncated, not a checkpoint) stops the run here, with nothing changed."""
    if not plan.last_ckpt.is_file():
        return None
    step, problem = inspect_checkpoint(plan.last_ckpt)
    if problem:
        raise UserError(f"the resume checkpoint {plan.last_ckpt} is damaged ({problem}); nothing was changed: "
                        "pass --rerun to start this run over (its checkpoints are discarded)")
    return step


# ---- plan ------------------------------------------------------------------------------------
def plan_run(model, task, preset, seed, out, overrides, registry, trainer_kwargs) -> RunPlan:
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise UserError(f"seed must be a whole number from 0 to 4294967295, got {seed!r}")
    config = resolve_run(_registry(registry), model, task, preset, overrides)
    kwargs = dict(trainer_kwargs or {})
    world = world_size_of(kwargs)
    check_data_fits(config)
    path = record_path(Path(out), model, task, preset, seed, overrides, world)
    ensure_writable(Path(out))
    return RunPlan(model, task, preset, seed, overrides, config, path, kwargs, world)


#: the least memory one token position of a generated split takes: its token and its target as
#: int64 (generation takes more: about 110 bytes per position on parity, in Python lists)
BYTES_PER_TOKEN = 16


def available_memory() -> int | None:
    """Bytes of memory this machine can still give (MemAvailable); None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def data_estimate(config: RunConfig) -> tuple[int, int, int]:
    """(bytes, examples, longest length): the least memory generating the largest split
    (n_train, n_val or n_test examples) takes at the longest length any *len* parameter allows;
    splits are generated one at a time."""
    values = config.task.values
    lengths = [v for key, value in values.items() if "len" in key
               for v in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(v, int) and not isinstance(v, bool)]
    if not lengths:
        return 0, 0, 0
    examples = max([values[k] for k in ("n_train", "n_val", "n_test") if isinstance(values.get(k), int)] or [0])
    return examples * max(lengths) * BYTES_PER_TOKEN, examples, max(lengths)


def check_data_fits(config: RunConfig) -> None:
    """Refuse, before any data is generated, a sequence length whose data would not fit in memory."""
    need, examples, length = data_estimate(config)
    have = available_memory()
    if have is not None and need > have:
        raise UserError(f"the data would need at least {need / 2**30:.1f} GiB ({examples:,} examples of up to {length:,} tokens) and "
                        f"{have / 2**30:.1f} GiB of memory is available; lower the data's lengths (e.g. data.max_len) or sizes (data.n_train)")


def world_size_of(trainer_kwargs: dict) -> int:
    """The number of processes Lightning will run, without starting them (a Trainer's connector
    resolves 'auto', device lists and nodes exactly as the real run will)."""
    if not any(k in trainer_kwargs for k in ("accelerator", "devices", "num_nodes", "strategy")):
        return 1
    try:
        with quiet():  # a probe: no "GPU available: ..." notes
            probe = L.Trainer(**{"accelerator": "auto", "devices": 1, **trainer_kwargs}, logger=False, enable_checkpointing=False,
                              enable_progress_bar=False, enable_model_summary=False)
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


# ---- build -----------------------------------------------------------------------------------
def build(plan: RunPlan):
    train = plan.train
    torch.set_num_threads(train["num_threads"] or default_threads())
    L.seed_everything(plan.seed, workers=True, verbose=False)
    task_obj = instantiate_task(plan.config.task)
    unknown = [s for s in train["watch_splits"] if s not in task_obj.test_splits()]
    if unknown:
        raise UserError(f"train.watch_splits: {plan.task!r} has no test split {unknown[0]!r}; "
                        f"its test splits are {', '.join(task_obj.test_splits())}")
    try:
        data = TaskData(task_obj, train["batch_size"], train["eval_batch_size"], plan.seed)
    except TaskError as exc:
        raise UserError(f"task {plan.task!r}: {exc}") from None
    except OSError as exc:  # the data cache cannot be created or written
        raise UserError(f"the data cache {cache_root()} cannot be written ({exc.strerror or exc}); "
                        f"set ${DATA_ENV} to a writable folder") from None
    backbone = instantiate_model(plan.config.model, task_obj.vocab_size)
    if train["compile"]:
        from torch import _dynamo

        _dynamo.config.allow_rnn = True  # LSTM/GRU layers trace into the graph (docs/perf.md)
        backbone.compile()  # in place: parameter names (and so checkpoints) stay those of the eager module
    batches = math.ceil(math.ceil(len(data.splits["train"]) / plan.world_size) / train["batch_size"])  # per rank
    steps_per_epoch = math.ceil(batches / train["accumulate_grad_batches"])
    first_val = train["val_every_steps"] or steps_per_epoch
    if train["max_steps"] not in (-1, None) and train["max_steps"] < first_val:
        raise UserError(f"train.max_steps={train['max_steps']} ends before the first validation (step {first_val}); "
                        f"raise train.max_steps or set train.val_every_steps <= {train['max_steps']}")
    return task_obj, data, TaskModule(backbone, task_obj, train, steps_per_epoch=steps_per_epoch)


def make_trainer(plan: RunPlan, task_obj, data: TaskData, progress, logger: str, extra_callbacks: list) -> L.Trainer:
    train = plan.train
    ckpt_dir = str(plan.last_ckpt.parent)
    # every validation's checkpoints are written when it ends (not at the end of the training
    # epoch), so a stop right after a validation resumes from that validation
    at_validation = dict(save_on_train_epoch_end=False, enable_version_counter=False)
    callbacks = [ValidationHistory(task_obj.metric), RNGState(), *extra_callbacks,
                 ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor="val_metric", mode="max", save_top_k=1,
                                 save_weights_only=True, **at_validation),
                 ModelCheckpoint(dirpath=ckpt_dir, filename="last", **at_validation),
                 ModelCheckpoint(dirpath=ckpt_dir, filename="last", enable_version_counter=False,
                                 train_time_interval=timedelta(minutes=train["checkpoint_every_min"])),
                 GracefulStop(str(plan.last_ckpt))]  # after the ModelCheckpoints (see its docstring)
    if train["patience"]:
        callbacks.append(EarlyStopping(monitor="val_metric", mode="max", patience=train["patience"], check_on_train_epoch_end=False))
    on_terminal = sys.stdout.isatty() and sys.stderr.isatty()
    mode = ("bar" if on_terminal else "lines") if progress in ("auto", True) else (progress or "none")
    if mode == "lines":  # logged to bench.progress (the CLI writes it to stderr, as every note: stdout has the results only)
        callbacks.append(LineProgress(task_obj.metric, every_s=60 * train["progress_every_min"]))
    kwargs = dict(
        max_epochs=train["max_epochs"], max_steps=train["max_steps"], gradient_clip_val=train["grad_clip"] or None,
        accumulate_grad_batches=train["accumulate_grad_batches"], precision=train["precision"],
        deterministic="warn" if train["deterministic"] else False, callbacks=callbacks, logger=make_loggers(plan, logger),
        plugins=[AtomicCheckpointIO()], enable_progress_bar=mode == "bar", enable_model_summary=False, num_sanity_val_steps=0,
        accelerator="auto", devices=1, use_distributed_sampler=False, default_root_dir=str(plan.folder), log_every_n_steps=1,
    )
    if train["val_every_steps"]:
        kwargs.update(val_check_interval=train["val_every_steps"], check_val_every_n_epoch=None)
    kwargs.update(plan.trainer_kwargs)
    try:
        return L.Trainer(**kwargs)
    except Exception as exc:  # noqa: BLE001 - Lightning's MisconfigurationException, ValueError, ...
        raise trainer_refused(plan.trainer_kwargs, exc) from None


#: --logger choices; csv and tensorboard come with Lightning, the others are optional extras
LOGGERS = ("csv", "tensorboard", "wandb", "mlflow", "none")
#: the package each logger needs (any of them) and how to install it
LOGGER_PACKAGES = {"tensorboard": (("tensorboard", "tensorboardX"), "pip install tensorboard"),
                   "wandb": (("wandb",), 'pip install "bench[wandb]"'), "mlflow": (("mlflow",), 'pip install "bench[mlflow]"')}


def check_logger(kind: str) -> None:
    """Refuse, before anything is written, a logger that is unknown or whose package is missing."""
    if kind not in LOGGERS:
        raise UserError(f"--logger {kind!r}: choose {', '.join(LOGGERS[:-1])} or none")
    if kind in LOGGER_PACKAGES:
        packages, install = LOGGER_PACKAGES[kind]
        if all(importlib.util.find_spec(package) is None for package in packages):
            raise UserError(f"--logger {kind} needs the {packages[0]} package ({install}); or use --logger csv")


def make_loggers(plan: RunPlan, kind: str) -> list:
    """CSV (one row per validation) by default, and beside it TensorBoard, Weights & Biases or
    MLflow with ``--logger tensorboard|wandb|mlflow``. Nothing leaves the machine unless asked:
    W&B runs offline (files under the run's folder, ``wandb sync`` uploads them) unless
    $WANDB_MODE says otherwise; MLflow writes a local file store under the run's folder
    (``mlruns/``) unless $MLFLOW_TRACKING_URI names another. A resumed run keeps the CSV rows up to
    its checkpoint (CSVLogger itself would delete the file)."""
    check_logger(kind)
    if kind == "none":
        return []
    curve = plan.folder / "metrics.csv"
    kept = []
    resume_step = inspect_checkpoint(plan.last_ckpt)[0] if curve.is_file() and plan.last_ckpt.is_file() else None
    if resume_step is not None:
        with open(curve, newline="") as f:
            kept = [row for row in csv.DictReader(f) if int(float(row.get("step") or 0)) <= resume_step]
    csv_logger = CSVLogger(save_dir=str(plan.folder), name="", version="")
    if kept:
        csv_logger.experiment.metrics.extend(kept)
    loggers = [csv_logger]
    name = f"{plan.model}-{plan.task}-{plan.preset}-{plan.record.stem}"  # e.g. transformer-parity-smoke-seed0
    if kind == "tensorboard":
        loggers.append(TensorBoardLogger(save_dir=str(plan.folder), name="", version="tensorboard"))
    elif kind == "wandb":
        from lightning.pytorch.loggers import WandbLogger

        import wandb

        offline = not os.environ.get("WANDB_MODE")  # the user's WANDB_MODE wins; else nothing is sent
        loggers.append(WandbLogger(name=name, project=os.environ.get("WANDB_PROJECT") or "bench", save_dir=str(plan.folder),
                                   offline=offline, config=plan.config.public(),
                                   settings=wandb.Settings(quiet=True)))  # its notes stay off stdout, which holds results
    elif kind == "mlflow":
        from lightning.pytorch.loggers import MLFlowLogger

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # a local file store in the run's folder (file:///.../mlruns); MLflow >= 3.7 wants it allowed
            uri = (plan.folder / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        loggers.append(MLFlowLogger(experiment_name=os.environ.get("MLFLOW_EXPERIMENT_NAME") or "bench", run_name=name,
                                    tracking_uri=uri))
    return loggers


# ---- fit and test ----------------------------------------------------------------------------
def fit(plan: RunPlan, trainer: L.Trainer, module: TaskModule, data: TaskData) -> None:
    train_loader = data.train_loader()
    # the loader's checkpointed position is the trainer's own count (Lightning prefetches a batch)
    train_loader.position = lambda: (trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_progress.current.processed)
    resume = str(plan.last_ckpt) if plan.last_ckpt.is_file() else None
    try:
        val_loaders = [data.eval_loader(s) for s in ["val", *plan.train["watch_splits"]]]  # index 0 selects
        trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loaders, ckpt_path=resume)
    except torch.OutOfMemoryError as exc:
        raise UserError(f"out of memory at step {trainer.global_step} with train.batch_size={plan.train['batch_size']} "
                        f"({str(exc).splitlines()[0]}); lower train.batch_size or the model size") from None
    if not next(c for c in trainer.callbacks if isinstance(c, ValidationHistory)).entries:
        raise UserError("training ran no validation; raise train.max_epochs / train.max_steps")
    trainer.save_checkpoint(str(plan.last_ckpt))  # the final weights (train.select=last tests these)


def test(plan: RunPlan, trainer: L.Trainer, module: TaskModule, data: TaskData, task_obj) -> dict:
    """The selected checkpoint on validation and on every test split."""
    ckpt = plan.best_ckpt if plan.train["select"] == "best_val" else plan.last_ckpt
    splits = ["val", *task_obj.test_splits()]
    trainer.test(module, dataloaders=[data.eval_loader(s) for s in splits], ckpt_path=str(ckpt), verbose=False)
    return {split: module.last_eval[i] for i, split in enumerate(splits)}


# ---- record ----------------------------------------------------------------------------------
def summarize(plan: RunPlan, trainer: L.Trainer, module: TaskModule, tested: dict, wall: float) -> dict:
    history = next(c for c in trainer.callbacks if isinstance(c, ValidationHistory))
    best = history.best()
    tokens = int(trainer.strategy.reduce(torch.tensor(float(module.train_tokens), device=module.device), reduce_op="sum"))
    return {
        "status": "ok",
        "metrics": tested,
        "test_splits": [s for s in tested if s != "val"],
        "select": plan.train["select"],
        "best_epoch": best["epoch"], "best_step": best["step"], "best_val": best[history.metric],
        "last_val": history.entries[-1][history.metric],
        "val_history": history.entries,
        "learned": module.backbone.learned(),  # e.g. RSA gates and REM parameters of the tested weights
        "epochs_run": trainer.current_epoch, "steps_run": trainer.global_step,
        "resumed_from": module.resumed_from,
        "wall_time_s": wall,  # this session's; train_time_s adds up every session of the run
        "train_time_s": module.train_time_s,
        "train_tokens": tokens,
        "train_tokens_per_s": tokens / module.train_time_s if module.train_time_s else None,
        "device": device_info(trainer),
        "world_size": trainer.world_size,
        "checkpoint": relative_checkpoint(plan.record, plan.best_ckpt if plan.train["select"] == "best_val" else plan.last_ckpt),
    }


def write_record(plan: RunPlan, trainer: L.Trainer, record: dict) -> dict:
    if trainer.is_global_zero:
        write_json_atomic(plan.record, record)
    return {**record, "path": str(plan.record), "rank": trainer.global_rank}


def keep_only_tested_checkpoint(plan: RunPlan, trainer: L.Trainer) -> None:
    trainer.strategy.barrier()
    if trainer.is_global_zero:
        other = plan.last_ckpt if plan.train["select"] == "best_val" else plan.best_ckpt
        other.unlink(missing_ok=True)
