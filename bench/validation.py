"""``bench validate``: the registry checked by resolving it the way ``bench run`` does
(bench/config.py's ``resolve_*``), so that it finds exactly what a run would refuse: each model
entry alone, each task's presets, each preset with every model (its sizes, family and train
settings), and each model built small. A model that cannot run a task (``errors.Incompatible``)
is no problem of either."""

from __future__ import annotations

from .config import resolve_model, resolve_task, resolve_train
from .errors import Incompatible, UserError
from .registry import BACKBONE_SETTINGS, PRESETS, Registry
from .spec import ModelSpec, TaskSpec


def registry_problems(registry: Registry) -> list[str]:
    """One line per refusal, each once, in registry order: the model entries' and their builds',
    then the tasks' presets' (the first refusal of each preset); empty when all resolve."""
    problems: list[str] = []
    models: dict[str, ModelSpec] = {}
    for name in registry.model_names():
        try:
            models[name] = resolve_model(registry, name, None, {})
        except UserError as exc:
            problems.append(str(exc))
    smoke_tasks, preset_problems = [], []
    for task in registry.task_names():
        try:
            presets = list(registry.task_entry(task)["presets"]) or [PRESETS[0]]  # none: what `bench run` says then
        except UserError as exc:
            preset_problems.append(str(exc))
            continue
        for preset in presets:
            spec, problem = _preset_problem(registry, task, preset, models)
            if spec is not None and preset == "smoke":
                smoke_tasks.append(spec)
            if problem:
                preset_problems.append(problem)
    for spec in models.values():
        problems += _build_problems(registry, spec, smoke_tasks)
    return list(dict.fromkeys(problems + preset_problems))


def _preset_problem(registry: Registry, task: str, preset: str, models: dict) -> tuple[TaskSpec | None, str | None]:
    """(the task's preset resolved, or None; the first refusal of it with every model in
    ``models``, or None)."""
    try:
        spec = resolve_task(registry, task, preset, {})
    except UserError as exc:
        return None, str(exc)
    try:
        for model in models:
            resolve_train(registry, model, spec, {})
            try:
                resolve_model(registry, model, spec, {})
            except Incompatible:
                continue
    except UserError as exc:
        return spec, str(exc)
    return spec, None


def _build_problems(registry: Registry, spec: ModelSpec, smoke_tasks: list[TaskSpec], vocab_size: int = 8) -> list[str]:
    """Model ``spec`` built at a tiny size: resolved with the smoke preset of the first task it
    can run on (its entry alone when none), for a vocabulary of ``vocab_size``; the line saying
    why, when its constructor refuses."""
    where = "its entry alone"
    for task in smoke_tasks:
        try:
            spec, where = resolve_model(registry, spec.name, task, {}), f"the smoke preset of {task.name}"
            break
        except UserError:
            continue
    params = {k: v for k, v in spec.params.items() if k not in BACKBONE_SETTINGS}
    try:
        spec.cls(vocab_size, spec.causal, **params)
    except Exception as exc:  # noqa: BLE001 - whatever a constructor raises is the entry's problem
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [f"models.{spec.name}: {spec.target} cannot be built with {where} ({type(exc).__name__}: {text})"]
    return []
