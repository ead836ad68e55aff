"""The shared layout of the Chomsky-hierarchy tasks (Deletang et al. 2023, "Neural Networks and
the Chomsky Hierarchy"; their repository google-deepmind/neural_networks_chomsky_hierarchy).

Each task maps an input string x_1..x_n to an output string y_1..y_k. As in the reference code
(``experiments/utils.py``, ``make_model_with_empty_targets``: the model reads the input, then k
empty tokens, and the outputs are read at those k positions; no teacher forcing), the model reads

    tokens    x_1 .. x_n  =    _    ..  _           ("=" separator, "_" empty output position)
    targets    .  ..  .   y_1  y_2  ..  y_k         ("." = IGNORE: not scored, not trained)

so the separator predicts y_1 and the j-th empty position y_{j+1}. Targets depend on the prefix
only (every output position sees the whole input and nothing of the answer), so every causal and
streaming family runs the task as it is; the reference Transformer is an encoder, which sees
nothing more here (the empty positions carry no information).

Lengths are input lengths n. Training, ``val`` and the in-distribution test ``iid`` draw n
uniformly from [min_len, max_len] (the reference's ``UniformCurriculum(range(1, N + 1))``, N = 40);
the out-of-distribution test ``ood`` holds ``n_test_per_length`` strings at each length
max_len + 1, max_len + 1 + test_len_step, ... <= test_max_len (the reference evaluates every length
up to 500). Train, val and iid share their length window and are kept disjoint by a stable hash of
the input string (``formal_languages.window_split``: 15% iid, 5% val, 80% train), so a short
window whose strings are few gives each split only its own strings; ood is disjoint by length.

Metric: the reference scores a length by its per-token accuracy over the output positions
(``accuracy_fn``: masked mean of argmax == target), averages it over the test lengths, and reports
that number (max and mean over seeds). Here that is ``token_acc`` of each per-length bin of the
``ood`` split (``bin_width`` 1: one bin per length), averaged over the bins: ``length_averaged``.
The split-level ``token_acc`` pools tokens, so longer lengths weigh more; ``acc`` is the share of
strings with every output right. For one-output tasks (modular arithmetic) all three agree.
"""

from __future__ import annotations

import abc

import numpy as np

from .base import IGNORE, LMTask, TaskError, length_averaged  # noqa: F401 - the reference's score of a split, by this name
from .formal_languages import BIN0_BUCKETS, HASH_BUCKETS, VAL_BUCKETS, window_split

SEP, EMPTY = 1, 2  # token ids of "=" and "_"; task symbols start at FIRST_SYMBOL
FIRST_SYMBOL = 3


