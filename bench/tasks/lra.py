"""Long Range Arena (Tay et al. 2021) as in [HALT §6.7, Table 4].

* ``lra-listops``: ListOps from our generator with LRA's settings (args <= 10, depth <= 10,
  500-2000 tokens; 96k / 2k / 2k); ``min_len`` / ``max_len`` shorten it for a CPU proxy.
  Pathfinder lives in ``bench/tasks/pathfinder.py``.
* ``lra-text`` (IMDB, bytes), ``lra-retrieval`` (AAN pairs, bytes, pair kind) and ``lra-image``
  (CIFAR-10 grayscale, 1024 pixel tokens) read files the user supplies; nothing is downloaded.
  The directory is the ``data_dir`` parameter, else $BENCH_LRA_DIR. Each task accepts the
  layouts its data is found in (``LAYOUTS``; docs/tasks.md, "LRA"), at the folder itself or
  under ``lra_release/`` (the archive, once or twice nested), ``tensorflow_datasets/``:

      lra-text       aclImdb/{train,test}/{pos,neg}/*.txt           (the aclImdb release)
                     imdb_reviews/plain_text/<v>/imdb_reviews-{train,test}.tfrecord*
                                                                    (tfds, as LRA's scripts load it)
      lra-retrieval  new_aan_pairs.{train,eval,test}.tsv in the folder, tsv_data/ (the
                     archive) or aan/ (the scripts' dataset_setup.sh)
      lra-image      cifar-10-batches-py/data_batch_1..5, test_batch  (the python release)
                     cifar10/<v>/cifar10-{train,test}.tfrecord*      (tfds, as the scripts)

  ``check_data(task, root)`` says in one line which layout it found or what is missing
  (``bench data check``).

  A worked Text sample: review b"Great film!" (label pos = 1) ->
  tokens <start> 74 117 104 ... 36 <end> (byte b -> token 3 + b), label 1.

Validation is never the test set (one of the known pitfalls of the original pipelines):
Text and Image hold out ``val_fraction`` of the training files with a permutation fixed by
``data_seed``; Retrieval uses the release's ``eval`` file.
"""
from __future__ import annotations

import io
import os
import pickle
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import Task, TaskError
from .listops import SPLITS as LISTOPS_SPLITS
from .listops import VOCAB, ListOps

ENV = "BENCH_LRA_DIR"
BYTE_VOCAB = ["<pad>", "<start>", "<end>", *[f"x{b:02x}" for b in range(256)]]
BYTE0, START, END = 3, 1, 2
#: where under the given folder a layout may sit: the folder itself, the LRA archive
#: (lra_release.gz unpacks to lra_release/lra_release/...) and a tfds data folder
PREFIXES = ("", "lra_release/", "lra_release/lra_release/", "tensorflow_datasets/")


