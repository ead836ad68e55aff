"""tfds' prepared shards read without TensorFlow: TFRecord framing, the protobuf wire format of a
tf.train.Example, and the named features of every Example in a task's shard files."""

from __future__ import annotations

import struct
from pathlib import Path

from ..base import TaskError


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
            value, i = buf[i : i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i : i + n], i + n
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
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


def check_first_record(task: str, path: Path, features: tuple[str, ...], expected: str) -> None:
    """``bench data check``: the first record of the shard ``path`` is a tf.train.Example holding
    every one of ``features``; else TaskError naming the file and what was ``expected``."""
    try:
        ex = parse_example(next(tfrecords(path), None) or b"")
        for name in features:
            ex[name][0]
    except (ValueError, KeyError, IndexError):
        raise TaskError(f"{task}: {path}: its first record is not an Example with {' and '.join(features)}; expected {expected}") from None


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
                raise TaskError(
                    f"{task}: {path}: record {n} is not a tfds Example with {', '.join(features)} "
                    f"({type(e).__name__}: {e}); expected tfds' own shard files"
                ) from None
    return cols
