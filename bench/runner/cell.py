"""The one way down: every cell is trained by ``run_cell``, whoever asks (``bench run`` for each
seed, the local grid's forked cells, and through ``bench run`` the fresh processes of GPU cells
and SLURM jobs). It prints nothing: notes go to the ``bench`` loggers, the record is returned."""
from __future__ import annotations

import os

from ..grid_cell import Cell
from .lifecycle import run


def run_cell(cell: Cell, out: str | os.PathLike, *, registry=None, trainer_kwargs: dict | None = None, rerun: bool = False,
             threads: int | None = None, progress: bool | str = "auto", logger: str = "csv", on_start=None) -> dict:
    """Train one cell (resuming it, or returning its finished record: ``bench.runner.run``) and
    return its record. ``threads`` is a launcher's share of the CPU (``train.num_threads``, not
    part of the run's identity), unless the cell's own overrides set it."""
    overrides = [*cell.overrides, *cell.thread_overrides(threads)]
    return run(model=cell.model, task=cell.task, preset=cell.preset, seed=cell.seed, out=out, overrides=overrides or None,
               registry=registry, trainer_kwargs=trainer_kwargs, progress=progress, logger=logger, rerun=rerun, on_start=on_start)
