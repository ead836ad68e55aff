"""What the benchmark scripts and tools share: timing one call on CPU or CUDA, printing / saving a
table, and the walk of the backfill scripts over run records."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
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


def backfill_args(doc: str) -> argparse.Namespace:
    """The command line of a backfill script: the folders to walk, and --write (default: only print)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--write", action="store_true", help="write the records (default: only print)")
    return p.parse_args()


def run_records(folders: list[Path]) -> Iterator[tuple[Path, dict]]:
    """(path, record) of every run record (``seed*.json``) under the folders, folder by folder in
    path order; a file that cannot be read as JSON is passed over."""
    for folder in folders:
        for path in sorted(folder.rglob("seed*.json")):
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            yield path, rec


def run_backfill(doc: str, backfill, unsaid: tuple[str, ...] = ()) -> int:
    """The walk of a backfill script: ``backfill(path, cache) -> (record or None, what)`` on every run
    record under the command line's folders (``backfill_args``, ``run_records``), each line said
    (but "nothing to write" and the ``unsaid`` ones), each record written with --write."""
    from bench.records import write_json_atomic

    args = backfill_args(doc)
    cache: dict = {}
    for path, _ in run_records(args.folders):
        rec, what = backfill(path, cache)
        if rec is None and what == "nothing to write":
            continue
        if what not in unsaid:
            print(f"{path}: {what}" + (" (written)" if rec is not None and args.write else ""))
        if rec is not None and args.write:
            write_json_atomic(path, rec)
    return 0
