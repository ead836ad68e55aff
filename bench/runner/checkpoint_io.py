"""Checkpoints written by rename: a kill while saving leaves the previous checkpoint intact.

Lightning's own ``_atomic_save`` writes the final path in place on a local disk, so a SIGKILL
mid-write would corrupt the only resume point of a run."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from ..records import current_umask


class AtomicCheckpointIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        try:
            os.fchmod(fd, 0o666 & ~current_umask())
            with os.fdopen(fd, "wb") as f:
                torch.save(checkpoint, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
