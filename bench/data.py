"""Generated data, cached as Hugging Face datasets on disk, and batches for training.

A split is generated once per fingerprint (task class, version, parameters, split name and
seed, anything the task adds) under $BENCH_DATA_DIR (default ~/.cache/bench/data), written
to a temporary folder and renamed into place, so an interrupted generation never leaves a
half-written cache behind.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from bench.tasks.base import PAD, Task
from bench.tasks.kinds import KINDS, kind_of, pad

from .metrics import with_token_chance
from .records import current_umask
from .sampling import ResumableLoader, eval_loader
from .tasks.chance import with_levels

DATA_ENV = "BENCH_DATA_DIR"


def cache_root() -> Path:
    return Path(os.environ.get(DATA_ENV) or Path.home() / ".cache" / "bench" / "data")


def fingerprint(task: Task, split: str) -> str:
    ident = {
        "class": f"{type(task).__module__}.{type(task).__qualname__}",
        "version": task.version,
        "params": task.params,  # every constructor argument, defaults included (bench.tasks.base.Task)
        "split": split,
        "seed": task.split_seed(split),
        "extra": task.fingerprint_extra(),
    }
    blob = json.dumps(ident, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _columns(generated) -> dict:
    """What ``Task.generate`` returns, checked: a dict of equal-length, non-empty columns."""
    from bench.tasks.base import TaskError

    if not isinstance(generated, dict) or "tokens" not in generated:
        raise TypeError(f"Task.generate must return a dict of columns with 'tokens', got {type(generated).__name__}")
    sizes = {key: len(column) for key, column in generated.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"Task.generate returned columns of different lengths: {sizes}")
    if sizes["tokens"] == 0:
        raise TaskError("the task generated an empty split (no examples); check its size parameters and input files")
    return generated


def split_path(task: Task, split: str) -> Path:
    return cache_root() / type(task).__name__.lower() / f"{split}-{fingerprint(task, split)}"


def _tqdm_thread_lock() -> None:
    """Give tqdm a thread lock before ``datasets.load_from_disk`` first uses it. Loading runs tqdm's
    ``thread_map``, whose first use creates tqdm's class lock, by default a multiprocessing RLock:
    a named POSIX semaphore the multiprocessing resource tracker watches. A grid cell stopped by a
    signal can exit without releasing it, and the tracker (a child of the grid) then prints a
    leaked-semaphore warning after the grid's last line. Loading needs threads only."""
    import threading

    from tqdm import tqdm

    if getattr(tqdm, "_lock", None) is None:
        tqdm.set_lock(threading.RLock())


def _read(path: Path):
    """The cached split at ``path``, or None when it is missing or unreadable (truncated, corrupt)."""
    import datasets

    if not path.is_dir():
        return None
    _tqdm_thread_lock()
    try:
        ds = datasets.load_from_disk(str(path))
        ds.data.validate(full=True)  # reads every buffer: a truncated file fails here, not mid-training
        return ds
    except Exception:  # noqa: BLE001 - arrow/fsspec/json errors of a damaged folder all mean "regenerate"
        return None


def load_split(task: Task, split: str, *, refresh: bool = False):
    """The cached HF dataset for one split, generating and caching it when needed.

    Safe under any number of concurrent processes: generation holds a lock per fingerprint and
    publishes the split by one atomic rename, a published folder is never deleted unless it is
    unreadable, and temporary folders left by killed generators are removed under the lock."""
    import datasets
    from filelock import FileLock

    datasets.disable_progress_bars()
    path = split_path(task, split)
    if not refresh and (ds := _read(path)) is not None:
        return ds
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.parent / f".{path.name}.lock")):
        if not refresh and (ds := _read(path)) is not None:  # another process made it meanwhile
            return ds
        for orphan in path.parent.glob(f".{path.name}-*"):  # a generator killed mid-write
            shutil.rmtree(orphan, ignore_errors=True)
        rng = np.random.default_rng(task.split_seed(split))
        ds = datasets.Dataset.from_dict(_columns(task.generate(split, rng)))
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
        try:
            tmp.chmod(0o777 & ~current_umask())  # mkdtemp's 0700 would hide a shared cache from others
            ds.save_to_disk(str(tmp))
            if path.exists():  # unreadable (checked above under the lock) or refresh=True
                shutil.rmtree(path)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    ds = _read(path)
    if ds is None:
        raise OSError(f"the cached split {path} cannot be read right after writing it; delete the folder and check the disk")
    return ds