class ArraysOnly(pickle.Unpickler):
    """CIFAR-10's python batches are pickles: read them as numpy arrays and plain values only, any
    other global (a class, a function: code the file could run) refused as UnpicklingError."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
               ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}; only numpy arrays and plain values are read")


# ---- layouts ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """One way a task's files are laid out: glob patterns per role (train / val / test) relative
    to a base folder; ``bases`` are where that folder may be under a prefix (globs; ``<v>``-style
    version folders of tfds are globbed and the highest version is taken)."""
    name: str
    parts: dict
    bases: tuple = ("",)
    shown: str = ""  # the files as a person writes them, for messages

    def patterns(self) -> list[str]:
        return [p for pats in self.parts.values() for p in pats]


@dataclass(frozen=True)
class Found:
    """A layout found complete: its base folder and the files of each role (sorted)."""
    layout: Layout
    base: Path
    files: dict

    def all_files(self) -> list[Path]:
        return sorted({p for fs in self.files.values() for p in fs})


def _version_key(path: Path):
    return [int(x) if x.isdigit() else x for x in re.split(r"[.\-]", path.name)]


def _bases(root: Path, layout: Layout) -> list[Path]:
    """Every candidate base folder of a layout under root, in PREFIXES order (tfds versions: newest first)."""
    out = []
    for prefix in PREFIXES:
        for base in layout.bases:
            pattern = prefix + base
            if "*" in pattern:
                out += sorted((p for p in root.glob(pattern) if p.is_dir()), key=_version_key, reverse=True)
            elif (root / pattern).is_dir():
                out.append(root / pattern)
    return list(dict.fromkeys(out))


def find_layout(root: Path, layouts: tuple) -> tuple[Found | None, tuple | None]:
    """(the first layout found complete under root, None) or (None, the nearest partial one as
    (layout, base, missing patterns), or None when no file of any layout is there)."""
    nearest, best = None, 0
    for layout in layouts:
        for base in _bases(root, layout):
            files = {role: sorted(p for pat in pats for p in base.glob(pat) if p.is_file()) for role, pats in layout.parts.items()}
            missing = [pat for pats in layout.parts.values() for pat in pats if not any(p.is_file() for p in base.glob(pat))]
            if not missing:
                return Found(layout, base, files), None
            have = len(layout.patterns()) - len(missing)
            if have > best:
                nearest, best = (layout, base, missing), have
    return None, nearest


def _describe(layout: Layout) -> str:
    return f"{layout.name}: {layout.shown or ', '.join(layout.patterns())}"


def locate(task: str, data_dir: str | None, layouts: tuple) -> Found:
    """The task's files under data_dir (else $BENCH_LRA_DIR); TaskError (one line) naming the
    layouts accepted and, when one is partly there, what it lacks."""
    root = data_dir or os.environ.get(ENV)
    accepted = "; or ".join(_describe(lay) for lay in layouts)
    if not root:
        raise TaskError(f"{task}: no data directory: set the task parameter data_dir or ${ENV} to the folder holding "
                        f"{accepted} (check it with: bench data check --task {task} --root PATH)")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise TaskError(f"{task}: {root} is not a folder; give the folder holding {accepted} (data_dir or ${ENV})")
    found, nearest = find_layout(root, layouts)
    if found:
        return found
    if nearest is None:
        raise TaskError(f"{task}: no files of it under {root} or its {', '.join(p for p in PREFIXES if p)}: expected {accepted} "
                        f"(set data_dir or ${ENV} to the folder holding them)")
    layout, base, missing = nearest
    raise TaskError(f"{task}: missing {', '.join(missing)} in {base} (the rest of the {layout.name} is there; "
                    f"accepted: {accepted})")


def file_stats(files: list[Path]) -> dict:
    """Count, sizes and latest mtime of the input files, so a changed file invalidates the cache."""
    return {"n_files": len(files), "bytes": sum(p.stat().st_size for p in files),
            "mtime": max((p.stat().st_mtime for p in files), default=0)}


# ---- tfds's TFRecord files, read without TensorFlow --------------------------------------------

def tfrecords(path: Path):
    """The records of one TFRecord file: each is uint64 length, uint32 masked CRC of it, the
    data, uint32 masked CRC of the data (little-endian; the CRCs are not checked here)."""
    with open(path, "rb") as f:
        while head := f.read(12):
            if len(head) < 12:
                raise TaskError(f"{path}: truncated TFRecord header")
            (n,) = struct.unpack("<Q", head[:8])
            data = f.read(n)
            if len(data) < n or len(f.read(4)) < 4:
                raise TaskError(f"{path}: truncated TFRecord (a record of {n} bytes is cut short)")
            yield data


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message: varints as int, 64/32-bit as raw
    bytes, length-delimited as bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {wire} not supported")
        yield number, wire, value


def parse_example(buf: bytes) -> dict:
    """A tf.train.Example as {feature name: list of bytes | list of int | list of float}:
    Example{1: Features{1: map entry{1: key, 2: Feature{1: BytesList, 2: FloatList, 3: Int64List}}}}."""
    out = {}
    for n, _, features in _fields(buf):
        if n != 1:
            continue
        for m, _, entry in _fields(features):
            if m != 1:
                continue
            key, feature = b"", b""
            for k, _, v in _fields(entry):
                key, feature = (v, feature) if k == 1 else (key, v) if k == 2 else (key, feature)
            values: list = []
            for kind, _, lst in _fields(feature):
                for _, wire, v in _fields(lst):
                    if kind == 1:
                        values.append(bytes(v))
                    elif kind == 2:
                        values += list(struct.unpack(f"<{len(v) // 4}f", v)) if wire == 2 else list(struct.unpack("<f", v))
                    elif kind == 3:
                        if wire == 2:  # packed
                            j = 0
                            while j < len(v):
                                x, j = _varint(v, j)
                                values.append(x - (1 << 64) if x >= 1 << 63 else x)
                        else:
                            values.append(v - (1 << 64) if v >= 1 << 63 else v)
            out[key.decode()] = values
    return out


def read_tfds(files: list[Path], features: tuple[str, ...], task: str) -> dict:
    """The named features of every Example in tfds shard files (in file order), one list each."""
    cols = {f: [] for f in features}
    for path in files:
        for n, rec in enumerate(tfrecords(path)):
            try:
                ex = parse_example(rec)
                for f in features:
                    (value,) = ex[f]
                    cols[f].append(value)
            except (ValueError, KeyError, IndexError) as e:
                raise TaskError(f"{task}: {path}: record {n} is not a tfds Example with {', '.join(features)} "
                                f"({type(e).__name__}: {e}); expected tfds' own shard files") from None
    return cols


# ---- the tasks ---------------------------------------------------------------------------------

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
    """LRA ListOps: one generated IID test set of trees of min_len-max_len tokens (LRA: 500-2000);
    with ``data_dir`` (never $BENCH_LRA_DIR: the generated task stays generated) the release's
    own files instead, every example of them (the n_* sizes and lengths then do not apply)."""

    layouts = (Layout("LRA ListOps files", {"train": ("basic_train.tsv",), "val": ("basic_val.tsv",), "test": ("basic_test.tsv",)},
                      bases=("", "listops-1000", "listops"),
                      shown="basic_{train,val,test}.tsv in the folder, in listops-1000/ (the archive's) "
                            "or in listops/ (where the scripts' dataset_setup.sh moves them)"),)

    def __init__(self, n_train: int = 96000, n_val: int = 2000, n_test: int = 2000,
                 min_len: int = 500, max_len: int = 2000, data_dir: str | None = None,
                 start_end: bool = True, data_seed: int = 1234):
        super().__init__(n_train, n_val, n_test, test_splits=["test"], start_end=start_end,
                         data_seed=data_seed)
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
        return {"tokens": [wrap(t) for t, _ in rows], "label": np.asarray([y for _, y in rows], dtype=np.int64),
                "length": np.asarray([len(t) for t, _ in rows], dtype=np.int64)}

    def check(self, found: Found) -> str:
        for role in ("train", "val", "test"):
            if not list(self._rows(found.files[role][0], limit=2)):
                raise TaskError(f"lra-listops: {found.files[role][0]} holds no examples")
        return "train, val and test files"


class _FileTask(Task):
    layouts: tuple = ()
    name = "lra"

    def __init__(self, data_dir: str | None = None, max_length: int = 4000,
                 start_end: bool = True, data_seed: int = 1234):
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
            self.found
        except TaskError as exc:
            return str(exc)
        return None

    def fingerprint_extra(self):
        found = self.found
        return {"layout": found.layout.name, **file_stats(found.all_files())}

    def check(self, found: Found) -> str:
        """Read the first example of each part (a format check); a one-line summary."""
        raise NotImplementedError


class LRAText(_FileTask):
    """IMDB sentiment from raw bytes: the aclImdb release or tfds' imdb_reviews."""

    kind = "classify"
    num_classes = 2
    name = "lra-text"
    layouts = (
        Layout("aclImdb release", {"train": ("aclImdb/train/pos/*.txt", "aclImdb/train/neg/*.txt"),
                                   "test": ("aclImdb/test/pos/*.txt", "aclImdb/test/neg/*.txt")},
               shown="aclImdb/{train,test}/{pos,neg}/*.txt"),
        Layout("tfds imdb_reviews (as LRA's scripts load it)",
               {"train": ("imdb_reviews-train.tfrecord*",), "test": ("imdb_reviews-test.tfrecord*",)},
               bases=("imdb_reviews/plain_text/*",), shown="imdb_reviews/plain_text/<version>/imdb_reviews-{train,test}.tfrecord*"),
    )

    def __init__(self, data_dir: str | None = None, max_length: int = 4000,
                 val_fraction: float = 0.1, start_end: bool = True, data_seed: int = 1234):
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
        return {"tokens": [encode_bytes(texts[i], self.max_length, self.start_end) for i in idx],
                "label": np.asarray(labels, dtype=np.int64)[idx]}

    def check(self, found):
        if found.layout is self.layouts[0]:
            counts = {part: sum(len(list((found.base / "aclImdb" / part / pol).glob("*.txt"))) for pol in ("pos", "neg"))
                      for part in ("train", "test")}
            return f"train {counts['train']} reviews, test {counts['test']}"
        first = {part: next(tfrecords(found.files[part][0]), None) for part in ("train", "test")}
        for part, rec in first.items():
            try:
                ex = parse_example(rec or b"")
                ex["text"][0], ex["label"][0]
            except (ValueError, KeyError, IndexError):
                raise TaskError(f"{self.name}: {found.files[part][0]}: its first record is not an Example with text and label; "
                                "expected tfds' imdb_reviews shards") from None
        return f"train {len(found.files['train'])} shard(s), test {len(found.files['test'])}"


