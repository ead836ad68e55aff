"""Logical inference: relations on hand-worked pairs, symmetry properties, generator labels,
and Bowman et al.'s generator (no tautologies or contradictions, operator-count bins)."""

import itertools
import random

import numpy as np
import pytest

from bench.tasks.logic import (
    OPS_CAP,
    RELATIONS,
    VARS,
    VOCAB,
    LogicalInference,
    TaskError,
    bowman_formula,
    bowman_pair,
    relation,
    truth_table,
)


def models(formula: str) -> frozenset:
    """Satisfying assignments by brute force, evaluating the surface form as Python booleans."""
    words = formula.split()

    def ev(i, env):  # returns (value, next index)
        w = words[i]
        if w in VARS:
            return env[w], i + 1
        assert w == "("
        if words[i + 1] == "not":
            v, j = ev(i + 2, env)
            return (not v), j + 1
        left, j = ev(i + 1, env)
        assert words[j] == "(" and words[j + 1] in ("and", "or")
        right, k = ev(j + 2, env)
        v = (left and right) if words[j + 1] == "and" else (left or right)
        return v, k + 2  # inner ")" and outer ")"

    out = set()
    for bits in itertools.product([False, True], repeat=6):
        env = dict(zip(VARS, bits))
        v, end = ev(0, env)
        assert end == len(words)
        if v:
            out.add(bits)
    return frozenset(out)


def rel(a: str, b: str) -> str:
    return RELATIONS[relation(truth_table(a.split()), truth_table(b.split()))]


CONTRA = "( a ( and ( not a ) ) )"
TAUT = "( a ( or ( not a ) ) )"


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("a", "a", "≡"),
        ("( not ( not b ) )", "b", "≡"),
        ("a", "( a ( or b ) )", "⊏"),
        ("( d ( or f ) )", "( f ( and a ) )", "⊐"),  # the docstring's example
        ("a", "( not a )", "^"),
        ("( a ( and b ) )", "( not a )", "|"),
        ("( a ( or b ) )", "( not a )", "‿"),
        ("a", "b", "#"),
        ("( d ( and ( c ( or d ) ) ) )", "( not f )", "#"),  # Tran et al.'s example
        # edge cases of the documented convention: entailment is tested before exclusion
        (CONTRA, "b", "⊏"),
        (CONTRA, TAUT, "⊏"),
        (CONTRA, "( b ( and ( not b ) ) )", "≡"),
        ("b", TAUT, "⊏"),
        (TAUT, "( c ( or ( not c ) ) )", "≡"),
    ],
)
def test_hand_worked_relations(a, b, expected):
    assert rel(a, b) == expected


def n_ops(formula: str) -> int:
    return sum(w in ("and", "or", "not") for w in formula.split())


def test_truth_tables_match_brute_force():
    rng = random.Random(0)
    for _ in range(300):
        variables = rng.sample(range(6), 4)
        toks, mask, ops = bowman_formula(rng, variables)
        brute = models(" ".join(toks))
        bits = {tuple(bool((j >> i) & 1) for i in range(6)) for j in range(64) if (mask >> j) & 1}
        assert bits == brute
        assert truth_table(toks) == mask
        assert ops == n_ops(" ".join(toks))
        assert {w for w in toks if w in VARS} <= {VARS[v] for v in variables}


def test_sampler_matches_bowman_probabilities():
    """Hand-computed from Bowman et al.'s generator: the root is binary with probability 4/9
    (`operators` = and, or, and, or + five leaves) and any node is negated with probability 1/3
    (`neg_or_nones` = not, none, none), so a formula has no operator with probability
    5/9 * 2/3 = 10/27. Binary nesting stops at three levels (maxlen 12 -> 6 -> 3 -> 1): at most
    7 binary operators and 15 negations."""
    rng = random.Random(2)
    n, no_op, root_binary, most_binary = 20000, 0, 0, 0
    for _ in range(n):
        toks, _, ops = bowman_formula(rng, [0, 1, 2, 3])
        no_op += ops == 0
        body = toks[2:-1] if toks[:2] == ["(", "not"] else toks
        root_binary += len(body) > 1 and body[1] != "not"
        binary = sum(w in ("and", "or") for w in toks)
        most_binary = max(most_binary, binary)
        assert binary <= 7 and ops - binary <= 15
    tol = 4 * (0.25 / n) ** 0.5  # four standard deviations at worst
    assert abs(no_op / n - 10 / 27) < tol
    assert abs(root_binary / n - 4 / 9) < tol
    assert most_binary == 7


