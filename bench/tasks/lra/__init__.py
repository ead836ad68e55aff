"""Long Range Arena (Tay et al. 2021) as in [HALT §6.7, Table 4].

* ``lra-listops``: ListOps from our generator with LRA's settings (args <= 10, depth <= 10,
  500-2000 tokens; 96k / 2k / 2k); ``min_len`` / ``max_len`` shorten it for a CPU proxy.
  Pathfinder lives in ``bench/tasks/pathfinder.py``.
* ``lra-text`` (IMDB, bytes), ``lra-retrieval`` (AAN pairs, bytes, pair kind) and ``lra-image``
  (CIFAR-10 grayscale, 1024 pixel tokens) read files the user supplies; nothing is downloaded.
  The directory is the ``data_dir`` parameter, else $BENCH_LRA_DIR. Each task accepts the
  layouts its data is found in (its ``layouts``; docs/tasks.md, "LRA"), at the folder itself or
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

One module per task (``listops``, ``text``, ``retrieval``, ``image``) and per shared concern:
``layouts`` (where the files may sit), ``tfds`` (tfds' shards without TensorFlow), ``files``
(byte tokens, the held-out validation, the ``FileTask`` base) and ``check`` (``bench data check``).
Every name is imported from here, ``bench.tasks.lra``, as the registry's targets name the classes.
"""

from __future__ import annotations

from .check import CHECKABLE, FILE_TASKS, check_data
from .files import BYTE0, BYTE_VOCAB, END, START, FileTask, encode_bytes, holdout
from .image import ArraysOnly, LRAImage
from .layouts import ENV, PREFIXES, Found, Layout, file_stats, find_layout, locate
from .listops import LRAListOps
from .retrieval import LRARetrieval
from .text import LRAText
from .tfds import parse_example, read_tfds, tfrecords

__all__ = [
    "ArraysOnly",
    "BYTE0",
    "BYTE_VOCAB",
    "CHECKABLE",
    "END",
    "ENV",
    "FILE_TASKS",
    "PREFIXES",
    "START",
    "FileTask",
    "Found",
    "LRAImage",
    "LRAListOps",
    "LRARetrieval",
    "LRAText",
    "Layout",
    "check_data",
    "encode_bytes",
    "file_stats",
    "find_layout",
    "holdout",
    "locate",
    "parse_example",
    "read_tfds",
    "tfrecords",
]

# The data cache names a split by its task's class, module included (bench/data.py: fingerprint),
# and the registry names these classes here: they keep this package as their module, as when it
# was one file, so the splits cached before the split into modules stay valid.
for _task in (LRAListOps, LRAText, LRARetrieval, LRAImage):
    _task.__module__ = __name__
del _task
