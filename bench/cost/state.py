"""The bytes of a model's streaming state after a given length: what ``init_state`` / ``step``
(bench/models/base.py) carry for one stream, counted by ``counters.state_bytes`` as `bench cost
--stream` counts it, at the model's own width.

``stream_state_bytes(backbone, length)`` steps a random token sequence of ``length`` through the
backbone (batch 1, fp32, eval, no grad; in pieces of at most ``PIECE`` tokens, which the streaming
contract makes equal to one call) and counts the state after it: nothing is inferred from shapes,
so a state that grows with the length (a Transformer's KV cache) and one that does not (an LSTM's
h and c) are measured alike. ``model_state(registry, model, task, preset, overrides)`` does it for
a registry model at the task's longest test length (``longest_test_length``): the figure run
records keep (``stream_state``) and `bench compare --state` / ``--budget state`` read."""
from __future__ import annotations

import torch

from bench.models.base import StreamingUnsupported

from ..config import resolve_run
from ..runner.build import instantiate_model, instantiate_task
from .counters import state_bytes

PIECE = 512  # tokens per step call: bounds the attention scores of a long prefill to PIECE x length


def streaming_refusal(backbone, batch: int, device) -> str | None:
    """Why ``backbone`` cannot stream (one line), or None when it can: a bidirectional instance, a
    family without the contract, or one that refuses by its definition at ``init_state``."""
    if not (backbone.supports_streaming and backbone.causal):
        return backbone.streaming_refusal()
    try:
        backbone.init_state(batch, device)
    except StreamingUnsupported as exc:
        return str(exc)
    return None


def stream_state_bytes(backbone, length: int, seed: int = 0) -> int:
    """Bytes of ``backbone``'s streaming state for one stream after ``length`` random tokens (on the
    backbone's device; its train / eval mode is given back). StreamingUnsupported if it cannot stream."""
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    device = next(backbone.parameters()).device
    if (refusal := streaming_refusal(backbone, 1, device)) is not None:
        raise StreamingUnsupported(refusal)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, backbone.vocab_size, (1, length), generator=gen).to(device)  # (1, T)
    was_training = backbone.training
    backbone.eval()
    try:
        with torch.inference_mode():
            state = backbone.init_state(1, device)
            for start in range(0, length, PIECE):
                _, state = backbone.step(tokens[:, start: start + PIECE], state)
            return state_bytes(state)
    finally:
        backbone.train(was_training)


def longest_test_length(task, splits: list[str] | None = None) -> int:
    """The longest token sequence over the task's test splits (or ``splits``), generated or read
    from the data cache."""
    import pyarrow.compute as pc

    from ..data import load_split

    longest = 0
    for split in task.test_splits() if splits is None else splits:
        tokens = load_split(task, split).data.column("tokens")
        longest = max(longest, int(pc.max(pc.list_value_length(tokens)).as_py() or 0))
    return longest


def state_of(backbone, length: int) -> dict:
    """The record's ``stream_state``: {"bytes", "length", "batch": 1}, or {"bytes": None, "length",
    "refusal"} for a backbone that cannot stream."""
    try:
        return {"bytes": stream_state_bytes(backbone, length), "length": length, "batch": 1}
    except StreamingUnsupported as exc:
        return {"bytes": None, "length": length, "refusal": str(exc)}


def model_state(registry, model: str, task: str, preset: str, overrides=None, length: int | None = None) -> dict:
    """``state_of`` a registry model built as `bench run` builds it (fresh weights, on the CPU) at
    ``length`` (default: the task's longest test length)."""
    config = resolve_run(registry, model, task, preset, overrides)
    task_obj = instantiate_task(config.task)
    with torch.random.fork_rng(devices=[]):  # the weights do not change the state's size; the caller's RNG stays as it was
        torch.manual_seed(0)
        backbone = instantiate_model(config.model, task_obj.vocab_size)
    return state_of(backbone, length or longest_test_length(task_obj))