class LRARetrieval(_FileTask):
    """AAN document matching: are two papers linked by citation? Pairs of byte sequences."""

    kind = "pair_classify"
    num_classes = 2
    name = "lra-retrieval"
    FILES = {"train": "new_aan_pairs.train.tsv", "val": "new_aan_pairs.eval.tsv", "test": "new_aan_pairs.test.tsv"}
    layouts = (Layout("AAN pairs", {role: (name,) for role, name in FILES.items()}, bases=("", "tsv_data", "aan"),
                      shown="new_aan_pairs.{train,eval,test}.tsv in the folder, in tsv_data/ (the archive's) "
                            "or in aan/ (where the scripts' dataset_setup.sh moves them)"),)

    @property
    def vocab(self):
        return BYTE_VOCAB

    def _rows(self, path: Path, limit: int | None = None):
        """(label, text1, text2) per line of a pairs file; TaskError naming the line when malformed."""
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                if limit is not None and n > limit:
                    return
                cols = line.rstrip(b"\r\n").split(b"\t")
                if n == 1 and cols[0].strip().lower() == b"label":
                    continue  # tolerate a header line
                try:
                    if len(cols) == 3:
                        raise ValueError("3 tab-separated fields: this file holds ids only (label, id1, id2), as the "
                                         "bucket's aan/*.only_ids.tsv; the texts are in lra_release/tsv_data/new_aan_pairs.*.tsv")
                    if len(cols) != 5:
                        raise ValueError(f"{len(cols)} tab-separated fields, expected 5")
                    label = int(float(cols[0]))
                    if label not in (0, 1):
                        raise ValueError(f"label {label} not in {{0, 1}}")
                except ValueError as e:
                    raise TaskError(f"{self.name}: {path}:{n}: malformed line ({e}); format: "
                                    "label<TAB>id1<TAB>id2<TAB>text1<TAB>text2") from None
                yield label, cols[3], cols[4]

    def generate(self, split, rng):
        path = self.found.files[split if split in self.FILES else "test"][0]
        out = {"tokens": [], "tokens2": [], "label": []}
        for label, a, b in self._rows(path):
            out["tokens"].append(encode_bytes(a, self.max_length, self.start_end))
            out["tokens2"].append(encode_bytes(b, self.max_length, self.start_end))
            out["label"].append(label)
        if not out["label"]:
            raise TaskError(f"{self.name}: {path} holds no examples")
        return out

    def check(self, found):
        for role in self.FILES:
            if not list(self._rows(found.files[role][0], limit=2)):
                raise TaskError(f"{self.name}: {found.files[role][0]} holds no examples")
        return "train, eval and test pair files"


