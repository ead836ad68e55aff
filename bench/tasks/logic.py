"""Logical inference (Bowman et al. 2015) as in [HALT §6.5, Table 2].

Two propositional formulas over the six variables a..f with and / or / not; the label is the
natural-logic relation between them, decided by truth tables over the 2^6 = 64 assignments:

    tokens:  <start> ( d ( or f ) ) <end>             # d or f
    tokens2: <start> ( f ( and a ) ) <end>            # f and a
    label:   2 = "⊐" (reverse entailment): every model of (f and a) satisfies (d or f),
             but d=1, f=0 satisfies only the first.

The generator is that of Bowman et al. (``propositionallogic/generate_neg_set_data.py`` in
their vector-entailment repository, whose files train0..12 / test0..12 Tran et al. 2018 and
[HALT Table 2] use), re-implemented:

* a pair draws 4 of the 6 variables; both formulas use only those;
* a formula is ``node(12)``: ``node(m)`` is, when m >= 2, a binary node ``( x ( op y ) )``
  with probability 4/9 (op = and / or, 1/2 each) whose operands are ``node(m // 2)``, else a
  variable; then the node is negated, ``( not x )``, with probability 1/3. So trees are at
  most three binary levels deep (12 -> 6 -> 3 -> 1) and carry 0..22 operators;
* a pair is rejected when either formula is a contradiction or a tautology (its set of
  satisfying assignments is empty or all 64): such formulas can only stand in ≡ / ⊏ / ⊐ to
  others, a shortcut for entailment, and MacCartney's relations are not defined for them;
* a pair's operator count (and, or, not) is that of its larger formula, capped at 12: bin 12
  holds every pair whose larger formula has 12 or more operators (Bowman's ``min(max(...),
  12)``). Train and val hold bins 0..``train_max_ops`` (6), each test split ``ops<k>`` bin k.

Each split is drawn by rejection from this one distribution, so a split's operator-count mix
and label mix are Bowman's natural ones. Duplicate pairs are dropped within a split (Bowman
de-duplicates each bin); val and train are disjoint by a stable content hash (``crc32 % 20
== 0`` reserved for val); test pairs have more operators than any train pair.

Relations on the sets of satisfying assignments S1, S2 of the universe U (|U| = 64), tested
in this order, the first that holds wins (so the label is always unique):

    0 ≡  equivalence          S1 = S2
    1 ⊏  forward entailment   S1 ⊂ S2 (strict)
    2 ⊐  reverse entailment   S1 ⊃ S2 (strict)
    3 ^  negation             S1 ∩ S2 = ∅ and S1 ∪ S2 = U
    4 |  alternation          S1 ∩ S2 = ∅ and S1 ∪ S2 ≠ U
    5 ‿  cover                S1 ∩ S2 ≠ ∅ and S1 ∪ S2 = U
    6 #  independence         otherwise

For sets that are neither empty nor U (all the generator produces) this is Bowman's
``compute_label``. ``relation`` still answers for empty or universal sets, by the same order:
a contradiction ⊏ every satisfiable formula, ∅ vs U is ⊏, two contradictions are ≡. Swapping
the two formulas keeps ≡ ^ | ‿ # and swaps ⊏ with ⊐.
"""

from __future__ import annotations

import random
import zlib

from .base import Task, TaskError

VARS = "abcdef"
RELATIONS = ("≡", "⊏", "⊐", "^", "|", "‿", "#")
RELATION_NAMES = ("equivalence", "forward_entailment", "reverse_entailment", "negation", "alternation", "cover", "independence")
VOCAB = ["<pad>", "<start>", "<end>", "(", ")", "and", "or", "not", *VARS]
TOK = {s: i for i, s in enumerate(VOCAB)}
FULL = (1 << 64) - 1
# bit j of a variable's mask = its value in assignment j (variable i is bit i of j)
VAR_MASKS = [sum(1 << j for j in range(64) if (j >> i) & 1) for i in range(6)]
# Bowman et al.'s generator: a formula is node(MAXLEN); a node with maxlen >= 2 is binary with
# probability P_BINARY (its `operators` list: and, or, and, or and five leaves), and any node is
# negated with probability P_NOT (`neg_or_nones`: not, none, none); a pair uses PAIR_VARS of
# the six variables; operator counts are capped at OPS_CAP for binning.
MAXLEN = 12
P_BINARY = 4 / 9
P_NOT = 1 / 3
PAIR_VARS = 4
OPS_CAP = 12


