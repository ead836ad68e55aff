"""One run, in named steps: plan -> build -> fit (resumable) -> test -> record.

    plan      resolve the configuration and the run's folder; every check on user input
              happens here, before anything is written and before Lightning is loaded
              (bench/runner/planning.py)
    build     threads, seed, task data (cached), backbone, LightningModule
    fit       a Lightning Trainer with checkpoints beside the record (best on validation, last at
              every validation and every train.checkpoint_every_min minutes); the same command
              after a kill resumes from the last one
    test      the selected checkpoint (train.select: best_val | last) on every test split
    record    one JSON file and the per-example outcomes beside it, written by global rank 0 only

A run's folder, next to its record ``seed0.json``::

    seed0/ckpt/last.ckpt    resume point (weights, optimizer, LR schedule, callbacks, RNG, data position)
    seed0/ckpt/best.ckpt    best-on-validation weights
    seed0/metrics.csv       one row per validation (CSVLogger)
    seed0/outcomes.npz      per-example outcomes of the test phase, every split (bench.load_outcomes)
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

import logging
import math
import os
import shutil
import time
import warnings

import lightning as L
import torch

from bench.tasks.base import TaskError

from ..cpus import default_threads
from ..data import DATA_ENV, TaskData, cache_root
from ..errors import RunFailed, UserError
from ..logs import quiet
from ..metrics import write_outcomes
from ..records import base_record, config_changes, device_info, outcomes_file, relative_checkpoint, write_json_atomic
from .build import check_attention_backend, instantiate_model, instantiate_task
from .callbacks import RunInterrupted, TrialPruning, ValidationHistory, signals_stop
from .guards import check_resume_point, finished_record, run_lock, storage_errors
from .health import losses_of, troubles
from .module import TaskModule
from .plan import RunPlan
from .planning import check_logger, plan_run
from .stream_state import longest_test_length, state_of
from .trainer import finish_wandb, make_trainer  # make_trainer: looked up here (tests wrap it)

__all__ = ["RunInterrupted", "RunPlan", "plan_run", "run", "run_plan"]
log = logging.getLogger(__name__)

_QUIET_WARNINGS = (
    ".*does not have many workers.*",
    ".*deterministic.*",
    ".*number of training batches.*",
    ".*LeafSpec.*",
    ".*litlogger.*",
    ".*Checkpoint directory.*exists and is not empty.*",
    ".*Experiment logs directory.*",
    ".*resuming from a checkpoint that ended before the epoch ended.*",
    ".*on_validation_end.*",
    ".*sync_dist=True.*",
    ".*`srun` command is available.*",
)  # logged values are already gathered or reduced over ranks


def run(
    model: str,
    task: str,
    preset: str = "small",
    seed: int = 0,
    out: str | os.PathLike = "out",
    overrides: list[str] | dict | None = None,
    registry=None,
    trainer_kwargs: dict | None = None,
    progress: bool | str = "auto",
    logger: str = "csv",
    rerun: bool = False,
    callbacks: list | None = None,
    on_start=None,
) -> dict:
    """Train ``model`` on ``task`` (resuming from its last checkpoint when one exists), test the
    selected weights on every test split, write one JSON record and return it: ``plan_run``, then
    ``run_plan``. Bad input raises UserError before anything is written."""
    check_logger(logger)
    plan = plan_run(model, task, preset, seed, out, overrides, registry, trainer_kwargs)
    return run_plan(plan, progress=progress, logger=logger, rerun=rerun, callbacks=callbacks, on_start=on_start)


def run_plan(
    plan: RunPlan, progress: bool | str = "auto", logger: str = "csv", rerun: bool = False, callbacks: list | None = None, on_start=None
) -> dict:
    """Carry out a planned run: a finished run (a record with status ok, made with the settings
    the plan resolves) is returned as it is, unless ``rerun``; otherwise build, fit, test and
    record. SIGINT / SIGTERM raise RunInterrupted after a checkpoint. ``on_start(plan)`` is called
    once everything is checked and built, just before training (the CLI names the run there). The
    process's torch thread count is the caller's again afterwards."""
    threads = torch.get_num_threads()  # the caller's, given back after the run (build sets train.num_threads)
    with quiet(), warnings.catch_warnings():  # Lightning's INFO lines and known warnings, for this run only
        for pattern in _QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern)
        try:
            done = finished_record(plan.record)
            if done is not None and not rerun and not config_changes(done.get("config"), plan.config.public()):
                return {**done, "path": str(plan.record), "skipped": True}  # finished: nothing to build or lock
            built = build(plan)  # before the lock: a bad model or an unwritable data cache stops here, with nothing written
            with run_lock(plan):
                return _run_locked(plan, built, progress, logger, rerun, callbacks, on_start)
        finally:
            torch.set_num_threads(threads)
            if logger == "wandb":
                finish_wandb()


def _run_locked(plan: RunPlan, built, progress, logger, rerun, callbacks, on_start) -> dict:
    done = finished_record(plan.record)  # again: another process may have finished it while this one waited
    changed = config_changes(done.get("config"), plan.config.public()) if done else None
    if changed and not rerun:  # the registry changed since: the record is not this cell's result any more
        log.warning(f"bench: {plan.record} was made with other settings ({changed}); training it again")
        rerun = True
    if done is not None and not rerun:
        return {**done, "path": str(plan.record), "skipped": True}
    start_over = rerun or (plan.record.exists() and done is None)  # a rerun, or after a failed run
    step = None
    if not start_over and (step := check_resume_point(plan)) is not None:
        log.info(f"bench: resuming {plan.model} on {plan.task} (seed {plan.seed}) from step {step}: {plan.last_ckpt}")
    task_obj, data, module = built
    if start_over:
        shutil.rmtree(plan.folder, ignore_errors=True)
    with storage_errors(plan) as storage:
        trainer = storage.trainer = make_trainer(plan, task_obj, data, progress, logger, callbacks or [])
        check_attention_backend(plan.config.model, trainer.strategy.root_device)
        if on_start is not None:
            on_start(plan)
        if progress not in ("none", False, None) and trainer.is_global_zero:
            say_estimate(plan, module, data, trainer.strategy.root_device, step)
        record = base_record(plan.model, plan.task, plan.preset, plan.seed, plan.overrides)
        record.update(
            {
                "status": "running",
                "config": plan.config.public(),
                "param_count": sum(p.numel() for p in module.parameters()),
                "primary_metric": task_obj.metric,
                "report_metrics": list(task_obj.report_metrics),
            }
        )
        t0 = time.perf_counter()
        try:
            fit(plan, trainer, module, data)
        except RunFailed as exc:
            record.update(
                {
                    "status": "failed",
                    "error": str(exc),
                    "steps_run": trainer.global_step,
                    "wall_time_s": time.perf_counter() - t0,
                    "device": device_info(trainer),
                }
            )
            return write_record(plan, trainer, record)
        if pruned_at(trainer) is not None:
            return write_pruned(plan, trainer, module, record, wall=time.perf_counter() - t0)
        tested, outcomes = test(plan, trainer, module, data, task_obj)
        record.update(summarize(plan, trainer, module, tested, wall=time.perf_counter() - t0))
        record["stream_state"] = stream_state(plan, task_obj)
        record = write_record(plan, trainer, record, outcomes)
        keep_only_tested_checkpoint(plan, trainer)
    return record


def say_estimate(plan: RunPlan, module: TaskModule, data: TaskData, device: torch.device, resume_step: int | None) -> None:
    """The run's size and time from a timed step (bench/runner/estimate.py), one line to
    ``bench.progress`` before training; a step that cannot be timed is a note, never the run's failure."""
    from .estimate import estimate, estimate_line

    try:
        est = estimate(module, data, plan.train, device, resume_step or 0)
    except Exception as exc:  # noqa: BLE001 - the estimate is a courtesy: the run goes on without it
        logging.getLogger("bench.progress").info(f"bench: no time estimate ({type(exc).__name__}: {str(exc)[:120]})")
        return
    logging.getLogger("bench.progress").info(estimate_line(est, plan.preset, resumed=bool(resume_step)))


