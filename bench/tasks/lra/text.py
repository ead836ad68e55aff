"""``lra-text``: IMDB sentiment from raw bytes, read from the aclImdb release or tfds' imdb_reviews shards."""

from __future__ import annotations

import numpy as np

from ..base import TaskError
from .files import BYTE_VOCAB, FileTask, encode_bytes, holdout
from .layouts import Found, Layout
from .tfds import check_first_record, read_tfds


class LRAText(FileTask):
    """IMDB sentiment from raw bytes: the aclImdb release or tfds' imdb_reviews."""

    kind = "classify"
    num_classes = 2
    name = "lra-text"
    layouts = (
        Layout(
            "aclImdb release",
            {"train": ("aclImdb/train/pos/*.txt", "aclImdb/train/neg/*.txt"), "test": ("aclImdb/test/pos/*.txt", "aclImdb/test/neg/*.txt")},
            shown="aclImdb/{train,test}/{pos,neg}/*.txt",
        ),
        Layout(
            "tfds imdb_reviews (as LRA's scripts load it)",
            {"train": ("imdb_reviews-train.tfrecord*",), "test": ("imdb_reviews-test.tfrecord*",)},
            bases=("imdb_reviews/plain_text/*",),
            shown="imdb_reviews/plain_text/<version>/imdb_reviews-{train,test}.tfrecord*",
        ),
    )

    def __init__(
        self, data_dir: str | None = None, max_length: int = 4000, val_fraction: float = 0.1, start_end: bool = True, data_seed: int = 1234
    ):
        super().__init__(data_dir, max_length, start_end, data_seed)
        self.val_fraction = val_fraction

    @property
    def vocab(self):
        return BYTE_VOCAB

    def _read(self, found: Found, part: str) -> tuple[list[bytes], list[int], str]:
        """(texts, labels 0 = neg / 1 = pos, a description of the source) of train or test."""
        if found.layout is self.layouts[0]:
            texts, labels = [], []
            for label, polarity in ((0, "neg"), (1, "pos")):
                got = sorted((found.base / "aclImdb" / part / polarity).glob("*.txt"))
                texts += [p.read_bytes() for p in got]
                labels += [label] * len(got)
            return texts, labels, f"{found.base / 'aclImdb' / part}/{{pos,neg}}/*.txt"
        cols = read_tfds(found.files[part], ("text", "label"), self.name)
        bad = sorted({y for y in cols["label"] if y not in (0, 1)})
        if bad:
            raise TaskError(f"{self.name}: {found.base}: labels {bad[:3]} are not 0 (neg) / 1 (pos)")
        return cols["text"], cols["label"], f"{found.base}/imdb_reviews-{part}.tfrecord*"

    def generate(self, split, rng):
        found = self.found
        part = "test" if split == "test" else "train"
        texts, labels, source = self._read(found, part)
        keep = np.ones(len(texts), dtype=bool)
        if part == "train":
            val = holdout(len(texts), self.val_fraction, self.data_seed, f"{self.name}: {source}")
            keep = val if split == "val" else ~val
        idx = np.flatnonzero(keep)
        return {
            "tokens": [encode_bytes(texts[i], self.max_length, self.start_end) for i in idx],
            "label": np.asarray(labels, dtype=np.int64)[idx],
        }

    def check(self, found):
        if found.layout is self.layouts[0]:
            counts = {
                part: sum(len(list((found.base / "aclImdb" / part / pol).glob("*.txt"))) for pol in ("pos", "neg"))
                for part in ("train", "test")
            }
            return f"train {counts['train']} reviews, test {counts['test']}"
        for part in ("train", "test"):
            check_first_record(self.name, found.files[part][0], ("text", "label"), "tfds' imdb_reviews shards")
        return f"train {len(found.files['train'])} shard(s), test {len(found.files['test'])}"