class ChomskyTask(LMTask):
    """A string-to-string task laid out as input, separator, empty output positions (see the
    module docstring). Subclasses name their ``symbols`` and implement ``sample``."""

    def __init__(
        self,
        min_len: int = 1,
        max_len: int = 40,
        test_max_len: int = 500,
        test_len_step: int = 1,
        n_train: int = 10000,
        n_val: int = 500,
        n_test: int = 1000,
        n_test_per_length: int = 64,
        bin_width: int = 1,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        problems = [
            f"{name}={value} (must be >= 1)"
            for name, value in (
                ("min_len", min_len),
                ("test_len_step", test_len_step),
                ("n_train", n_train),
                ("n_val", n_val),
                ("n_test", n_test),
                ("n_test_per_length", n_test_per_length),
                ("bin_width", bin_width),
            )
            if value < 1
        ]
        if problems:
            raise ValueError(", ".join(problems))
        if max_len < min_len:
            raise ValueError(f"max_len={max_len} is below min_len={min_len}: the training lengths are min_len..max_len")
        if test_max_len <= max_len:
            raise ValueError(f"test_max_len={test_max_len} must exceed max_len={max_len}: the ood lengths lie above the training ones")
        self.min_len, self.max_len, self.test_max_len, self.test_len_step = min_len, max_len, test_max_len, test_len_step
        self.n_train, self.n_val, self.n_test, self.n_test_per_length = n_train, n_val, n_test, n_test_per_length
        self.bin_width = bin_width
        self.ood_lengths = sorted(
            {self.input_length(n) for n in range(max_len + 1, test_max_len + 1, test_len_step) if self.input_length(n) > max_len}
        )
        if not self.ood_lengths:
            raise ValueError(f"no test length above max_len={max_len} up to test_max_len={test_max_len}")

    # --- the task (subclasses) ----------------------------------------------------------
    @property
    @abc.abstractmethod
    def symbols(self) -> list[str]:
        """The task's input and output symbols (token ids from FIRST_SYMBOL on)."""

    def input_length(self, n: int) -> int:
        """The input length drawn for a requested length n (modular arithmetic: odd lengths only)."""
        return n

    @abc.abstractmethod
    def sample(self, rng: np.random.Generator, count: int, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """``count`` input strings of length n as symbol indices [count, n], and each one's output."""

    def text(self, x: np.ndarray) -> str:
        """An input string as text, its symbols separated by spaces."""
        return " ".join(self.symbols[i] for i in x)

    # --- the harness contract -----------------------------------------------------------
    @property
    def vocab(self) -> list[str]:
        return ["<pad>", "=", "_", *self.symbols]

    def test_splits(self) -> list[str]:
        return ["iid", "ood"]

    def length_bin(self, length: int) -> str:
        if self.bin_width == 1:
            return str(length)
        lo = (length - 1) // self.bin_width * self.bin_width + 1
        return f"{lo}-{lo + self.bin_width - 1}"

    def generate(self, split: str, rng: np.random.Generator) -> dict:
        if split == "ood":
            lengths = np.repeat(self.ood_lengths, self.n_test_per_length)
            inputs, outputs = self._draw(rng, lengths)
        elif split in ("train", "val", "iid"):
            inputs, outputs = self._draw_window(rng, split, {"train": self.n_train, "val": self.n_val, "iid": self.n_test}[split])
        else:
            raise TaskError(f"{self.name}: unknown split {split!r}; splits: {', '.join(self.splits())}")
        dtype = np.int8 if self.vocab_size <= 127 else np.int32
        tokens, targets = [], []
        for x, y in zip(inputs, outputs):
            tokens.append(np.concatenate([x + FIRST_SYMBOL, [SEP], np.full(len(y) - 1, EMPTY)]).astype(dtype))
            targets.append(np.concatenate([np.full(len(x), IGNORE), y + FIRST_SYMBOL]).astype(dtype))
        return {"tokens": tokens, "targets": targets, "length": [len(x) for x in inputs]}

    def _draw(self, rng: np.random.Generator, lengths: np.ndarray) -> tuple[list, list]:
        """One string per entry of ``lengths``, in that order (sampled length by length)."""
        inputs: list = [None] * len(lengths)
        outputs: list = [None] * len(lengths)
        for n in np.unique(lengths):
            where = np.flatnonzero(lengths == n)
            x, y = self.sample(rng, len(where), int(n))
            for i, xi, yi in zip(where, x, y):
                inputs[i], outputs[i] = xi, np.asarray(yi)
        return inputs, outputs

    def _draw_window(self, rng: np.random.Generator, split: str, count: int) -> tuple[list, list]:
        """``count`` strings of the training window whose hash puts them in ``split``."""
        held_out = {"val": len(VAL_BUCKETS), "iid": len(BIN0_BUCKETS)}
        share = held_out.get(split, HASH_BUCKETS - sum(held_out.values())) / HASH_BUCKETS
        inputs: list = []
        outputs: list = []
        for _ in range(50):
            need = count - len(inputs)
            if need <= 0:
                break
            requested = rng.integers(self.min_len, self.max_len + 1, size=int(need / share * 1.2) + 16)
            lengths = np.array([self.input_length(int(n)) for n in requested])
            for x, y in zip(*self._draw(rng, lengths)):
                if window_split(self.text(x)) == {"iid": "bin0"}.get(split, split):
                    inputs.append(x)
                    outputs.append(y)
        if len(inputs) < count:
            raise TaskError(
                f"{self.name}: only {len(inputs)} of {count} {split} strings found in lengths "
                f"{self.min_len}..{self.max_len}; raise max_len or lower n_{'test' if split == 'iid' else split}"
            )
        return inputs[:count], outputs[:count]


class StringOverAlphabet(ChomskyTask):
    """A task whose input is a uniform string over the digits 0 .. alphabet_size-1 (reverse string,
    bucket sort); a subclass says what each string's output is (``outputs``)."""

    def __init__(self, alphabet_size: int, **kwargs):
        if alphabet_size < 2:
            raise ValueError(f"alphabet_size={alphabet_size}: must be >= 2")
        self.alphabet_size = alphabet_size
        super().__init__(**kwargs)

    @property
    def symbols(self) -> list[str]:
        return [str(i) for i in range(self.alphabet_size)]

    def sample(self, rng, count, n):
        strings = rng.integers(0, self.alphabet_size, size=(count, n))
        return strings, self.outputs(strings)

    @abc.abstractmethod
    def outputs(self, strings: np.ndarray) -> list[np.ndarray]:
        """Each input string's output, from the strings [count, n]."""
