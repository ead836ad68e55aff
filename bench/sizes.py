"""What a forward at a given batch and length costs, estimated from a model's parameters before
any work, so that a size that cannot fit in memory is refused in one line and a long one says so.

The estimate is rough, not a measurement: float32 activations of ``ACTIVATIONS`` tensors of
(batch, length, d_model) per layer alive at once (``RECURRENT_ACTIVATIONS`` for a recurrent layer;
half of them in evaluation; every layer when training keeps them for the backward, one layer in
evaluation), the position table, and the score matrix (batch, heads,
length, length) of one layer for attention models whose attention is not sdpa's (sdpa's CPU and
GPU kernels work in tiles). Work: about 24 * d_model^2 multiply-adds per token and layer, plus
2 * length * d_model per token and layer for attention, or a fixed cost per time step and layer
for a recurrent model (one without n_heads)."""

from __future__ import annotations

from pathlib import Path

from .errors import UserError

#: (batch, length, d_model) float32 tensors a layer keeps alive (attention in/out, MLP at 4x, norms)
ACTIVATIONS = 12
#: the same for a recurrent layer (its input and output sequences; the gates live one step)
RECURRENT_ACTIVATIONS = 4
#: the multiply-adds per second one CPU core does in a forward, to turn work into minutes (rough)
CPU_MACS_PER_S = 5e9
#: the fixed cost of one time step of a recurrent layer (kernel launches, Python), as multiply-adds (~40 µs)
STEP_MACS = 200_000


def available_memory() -> int | None:
    """Bytes of memory this machine can still give (MemAvailable); None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _int(params: dict, *keys: str, default: int = 1) -> int:
    for key in keys:
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def forward_cost(params: dict, batch: int, length: int, training: bool) -> tuple[int, int]:
    """(bytes, multiply-adds) of one forward (and, ``training``, backward) of a model with these
    parameters on ``batch`` sequences of ``length`` tokens."""
    d = _int(params, "d_model", "hidden_size", default=128)
    layers = _int(params, "n_layers", "max_layers", "num_layers")
    heads = params.get("n_heads") if isinstance(params.get("n_heads"), int) else 0
    alive = layers if training else 1
    tensors = (ACTIVATIONS if heads else RECURRENT_ACTIVATIONS) // (1 if training else 2)
    memory = tensors * batch * length * d * 4 * alive + length * d * 4
    if heads and params.get("attn_backend", "sdpa") != "sdpa":
        memory += batch * heads * length * length * 4 * alive
    macs = batch * length * layers * (24 * d * d + (2 * length * d if heads else 0)) * (3 if training else 1)
    if not heads:  # a recurrent model steps through time: a fixed cost per step and layer, whatever the batch
        macs += length * layers * STEP_MACS * (3 if training else 1)
    return memory, macs


def check_fits(what: str, need: int, hint: str) -> None:
    """One UserError line when ``need`` bytes exceed the memory this machine can give."""
    have = available_memory()
    if have is not None and need > have:
        raise UserError(f"{what} would need at least {need / 2**30:,.1f} GiB and {have / 2**30:,.1f} GiB of memory is available; {hint}")


def duration(macs: int) -> str:
    """Work as a rough time on one CPU core: '3 minutes', '2.5 hours'."""
    seconds = macs / CPU_MACS_PER_S
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.0f} seconds"
