"""Many runs: expand (model, task, seed) cells, skip finished ones, make each split once, then
hand the rest to a launcher. A launcher decides only *where* a cell runs (local processes,
SLURM through submitit); what a cell does is ``bench.runner.run_cell``, the same everywhere (a
local CPU cell calls it in a forked process; a GPU cell or a SLURM job runs ``bench run``, which
calls it). Progress is logged to ``bench.grid`` (the CLI writes it to stderr); nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..config import parse_overrides, resolve_run, resolve_task
from ..data import load_split
from ..errors import UserError
from ..grid_cell import Cell
from ..records import config_changes, read_record, record_path
from . import local, slurm
from .common import Progress, Stopped

__all__ = ["Cell", "GridPlan", "Progress", "Stopped", "launcher_profile", "plan_grid", "prepare_data", "run_grid", "seed_major"]


@dataclass
class GridPlan:
    todo: list[Cell] = field(default_factory=list)
    finished: list[Cell] = field(default_factory=list)
    incompatible: list[tuple[Cell, str]] = field(default_factory=list)


def plan_grid(
    registry,
    models: list[str],
    tasks: list[str],
    seeds: list[int],
    preset: str,
    overrides: list[str] | None,
    out: Path,
    world_size: int = 1,
    rerun: bool = False,
) -> GridPlan:
    """Which cells to train: every (task, model, seed) without a finished record (status ok, made
    with the settings the registry gives today).
    Cells a model cannot run (a causal task for a bidirectional-only model) are set aside with
    the reason; any other bad input stops the grid before anything runs."""
    plan = GridPlan()
    for task in tasks:
        registry.preset(task, preset)
        for model in models:
            try:
                current = resolve_run(registry, model, task, preset, overrides).public()
            except UserError as exc:
                if "causal" not in str(exc):
                    raise
                plan.incompatible.append((Cell(model, task, preset, seeds[0], tuple(overrides or ())), str(exc)))
                continue
            for seed in seeds:
                cell = Cell(model, task, preset, seed, tuple(overrides or ()))
                rec = read_record(record_path(out, model, task, preset, seed, overrides, world_size))
                done = rec.get("status") == "ok" and not config_changes(rec.get("config"), current)
                (plan.finished if done and not rerun else plan.todo).append(cell)
    return plan


def prepare_data(registry, cells: list[Cell]) -> None:
    """Generate every split the cells need once, here, before any cell starts (the cache is
    safe under concurrency anyway; this only avoids generating the same split N times)."""
    from ..runner import instantiate_task  # lazy: the runner (torch, the tasks) is not needed to plan a grid

    seen = set()
    for cell in cells:
        key = (cell.task, cell.preset, tuple(o for o in cell.overrides if o.startswith("data.")))
        if key in seen:
            continue
        seen.add(key)
        task = instantiate_task(resolve_task(registry, cell.task, cell.preset, parse_overrides(list(key[2]))))
        for split in task.splits():
            load_split(task, split)


def launcher_profile(launcher: str, path: str | None, settings=()) -> dict | None:
    """The validated SLURM profile for ``--launcher slurm`` (None for local): called before the
    grid is planned, so a bad profile stops everything before anything runs."""
    if launcher != "slurm":
        return None
    return slurm.load_profile(path, settings or ())


def seed_major(cells: list[Cell]) -> list[Cell]:
    """The cells by seed, smallest first (cells of one seed in plan order): every (model, task)
    at its first missing seed before any at its next, so a grid stopped part-way leaves a table
    with as many seeds in every cell as it could, not some cells finished and others empty."""
    return sorted(cells, key=lambda c: c.seed)


def run_grid(
    registry,
    cells: list[Cell],
    out: Path,
    *,
    jobs: int = 1,
    launcher: str = "local",
    runs_per_gpu: int = 1,
    trainer_args: dict | None = None,
    rerun: bool = False,
    profile: str | None = None,
) -> list[tuple[Cell, str]]:
    """Train the cells, seed-major; returns the failed ones with a one-line reason (empty: all succeeded)."""
    if not cells:
        return []
    cells = seed_major(cells)
    if launcher == "local":
        local.start_fork_server()
    prepare_data(registry, cells)
    registry_path = registry.user_spec or str(registry.path)
    if launcher == "local":
        return local.run_local(
            cells, out, registry_path, jobs=jobs, runs_per_gpu=runs_per_gpu, trainer_args=trainer_args or {}, rerun=rerun
        )
    if launcher == "slurm":
        return slurm.run_slurm(cells, out, registry_path, trainer_args=trainer_args or {}, rerun=rerun, profile=profile)
    raise UserError(f"--launcher {launcher!r}: choose local or slurm")
