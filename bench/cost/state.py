"""A registry model's streaming state in bytes, built as `bench run` builds it: ``model_state``
(the measuring itself is bench/runner/stream_state.py, which runs record)."""

from __future__ import annotations

import torch

from ..config import resolve_run
from ..runner.build import instantiate_model, instantiate_task
from ..runner.stream_state import longest_test_length, state_of


def model_state(registry, model: str, task: str, preset: str, overrides=None, length: int | None = None) -> dict:
    """``state_of`` a registry model built as `bench run` builds it (fresh weights, on the CPU) at
    ``length`` (default: the task's longest test length)."""
    config = resolve_run(registry, model, task, preset, overrides)
    task_obj = instantiate_task(config.task)
    with torch.random.fork_rng(devices=[]):  # the weights do not change the state's size; the caller's RNG stays as it was
        torch.manual_seed(0)
        backbone = instantiate_model(config.model, task_obj.vocab_size)
    return state_of(backbone, length or longest_test_length(task_obj))
