"""Group word problems (Merrill et al. 2024, "The Illusion of State in State-Space Models";
Liu et al. 2023, "Transformers Learn Shortcuts to Automata"): read a sequence of group
elements and, at every position, name the product of everything read so far.

Groups (``group``): ``s5``, the 120 permutations of 0..4; ``a5``, its 60 even permutations
(non-abelian and simple, so its word problem is NC1-complete: a fixed-depth Transformer
cannot compute it at every length unless TC0 = NC1, a recurrent network can); ``z60``, the integers mod 60 under
addition (abelian, the easy control). A permutation is named in one-line notation: ``10234``
is the p with p(0) = 1, p(1) = 0, p(i) = i otherwise. Token ids: 0 is <pad>, then the
elements in order (permutations lexicographically, so 1 is the identity ``01234``; Z60: the
residue r is ``str(r)``, id r + 1).

The label at position t is the token id of the running product

    state_0 = x_0,    state_t = x_t . state_{t-1}    (so state_t = x_t . ... . x_1 . x_0)

where (p . q)(i) = p(q(i)): q is applied first, so the element read last acts last. For Z60,
state_t = (x_0 + ... + x_t) mod 60.

Worked example, S5 (tests/test_probes.py checks it):

    tokens  10234   12034   21034
    labels  10234   21034   01234

    state_1 = x_1 . x_0 = 12034 . 10234: i -> x_1(x_0(i)) sends 0 -> 1 -> 2, 1 -> 0 -> 1,
    2 -> 2 -> 0, so 21034 (the other order, x_0 . x_1, would be 02134); state_2 = 21034 .
    21034 = 01234, the identity.

Worked example, Z60:   tokens 7 55 3  ->  labels 7 2 5.

The kind is ``lm`` with a target at every position: one softmax over the group's elements
per position, as both sources train (the ``tag`` kind's independent yes/no labels would be
|G| separate sigmoids). Metrics: ``token_acc`` (share of positions whose state is right,
the selection metric), ``acc`` (whole-sequence: every prefix right) and ``last_acc`` (the
state after the last element: the word problem's answer at that length).

Splits: train at one length ``train_len`` (every prefix is labelled, so a causal model trains
on every length up to it); tests ``len<L>`` at each of ``test_lengths`` (default train_len x
1, 2, 4, 8), so accuracy is reported per length. The test at train_len and val are drawn
from the training distribution and kept disjoint from train by a hash of the tokens
(bench/tasks/draws.py).
"""

from __future__ import annotations

import itertools

import numpy as np

from .base import LMTask, TaskError
from .draws import draw_owned, positive

GROUPS = ("s5", "a5", "z60")


def _parity(p: tuple) -> int:
    """0 for an even permutation, 1 for an odd one (count inversions)."""
    return sum(p[i] > p[j] for i in range(len(p)) for j in range(i + 1, len(p))) % 2


def group_elements(group: str) -> tuple[list[str], np.ndarray]:
    """(names, table) of a group: table[a, b] = index of element a . b (b applied first)."""
    if group == "z60":
        n = 60
        idx = np.arange(n)
        return [str(r) for r in range(n)], (idx[:, None] + idx[None, :]) % n
    if group not in ("s5", "a5"):
        raise TaskError(f"unknown group {group!r}; groups: {', '.join(GROUPS)}")
    perms = [p for p in itertools.permutations(range(5)) if group == "s5" or _parity(p) == 0]
    index = {p: i for i, p in enumerate(perms)}
    table = np.array([[index[tuple(a[b[i]] for i in range(5))] for b in perms] for a in perms])
    return ["".join(map(str, p)) for p in perms], table


class GroupWordProblem(LMTask):
    report_metrics = ("token_acc", "acc", "last_acc")

    def __init__(
        self,
        group: str,
        train_len: int = 16,
        test_lengths: list | None = None,
        n_train: int = 10000,
        n_val: int = 500,
        n_test: int = 500,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        self.group = group
        self.names, self.table = group_elements(group)
        positive(train_len=train_len, n_train=n_train, n_val=n_val, n_test=n_test)
        self.train_len = train_len
        self.test_lengths = [int(x) for x in (test_lengths or [train_len * k for k in (1, 2, 4, 8)])]
        positive(**{f"test_lengths[{i}]": x for i, x in enumerate(self.test_lengths)})
        self.n_train, self.n_val, self.n_test = n_train, n_val, n_test

    @property
    def vocab(self) -> list[str]:
        return ["<pad>", *self.names]

    def test_splits(self) -> list[str]:
        return [f"len{L}" for L in self.test_lengths]

    def _sequences(self, rng: np.random.Generator, n: int, length: int) -> dict:
        """n words of ``length`` uniform elements and their running products (token ids)."""
        x = rng.integers(0, len(self.names), size=(n, length))  # element indices
        state = np.empty_like(x)
        state[:, 0] = x[:, 0]
        for t in range(1, length):
            state[:, t] = self.table[x[:, t], state[:, t - 1]]  # state_t = x_t . state_{t-1}
        return {"tokens": (x + 1).astype(np.int16), "targets": (state + 1).astype(np.int16)}

    def generate(self, split: str, rng: np.random.Generator) -> dict:
        if split in ("train", "val"):
            n = self.n_train if split == "train" else self.n_val
            return draw_owned(lambda m: self._sequences(rng, m, self.train_len), n, split)
        length = int(split[3:])
        if length == self.train_len:  # in distribution: never a training sequence
            return draw_owned(lambda m: self._sequences(rng, m, length), self.n_test, "test")
        return self._sequences(rng, self.n_test, length)

    def trivial_strategies(self) -> dict:
        """Beside the kind's, copying the first element then guessing uniformly: the first state is
        the first element (right), every later one a uniform guess among the |G| elements
        (1/|G|): 1/L + (L - 1) / (|G| L) of a length-L word's states."""
        return {COPY_FIRST: copy_first_then_guess}


COPY_FIRST = "copy the first element, guess the rest"


def copy_first_then_guess(task: GroupWordProblem, columns: dict, kind=None) -> list[np.ndarray]:
    """Per word, 1 at its first state and 1/|G| at each later one."""
    out = []
    for targets in columns["targets"]:
        right = np.full(len(targets), 1.0 / len(task.names))
        right[:1] = 1.0
        out.append(right)
    return out
