"""Build tasks and models from the registry, train one run, evaluate, write its record."""
from __future__ import annotations

import copy
import os
import time
import warnings
from pathlib import Path

import torch

from tasks.base import TaskError

from ..config import public, resolve_model, resolve_run, resolve_task, parse_overrides
from ..data import TaskData
from ..errors import RunFailed, UserError
from ..records import base_record, device_info, ensure_writable, record_path, write_json_atomic
from ..registry import Registry


def _registry(registry) -> Registry:
    return registry if isinstance(registry, Registry) else Registry(registry)


def instantiate_task(resolved: dict):
    try:
        task = resolved["_cls"](**resolved["params"])
    except (TaskError, ValueError, TypeError) as exc:
        raise UserError(f"task {resolved['name']!r}: {exc}") from None
    task.params = resolved["params"]
    task.name = resolved["name"]
    return task


def instantiate_model(resolved: dict, vocab_size: int):
    try:
        return resolved["_cls"](vocab_size, resolved["causal"], **resolved["params"])
    except (ValueError, TypeError) as exc:
        raise UserError(f"model {resolved['name']!r}: {exc}") from None


def check_attention_backend(params: dict, device: torch.device) -> None:
    """xformers is optional and CUDA only: say so before training rather than fail in step one."""
    if params.get("attn_backend") != "xformers":
        return
    from models.layers import xformers_available

    if device.type != "cuda":
        raise UserError(f"model.attn_backend=xformers runs on CUDA only and this run is on {device.type}; use model.attn_backend=sdpa")
    if not xformers_available():
        raise UserError("model.attn_backend=xformers needs the xformers package (pip install xformers, built for your CUDA torch); or use model.attn_backend=sdpa")


def build_task(name: str, preset: str = "smoke", registry=None, **data_overrides):
    """A task object from its registry entry and preset; keyword arguments override data params."""
    reg = _registry(registry)
    return instantiate_task(resolve_task(reg, name, preset, parse_overrides({f"data.{k}": v for k, v in data_overrides.items()})))


def build_model(name: str, task=None, vocab_size: int | None = None, causal: bool | None = None, preset: str = "smoke", registry=None, **overrides):
    """The backbone module of a registry model. With ``task`` (a name or Task), the task's preset
    model parameters and its causality apply; otherwise give ``vocab_size`` (and ``causal``)."""
    reg = _registry(registry)
    ov = {f"model.{k}": v for k, v in overrides.items()}
    if causal is not None:
        ov["model.causal"] = causal
    ov = parse_overrides(ov)
    pre, task_cls = None, None
    if task is not None:
        task_name = task if isinstance(task, str) else task.name
        resolved_task = resolve_task(reg, task_name, preset, parse_overrides({}))
        pre, task_cls = resolved_task["_preset"], resolved_task["_cls"]
        if isinstance(task, str):
            task = instantiate_task(resolved_task)
        vocab_size = task.vocab_size
    if vocab_size is None:
        raise UserError("build_model needs a task or a vocab_size")
    return instantiate_model(resolve_model(reg, name, task_cls, pre, ov), vocab_size)


class _BestState:
    """Keeps the best-on-validation weights in memory (no checkpoint files) and times training."""

    def __init__(self, metric: str):
        import lightning as L

        outer = self

        class Callback(L.Callback):
            def on_validation_end(self, trainer, module):
                if trainer.sanity_checking or 0 not in module.last_eval:
                    return
                value = module.last_eval[0][metric]
                outer.history.append({"epoch": trainer.current_epoch, "step": trainer.global_step, metric: value})
                if outer.best is None or value > outer.best:
                    outer.best = value
                    outer.best_epoch = trainer.current_epoch
                    outer.best_step = trainer.global_step
                    outer.best_eval = copy.deepcopy(module.last_eval[0])
                    outer.state = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}

            def on_train_batch_start(self, trainer, module, batch, batch_idx):
                outer._t0 = time.perf_counter()

            def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
                outer.train_time += time.perf_counter() - outer._t0

        self.callback = Callback()
        self.best = None
        self.best_epoch = self.best_step = None
        self.best_eval = None
        self.state = None
        self.history: list[dict] = []
        self.train_time = 0.0
        self._t0 = 0.0