class LRAImage(_FileTask):
    """CIFAR-10 in grayscale, 32x32 pixels as 1024 tokens (pixel v -> token 3 + v): the python
    release or tfds' cifar10."""

    kind = "classify"
    num_classes = 10
    name = "lra-image"
    BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
    layouts = (
        Layout("CIFAR-10 python release", {"train": tuple(f"cifar-10-batches-py/{b}" for b in BATCHES),
                                           "test": ("cifar-10-batches-py/test_batch",)},
               shown="cifar-10-batches-py/data_batch_1 .. data_batch_5, test_batch"),
        Layout("tfds cifar10 (as LRA's scripts load it)", {"train": ("cifar10-train.tfrecord*",), "test": ("cifar10-test.tfrecord*",)},
               bases=("cifar10/*",), shown="cifar10/<version>/cifar10-{train,test}.tfrecord*"),
    )

    def __init__(self, data_dir: str | None = None, val_fraction: float = 0.1,
                 start_end: bool = True, data_seed: int = 1234):
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
            raise TaskError(f"{self.name}: {path}: not a CIFAR-10 python batch ({e!r}); expected "
                            "a pickled dict with b'data' uint8 [N, 3072] and b'labels'") from None
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
            source = (f"{found.base / 'cifar-10-batches-py'}/data_batch_1..5" if found.layout is self.layouts[0]
                      else f"{found.base}/cifar10-train.tfrecord*")
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
            px = np.concatenate([np.full((n, 1), START, np.int16), px,
                                 np.full((n, 1), END, np.int16)], 1)
        return {"tokens": px, "label": labels}

    def check(self, found):
        if found.layout is self.layouts[0]:
            data, _ = self._read_batch(found.files["test"][0])
            return f"5 training batches, test_batch of {len(data)} images"
        rec = next(tfrecords(found.files["test"][0]), None)
        try:
            ex = parse_example(rec or b"")
            ex["image"][0], ex["label"][0]
        except (ValueError, KeyError, IndexError):
            raise TaskError(f"{self.name}: {found.files['test'][0]}: its first record is not an Example with image and label; "
                            "expected tfds' cifar10 shards") from None
        return f"train {len(found.files['train'])} shard(s), test {len(found.files['test'])}"


FILE_TASKS = {cls.name: cls for cls in (LRAText, LRARetrieval, LRAImage)}  # the tasks that need your files
CHECKABLE = {**FILE_TASKS, "lra-listops": LRAListOps}  # lra-listops reads the release's files only when asked (data_dir)


def check_data(task: str, root: str) -> str:
    """One line: which layout of ``task``'s files is under ``root`` and what it holds; TaskError
    (one line) naming what is missing or malformed (``bench data check``)."""
    if task not in CHECKABLE:
        raise TaskError(f"no files to check for task {task!r}: the tasks that read your files are {', '.join(CHECKABLE)}")
    t = CHECKABLE[task](data_dir=root)
    found = t.found
    return f"{task}: ok: {found.layout.name} in {found.base} ({t.check(found)})"
