"""What the benchmark scripts share: timing one call on CPU or CUDA, and printing / saving a table."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch


def seconds(device: torch.device, fn, *args) -> float:
    """Wall time of fn(*args); on CUDA the queue is drained before and after, so kernels count."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(*args)
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def emit(table: str, out: str | None) -> None:
    """Print the table; with out, also write it there under a first line giving the command that made it."""
    print("\n" + table)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("# " + " ".join(["python"] + sys.argv) + "\n\n" + table + "\n")