# ---- build -----------------------------------------------------------------------------------
def build(plan: RunPlan):
    train = plan.train
    torch.set_num_threads(train.num_threads or default_threads())
    L.seed_everything(plan.seed, workers=True, verbose=False)
    task_obj = instantiate_task(plan.config.task)
    unknown = [s for s in train.watch_splits if s not in task_obj.test_splits()]
    if unknown:
        raise UserError(
            f"train.watch_splits: {plan.task!r} has no test split {unknown[0]!r}; its test splits are {', '.join(task_obj.test_splits())}"
        )
    try:
        data = TaskData(task_obj, train.batch_size, train.eval_batch_size, plan.seed)
    except TaskError as exc:
        raise UserError(f"task {plan.task!r}: {exc}") from None
    except (ValueError, ZeroDivisionError, IndexError) as exc:  # a generator that cannot use its parameters
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UserError(
            f"task {plan.task!r} cannot generate its data with these parameters ({type(exc).__name__}: {text}); see bench explain for them"
        ) from None
    except OSError as exc:  # the data cache cannot be created or written
        raise UserError(
            f"the data cache {cache_root()} cannot be written ({exc.strerror or exc}); set ${DATA_ENV} to a writable folder"
        ) from None
    backbone = instantiate_model(plan.config.model, task_obj.vocab_size)
    if train.compile:
        from torch import _dynamo

        _dynamo.config.allow_rnn = True  # LSTM/GRU layers trace into the graph (docs/perf.md)
        backbone.compile()  # in place: parameter names (and so checkpoints) stay those of the eager module
    batches = math.ceil(math.ceil(len(data.splits["train"]) / plan.world_size) / train.batch_size)  # per rank
    steps_per_epoch = math.ceil(batches / train.accumulate_grad_batches)
    first_val = train.val_every_steps or steps_per_epoch
    if train.max_steps not in (-1, None) and train.max_steps < first_val:
        raise UserError(
            f"train.max_steps={train.max_steps} ends before the first validation (step {first_val}); "
            f"raise train.max_steps or set train.val_every_steps <= {train.max_steps}"
        )
    return task_obj, data, TaskModule(backbone, task_obj, train, steps_per_epoch=steps_per_epoch)


