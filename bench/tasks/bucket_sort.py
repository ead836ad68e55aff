"""Bucket sort (Deletang et al. 2023; context-sensitive): output the input string sorted, over an
alphabet of ``alphabet_size`` symbols (5 in the paper), drawn uniformly. The reference is their
``tasks/cs/bucket_sort.py``. The output has the input's length; counting each symbol solves it.

Worked example (alphabet_size 5), the string 3 0 4 0 1:

    tokens    3  0  4  0  1  =  _  _  _  _
    targets   .  .  .  .  .  0  0  1  3  4       ("=" separator, "_" empty, "." = IGNORE)
"""

from __future__ import annotations

import numpy as np

from .chomsky import StringOverAlphabet


class BucketSort(StringOverAlphabet):
    def __init__(self, alphabet_size: int = 5, **kwargs):
        super().__init__(alphabet_size, **kwargs)

    def outputs(self, strings):
        return list(np.sort(strings, axis=1))
