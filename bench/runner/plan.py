"""A run's plan: what it is (model, task, preset, seed, overrides), its resolved configuration and
where it lives (record, run folder, checkpoints, lock), made once by ``lifecycle.plan_run`` and
handed to every later step."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import RunConfig, TrainConfig
from ..records import run_folder


@dataclass(frozen=True)
class RunPlan:
    model: str
    task: str
    preset: str
    seed: int
    overrides: list | dict | None
    config: RunConfig
    train: TrainConfig  # config.train, typed
    record: Path
    trainer_kwargs: dict
    world_size: int

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