def _list_to_numpy(arr):
    """A (possibly nested) Arrow list array -> (flat values as numpy, per-row lengths)."""
    import pyarrow.compute as pc

    lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
    values = arr.flatten()
    if hasattr(values, "flatten") and hasattr(values.type, "value_type"):  # list of lists (tag labels)
        inner, inner_len = _list_to_numpy(values)
        if len(inner_len) and (inner_len == inner_len[0]).all():
            return inner.reshape(len(inner_len), int(inner_len[0])), lengths
        raise ValueError("ragged inner lists are not supported in a column")
    return values.to_numpy(zero_copy_only=False), lengths


def _column_to_numpy(chunked):
    """One column -> a 2-D array when every row has the same length (the fast path), else a
    list of per-row arrays; scalars -> a 1-D array. Done once per split, not per batch."""
    arr = chunked.combine_chunks()
    if not hasattr(arr.type, "value_type"):
        return arr.to_numpy(zero_copy_only=False)
    values, lengths = _list_to_numpy(arr)
    if len(lengths) and (lengths == lengths[0]).all():
        return values.reshape(len(lengths), int(lengths[0]), *values.shape[1:])
    return np.split(values, np.cumsum(lengths)[:-1])


class SplitData(Dataset):
    """One split held as numpy columns (fixed-length columns stay one 2-D array)."""

    def __init__(self, hf_dataset):
        self.columns = {c: _column_to_numpy(hf_dataset.data.column(c)) for c in hf_dataset.column_names}
        self.n = len(hf_dataset)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        ex = {c: col[i] for c, col in self.columns.items()}
        ex["index"] = i
        return ex


def collate(examples: list[dict], kind: str | None = None) -> dict:
    """Right-pad a list of examples into a batch: tokens, mask, index, length, and the columns of
    the task's ``kind`` (bench/tasks/kinds.py; None: the kind whose columns the examples hold)."""
    batch: dict = {"index": torch.tensor([ex["index"] for ex in examples])}
    batch["tokens"], batch["mask"] = pad([ex["tokens"] for ex in examples], PAD)
    task_kind = kind_of(kind) if kind is not None else _kind_of_columns(examples[0])
    if task_kind is not None:
        task_kind.collate(examples, batch)
    if "length" in examples[0]:
        batch["length"] = torch.tensor([int(ex["length"]) for ex in examples])
    else:
        batch["length"] = batch["mask"].sum(-1)
    return batch


def _kind_of_columns(example: dict):
    """The kind with the most columns that ``example`` holds all of (None: only tokens)."""
    fits = [k for k in KINDS.values() if k.columns and all(c in example for c in k.columns)]
    return max(fits, key=lambda k: len(k.columns), default=None)


class TaskData:
    """Train / validation / test loaders for one task (a Lightning-free data module: the
    LightningModule takes the loaders directly, so the bare-torch benchmark uses the same ones)."""

    def __init__(self, task: Task, batch_size: int, eval_batch_size: int, seed: int):
        self.task = task
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.seed = seed
        self.splits = {name: SplitData(load_split(task, name)) for name in task.splits()}

    def train_loader(self) -> DataLoader:
        """Seeded, epoch-dependent, rank-sharded and resumable order (bench/sampling.py)."""
        return ResumableLoader(self.splits["train"], self.batch_size, self.seed, functools.partial(collate, kind=self.task.kind))

    def eval_loader(self, split: str) -> DataLoader:
        """Every example once, in order, no dropped last batch (sharded over ranks under DDP)."""
        return eval_loader(self.splits[split], self.eval_batch_size, functools.partial(collate, kind=self.task.kind))

    def test_splits(self) -> list[str]:
        return self.task.test_splits()

    def with_chance(self, split: str, metrics: dict) -> dict:
        """``metrics`` of ``split`` (every example evaluated) with its token-level chance level
        (bench/metrics.py:with_token_chance) and its chance levels, the best trivial strategy's
        score per metric (bench/tasks/chance.py:with_levels)."""
        columns = self.splits[split].columns
        return with_levels(with_token_chance(metrics, self.task.kind, columns, self.task.length_bin), self.task, columns)
