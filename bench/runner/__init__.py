"""One run: plan -> build -> fit (Lightning, checkpoints, resume) -> test -> record; ``run_cell``
is the one entry every caller (CLI, local grid, SLURM jobs through the CLI) trains a cell with."""
from .build import build_model, build_task, instantiate_model, instantiate_task
from .callbacks import RunInterrupted
from .cell import run_cell
from .lifecycle import run

__all__ = ["RunInterrupted", "build_model", "build_task", "instantiate_model", "instantiate_task", "run", "run_cell"]
