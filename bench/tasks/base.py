"""The task contract.

A task knows its vocabulary, its kind, its splits and how to generate (or load) one split.
The harness caches what ``generate`` returns as a Hugging Face dataset and never calls it
again while the fingerprint (class, version, parameters, split seed) matches.

``generate(split, rng)`` returns the split as a dict of equal-length columns, one entry per
example (lists, or numpy arrays whose first axis is the example): what
``datasets.Dataset.from_dict`` takes, and what a vectorised generator produces anyway (a
[N, T] array of tokens is one column, not N row dicts).

Kinds and the columns each kind's split carries (token ids are ints, 0 is always PAD); each kind
is one class in bench/tasks/kinds.py (its collate, head, loss and outcomes), ``KINDS`` by name:

* ``classify``       "tokens": [..], "label": int                      pooled -> num_classes
* ``pair_classify``  "tokens": [..], "tokens2": [..], "label": int     [u; v; u*v; |u-v|]
* ``tag``            "tokens": [..], "labels": [[0/1] * num_labels per position]
                     per-position multi-label; a string is correct iff every position is
* ``lm``             "tokens": [..], "targets": [..] next-token targets, IGNORE = not scored

Every split may carry ``"length"`` (int per example) used for per-length metrics; it defaults
to len(tokens). Metrics the harness computes for every split: ``acc`` (example-level: label,
or every scored position right), ``token_acc`` (tag / lm, per position), ``last_acc`` (lm:
the last scored position); classify / pair_classify splits also record ``majority``, the share
of the split's most frequent label (chance). A task names its primary (model selection) metric in ``metric``.

Every task instance carries ``params`` (its constructor's arguments, defaults included, as
JSON values) and ``name``, both set by this base class before the subclass constructor runs,
so the data-cache key always sees every parameter, however the task was built.
"""

from __future__ import annotations

import abc
import functools
import inspect
import os
import zlib
from typing import ClassVar

import numpy as np

from ..signature import constructor_defaults

IGNORE = -100
PAD = 0


def length_averaged(split_metrics: dict, metric: str = "token_acc") -> float:
    """A split's ``metric`` averaged over its per-length bins (``by_length``: ``Task.length_bin``'s
    labels) without weights: the Chomsky reference's score of a split (bench/tasks/chomsky.py);
    NaN without bins."""
    values = [entry[metric] for entry in (split_metrics.get("by_length") or {}).values()]
    return float(np.mean(values)) if values else float("nan")


class TaskError(ValueError):
    """Bad task input (missing files, malformed data): reported as one line, exit status 2."""


