"""The run's Lightning Trainer (callbacks, checkpoints, progress) and its loggers (CSV,
TensorBoard, W&B, MLflow)."""

from __future__ import annotations

import contextlib
import csv
import os
import sys
from datetime import timedelta

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from ..data import TaskData
from .callbacks import GracefulStop, LineProgress, RNGState, ValidationHistory
from .checkpoint_io import AtomicCheckpointIO, inspect_checkpoint
from .guards import trainer_refused
from .plan import RunPlan
from .planning import check_logger


def finish_wandb() -> None:
    """End the run's W&B run now (not at exit), its closing notes on stderr: stdout holds results."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        with contextlib.redirect_stdout(sys.stderr):
            wandb.finish()


def make_trainer(plan: RunPlan, task_obj, data: TaskData, progress, logger: str, extra_callbacks: list) -> L.Trainer:
    train = plan.train
    ckpt_dir = str(plan.last_ckpt.parent)
    # every validation's checkpoints are written when it ends (not at the end of the training
    # epoch), so a stop right after a validation resumes from that validation
    at_validation = dict(save_on_train_epoch_end=False, enable_version_counter=False)
    callbacks = [
        ValidationHistory(task_obj.metric),
        RNGState(),
        *extra_callbacks,
        ModelCheckpoint(
            dirpath=ckpt_dir, filename="best", monitor="val_metric", mode="max", save_top_k=1, save_weights_only=True, **at_validation
        ),
        ModelCheckpoint(dirpath=ckpt_dir, filename="last", **at_validation),
        ModelCheckpoint(
            dirpath=ckpt_dir,
            filename="last",
            enable_version_counter=False,
            train_time_interval=timedelta(minutes=train.checkpoint_every_min),
        ),
        GracefulStop(str(plan.last_ckpt)),
    ]  # after the ModelCheckpoints (see its docstring)
    if train.patience:
        callbacks.append(EarlyStopping(monitor="val_metric", mode="max", patience=train.patience, check_on_train_epoch_end=False))
    on_terminal = sys.stdout.isatty() and sys.stderr.isatty()
    mode = ("bar" if on_terminal else "lines") if progress in ("auto", True) else (progress or "none")
    if mode == "lines":  # logged to bench.progress (the CLI writes it to stderr, as every note: stdout has the results only)
        callbacks.append(LineProgress(task_obj.metric, every_s=60 * train.progress_every_min))
    kwargs = dict(
        max_epochs=train.max_epochs,
        max_steps=train.max_steps,
        gradient_clip_val=train.grad_clip or None,
        accumulate_grad_batches=train.accumulate_grad_batches,
        precision=train.precision,
        deterministic="warn" if train.deterministic else False,
        callbacks=callbacks,
        logger=make_loggers(plan, logger),
        plugins=[AtomicCheckpointIO()],
        enable_progress_bar=mode == "bar",
        enable_model_summary=False,
        num_sanity_val_steps=0,
        accelerator="auto",
        devices=1,
        use_distributed_sampler=False,
        default_root_dir=str(plan.folder),
        log_every_n_steps=1,
    )
    if train.val_every_steps:
        kwargs.update(val_check_interval=train.val_every_steps, check_val_every_n_epoch=None)
    kwargs.update(plan.trainer_kwargs)
    try:
        return L.Trainer(**kwargs)
    except Exception as exc:  # noqa: BLE001 - Lightning's MisconfigurationException, ValueError, ...
        raise trainer_refused(plan.trainer_kwargs, exc) from None


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
        import wandb
        from lightning.pytorch.loggers import WandbLogger

        offline = not os.environ.get("WANDB_MODE")  # the user's WANDB_MODE wins; else nothing is sent
        loggers.append(
            WandbLogger(
                name=name,
                project=os.environ.get("WANDB_PROJECT") or "bench",
                save_dir=str(plan.folder),
                offline=offline,
                config=plan.config.public(),
                settings=wandb.Settings(quiet=True),
            )
        )  # its notes stay off stdout, which holds results
    elif kind == "mlflow":
        from lightning.pytorch.loggers import MLFlowLogger

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # a local file store in the run's folder (file:///.../mlruns); MLflow >= 3.7 wants it allowed
            uri = (plan.folder / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        loggers.append(MLFlowLogger(experiment_name=os.environ.get("MLFLOW_EXPERIMENT_NAME") or "bench", run_name=name, tracking_uri=uri))
    return loggers
