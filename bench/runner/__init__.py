"""One run: plan -> build -> fit (Lightning, checkpoints, resume) -> test -> record."""
from .build import build_model, build_task, instantiate_model, instantiate_task
from .callbacks import RunInterrupted
from .lifecycle import run

__all__ = ["RunInterrupted", "build_model", "build_task", "instantiate_model", "instantiate_task", "run"]
