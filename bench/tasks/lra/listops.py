"""``lra-listops``: ListOps at LRA's settings, generated, or read from the release's files when given ``data_dir``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..base import TaskError
from ..listops import SPLITS as LISTOPS_SPLITS
from ..listops import VOCAB, ListOps
from .files import END, START
from .layouts import Found, Layout, file_stats, locate


class LRAListOps(ListOps):
    """LRA ListOps: one generated IID test set of trees of min_len-max_len tokens (LRA: 500-2000);
    with ``data_dir`` (never $BENCH_LRA_DIR: the generated task stays generated) the release's
    own files instead, every example of them (the n_* sizes and lengths then do not apply)."""

    layouts = (
        Layout(
            "LRA ListOps files",
            {"train": ("basic_train.tsv",), "val": ("basic_val.tsv",), "test": ("basic_test.tsv",)},
            bases=("", "listops-1000", "listops"),
            shown="basic_{train,val,test}.tsv in the folder, in listops-1000/ (the archive's) "
            "or in listops/ (where the scripts' dataset_setup.sh moves them)",
        ),
    )

    def __init__(
        self,
        n_train: int = 96000,
        n_val: int = 2000,
        n_test: int = 2000,
        min_len: int = 500,
        max_len: int = 2000,
        data_dir: str | None = None,
        start_end: bool = True,
        data_seed: int = 1234,
    ):
        super().__init__(n_train, n_val, n_test, test_splits=["test"], start_end=start_end, data_seed=data_seed)
        if not 1 <= min_len <= max_len:
            raise TaskError(f"lra-listops: lengths need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
        self.min_len, self.max_len, self.data_dir = min_len, max_len, data_dir

    def split_config(self, split):
        # every split draws from LRA's distribution (args <= 10, depth <= 10) at these lengths;
        # at >= 100 tokens two random trees are equal too rarely to need a hash partition
        _, _, max_args, leaf_p, max_depth = LISTOPS_SPLITS["lra"]
        return (self.min_len, self.max_len, max_args, leaf_p, max_depth)

    @property
    def found(self) -> Found:
        if not self.data_dir:
            raise TaskError("lra-listops: generated; give data_dir to read the release's basic_{train,val,test}.tsv instead")
        return locate("lra-listops", self.data_dir, self.layouts)

    def fingerprint_extra(self):
        if not self.data_dir:
            return {}
        found = self.found
        return {"layout": found.layout.name, **file_stats(found.all_files())}

    def _rows(self, path: Path, limit: int | None = None):
        """(tokens without START / END, label) per line of a release file: a header Source<TAB>Target,
        then the tree as LRA writes it ("( ( [MAX 2 9 ] ) )": the brackets of its tokenizer are dropped,
        as LRA's input pipeline drops them) and its value."""
        index = {tok: i for i, tok in enumerate(VOCAB)}
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if limit is not None and n > limit:
                    return
                cols = line.rstrip("\r\n").split("\t")
                if n == 1 and cols[0] == "Source":
                    continue
                try:
                    if len(cols) != 2:
                        raise ValueError(f"{len(cols)} tab-separated fields, expected 2")
                    toks = [index[t] for t in cols[0].split() if t not in ("(", ")")]
                    label = int(cols[1])
                    if not 0 <= label <= 9:
                        raise ValueError(f"value {label} not in 0..9")
                except KeyError as e:
                    raise TaskError(f"lra-listops: {path}:{n}: unknown token {e.args[0]!r}; tokens: {' '.join(VOCAB[3:])}, ( )") from None
                except ValueError as e:
                    raise TaskError(f"lra-listops: {path}:{n}: malformed line ({e}); format: Source<TAB>Target") from None
                yield np.asarray(toks, dtype=np.int16), label

    def generate(self, split, rng):
        if not self.data_dir:
            return super().generate(split, rng)
        path = self.found.files[split][0]
        rows = list(self._rows(path))
        if not rows:
            raise TaskError(f"lra-listops: {path} holds no examples")
        wrap = (lambda t: np.concatenate([[START], t, [END]]).astype(np.int16)) if self.start_end else (lambda t: t)
        return {
            "tokens": [wrap(t) for t, _ in rows],
            "label": np.asarray([y for _, y in rows], dtype=np.int64),
            "length": np.asarray([len(t) for t, _ in rows], dtype=np.int64),
        }

    def check(self, found: Found) -> str:
        for role in ("train", "val", "test"):
            if not list(self._rows(found.files[role][0], limit=2)):
                raise TaskError(f"lra-listops: {found.files[role][0]} holds no examples")
        return "train, val and test files"
