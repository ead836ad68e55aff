"""Stack manipulation (Deletang et al. 2023; deterministic context-free): a binary stack, given
bottom to top, then actions POP / PUSH0 / PUSH1 applied left to right (a POP on an empty stack does
nothing); output the final stack top to bottom, then the end symbol ``$``.

The reference is their ``tasks/dcf/stack_manipulation.py``: for an input of length n >= 2 the
stack's length is uniform in [1, n - 1], its bits and the n - len(stack) actions uniform; an input
of length 1 is one bit. The reference pads its output with 0s to n + 1 positions and scores up to
``$`` (``accuracy_mask``); here the output ends at ``$`` (the positions after it would be
neither trained nor scored, and a causal model's earlier outputs never see them).

Worked example, the stack 0 1 1 0 then PUSH1 POP POP:

    stack     0 1 1 0  ->  PUSH1: 0 1 1 0 1  ->  POP: 0 1 1 0  ->  POP: 0 1 1
    tokens    0  1  1  0  PUSH1  POP  POP  =  _  _  _
    targets   .  .  .  .  .      .    .    1  1  0  $       ("." = IGNORE)
"""

from __future__ import annotations

import numpy as np

from .chomsky import ChomskyTask

BITS = ("0", "1")
ACTIONS = ("POP", "PUSH0", "PUSH1")
POP, PUSH0 = 2, 3  # symbol indices
END = 5  # "$"


def final_stack(stack: list[int], actions: list[int]) -> list[int]:
    """The stack (bits, bottom to top) after the actions (symbol indices POP, PUSH0, PUSH0 + 1)."""
    stack = list(stack)
    for action in actions:
        if action != POP:
            stack.append(action - PUSH0)
        elif stack:  # a POP on an empty stack does nothing
            stack.pop()
    return stack


class StackManipulation(ChomskyTask):
    @property
    def symbols(self) -> list[str]:
        return [*BITS, *ACTIONS, "$"]

    def sample(self, rng, count, n):
        inputs = np.empty((count, n), dtype=np.int64)
        outputs = []
        for row in inputs:
            depth = int(rng.integers(1, n)) if n > 1 else 1
            row[:depth] = rng.integers(0, 2, size=depth)
            row[depth:] = rng.integers(POP, POP + len(ACTIONS), size=n - depth)
            outputs.append(np.array([*final_stack(row[:depth], row[depth:])[::-1], END]))
        return inputs, outputs
