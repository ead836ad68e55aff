"""What the LRA tasks that read your files share: byte tokens (3 + byte, between START and END),
the validation held out of the training files, and ``FileTask``, their base (the data folder, its
layout found, its files' sizes in the data cache's fingerprint)."""

from __future__ import annotations

import numpy as np

from ..base import Task, TaskError
from .layouts import Found, file_stats, locate

BYTE_VOCAB = ["<pad>", "<start>", "<end>", *[f"x{b:02x}" for b in range(256)]]
BYTE0, START, END = 3, 1, 2


def encode_bytes(data: bytes, max_len: int, start_end: bool = True) -> np.ndarray:
    """Byte-level tokens (3 + byte), truncated so the sequence fits in max_len."""
    body = np.frombuffer(data[: max_len - 2 * start_end], dtype=np.uint8).astype(np.int16) + BYTE0
    return np.concatenate([[START], body, [END]]).astype(np.int16) if start_end else body


def holdout(n: int, fraction: float, seed: int, source: str) -> np.ndarray:
    """Boolean mask of the validation items among the n training items of ``source`` (fixed by
    seed); TaskError when validation or training would be left empty."""
    n_val = int(round(n * fraction))
    if not 0 < n_val < n:
        raise TaskError(
            f"{source} holds {n} training examples; val_fraction={fraction:g} holds out {n_val} "
            f"for validation and leaves {n - n_val} for training, and each needs at least one "
            f"(supply more examples or change val_fraction)"
        )
    val = np.zeros(n, dtype=bool)
    val[np.random.default_rng(seed).permutation(n)[:n_val]] = True
    return val


class FileTask(Task):
    """The base of the tasks that read your files: ``data_dir`` (else $BENCH_LRA_DIR) searched for
    one of the class's ``layouts``, the files found named in the data cache's fingerprint."""

    layouts: tuple = ()
    name = "lra"
    reads_user_files = True

    def __init__(self, data_dir: str | None = None, max_length: int = 4000, start_end: bool = True, data_seed: int = 1234):
        super().__init__(data_seed)
        self.data_dir, self.max_length, self.start_end = data_dir, max_length, start_end

    @property
    def found(self) -> Found:
        return locate(self.name, self.data_dir, self.layouts)

    def test_splits(self):
        return ["test"]

    def data_problem(self) -> str | None:
        """None when the task's files are found, else the one line saying what is missing."""
        try:
            _ = self.found  # the property raises TaskError when a file is missing
        except TaskError as exc:
            return str(exc)
        return None

    def fingerprint_extra(self):
        found = self.found
        return {"layout": found.layout.name, **file_stats(found.all_files())}

    def check(self, found: Found) -> str:
        """Read the first example of each part (a format check); a one-line summary."""
        raise NotImplementedError