def run(
    model: str,
    task: str,
    preset: str = "small",
    seed: int = 0,
    out: str | os.PathLike = "results",
    overrides: list[str] | dict | None = None,
    registry=None,
    trainer_kwargs: dict | None = None,
    progress: bool = True,
) -> dict:
    """Train ``model`` on ``task``, select the best epoch on validation, test every test split,
    write one JSON record and return it. Bad input raises UserError before anything is written."""
    import lightning as L

    from .module import TaskModule

    import logging

    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    reg = _registry(registry)
    config = resolve_run(reg, model, task, preset, overrides)
    train = config["train"]
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise UserError(f"seed must be an integer, got {seed!r}")
    path = record_path(Path(out), model, task, preset, seed, overrides)
    ensure_writable(path.parent)
    threads = train["num_threads"] or min(os.cpu_count() or 1, 8)
    torch.set_num_threads(threads)
    L.seed_everything(seed, workers=True, verbose=False)

    task_obj = instantiate_task(config["task"])
    try:
        data = TaskData(task_obj, train["batch_size"], train["eval_batch_size"], seed)
    except TaskError as exc:
        raise UserError(f"task {task!r}: {exc}") from None
    backbone = instantiate_model(config["model"], task_obj.vocab_size)
    train_loader = data.train_loader()
    module = TaskModule(backbone, task_obj, train, steps_per_epoch=len(train_loader))
    n_params = sum(p.numel() for p in module.parameters())
    record = base_record(model, task, preset, seed, overrides)
    record.update({"status": "running", "config": public(config), "param_count": n_params, "primary_metric": task_obj.metric, "report_metrics": list(task_obj.report_metrics)})

    best = _BestState(task_obj.metric)
    callbacks = [best.callback]
    if train["patience"]:
        from lightning.pytorch.callbacks import EarlyStopping

        callbacks.append(EarlyStopping(monitor="val_metric", mode="max", patience=train["patience"]))
    kwargs = dict(
        max_epochs=train["max_epochs"],
        max_steps=train["max_steps"],
        gradient_clip_val=train["grad_clip"] or None,
        accumulate_grad_batches=train["accumulate_grad_batches"],
        precision=train["precision"],
        deterministic="warn" if train["deterministic"] else False,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=progress,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        accelerator="auto",
        devices=1,
    )
    if train["val_every_steps"]:
        kwargs.update(val_check_interval=train["val_every_steps"], check_val_every_n_epoch=None)
    kwargs.update(trainer_kwargs or {})
    t_start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*deterministic.*")
        warnings.filterwarnings("ignore", message=".*number of training batches.*")
        warnings.filterwarnings("ignore", message=".*LeafSpec.*")
        warnings.filterwarnings("ignore", message=".*litlogger.*")
        trainer = L.Trainer(**kwargs)
        check_attention_backend(config["model"]["params"], trainer.strategy.root_device)
        try:
            trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=data.eval_loader("val"))
        except RunFailed as exc:
            record.update({"status": "failed", "error": str(exc), "wall_time_s": time.perf_counter() - t_start, "device": device_info(kwargs["accelerator"])})
            write_json_atomic(path, record)
            record["path"] = str(path)
            return record
        if best.state is None:
            raise UserError("training ran no validation; raise train.max_epochs / train.max_steps")
        module.load_state_dict(best.state)  # test the best-on-validation weights, never the last
        tests = task_obj.test_splits()
        trainer.test(module, dataloaders=[data.eval_loader(s) for s in tests], verbose=False)
    wall = time.perf_counter() - t_start
    record.update(
        {
            "status": "ok",
            "metrics": {"val": best.best_eval, **{s: module.last_eval[i] for i, s in enumerate(tests)}},
            "test_splits": tests,
            "best_epoch": best.best_epoch,
            "best_step": best.best_step,
            "best_val": best.best,
            "val_history": best.history,
            "epochs_run": trainer.current_epoch,
            "steps_run": trainer.global_step,
            "wall_time_s": wall,
            "train_time_s": best.train_time,
            "train_tokens": module.train_tokens,
            "train_tokens_per_s": module.train_tokens / best.train_time if best.train_time else None,
            "device": device_info(kwargs["accelerator"]),
        }
    )
    write_json_atomic(path, record)
    record["path"] = str(path)
    return record
