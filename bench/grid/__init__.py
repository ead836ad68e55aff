"""Many runs: expand (model, task, seed) cells, skip finished ones, make each split once, then
hand the rest to a launcher. A launcher decides only *where* a cell runs (local processes,
SLURM through submitit); what a cell does is ``bench run`` for one seed, the same everywhere.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..records import config_changes, read_record, record_path
from ..stats import eta_text


class Stopped(KeyboardInterrupt):
    """A grid stopped by SIGINT or SIGTERM (its running cells checkpointed): the CLI exits with
    128 + the signal's number, 130 or 143, as a shell reports a process the signal ended."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@dataclass(frozen=True)
class Cell:
    model: str
    task: str
    preset: str
    seed: int
    overrides: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.model} on {self.task} ({self.preset}), seed {self.seed}"

    def threads_argv(self, share: int) -> list[str]:
        """``--set train.num_threads=<share>`` (a launcher's division of the CPU), unless the
        user set train.num_threads for the grid: theirs wins."""
        if any(item.partition("=")[0].strip() == "train.num_threads" for item in self.overrides):
            return []
        return ["--set", f"train.num_threads={share}"]

    def argv(self, out: Path, registry_path: str | None, trainer_args: dict, rerun: bool) -> list[str]:
        """The ``bench run`` command line of this cell (a launcher may append settings that do
        not change what is learned, such as train.num_threads)."""
        args = ["run", "--model", self.model, "--task", self.task, "--preset", self.preset, "--seed", str(self.seed), "--out", str(out)]
        for item in self.overrides:
            args += ["--set", item]
        for key, value in trainer_args.items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        if registry_path:
            args = ["--registry", registry_path, *args]
        return args + (["--rerun"] if rerun else [])


@dataclass
class GridPlan:
    todo: list[Cell] = field(default_factory=list)
    finished: list[Cell] = field(default_factory=list)
    incompatible: list[tuple[Cell, str]] = field(default_factory=list)


def plan_grid(registry, models: list[str], tasks: list[str], seeds: list[int], preset: str, overrides: list[str] | None,
              out: Path, world_size: int = 1, rerun: bool = False) -> GridPlan:
    """Which cells to train: every (task, model, seed) without a finished record (status ok, made
    with the settings the registry gives today).
    Cells a model cannot run (a causal task for a bidirectional-only model) are set aside with
    the reason; any other bad input stops the grid before anything runs."""
    from ..config import resolve_run

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
    from ..config import resolve_task, parse_overrides
    from ..data import load_split
    from ..runner import instantiate_task

    seen = set()
    for cell in cells:
        key = (cell.task, cell.preset, tuple(o for o in cell.overrides if o.startswith("data.")))
        if key in seen:
            continue
        seen.add(key)
        task = instantiate_task(resolve_task(registry, cell.task, cell.preset, parse_overrides(list(key[2]))))
        for split in task.splits():
            load_split(task, split)


class Progress:
    """One line per finished cell, with the grid's progress, elapsed time and ETA (on stderr:
    progress, not results)."""

    def __init__(self, total: int, jobs: int, stream=None):
        self.total, self.jobs, self.done, self.failed = total, max(1, jobs), 0, []
        self.t0 = time.perf_counter()
        self.stream = stream or sys.stderr

    def finished(self, cell: Cell, ok: bool, seconds: float, detail: str = "") -> None:
        self.done += 1
        if not ok:
            self.failed.append((cell, detail))
        elapsed = time.perf_counter() - self.t0
        remaining = self.total - self.done
        status = "ok  " if ok else "FAIL"
        line = f"[{self.done}/{self.total}] {status} {cell.name} ({seconds:.0f}s)"
        line += f"  | elapsed {elapsed:.0f}s, {eta_text(elapsed, self.done, remaining)}" if remaining else f"  | elapsed {elapsed:.0f}s"
        if detail and not ok:
            line += f"\n       {detail}"
        print(line, file=self.stream, flush=True)


def launcher_profile(launcher: str, path: str | None, settings=()) -> dict | None:
    """The validated SLURM profile for ``--launcher slurm`` (None for local): called before the
    grid is planned, so a bad profile stops everything before anything runs."""
    if launcher != "slurm":
        return None
    from .slurm import load_profile

    return load_profile(path, settings or ())


def seed_major(cells: list[Cell]) -> list[Cell]:
    """The cells by seed, smallest first (cells of one seed in plan order): every (model, task)
    at its first missing seed before any at its next, so a grid stopped part-way leaves a table
    with as many seeds in every cell as it could, not some cells finished and others empty."""
    return sorted(cells, key=lambda c: c.seed)


def run_grid(registry, cells: list[Cell], out: Path, *, jobs: int = 1, launcher: str = "local", runs_per_gpu: int = 1,
             trainer_args: dict | None = None, rerun: bool = False, profile: str | None = None) -> list[tuple[Cell, str]]:
    """Train the cells, seed-major; returns the failed ones with a one-line reason (empty: all succeeded)."""
    if not cells:
        return []
    cells = seed_major(cells)
    if launcher == "local":
        from .local import start_fork_server

        start_fork_server()
    prepare_data(registry, cells)
    registry_path = str(registry.path)
    if launcher == "local":
        from .local import run_local

        return run_local(cells, out, registry_path, jobs=jobs, runs_per_gpu=runs_per_gpu, trainer_args=trainer_args or {}, rerun=rerun)
    if launcher == "slurm":
        from .slurm import run_slurm

        return run_slurm(cells, out, registry_path, trainer_args=trainer_args or {}, rerun=rerun, profile=profile)
    raise UserError(f"--launcher {launcher!r}: choose local or slurm")
