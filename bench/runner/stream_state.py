"""The bytes of a model's streaming state after a given length: what ``init_state`` / ``step``
(bench/models/base.py) carry for one stream, at the model's own width; the figure a run records
(``stream_state``), `bench cost --stream` prints and `bench compare --state` / ``--budget state`` read.

``stream_state_bytes(backbone, length)`` steps a random token sequence of ``length`` through the
backbone (batch 1, fp32, eval, no grad; in pieces of at most ``PIECE`` tokens, which the streaming
contract makes equal to one call) and counts the state after it (``state_bytes``): nothing is
inferred from shapes, so a state that grows with the length (a Transformer's KV cache) and one that
does not (an LSTM's h and c) are measured alike. ``longest_test_length`` is the length a run
measures at: the task's longest test sequence."""

from __future__ import annotations

import torch

from ..models.base import StreamingUnsupported


def state_bytes(obj) -> int:
    """Sum of tensor nbytes over a streaming state (tensors in lists, tuples, dicts, dataclasses, objects)."""
    if isinstance(obj, torch.Tensor):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(state_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple, set)):
        return sum(state_bytes(v) for v in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return state_bytes(vars(obj))
    return 0


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
                _, state = backbone.step(tokens[:, start : start + PIECE], state)
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
