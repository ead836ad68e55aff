"""Bucket sort (Deletang et al. 2023; context-sensitive): output the input string sorted, over an
alphabet of ``alphabet_size`` symbols (5 in the paper), drawn uniformly. The reference is their
``tasks/cs/bucket_sort.py``. The output has the input's length; counting each symbol solves it.

Worked example (alphabet_size 5), the string 3 0 4 0 1:

    tokens    3  0  4  0  1  =  _  _  _  _
    targets   .  .  .  .  .  0  0  1  3  4       ("=" separator, "_" empty, "." = IGNORE)
"""
from __future__ import annotations

import numpy as np

from .chomsky import ChomskyTask


class BucketSort(ChomskyTask):

    def __init__(self, alphabet_size: int = 5, **kwargs):
        if alphabet_size < 2:
            raise ValueError(f"alphabet_size={alphabet_size}: must be >= 2")
        self.alphabet_size = alphabet_size
        super().__init__(**kwargs)

    @property
    def symbols(self) -> list[str]:
        return [str(i) for i in range(self.alphabet_size)]

    def sample(self, rng, count, n):
        strings = rng.integers(0, self.alphabet_size, size=(count, n))
        return strings, list(np.sort(strings, axis=1))
