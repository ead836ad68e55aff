"""The one way down: every cell is trained by ``run_cell``, whoever asks (the local grid's
forked cells, and through ``bench run`` the fresh processes of GPU cells and SLURM jobs);
``bench run`` plans its seeds with ``plan_cell`` first and runs each plan. It prints nothing:
notes go to the ``bench`` loggers, the record is returned."""

from __future__ import annotations

import os

from ..grid_cell import Cell
from .plan import RunPlan
from .planning import check_logger, plan_run


def plan_cell(
    cell: Cell, out: str | os.PathLike, *, registry=None, trainer_kwargs: dict | None = None, threads: int | None = None
) -> RunPlan:
    """The cell's run planned (``planning.plan_run``: resolved and checked, nothing written; no Lightning).
    ``threads`` is a launcher's share of the CPU (``train.num_threads``, not part of the run's
    identity), unless the cell's own overrides set it."""
    overrides = [*cell.overrides, *cell.thread_overrides(threads)]
    return plan_run(cell.model, cell.task, cell.preset, cell.seed, out, overrides or None, registry, trainer_kwargs)


def run_cell(
    cell: Cell,
    out: str | os.PathLike,
    *,
    registry=None,
    trainer_kwargs: dict | None = None,
    rerun: bool = False,
    threads: int | None = None,
    progress: bool | str = "auto",
    logger: str = "csv",
    on_start=None,
) -> dict:
    """Train one cell (resuming it, or returning its finished record: ``lifecycle.run_plan``) and
    return its record."""
    from .lifecycle import run_plan

    check_logger(logger)
    plan = plan_cell(cell, out, registry=registry, trainer_kwargs=trainer_kwargs, threads=threads)
    return run_plan(plan, progress=progress, logger=logger, rerun=rerun, on_start=on_start)
