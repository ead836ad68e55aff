"""Trained weights for a measured training step: the tested checkpoint of a `bench run` record
loaded into a ``TrainingStep``'s model, so that a cost table times a trained model (a halting
unit that stops where training taught it to) instead of a freshly initialised one.

A cost table's ``cost.weights`` entry names for each cell the run whose weights it loads
(bench/report/cost_weights.py: ``cell_runs``); here those runs' checkpoints are found and loaded,
at ``--run`` only (the table is rebuilt without them). Every parameter of the timed model must be
in the checkpoint with its shape; checkpoint entries the timed model lacks (the halting unit, for
a model in no-halt mode) are left out and listed. The timed steps then train on from those weights
with a fresh optimizer at the schedule's first learning rate (warm-up: lr / warmup_steps), so the
weights move by about that much per step.
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from ..errors import UserError
from ..records import read_record, record_checkpoint, record_path


def weights_record(out: Path, model: str, task: str, preset: str, seed: int, overrides: list[str]) -> Path:
    """Where the run whose weights a cell loads keeps its record (it need not exist)."""
    return record_path(Path(out), model, task, preset, seed, overrides)


def train_command(out: Path, model: str, task: str, preset: str, seed: int, overrides: list[str]) -> str:
    sets = " ".join(f"--set {shlex.quote(o)}" for o in overrides)
    return f"bench run --out {out} --model {model} --task {task} --preset {preset} --seed {seed} {sets}".rstrip()


def tested_checkpoint(out: Path, model: str, task: str, preset: str, seed: int, overrides: list[str]) -> Path:
    """The tested checkpoint of the finished run (model, task, preset, seed, overrides) under ``out``;
    a missing or unfinished run, or a missing checkpoint, is one UserError line saying how to train it."""
    record = weights_record(out, model, task, preset, seed, overrides)
    rec = read_record(record, quiet=True)
    train = train_command(out, model, task, preset, seed, overrides)
    if rec.get("status") != "ok":
        what = "has no record" if not record.is_file() else f"is not finished (status {rec.get('status', 'unreadable')!r})"
        raise UserError(f"cost.weights: the run {record} {what}; train it first: {train}")
    ckpt = record_checkpoint(record, rec)
    if not ckpt.is_file():
        raise UserError(
            f"cost.weights: {record} has no tested checkpoint {ckpt} (checkpoints are not committed); train it again: {train} --rerun"
        )
    return ckpt


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_weights(step, checkpoint: Path) -> dict:
    """Put the checkpoint's weights into ``step``'s model (head included); returns what was loaded:
    the checkpoint's SHA-256 and the checkpoint entries the model does not have."""
    import torch

    state = torch.load(checkpoint, map_location=step.device, weights_only=True)["state_dict"]
    own = step.module.state_dict()
    missing = [k for k in own if k not in state]
    wrong = [f"{k} {tuple(state[k].shape)} vs {tuple(v.shape)}" for k, v in own.items() if k in state and state[k].shape != v.shape]
    if missing or wrong:
        raise UserError(
            f"cost.weights: {checkpoint} does not fit {step.name} ({step.config.model.params.get('mode', '')}): "
            + (f"missing {', '.join(missing[:3])}" if missing else f"shapes {', '.join(wrong[:3])}")
            + "; the table's settings must build the model the run trained"
        )
    unused = sorted(k for k in state if k not in own)
    step.module.load_state_dict({k: state[k] for k in own})
    return {"checkpoint_sha256": sha256(checkpoint), "unused": unused}


def check_runs(runs: dict[str, dict], out: Path, preset: str) -> dict[str, Path]:
    """Each cell's tested checkpoint, all checked before anything is built or timed."""
    return {key: tested_checkpoint(out, r["model"], r["task"], preset, r["seed"], r["set"]) for key, r in runs.items()}


def load_cells(runs: dict[str, dict], out: Path, preset: str, steps: dict) -> dict[str, dict]:
    """Every cell's TrainingStep (``steps``, by cell key) given its run's weights, each checkpoint
    found before any is loaded; returns per cell {record, checkpoint_sha256, unused}."""
    checkpoints = check_runs(runs, out, preset)
    return {key: {"record": runs[key]["record"], **load_weights(step, checkpoints[key])} for key, step in steps.items()}