def relation(s1: int, s2: int) -> int:
    """Index into RELATIONS of the relation between two 64-bit truth-table masks."""
    if s1 == s2:
        return 0
    if s1 & s2 == s1:
        return 1
    if s1 & s2 == s2:
        return 2
    disjoint, exhaustive = (s1 & s2) == 0, (s1 | s2) == FULL
    if disjoint and exhaustive:
        return 3
    if disjoint:
        return 4
    if exhaustive:
        return 5
    return 6


def degenerate(mask: int) -> bool:
    """True for a contradiction (no satisfying assignment) or a tautology (all 64)."""
    return mask == 0 or mask == FULL


def bowman_formula(rng: random.Random, variables: list[int], maxlen: int = MAXLEN) -> tuple[list[str], int, int]:
    """One formula drawn as Bowman et al.'s ``create_sub_statement(variables, maxlen)``:
    (tokens, truth-table mask, number of operators)."""
    if maxlen >= 2 and rng.random() < P_BINARY:
        lt, lm, ln = bowman_formula(rng, variables, maxlen // 2)
        rt, rm, rn = bowman_formula(rng, variables, maxlen // 2)
        if rng.random() < 0.5:
            toks, mask = ["(", *lt, "(", "and", *rt, ")", ")"], lm & rm
        else:
            toks, mask = ["(", *lt, "(", "or", *rt, ")", ")"], lm | rm
        n_ops = ln + rn + 1
    else:
        v = variables[rng.randrange(len(variables))]
        toks, mask, n_ops = [VARS[v]], VAR_MASKS[v], 0
    if rng.random() < P_NOT:
        return ["(", "not", *toks, ")"], FULL & ~mask, n_ops + 1
    return toks, mask, n_ops


def bowman_pair(rng: random.Random):
    """One pair as Bowman et al. draw it, or None when either formula is a contradiction or a
    tautology (their generator skips the pair): (tokens_a, mask_a, tokens_b, mask_b, bin)
    with bin = min(max(operators of a, operators of b), OPS_CAP)."""
    variables = rng.sample(range(len(VARS)), PAIR_VARS)
    ta, ma, na = bowman_formula(rng, variables)
    tb, mb, nb = bowman_formula(rng, variables)
    if degenerate(ma) or degenerate(mb):
        return None
    return ta, ma, tb, mb, min(max(na, nb), OPS_CAP)


def truth_table(tokens: list[str]) -> int:
    """Truth-table mask of a formula in the surface form (used by tests and describe)."""
    pos = 0

    def parse():
        nonlocal pos
        t = tokens[pos]
        pos += 1
        if t in VARS:
            return VAR_MASKS[VARS.index(t)]
        if t != "(":
            raise TaskError(f"logic: unexpected token {t!r}")
        if tokens[pos] == "not":
            pos += 1
            m = FULL & ~parse()
        else:
            left = parse()
            if tokens[pos] == "(" and tokens[pos + 1] in ("and", "or"):
                op = tokens[pos + 1]
                pos += 2
                right = parse()
                pos += 1  # inner ")"
                m = left & right if op == "and" else left | right
            else:  # a parenthesised sub-formula
                m = left
        pos += 1  # ")"
        return m

    return parse()


class LogicalInference(Task):
    """Pairs of formulas labelled with one of seven natural-logic relations."""

    kind = "pair_classify"
    num_classes = 7
    version = "2"  # 2: Bowman et al.'s sampler, no tautologies / contradictions, bin 12 = 12+

    def __init__(
        self,
        n_train: int = 100000,
        n_val: int = 5000,
        n_test: int = 5000,
        train_max_ops: int = 6,
        test_ops: list | None = None,
        start_end: bool = True,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        self.n_train, self.n_val, self.n_test = n_train, n_val, n_test
        self.train_max_ops = train_max_ops
        self.test_ops = list(test_ops) if test_ops is not None else list(range(7, OPS_CAP + 1))
        if min(self.test_ops) <= train_max_ops:
            raise TaskError("logic: test operator counts must exceed train_max_ops")
        if max(self.test_ops) > OPS_CAP:
            raise TaskError(
                f"logic: operator counts are binned up to {OPS_CAP} (bin {OPS_CAP} = {OPS_CAP} or more, "
                f"as Bowman et al.); got test_ops={self.test_ops}"
            )
        self.start_end = start_end

    @property
    def vocab(self):
        return VOCAB

    def test_splits(self):
        return [f"ops{k}" for k in self.test_ops]

    def _encode(self, toks):
        ids = [TOK[t] for t in toks]
        return [TOK["<start>"], *ids, TOK["<end>"]] if self.start_end else ids

    def generate(self, split, rng):
        if split in ("train", "val"):
            n, ks = (self.n_train if split == "train" else self.n_val), None
        elif split.startswith("ops") and split[3:].isdigit() and int(split[3:]) in self.test_ops:
            n, ks = self.n_test, int(split[3:])
        else:
            raise TaskError(f"logic: unknown split {split!r}")
        # scalar draws from numpy's Generator cost ~1 us each; a random.Random seeded from it
        # is deterministic given rng and ~10x faster for this recursive, scalar-heavy code
        rng = random.Random(int(rng.integers(2**63)))
        seen: dict[str, None] = {}
        out = {"tokens": [], "tokens2": [], "label": [], "length": []}
        tries = 0
        while len(out["label"]) < n:
            tries += 1
            if tries > 1000 * n + 10000:  # bin 12 takes ~100 draws per pair
                raise TaskError(f"logic: could not draw {n} distinct pairs for {split}")
            pair = bowman_pair(rng)
            if pair is None:  # a tautology or contradiction on either side: skipped, as Bowman
                continue
            ta, ma, tb, mb, k = pair
            if (k > self.train_max_ops) if ks is None else (k != ks):
                continue
            key = " ".join(ta) + " | " + " ".join(tb)
            if key in seen:
                continue
            if ks is None and (zlib.crc32(key.encode()) % 20 == 0) != (split == "val"):
                continue
            seen[key] = None
            out["tokens"].append(self._encode(ta))
            out["tokens2"].append(self._encode(tb))
            out["label"].append(relation(ma, mb))
            out["length"].append(k)  # "length" = operator-count bin, for per-k reporting
        return out

    def length_bin(self, length):
        return f"ops{length}"


def split_stats(task: LogicalInference) -> list[str]:
    """One line per split: size, % of pairs with a tautology or contradiction on either side
    (recomputed from the tokens), and the label distribution in %."""
    import numpy as np

    lines = [f"{'split':8s} {'n':>7s} {'degenerate%':>11s}  " + " ".join(f"{r:>5s}" for r in RELATIONS)]
    for split in task.splits():
        d = task.generate(split, np.random.default_rng(task.split_seed(split)))
        strip = (lambda t: t[1:-1]) if task.start_end else (lambda t: t)
        deg = sum(
            degenerate(truth_table([VOCAB[i] for i in strip(a)])) or degenerate(truth_table([VOCAB[i] for i in strip(b)]))
            for a, b in zip(d["tokens"], d["tokens2"])
        )
        counts = np.bincount(d["label"], minlength=len(RELATIONS)) / len(d["label"])
        lines.append(f"{split:8s} {len(d['label']):7d} {100 * deg / len(d['label']):11.1f}  " + " ".join(f"{100 * c:5.1f}" for c in counts))
    return lines


if __name__ == "__main__":  # python -m bench.tasks.logic [n_train n_val n_test]: the numbers in docs/tasks.md
    import sys

    sizes = [int(a) for a in sys.argv[1:4]] or [135000, 5000, 5000]
    print("\n".join(split_stats(LogicalInference(*sizes))))
