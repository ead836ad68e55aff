"""One run: plan -> build -> fit (Lightning, checkpoints, resume) -> test -> record; ``run_cell``
is the one entry every caller (CLI, local grid, SLURM jobs through the CLI) trains a cell with
(``bench run`` plans its seeds first with ``plan_cell`` and hands each plan to ``run_plan``)."""
from .build import build_model, build_task, instantiate_model, instantiate_task
from .callbacks import RunInterrupted
from .cell import plan_cell, run_cell
from .lifecycle import run, run_plan
from .plan import RunPlan

__all__ = ["RunInterrupted", "RunPlan", "build_model", "build_task", "instantiate_model", "instantiate_task", "plan_cell", "run",
           "run_cell", "run_plan"]