def test_relation_symmetries():
    rng = random.Random(1)
    swap = {"⊏": "⊐", "⊐": "⊏"}
    seen = set()
    for _ in range(3000):
        pair = bowman_pair(rng)
        if pair is None:
            continue
        _, m1, _, m2, _ = pair
        r12, r21 = RELATIONS[relation(m1, m2)], RELATIONS[relation(m2, m1)]
        assert r21 == swap.get(r12, r12)  # ≡ ^ | ‿ # symmetric, ⊏ / ⊐ swap
        seen.add(r12)
    assert seen == set(RELATIONS)


def words(tokens):
    w = [VOCAB[t] for t in tokens]
    assert w[0] == "<start>" and w[-1] == "<end>"
    return " ".join(w[1:-1])


def test_generated_labels_and_operator_counts():
    task = LogicalInference(n_train=300, n_val=60, n_test=40)
    assert task.test_splits() == [f"ops{k}" for k in range(7, 13)]
    for split in task.splits():
        d = task.generate(split, np.random.default_rng(task.split_seed(split)))
        assert len(d["label"]) == {"train": 300, "val": 60}.get(split, 40)
        larger = []
        for t1, t2, label, k in zip(d["tokens"], d["tokens2"], d["label"], d["length"]):
            a, b = words(t1), words(t2)
            s1, s2 = models(a), models(b)
            # Bowman's generator skips tautologies and contradictions (brute force over 64 rows)
            assert 0 < len(s1) < 64 and 0 < len(s2) < 64, (a, b)
            # the seven relations recomputed from sets of assignments, independently
            full = 64
            if s1 == s2:
                exp = "≡"
            elif s1 < s2:
                exp = "⊏"
            elif s1 > s2:
                exp = "⊐"
            elif not (s1 & s2) and len(s1 | s2) == full:
                exp = "^"
            elif not (s1 & s2):
                exp = "|"
            elif len(s1 | s2) == full:
                exp = "‿"
            else:
                exp = "#"
            assert RELATIONS[label] == exp, (a, b)
            # a pair's bin: its larger formula's operator count, 12 standing for 12 or more
            larger.append(max(n_ops(a), n_ops(b)))
            assert k == min(larger[-1], 12)
            assert len({w for w in (a + " " + b).split() if w in VARS}) <= 4  # 4 variables per pair
            if split in ("train", "val"):
                assert 0 <= k <= 6
            else:
                assert k == int(split[3:])
        if split == "ops12":
            assert max(larger) > 12  # the last bin is open-ended, as Bowman's test12


def test_test_ops_beyond_the_last_bin_are_refused():
    with pytest.raises(TaskError):
        LogicalInference(test_ops=[7, OPS_CAP + 1])
    with pytest.raises(TaskError):
        LogicalInference(test_ops=[6, 7])


def test_no_degenerate_pairs_at_scale_and_entailment_not_inflated():
    """Over 3000 train pairs: no formula is a tautology or contradiction (checked by the task's
    truth tables, which test_truth_tables_match_brute_force ties to brute force), and the
    entailment labels are not inflated by them: before the fix a pair with a degenerate side
    could only be ≡ / ⊏ / ⊐, which took ⊏ + ⊐ to ~27% of train; Bowman's distribution has ~21%."""
    task = LogicalInference(n_train=3000, n_val=10, n_test=10)
    d = task.generate("train", np.random.default_rng(task.split_seed("train")))
    full = (1 << 64) - 1
    for t1, t2 in zip(d["tokens"], d["tokens2"]):
        for t in (t1, t2):
            assert truth_table([VOCAB[i] for i in t[1:-1]]) not in (0, full)
    entail = np.isin(d["label"], [1, 2]).mean()
    assert 0.17 < entail < 0.25


def test_splits_deterministic_and_train_val_disjoint():
    task = LogicalInference(n_train=2000, n_val=200, n_test=10)
    gen = lambda s: task.generate(s, np.random.default_rng(task.split_seed(s)))
    a, b = gen("train"), gen("train")
    assert a == b
    pairs = lambda d: {(tuple(x), tuple(y)) for x, y in zip(d["tokens"], d["tokens2"])}
    assert len(pairs(a)) == len(a["label"])
    assert not pairs(a) & pairs(gen("val"))
