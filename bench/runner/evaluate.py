"""`bench eval RECORD`: a finished run's tested checkpoint on its test splits again, or on other
data (``--set data.key=value``: longer test lengths, another data seed), on one device.

The run is rebuilt from its record's resolved config, not from the registry. The result is
printed and written as ``<run>/eval[-<tag>].json``, its per-example outcomes as
``<run>/eval[-<tag>]-outcomes.npz`` (``bench.load_outcomes``): beside the record, except for a record of the
checkout's reference results (``results/``), whose evaluation goes under --out (default out/) at
the same path (records.py:eval_folder); the run's own record is never changed. The checkpoint is
the record's own, in its run folder (whatever
path the record was written with): a copied results tree evaluates its own checkpoints, and a
copy without them stops with one line instead of scoring another copy's weights."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import lightning as L

from ..config import TRAIN_DEFAULTS, RunConfig, TrainConfig, check_data, check_overrides, parse_overrides, resolve_run
from ..data import TaskData
from ..errors import UserError
from ..logs import quiet
from ..metrics import write_outcomes
from ..parsing import version
from ..records import (
    Record,
    RecordError,
    config_changes,
    eval_folder,
    outcomes_file,
    overrides_tag,
    record_checkpoint,
    relative_checkpoint,
    rerun_command,
    write_json_atomic,
)
from ..registry import BACKBONE_SETTINGS, constructor_params
from ..spec import ModelSpec, TaskSpec, layer
from ..targets import import_model_class, import_task_class
from .build import instantiate_model, instantiate_task
from .callbacks import signals_stop
from .checkpoint_io import inspect_checkpoint
from .guards import check_sizes, runs_on_cpu
from .lifecycle import _QUIET_WARNINGS as QUIET_WARNINGS
from .module import TaskModule

log = logging.getLogger(__name__)


def read_record(path: Path) -> dict:
    """The record ``bench eval`` was given, or one UserError line saying why it cannot be used."""
    try:
        return Record.read(path, required=("model", "task", "preset", "seed")).data
    except FileNotFoundError:
        raise UserError(f"record {str(path)!r} not found; give the path of a run's .json under OUT/runs") from None
    except IsADirectoryError:
        raise UserError(f"{str(path)!r} is a folder, not a record; give the path of a run's .json under OUT/runs") from None
    except RecordError as exc:
        if exc.unreadable:
            raise UserError(f"record {str(path)!r} is not readable JSON ({exc.problem}); rerun the run with --rerun") from None
        raise UserError(
            f"record {str(path)!r} is not a bench run record ({exc.problem}); give the path of a run's .json under OUT/runs"
        ) from None


def rebuild_run(path: Path, data_overrides: list[str], registry, accelerator: str | None = None):
    """A finished run, rebuilt from its record: (record, checkpoint path, task, data, module with
    untrained weights; Lightning's ``ckpt_path`` or ``load_state_dict`` puts the tested ones in).
    The model, the task and the training settings are the record's resolved config (the registry
    is not consulted for them); ``data_overrides`` (``data.*``) change the data it is scored on.
    Where the registry would now resolve the run differently, one note says so."""
    rec = read_record(path)
    if rec["status"] != "ok":
        raise UserError(f"record {str(path)!r} has status {rec['status']!r}; only finished runs (status ok) have a tested checkpoint")
    bad = [item for item in data_overrides if not item.startswith("data.")]
    if bad:
        raise UserError(f"bench eval --set takes data.* only (the model is the checkpoint's), got {bad[0]!r}")
    ckpt = record_checkpoint(Path(path), rec)
    if not ckpt.is_file():
        raise UserError(
            f"the record's checkpoint {str(ckpt)!r} is missing (checkpoints of reference records are not committed; or a copy "
            f"made without it); this recreates it: {rerun_command(Path(path), rec)}"
        )
    problem = inspect_checkpoint(ckpt, needs=("state_dict",))[1]
    if problem:
        raise UserError(
            f"the record's checkpoint {str(ckpt)!r} is damaged ({problem}); this recreates it: {rerun_command(Path(path), rec)}"
        )
    config = record_run_config(Path(path), rec, data_overrides)
    train = config.train
    check_sizes(config, train, "the evaluation", on_cpu=runs_on_cpu({"accelerator": accelerator or "auto"}))
    task = instantiate_task(config.task)
    data = TaskData(task, train.batch_size, train.eval_batch_size, rec["seed"])
    module = TaskModule(instantiate_model(config.model, task.vocab_size), task, train, steps_per_epoch=1)
    check_weights_fit(ckpt, module)
    _note_registry_changes(Path(path), rec, registry)
    return rec, ckpt, task, data, module


def check_weights_fit(ckpt: Path, module) -> None:
    """The checkpoint's weights are the model the record's config describes (same names, same
    shapes); else one line: the record or its checkpoint was changed after the run."""
    import torch

    saved = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    built = module.state_dict()
    problems = [
        f"{k} is {tuple(saved[k].shape)} in the checkpoint and {tuple(v.shape)} in the config's model"
        for k, v in built.items()
        if k in saved and tuple(saved[k].shape) != tuple(v.shape)
    ]
    problems += [f"{k} is only in the config's model" for k in built if k not in saved]
    problems += [f"{k} is only in the checkpoint" for k in saved if k not in built]
    if problems:
        raise UserError(
            f"the record's checkpoint {str(ckpt)!r} does not hold the model its config describes ({problems[0]}"
            f"{f', and {len(problems) - 1} more' if len(problems) > 1 else ''}): the record or its checkpoint was "
            f"changed after the run; train it again with --rerun"
        )


def record_run_config(path: Path, rec: dict, data_overrides: list[str]) -> RunConfig:
    """The RunConfig a record was made with (its ``config``), ``data_overrides`` applied to the
    task's parameters; one UserError line naming what the current code cannot build."""
    config = rec.get("config") or {}
    model, task, train = config.get("model"), config.get("task"), config.get("train")
    if not all(isinstance(part, dict) for part in (model, task, train)):
        raise UserError(
            f"record {str(path)!r} holds no resolved config (model, task and train); it cannot be rebuilt: train the run again with --rerun"
        )
    rebuild = f"cannot be rebuilt by this bench (version {version()}; the record was made with {_made_with(rec)})"
    where = f"record {str(path)!r}"
    model_cls = _record_class(import_model_class, model.get("target"), where, "config.model", rebuild)
    task_cls = _record_class(import_task_class, task.get("target"), where, "config.task", rebuild)
    params = dict(model.get("params") or {})
    accepted = {**constructor_params(model_cls), **BACKBONE_SETTINGS}
    gone = sorted(set(params) - set(accepted))
    if gone:
        raise UserError(f"{where} {rebuild}: {model.get('target')} no longer takes {', '.join(gone)}")
    task_params = dict(task.get("params") or {})
    task_accepted = constructor_params(task_cls, skip=("self",))
    gone = sorted(set(task_params) - set(task_accepted))
    if gone:
        raise UserError(f"{where} {rebuild}: {task.get('target')} no longer takes {', '.join(gone)}")
    given = parse_overrides(data_overrides)["data"]
    check_overrides("data", given, {**task_accepted, **task_params}, f"task {rec['task']!r}")
    values, sources = layer([("the record", task_params), ("--set", given)])
    check_data(values, sources)
    model_spec = ModelSpec(
        rec["model"],
        model.get("target"),
        model_cls,
        {**BACKBONE_SETTINGS, **params},
        bool(model.get("causal")),
        dict.fromkeys(params, "the record"),
    )
    task_spec = TaskSpec(rec["task"], task.get("target"), task_cls, values, rec["preset"], sources)
    known = {k: v for k, v in train.items() if k in TRAIN_DEFAULTS}  # a setting removed since changes no evaluation
    return RunConfig(model_spec, task_spec, TrainConfig(**{**TRAIN_DEFAULTS, **known}), rec["preset"], {})