# ---- fit and test ----------------------------------------------------------------------------
def fit(plan: RunPlan, trainer: L.Trainer, module: TaskModule, data: TaskData) -> None:
    train_loader = data.train_loader()
    # the loader's checkpointed position is the trainer's own count (Lightning prefetches a batch)
    train_loader.position = lambda: (trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_progress.current.processed)
    resume = str(plan.last_ckpt) if plan.last_ckpt.is_file() else None
    try:
        val_loaders = [data.eval_loader(s) for s in ["val", *plan.train.watch_splits]]  # index 0 selects
        with signals_stop(trainer, str(plan.last_ckpt)):
            trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loaders, ckpt_path=resume)
    except torch.OutOfMemoryError as exc:
        raise UserError(
            f"out of memory at step {trainer.global_step} with train.batch_size={plan.train.batch_size} "
            f"({str(exc).splitlines()[0]}); lower train.batch_size or the model size"
        ) from None
    if not next(c for c in trainer.callbacks if isinstance(c, ValidationHistory)).entries:
        raise UserError("training ran no validation; raise train.max_epochs / train.max_steps")
    trainer.save_checkpoint(str(plan.last_ckpt))  # the final weights (train.select=last tests these)


def test(plan: RunPlan, trainer: L.Trainer, module: TaskModule, data: TaskData, task_obj) -> tuple[dict, dict]:
    """The selected checkpoint on validation and on every test split: (metrics, per-example outcomes) by split."""
    ckpt = plan.best_ckpt if plan.train.select == "best_val" else plan.last_ckpt
    splits = ["val", *task_obj.test_splits()]
    with signals_stop(trainer, str(plan.last_ckpt)):  # training is over: the same command only tests again
        trainer.test(module, dataloaders=[data.eval_loader(s) for s in splits], ckpt_path=str(ckpt), verbose=False)
    return (
        {split: data.with_chance(split, module.last_eval[i]) for i, split in enumerate(splits)},
        {split: module.last_outcomes[i] for i, split in enumerate(splits)},
    )


