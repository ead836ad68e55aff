"""Checkpoints written by rename: a kill while saving leaves the previous checkpoint intact.

Lightning's own ``_atomic_save`` writes the final path in place on a local disk, so a SIGKILL
mid-write would corrupt the only resume point of a run. Checkpoints are read with
``weights_only=True`` (tensors and plain values: nothing in a file is unpickled as code), by a
resume as by ``inspect_checkpoint``; every callback's state is made of such values (callbacks.py)."""

from __future__ import annotations

import io

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from ..records import write_atomic


class AtomicCheckpointIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        write_atomic(path, buffer.getvalue())

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict:
        return super().load_checkpoint(path, map_location=map_location or (lambda storage, loc: storage), weights_only=True)


RESUME_KEYS = ("state_dict", "global_step", "loops")


def inspect_checkpoint(path, needs: tuple[str, ...] = RESUME_KEYS) -> tuple[int | None, str | None]:
    """(global step, None) for a loadable Lightning checkpoint, (None, what is wrong) for a
    damaged one: truncated, not a torch file, or without the state a resume needs (``needs``:
    ``("state_dict",)`` for weights-only checkpoints such as best.ckpt)."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - zip, pickle and EOF errors all mean "damaged"
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        return None, f"{type(exc).__name__}: {lines[0].split('. ')[0] if lines else 'unreadable'}"  # its first sentence
    if not isinstance(ckpt, dict):
        return None, f"it holds a {type(ckpt).__name__}, not a checkpoint"
    missing = [k for k in needs if k not in ckpt]
    if missing:
        return None, f"it has no {', '.join(missing)}"
    return int(ckpt.get("global_step", 0)), None
