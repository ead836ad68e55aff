"""``lra-image``: CIFAR-10 in grayscale, 1024 pixel tokens, read from the python release (its pickles
unpickled as arrays only) or tfds' cifar10 shards."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np

from ..base import TaskError
from .files import BYTE0, END, START, FileTask, holdout
from .layouts import Found, Layout
from .tfds import check_first_record, read_tfds


class ArraysOnly(pickle.Unpickler):
    """CIFAR-10's python batches are pickles: read them as numpy arrays and plain values only, any
    other global (a class, a function: code the file could run) refused as UnpicklingError."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),
    }

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}; only numpy arrays and plain values are read")


class LRAImage(FileTask):
    """CIFAR-10 in grayscale, 32x32 pixels as 1024 tokens (pixel v -> token 3 + v): the python
    release or tfds' cifar10."""

    kind = "classify"
    num_classes = 10
    name = "lra-image"
    BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
    layouts = (
        Layout(
            "CIFAR-10 python release",
            {"train": tuple(f"cifar-10-batches-py/{b}" for b in BATCHES), "test": ("cifar-10-batches-py/test_batch",)},
            shown="cifar-10-batches-py/data_batch_1 .. data_batch_5, test_batch",
        ),
        Layout(
            "tfds cifar10 (as LRA's scripts load it)",
            {"train": ("cifar10-train.tfrecord*",), "test": ("cifar10-test.tfrecord*",)},
            bases=("cifar10/*",),
            shown="cifar10/<version>/cifar10-{train,test}.tfrecord*",
        ),
    )

    def __init__(self, data_dir: str | None = None, val_fraction: float = 0.1, start_end: bool = True, data_seed: int = 1234):
        super().__init__(data_dir, 1026, start_end, data_seed)
        self.val_fraction = val_fraction

    @property
    def vocab(self):
        return ["<pad>", "<start>", "<end>", *[str(v) for v in range(256)]]

    def _read_batch(self, path: Path):
        try:
            with open(path, "rb") as f:
                d = ArraysOnly(f, encoding="bytes").load()
            data = np.asarray(d[b"data"], dtype=np.uint8)
            labels = np.asarray(d[b"labels"], dtype=np.int64)
            if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
                raise ValueError(f"data {data.shape}, labels {labels.shape}")
        except (pickle.UnpicklingError, KeyError, ValueError, TypeError, EOFError) as e:
            raise TaskError(
                f"{self.name}: {path}: not a CIFAR-10 python batch ({e!r}); expected "
                "a pickled dict with b'data' uint8 [N, 3072] and b'labels'"
            ) from None
        return data, labels

    def _read_tfds(self, files: list[Path]):
        """tfds' cifar10 shards: PNG images -> [N, 3072] as the python release stores them (R, G, B planes)."""
        from PIL import Image

        cols = read_tfds(files, ("image", "label"), self.name)
        data = np.zeros((len(cols["image"]), 3072), dtype=np.uint8)
        for i, png in enumerate(cols["image"]):
            try:
                img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))  # (32, 32, 3)
            except OSError as e:
                raise TaskError(f"{self.name}: {files[0].parent}: image {i} is not a PNG ({e})") from None
            if img.shape != (32, 32, 3):
                raise TaskError(f"{self.name}: {files[0].parent}: image {i} is {img.shape[1]}x{img.shape[0]}, expected 32x32")
            data[i] = img.transpose(2, 0, 1).reshape(3072)
        return data, np.asarray(cols["label"], dtype=np.int64)

    def _read(self, found: Found, part: str):
        if found.layout is self.layouts[0]:
            parts = [self._read_batch(p) for p in found.files[part]]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        return self._read_tfds(found.files[part])

    def generate(self, split, rng):
        found = self.found
        data, labels = self._read(found, "test" if split == "test" else "train")
        if split != "test":
            source = (
                f"{found.base / 'cifar-10-batches-py'}/data_batch_1..5"
                if found.layout is self.layouts[0]
                else f"{found.base}/cifar10-train.tfrecord*"
            )
            val = holdout(len(data), self.val_fraction, self.data_seed, f"{self.name}: {source}")
            keep = val if split == "val" else ~val
            data, labels = data[keep], labels[keep]
        # tf.image.rgb_to_grayscale as in LRA: ITU-R 601 weights, back to uint8 by
        # convert_image_dtype (floor of x * 255.5 on the [0, 1] scale)
        rgb = data.reshape(-1, 3, 1024).astype(np.float32) / 255.0
        gray = np.tensordot(np.array([0.2989, 0.5870, 0.1140], np.float32), rgb, axes=([0], [1]))
        px = np.floor(gray * 255.5).clip(0, 255).astype(np.int16) + BYTE0  # (N, 1024)
        if self.start_end:
            n = len(px)
            px = np.concatenate([np.full((n, 1), START, np.int16), px, np.full((n, 1), END, np.int16)], 1)
        return {"tokens": px, "label": labels}

    def check(self, found):
        if found.layout is self.layouts[0]:
            data, _ = self._read_batch(found.files["test"][0])
            return f"5 training batches, test_batch of {len(data)} images"
        check_first_record(self.name, found.files["test"][0], ("image", "label"), "tfds' cifar10 shards")
        return f"train {len(found.files['train'])} shard(s), test {len(found.files['test'])}"
