"""Long Range Arena (Tay et al. 2021) as in [HALT §6.7, Table 4].

* ``lra-listops``: ListOps from our generator with LRA's settings (args <= 10, depth <= 10,
  500-2000 tokens; 96k / 2k / 2k). Pathfinder lives in ``bench/tasks/pathfinder.py``.
* ``lra-text`` (IMDB, bytes), ``lra-retrieval`` (AAN pairs, bytes, pair kind) and ``lra-image``
  (CIFAR-10 grayscale, 1024 pixel tokens) read files the user supplies; nothing is downloaded.
  The directory is the ``data_dir`` parameter, else $BENCH_LRA_DIR. Expected files (the
  standard release names; see docs/tasks.md):

      aclImdb/train/{pos,neg}/*.txt, aclImdb/test/{pos,neg}/*.txt     (Maas et al. 2011 release)
      new_aan_pairs.train.tsv, new_aan_pairs.eval.tsv, new_aan_pairs.test.tsv  (lra_release/tsv_data)
      cifar-10-batches-py/data_batch_1..5, cifar-10-batches-py/test_batch   (python pickles)

  A worked Text sample: review b"Great film!" (label pos = 1) ->
  tokens <start> 74 117 104 ... 36 <end> (byte b -> token 3 + b), label 1.

Validation is never the test set (one of the known pitfalls of the original pipelines):
Text and Image hold out ``val_fraction`` of the training files with a permutation fixed by
``data_seed``; Retrieval uses the release's ``eval`` file.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np

from .base import Task, TaskError
from .listops import SPLITS as LISTOPS_SPLITS
from .listops import ListOps

ENV = "BENCH_LRA_DIR"
BYTE_VOCAB = ["<pad>", "<start>", "<end>", *[f"x{b:02x}" for b in range(256)]]
BYTE0, START, END = 3, 1, 2


class ArraysOnly(pickle.Unpickler):
    """CIFAR-10's python batches are pickles: read them as numpy arrays and plain values only, any
    other global (a class, a function: code the file could run) refused as UnpicklingError."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
               ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}; only numpy arrays and plain values are read")


def data_root(task: str, data_dir: str | None, expected: list[str]) -> Path:
    """The directory holding a task's files; TaskError (one line) when it or a file is missing."""
    root = data_dir or os.environ.get(ENV)
    if not root:
        raise TaskError(f"{task}: no data directory: set the task parameter data_dir or ${ENV} "
                        f"to the folder holding {', '.join(expected)}")
    root = Path(root).expanduser()
    missing = [e for e in expected if not any(root.glob(e))]
    if missing:
        raise TaskError(f"{task}: missing {', '.join(missing)} in {root} "
                        f"(expected {', '.join(expected)}; set data_dir or ${ENV})")
    return root


def file_stats(root: Path, patterns: list[str]) -> dict:
    """Sizes and mtimes of the input files, so a changed file invalidates the cache."""
    files = sorted(p for pat in patterns for p in root.glob(pat))
    return {"n_files": len(files), "bytes": sum(p.stat().st_size for p in files),
            "mtime": max((p.stat().st_mtime for p in files), default=0)}


def encode_bytes(data: bytes, max_len: int, start_end: bool = True) -> np.ndarray:
    """Byte-level tokens (3 + byte), truncated so the sequence fits in max_len."""
    body = np.frombuffer(data[: max_len - 2 * start_end], dtype=np.uint8).astype(np.int16) + BYTE0
    return np.concatenate([[START], body, [END]]).astype(np.int16) if start_end else body


def holdout(n: int, fraction: float, seed: int, source: str) -> np.ndarray:
    """Boolean mask of the validation items among the n training items of ``source`` (fixed by
    seed); TaskError when validation or training would be left empty."""
    n_val = int(round(n * fraction))
    if not 0 < n_val < n:
        raise TaskError(f"{source} holds {n} training examples; val_fraction={fraction:g} holds out {n_val} "
                        f"for validation and leaves {n - n_val} for training, and each needs at least one "
                        f"(supply more examples or change val_fraction)")
    val = np.zeros(n, dtype=bool)
    val[np.random.default_rng(seed).permutation(n)[:n_val]] = True
    return val


class LRAListOps(ListOps):
    """LRA ListOps: one generated IID test set of 500-2000-token trees."""

    def __init__(self, n_train: int = 96000, n_val: int = 2000, n_test: int = 2000,
                 start_end: bool = True, data_seed: int = 1234):
        super().__init__(n_train, n_val, n_test, test_splits=["test"], start_end=start_end,
                         data_seed=data_seed)

    def split_config(self, split):
        # every split draws from LRA's distribution; at >= 500 tokens two random trees are
        # never equal in practice, so no hash partition between splits is needed
        return LISTOPS_SPLITS["lra"]


class _FileTask(Task):
    expected: list[str] = []
    name = "lra"

    def __init__(self, data_dir: str | None = None, max_length: int = 4000,
                 start_end: bool = True, data_seed: int = 1234):
        super().__init__(data_seed)
        self.data_dir, self.max_length, self.start_end = data_dir, max_length, start_end

    @property
    def root(self) -> Path:
        return data_root(self.name, self.data_dir, self.expected)

    def test_splits(self):
        return ["test"]

    def fingerprint_extra(self):
        return file_stats(self.root, self.expected)


