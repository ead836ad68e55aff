"""`bench eval RECORD`: a finished run's tested checkpoint on its test splits again, or on other
data (``--set data.key=value``: longer test lengths, another data seed), on one device.

The result is printed and written beside the record as ``<run>/eval[-<tag>].json``, its
per-example outcomes as ``<run>/eval[-<tag>]-outcomes.npz`` (``bench.load_outcomes``); the run's
own record is never changed. The checkpoint is the record's own, in its run folder (whatever
path the record was written with): a copied results tree evaluates its own checkpoints, and a
copy without them stops with one line instead of scoring another copy's weights."""
from __future__ import annotations

from pathlib import Path

import lightning as L

from ..config import resolve_run
from ..data import TaskData
from ..errors import UserError
from ..logs import quiet
from ..metrics import write_outcomes
from ..records import (Record, RecordError, outcomes_file, overrides_tag, record_checkpoint, relative_checkpoint, run_folder,
                       write_json_atomic)
from .build import instantiate_model, instantiate_task
from .checkpoint_io import inspect_checkpoint
from .module import TaskModule


def read_record(path: Path) -> dict:
    """The record ``bench eval`` was given, or one UserError line saying why it cannot be used."""
    try:
        return Record.read(path, required=("model", "task", "preset", "seed")).data
    except FileNotFoundError:
        raise UserError(f"record {str(path)!r} not found; give the path of a run's .json under OUT/runs") from None
    except RecordError as exc:
        if exc.unreadable:
            raise UserError(f"record {str(path)!r} is not readable JSON ({exc.problem}); rerun the run with --rerun") from None
        raise UserError(f"record {str(path)!r} is not a bench run record ({exc.problem}); give the path of a run's .json under OUT/runs") from None


def rebuild_run(path: Path, data_overrides: list[str], registry):
    """A finished run, rebuilt from its record: (record, checkpoint path, task, data, module with
    untrained weights; Lightning's ``ckpt_path`` or ``load_state_dict`` puts the tested ones in)."""
    rec = read_record(path)
    if rec["status"] != "ok":
        raise UserError(f"record {str(path)!r} has status {rec['status']!r}; only finished runs (status ok) have a tested checkpoint")
    bad = [item for item in data_overrides if not item.startswith("data.")]
    if bad:
        raise UserError(f"bench eval --set takes data.* only (the model is the checkpoint's), got {bad[0]!r}")
    ckpt = record_checkpoint(Path(path), rec)
    if not ckpt.is_file():
        raise UserError(f"the record's checkpoint {str(ckpt)!r} is missing (deleted, or a copy made without it); "
                        f"train the run again with --rerun to recreate it")
    problem = inspect_checkpoint(ckpt, needs=("state_dict",))[1]
    if problem:
        raise UserError(f"the record's checkpoint {str(ckpt)!r} is damaged ({problem}); train the run again with --rerun")
    overrides = [*rec.get("overrides", []), *data_overrides]
    config = resolve_run(registry, rec["model"], rec["task"], rec["preset"], overrides)
    train = config.train
    task = instantiate_task(config.task)
    data = TaskData(task, train["batch_size"], train["eval_batch_size"], rec["seed"])
    module = TaskModule(instantiate_model(config.model, task.vocab_size), task, train, steps_per_epoch=1)
    return rec, ckpt, task, data, module


def evaluate_record(path: Path, data_overrides: list[str], registry, accelerator: str | None = None) -> dict:
    rec, ckpt, task, data, module = rebuild_run(path, data_overrides, registry)
    train = module.train_cfg
    splits = ["val", *task.test_splits()]
    with quiet():  # no "GPU available: ..." notes while it evaluates: stderr is for problems
        trainer = L.Trainer(accelerator=accelerator or "auto", devices=1, logger=False, enable_progress_bar=False,
                            enable_model_summary=False, precision=train["precision"])
        trainer.test(module, dataloaders=[data.eval_loader(s) for s in splits], ckpt_path=str(ckpt), verbose=False)
    tag = overrides_tag(data_overrides)
    out = run_folder(Path(path)) / (f"eval-{tag}.json" if tag else "eval.json")
    result = {**rec, "metrics": {s: module.last_eval[i] for i, s in enumerate(splits)}, "test_splits": splits[1:],
              "evaluated_with": data_overrides, "checkpoint": relative_checkpoint(Path(path), ckpt),
              "outcomes": outcomes_file(out, evaluation=True).name}
    write_outcomes(outcomes_file(out, evaluation=True), {s: module.last_outcomes[i] for i, s in enumerate(splits)})
    write_json_atomic(out, result)
    return {"record": result, "checkpoint": str(ckpt), "path": str(out)}
