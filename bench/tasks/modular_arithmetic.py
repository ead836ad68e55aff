"""Modular arithmetic (Deletang et al. 2023; regular): the value, modulo m (m = 5), of an
expression over the numbers {0..m-1} and the operators +, - and *, multiplication binding tighter
than addition and subtraction, which go left to right.

The reference is their ``tasks/regular/modular_arithmetic.py``, without brackets (the bracketed,
context-free variant is ``tasks/dcf/modular_arithmetic_brackets.py``, not this task). Numbers and
operators alternate, so an expression has odd length: a requested even length n draws n - 1, as
the reference does. Numbers and operators are uniform. The answer is one token, read at the
separator. A finite automaton solves it left to right: its state is (the sum of the finished
terms, the value of the current term), both modulo m.

Worked example (m = 5), the expression 1 + 2 * 3 - 4 = 1 + 6 - 4 = 3:

    tokens    1  +  2  *  3  -  4  =
    targets   .  .  .  .  .  .  .  3        ("." = IGNORE)

``length`` is 7, the expression's.
"""

from __future__ import annotations

import numpy as np

from .chomsky import ChomskyTask

OPERATORS = "+-*"


class ModularArithmetic(ChomskyTask):
    def __init__(self, modulus: int = 5, operators: str = OPERATORS, **kwargs):
        if modulus < 2:
            raise ValueError(f"modulus={modulus}: must be >= 2")
        if not operators or set(operators) - set(OPERATORS) or len(set(operators)) < len(operators):
            raise ValueError(f"operators={operators!r}: must be distinct characters of {OPERATORS!r}")
        self.modulus, self.operators = modulus, operators
        super().__init__(**kwargs)

    @property
    def symbols(self) -> list[str]:
        return [*(str(i) for i in range(self.modulus)), *OPERATORS]

    def input_length(self, n: int) -> int:
        return n if n % 2 else n - 1

    def sample(self, rng, count, n):
        m = self.modulus
        numbers = rng.integers(0, m, size=(count, n // 2 + 1))
        ops = rng.choice(np.array([m + OPERATORS.index(c) for c in self.operators]), size=(count, n // 2))
        expressions = np.empty((count, n), dtype=np.int64)
        expressions[:, 0::2], expressions[:, 1::2] = numbers, ops
        return expressions, list(self.evaluate(numbers, ops - m)[:, None])

    def evaluate(self, numbers: np.ndarray, ops: np.ndarray) -> np.ndarray:
        """Values of [B, k+1] numbers joined by [B, k] operator indices into OPERATORS, mod m."""
        m = self.modulus
        total = np.zeros(len(numbers), dtype=np.int64)  # the finished terms
        term = numbers[:, 0].copy()  # the current term, its sign included
        for j in range(ops.shape[1]):
            op, x = ops[:, j], numbers[:, j + 1]
            times = op == OPERATORS.index("*")
            total = np.where(times, total, (total + term) % m)
            term = np.where(times, term * x, np.where(op == OPERATORS.index("-"), -x, x)) % m
        return (total + term) % m
