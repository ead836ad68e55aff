"""One run: plan -> build -> fit (Lightning, checkpoints, resume) -> test -> record; ``run_cell``
is the one entry every caller (CLI, local grid, SLURM jobs through the CLI) trains a cell with
(``bench run`` plans its seeds first with ``plan_cell`` and hands each plan to ``run_plan``).

The names are loaded on first use: planning (``plan_cell``, bench/runner/planning.py) needs no
Lightning, so a run refused for its input is refused before Lightning is imported."""

from __future__ import annotations

import importlib

_WHERE = {
    "build_model": "build",
    "build_task": "build",
    "instantiate_model": "build",
    "instantiate_task": "build",
    "RunInterrupted": "callbacks",
    "plan_cell": "cell",
    "run_cell": "cell",
    "run": "lifecycle",
    "run_plan": "lifecycle",
    "RunPlan": "plan",
    "plan_run": "planning",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