class LRAText(_FileTask):
    """IMDB sentiment from raw bytes (the aclImdb release)."""

    kind = "classify"
    num_classes = 2
    name = "lra-text"
    expected = ["aclImdb/train/pos/*.txt", "aclImdb/train/neg/*.txt",
                "aclImdb/test/pos/*.txt", "aclImdb/test/neg/*.txt"]

    def __init__(self, data_dir: str | None = None, max_length: int = 4000,
                 val_fraction: float = 0.1, start_end: bool = True, data_seed: int = 1234):
        super().__init__(data_dir, max_length, start_end, data_seed)
        self.val_fraction = val_fraction

    @property
    def vocab(self):
        return BYTE_VOCAB

    def generate(self, split, rng):
        part = "test" if split == "test" else "train"
        files, labels = [], []
        for label, polarity in ((0, "neg"), (1, "pos")):
            got = sorted((self.root / "aclImdb" / part / polarity).glob("*.txt"))
            files += got
            labels += [label] * len(got)
        keep = np.ones(len(files), dtype=bool)
        if part == "train":
            val = holdout(len(files), self.val_fraction, self.data_seed,
                          f"{self.name}: {self.root / 'aclImdb' / 'train'}/{{pos,neg}}/*.txt")
            keep = val if split == "val" else ~val
        idx = np.flatnonzero(keep)
        return {"tokens": [encode_bytes(files[i].read_bytes(), self.max_length, self.start_end)
                           for i in idx],
                "label": np.asarray(labels, dtype=np.int64)[idx]}


class LRARetrieval(_FileTask):
    """AAN document matching: are two papers linked by citation? Pairs of byte sequences."""

    kind = "pair_classify"
    num_classes = 2
    name = "lra-retrieval"
    expected = ["new_aan_pairs.train.tsv", "new_aan_pairs.eval.tsv", "new_aan_pairs.test.tsv"]

    @property
    def vocab(self):
        return BYTE_VOCAB

    def generate(self, split, rng):
        path = self.root / f"new_aan_pairs.{ {'train': 'train', 'val': 'eval'}.get(split, 'test') }.tsv"
        out = {"tokens": [], "tokens2": [], "label": []}
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                cols = line.rstrip(b"\r\n").split(b"\t")
                if n == 1 and cols[0].strip().lower() == b"label":
                    continue  # tolerate a header line
                try:
                    if len(cols) != 5:
                        raise ValueError(f"{len(cols)} tab-separated fields, expected 5")
                    label = int(float(cols[0]))
                    if label not in (0, 1):
                        raise ValueError(f"label {label} not in {{0, 1}}")
                except ValueError as e:
                    raise TaskError(f"{self.name}: {path}:{n}: malformed line ({e}); format: "
                                    "label<TAB>id1<TAB>id2<TAB>text1<TAB>text2") from None
                out["tokens"].append(encode_bytes(cols[3], self.max_length, self.start_end))
                out["tokens2"].append(encode_bytes(cols[4], self.max_length, self.start_end))
                out["label"].append(label)
        if not out["label"]:
            raise TaskError(f"{self.name}: {path} holds no examples")
        return out


class LRAImage(_FileTask):
    """CIFAR-10 in grayscale, 32x32 pixels as 1024 tokens (pixel v -> token 3 + v)."""

    kind = "classify"
    num_classes = 10
    name = "lra-image"
    expected = [*[f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)],
                "cifar-10-batches-py/test_batch"]

    def __init__(self, data_dir: str | None = None, val_fraction: float = 0.1,
                 start_end: bool = True, data_seed: int = 1234):
        super().__init__(data_dir, 1026, start_end, data_seed)
        self.val_fraction = val_fraction

    @property
    def vocab(self):
        return ["<pad>", "<start>", "<end>", *[str(v) for v in range(256)]]

    def _read(self, name):
        path = self.root / "cifar-10-batches-py" / name
        try:
            with open(path, "rb") as f:
                d = ArraysOnly(f, encoding="bytes").load()
            data = np.asarray(d[b"data"], dtype=np.uint8)
            labels = np.asarray(d[b"labels"], dtype=np.int64)
            if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
                raise ValueError(f"data {data.shape}, labels {labels.shape}")
        except (pickle.UnpicklingError, KeyError, ValueError, TypeError, EOFError) as e:
            raise TaskError(f"{self.name}: {path}: not a CIFAR-10 python batch ({e!r}); expected "
                            "a pickled dict with b'data' uint8 [N, 3072] and b'labels'") from None
        return data, labels

    def generate(self, split, rng):
        names = ["test_batch"] if split == "test" else [f"data_batch_{i}" for i in range(1, 6)]
        parts = [self._read(n) for n in names]
        data = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
        if split != "test":
            val = holdout(len(data), self.val_fraction, self.data_seed,
                          f"{self.name}: {self.root / 'cifar-10-batches-py'}/data_batch_1..5")
            keep = val if split == "val" else ~val
            data, labels = data[keep], labels[keep]
        # tf.image.rgb_to_grayscale as in LRA: ITU-R 601 weights, back to uint8 by
        # convert_image_dtype (floor of x * 255.5 on the [0, 1] scale)
        rgb = data.reshape(-1, 3, 1024).astype(np.float32) / 255.0
        gray = np.tensordot(np.array([0.2989, 0.5870, 0.1140], np.float32), rgb, axes=([0], [1]))
        px = np.floor(gray * 255.5).clip(0, 255).astype(np.int16) + BYTE0  # (N, 1024)
        if self.start_end:
            n = len(px)
            px = np.concatenate([np.full((n, 1), START, np.int16), px,
                                 np.full((n, 1), END, np.int16)], 1)
        return {"tokens": px, "label": labels}
