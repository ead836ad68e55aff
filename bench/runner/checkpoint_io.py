"""Checkpoints written by rename: a kill while saving leaves the previous checkpoint intact.

Lightning's own ``_atomic_save`` writes the final path in place on a local disk, so a SIGKILL
mid-write would corrupt the only resume point of a run."""
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