def _record_class(importer, target, where: str, section: str, rebuild: str):
    try:
        return importer(target, section)
    except UserError as exc:
        raise UserError(f"{where} {rebuild}: {exc}") from None


def _made_with(rec: dict) -> str:
    made = (rec.get("versions") or {}).get("bench")
    commit = (rec.get("git") or {}).get("commit")
    return ", ".join(filter(None, [f"bench {made}" if made else None, f"commit {commit[:12]}" if commit else None])) or "an unknown version"


def _note_registry_changes(path: Path, rec: dict, registry) -> None:
    """One note where the registry would now resolve the record's cell differently (as
    ``bench compare`` marks it with †) or cannot resolve it at all."""
    try:
        current = resolve_run(registry, rec["model"], rec["task"], rec["preset"], rec.get("overrides") or None).public()
    except UserError as exc:
        log.info(f"bench: note: the registry no longer resolves this record's run ({exc}); evaluated with the record's config")
        return
    changes = config_changes(rec.get("config"), current)
    if changes:
        log.info(
            f"bench: note: the registry now gives this run other settings ({changes}); "
            f"evaluated with the record's config, as it was trained"
        )


def evaluate_record(path: Path, data_overrides: list[str], registry, accelerator: str | None = None, out: str | Path | None = None) -> dict:
    rec, ckpt, task, data, module = rebuild_run(path, data_overrides, registry, accelerator)
    splits = ["val", *task.test_splits()]
    with quiet(), warnings.catch_warnings():  # no "GPU available: ..." notes or known warnings: stderr is for problems
        for pattern in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern)
        trainer = L.Trainer(
            accelerator=accelerator or "auto",
            devices=1,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            precision=module.train_cfg.precision,
        )
        with signals_stop(trainer, str(ckpt)):  # stopped: nothing written, the same command evaluates again
            trainer.test(module, dataloaders=[data.eval_loader(s) for s in splits], ckpt_path=str(ckpt), verbose=False)
    tag = overrides_tag(data_overrides)
    written = eval_folder(Path(path), out) / (f"eval-{tag}.json" if tag else "eval.json")
    result = {
        **rec,
        "metrics": {s: data.with_chance(s, module.last_eval[i]) for i, s in enumerate(splits)},
        "test_splits": splits[1:],
        "evaluated_with": data_overrides,
        "checkpoint": relative_checkpoint(Path(path), ckpt),
        "outcomes": outcomes_file(written, evaluation=True).name,
    }
    write_outcomes(outcomes_file(written, evaluation=True), {s: module.last_outcomes[i] for i, s in enumerate(splits)})
    write_json_atomic(written, result)
    return {"record": result, "checkpoint": str(ckpt), "path": str(written)}
