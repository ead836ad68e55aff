"""Reverse string (Deletang et al. 2023; deterministic context-free): output the input string
reversed. The reference is their ``tasks/dcf/reverse_string.py``; the paper uses binary strings
(``alphabet_size`` 2), drawn uniformly. The output has the input's length; a stack solves it.

Worked example, the string 0 1 1 0 1:

    tokens    0  1  1  0  1  =  _  _  _  _
    targets   .  .  .  .  .  1  0  1  1  0       ("=" separator, "_" empty, "." = IGNORE)
"""
from __future__ import annotations

from .chomsky import ChomskyTask


class ReverseString(ChomskyTask):

    def __init__(self, alphabet_size: int = 2, **kwargs):
        if alphabet_size < 2:
            raise ValueError(f"alphabet_size={alphabet_size}: must be >= 2")
        self.alphabet_size = alphabet_size
        super().__init__(**kwargs)

    @property
    def symbols(self) -> list[str]:
        return [str(i) for i in range(self.alphabet_size)]

    def sample(self, rng, count, n):
        strings = rng.integers(0, self.alphabet_size, size=(count, n))
        return strings, list(strings[:, ::-1])
