"""Reverse string (Deletang et al. 2023; deterministic context-free): output the input string
reversed. The reference is their ``tasks/dcf/reverse_string.py``; the paper uses binary strings
(``alphabet_size`` 2), drawn uniformly. The output has the input's length; a stack solves it.

Worked example, the string 0 1 1 0 1:

    tokens    0  1  1  0  1  =  _  _  _  _
    targets   .  .  .  .  .  1  0  1  1  0       ("=" separator, "_" empty, "." = IGNORE)
"""

from __future__ import annotations

from .chomsky import StringOverAlphabet


class ReverseString(StringOverAlphabet):
    def __init__(self, alphabet_size: int = 2, **kwargs):
        super().__init__(alphabet_size, **kwargs)

    def outputs(self, strings):
        return list(strings[:, ::-1])