def _json_value(value, where: str):
    """A constructor argument as a plain JSON value (tuples -> lists, numpy scalars -> Python)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.generic, np.ndarray)):
        return _json_value(value.tolist(), where)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v, f"{where}.{k}") for k, v in value.items()}
    raise TypeError(f"task parameter {where}={value!r} is not a JSON value (number, string, list, dict)")


def _bound_arguments(owner: type, init, args: tuple, kwargs: dict, built: type) -> dict:
    """The arguments of one call of ``owner``'s constructor building a ``built``, defaults
    included, as {name: JSON value}."""
    signature = inspect.signature(init)
    try:
        bound = signature.bind(None, *args, **kwargs)  # None stands for self
    except TypeError as exc:
        raise TypeError(f"{built.__name__}: {exc}") from None
    bound.apply_defaults()
    params: dict = {}
    forwarded = False
    for name, value in list(bound.arguments.items())[1:]:
        kind = signature.parameters[name].kind
        if kind == inspect.Parameter.VAR_KEYWORD:
            params.update(value)
            forwarded = True
        elif kind == inspect.Parameter.VAR_POSITIONAL:
            if value:
                raise TypeError(f"{built.__name__}: task parameters are keyword parameters; got extra positional {value!r}")
        else:
            params[name] = value
    if forwarded:  # what **kwargs passes on keeps the parent constructor's defaults
        for key, default in constructor_defaults(owner.__mro__[1]).items():
            params.setdefault(key, default)
    return {k: _json_value(v, k) for k, v in params.items()}


def _recording_constructor(owner: type, init):
    """Wraps a task constructor so that the outermost call (the one that builds the object)
    first records its bound arguments as ``self.params`` and a default ``self.name``."""

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if "params" not in self.__dict__:  # inner super().__init__ calls keep the outer record
            self.params = _bound_arguments(owner, init, args, kwargs, type(self))
            if "name" not in self.__dict__:
                self.name = getattr(type(self), "name", None) or type(self).__name__.lower()
        init(self, *args, **kwargs)

    __init__.records_params = True
    return __init__


class Task(abc.ABC):
    """One task family: subclasses set ``kind`` and implement ``vocab``, ``test_splits`` and
    ``generate``; the constructor's keyword parameters are the registry's ``data`` parameters."""

    kind: ClassVar[str]
    #: True: the model must be causal (targets depend on the prefix only).
    #: None: either works; the model's own default is used.
    requires_causal: ClassVar[bool | None] = None
    #: True: the data are the user's files (data_dir), not generated; without them the task
    #: cannot build its splits, and the conformance checks that need its data skip it
    reads_user_files: ClassVar[bool] = False
    metric: ClassVar[str] = "acc"
    #: metrics shown in tables, in order; the first is the primary one by default
    report_metrics: ClassVar[tuple[str, ...]] = ("acc",)
    #: bump when generated data changes for the same parameters (invalidates caches)
    version: ClassVar[str] = "1"

    #: the constructor's arguments, defaults included (JSON values); part of the cache key
    params: dict
    #: the registry entry's name; the class name lower-cased (or a class attribute
    #: ``name``) when the task was built directly
    name: str

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "records_params", False):
            cls.__init__ = _recording_constructor(cls, init)

    def __init__(self, data_seed: int = 1234):
        self.data_seed = data_seed

    @classmethod
    def build(cls, name: str, params: dict) -> Task:
        """The task a registry entry describes: ``cls(**params)`` named ``name`` (set before
        the constructor runs, so its error messages can use it)."""
        task = cls.__new__(cls)
        task.name = name
        task.__init__(**params)
        return task

    # --- vocabulary -------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def vocab(self) -> list[str]:
        """Token strings by id; index 0 must be "<pad>"."""

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    num_classes: int = 0  # classify / pair_classify
    num_labels: int = 0  # tag

    # --- splits -----------------------------------------------------------------------
    def splits(self) -> list[str]:
        """All split names: 'train', 'val', then the test splits."""
        return ["train", "val", *self.test_splits()]

    @abc.abstractmethod
    def test_splits(self) -> list[str]:
        """Names of the test splits (in- and out-of-distribution), in report order."""

    def split_seed(self, split: str) -> int:
        """Each split has its own fixed seed, so resizing train never changes a test set."""
        return (self.data_seed * 1_000_003 + zlib.crc32(split.encode())) % (2**32)

    @abc.abstractmethod
    def generate(self, split: str, rng: np.random.Generator) -> dict:
        """One split as a dict of equal-length columns (see the module docstring), drawn from
        ``rng`` only, so the same seed gives the same data."""

    def fingerprint_extra(self) -> dict:
        """Anything beyond the constructor parameters that identifies the data (file stats)."""
        return {}

    # --- per-length reporting -----------------------------------------------------------
    def length_bin(self, length: int) -> str | None:
        """Label of the length bucket an example falls in, for per-length accuracy; None = skip."""
        return None

    # --- chance ---------------------------------------------------------------------------
    def trivial_strategies(self) -> dict:
        """The strategies this task adds to its kind's (``TaskKind.trivial_strategies``) that score
        on it without solving it, by name: functions ``(task, columns, kind)`` (bench/tasks/trivial.py).
        The best of all of them on a split is its chance level (bench/tasks/chance.py)."""
        return {}


Task.__init__ = _recording_constructor(Task, Task.__init__)


class LMTask(Task):
    """A causal task of kind ``lm``: targets at some positions of the sequence (IGNORE elsewhere),
    selected on token accuracy, reported per token and per whole sequence."""

    kind = "lm"
    requires_causal = True
    metric = "token_acc"
    report_metrics = ("token_acc", "acc")
