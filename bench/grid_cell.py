"""A grid's cell: one (model, task, preset, seed, overrides) run, the unit every launcher hands
out. Plain Python (no torch or Lightning): the grid planner and the report modules use it too.
``bench.runner.run_cell`` trains one; ``Cell.argv`` is its ``bench run`` command line, for
launchers that start a fresh process (a GPU cell, a SLURM job)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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

    def thread_overrides(self, share: int | str | None) -> list[str]:
        """``train.num_threads=<share>`` (a launcher's division of the CPU), unless the user set
        train.num_threads for the grid (theirs wins) or there is no share to give."""
        if share is None or any(item.partition("=")[0].strip() == "train.num_threads" for item in self.overrides):
            return []
        return [f"train.num_threads={share}"]

    def threads_argv(self, share: int | str) -> list[str]:
        """``--set train.num_threads=<share>`` for the cell's command line (see thread_overrides)."""
        return [word for item in self.thread_overrides(share) for word in ("--set", item)]

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