# ---- record ----------------------------------------------------------------------------------
def summarize(plan: RunPlan, trainer: L.Trainer, module: TaskModule, tested: dict, wall: float) -> dict:
    history = next(c for c in trainer.callbacks if isinstance(c, ValidationHistory))
    best = history.best()
    tokens = int(trainer.strategy.reduce(torch.tensor(float(module.train_tokens), device=module.device), reduce_op="sum"))
    return {
        "status": "ok",
        "metrics": tested,
        "test_splits": [s for s in tested if s != "val"],
        "select": plan.train.select,
        "best_epoch": best["epoch"],
        "best_step": best["step"],
        "best_val": best[history.metric],
        "last_val": history.entries[-1][history.metric],
        "val_history": history.entries,
        "learned": module.backbone.learned(),  # e.g. RSA gates and REM parameters of the tested weights
        "trouble": troubles(tested, losses_of(curve_rows(trainer))),  # collapsed, diverged or stuck (health.py)
        "epochs_run": trainer.current_epoch,
        "steps_run": trainer.global_step,
        "resumed_from": module.resumed_from,
        "wall_time_s": wall,  # this session's; train_time_s adds up every session of the run
        "train_time_s": module.train_time_s,
        "val_time_s": module.val_time_s,
        "test_time_s": module.test_time_s,  # this session's, within wall_time_s
        "train_tokens": tokens,
        "train_tokens_per_s": tokens / module.train_time_s if module.train_time_s else None,
        "device": device_info(trainer),
        "world_size": trainer.world_size,
        "checkpoint": relative_checkpoint(plan.record, plan.best_ckpt if plan.train.select == "best_val" else plan.last_ckpt),
        "outcomes": relative_checkpoint(plan.record, outcomes_file(plan.record)),
    }


def curve_rows(trainer: L.Trainer) -> list[dict]:
    """The rows the run's CSV logger holds (one per validation: train_loss, val_metric, ...); on
    global rank 0, the one that writes the record (the other ranks' loggers are stand-ins): [] elsewhere."""
    from lightning.pytorch.loggers import CSVLogger

    if not trainer.is_global_zero:
        return []
    return next((list(lg.experiment.metrics) for lg in trainer.loggers if isinstance(lg, CSVLogger)), [])


def stream_state(plan: RunPlan, task_obj) -> dict:
    """The bytes of the model's streaming state for one stream after the task's longest test length,
    at the run's width (stream_state.py: a fresh build of the run's model, stepped on the CPU);
    a model that cannot stream says why. A failure here is noted, never the run's."""
    length = longest_test_length(task_obj)
    try:
        with torch.random.fork_rng(devices=[]):
            return state_of(instantiate_model(plan.config.model, task_obj.vocab_size), length)
    except Exception as exc:  # noqa: BLE001 - the trained run's record is written whatever this measure does
        log.warning(f"bench: warning: the streaming state of {plan.model} was not measured ({type(exc).__name__}: {exc})")
        return {"bytes": None, "length": length, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def write_record(plan: RunPlan, trainer: L.Trainer, record: dict, outcomes: dict | None = None) -> dict:
    """The record (and first the per-example outcomes it names, when it has them), by global rank 0."""
    if trainer.is_global_zero:
        if outcomes is not None:
            write_outcomes(outcomes_file(plan.record), outcomes)
        write_json_atomic(plan.record, record)
    return {**record, "path": str(plan.record), "rank": trainer.global_rank}


def pruned_at(trainer: L.Trainer) -> int | None:
    """The step at which a tuning trial's pruner stopped the run (bench/tune), or None."""
    return next((c.pruned_step for c in trainer.callbacks if isinstance(c, TrialPruning) and c.pruned_step is not None), None)


def write_pruned(plan: RunPlan, trainer: L.Trainer, module: TaskModule, record: dict, wall: float) -> dict:
    """A pruned trial's record: status ``pruned`` with its validation curve, nothing tested; its
    checkpoints are removed (a pruned trial is never resumed)."""
    history = next(c for c in trainer.callbacks if isinstance(c, ValidationHistory))
    record.update(
        {
            "status": "pruned",
            "pruned_step": pruned_at(trainer),
            "val_history": history.entries,
            "best_val": history.best()[history.metric],
            "last_val": history.entries[-1][history.metric],
            "epochs_run": trainer.current_epoch,
            "steps_run": trainer.global_step,
            "resumed_from": module.resumed_from,
            "wall_time_s": wall,
            "train_time_s": module.train_time_s,
            "val_time_s": module.val_time_s,
            "device": device_info(trainer),
        }
    )
    record = write_record(plan, trainer, record)
    trainer.strategy.barrier()
    if trainer.is_global_zero:
        shutil.rmtree(plan.folder / "ckpt", ignore_errors=True)
    return record


def keep_only_tested_checkpoint(plan: RunPlan, trainer: L.Trainer) -> None:
    trainer.strategy.barrier()
    if trainer.is_global_zero:
        other = plan.last_ckpt if plan.train.select == "best_val" else plan.best_ckpt
        other.unlink(missing_ok=True)
