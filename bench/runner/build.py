"""Build a run's parts from the registry: the task, the backbone, checks on where it runs."""

from __future__ import annotations

import torch

from bench.tasks.base import TaskError

from ..config import parse_overrides, resolve_model, resolve_task
from ..errors import UserError
from ..registry import BACKBONE_SETTINGS, Registry
from ..spec import ModelSpec, TaskSpec


def _registry(registry) -> Registry:
    return registry if isinstance(registry, Registry) else Registry(registry)


def instantiate_task(spec: TaskSpec):
    try:
        return spec.cls.build(spec.name, spec.params)
    except (TaskError, ValueError, TypeError) as exc:
        raise UserError(f"task {spec.name!r}: {exc}") from None


def instantiate_model(spec: ModelSpec, vocab_size: int):
    from bench.models.layers.init import initialise, place_dropout

    params = {k: v for k, v in spec.params.items() if k not in BACKBONE_SETTINGS}
    try:
        model = initialise(spec.cls(vocab_size, spec.causal, **params), spec.params.get("init", "default"))
        return place_dropout(model, spec.params.get("dropout_at", "bench"))
    except (ValueError, TypeError) as exc:
        raise UserError(f"model {spec.name!r}: {exc}") from None
    except (RuntimeError, MemoryError) as exc:  # negative sizes, allocator failures
        raise UserError(f"model {spec.name!r} cannot be built with {_sizes(spec.params)}: {_first_line(exc)}") from None


def _sizes(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items() if isinstance(v, int) and not isinstance(v, bool)) or "these parameters"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "alloc" in text.lower() or isinstance(exc, MemoryError):
        return f"out of memory ({text}); reduce model.d_model / model.n_layers or train.batch_size"
    return text


def check_attention_backend(spec: ModelSpec, device: torch.device) -> None:
    """xformers is optional and CUDA only: say so before training rather than fail in step one."""
    if spec.params.get("attn_backend") != "xformers":
        return
    from bench.models.layers import xformers_unusable

    if device.type != "cuda":
        raise UserError(f"model.attn_backend=xformers runs on CUDA only and this run is on {device.type}; use model.attn_backend=sdpa")
    if (why := xformers_unusable()) is not None:
        raise UserError(f"model.attn_backend=xformers {why}; or use model.attn_backend=sdpa")


def build_task(name: str, preset: str = "smoke", registry=None, **data_overrides):
    """A task object from its registry entry and preset; keyword arguments override data params."""
    reg = _registry(registry)
    return instantiate_task(resolve_task(reg, name, preset, parse_overrides({f"data.{k}": v for k, v in data_overrides.items()})))


def build_model(
    name: str, task=None, vocab_size: int | None = None, causal: bool | None = None, preset: str = "smoke", registry=None, **overrides
):
    """The backbone module of a registry model. With ``task`` (a name or Task), the task's preset
    model parameters and its causality apply; otherwise give ``vocab_size`` (and ``causal``)."""
    reg = _registry(registry)
    ov = {f"model.{k}": v for k, v in overrides.items()}
    if causal is not None:
        ov["model.causal"] = causal
    ov = parse_overrides(ov)
    resolved_task = None
    if task is not None:
        task_name = task if isinstance(task, str) else task.name
        resolved_task = resolve_task(reg, task_name, preset, parse_overrides({}))
        if isinstance(task, str):
            task = instantiate_task(resolved_task)
        vocab_size = task.vocab_size
    if vocab_size is None:
        raise UserError("build_model needs a task or a vocab_size")
    return instantiate_model(resolve_model(reg, name, resolved_task, ov), vocab_size)
