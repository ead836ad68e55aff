"""Planning a run, without Lightning: its configuration resolved and checked, its record's path,
the output folder writable, the logger available; nothing is written. Every check on user input
happens here, so a run asked with bad input is refused in one line before Lightning (seconds of
import) is loaded; ``lifecycle`` then builds, fits, tests and records the plan."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ..config import resolve_run
from ..errors import UserError
from ..records import ensure_writable, record_path
from .build import _registry, instantiate_task
from .guards import check_sizes, runs_on_cpu, world_size_of
from .plan import RunPlan

#: --logger choices; csv and tensorboard come with Lightning, the others are optional extras
LOGGERS = ("csv", "tensorboard", "wandb", "mlflow", "none")
#: the package each logger needs (any of them) and how to install it
LOGGER_PACKAGES = {
    "tensorboard": (("tensorboard", "tensorboardX"), "pip install tensorboard"),
    "wandb": (("wandb",), 'pip install "bench[wandb]"'),
    "mlflow": (("mlflow",), 'pip install "bench[mlflow]"'),
}


def check_logger(kind: str) -> None:
    """Refuse, before anything is written, a logger that is unknown or whose package is missing."""
    if kind not in LOGGERS:
        raise UserError(f"--logger {kind!r}: choose {', '.join(LOGGERS[:-1])} or none")
    if kind in LOGGER_PACKAGES:
        packages, install = LOGGER_PACKAGES[kind]
        if all(importlib.util.find_spec(package) is None for package in packages):
            raise UserError(f"--logger {kind} needs the {packages[0]} package ({install}); or use --logger csv")


def plan_run(
    model: str,
    task: str,
    preset: str,
    seed: int,
    out: str | os.PathLike,
    overrides: list[str] | dict | None,
    registry=None,
    trainer_kwargs: dict | None = None,
) -> RunPlan:
    """The run's plan: its configuration resolved and checked (the seed, the task's settings, the
    data and a forward fit in memory), its record's path, the output folder writable; nothing is
    written."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise UserError(f"seed must be a whole number from 0 to 4294967295, got {seed!r}")
    config = resolve_run(_registry(registry), model, task, preset, overrides)
    instantiate_task(config.task)  # settings the task refuses (its constructor only stores them): one line, here
    train = config.train
    kwargs = dict(trainer_kwargs or {})
    world = world_size_of(kwargs)
    check_sizes(config, train, on_cpu=runs_on_cpu(kwargs))
    path = record_path(Path(out), model, task, preset, seed, overrides, world)
    ensure_writable(Path(out))
    return RunPlan(model, task, preset, seed, overrides, config, train, path, kwargs, world)
