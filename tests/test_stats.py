"""bench/report/stats.py: the verdicts' tests against hand-computed values and scipy's own
results, their error rates under the null simulated through the same judging code, and their
power."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from bench.report import stats
from bench.report.stats import FAILS, HOLDS, UNSURE


def test_welch_matches_a_worked_example():
    # a = 30, 32, 34 (mean 32, variance 4), b = 10, 11, 12 (mean 11, variance 1), 3 each:
    # se^2 = 4/3 + 1/3 = 5/3; t = 21 / sqrt(5/3) = 16.266; df = (5/3)^2 / ((4/3)^2/2 + (1/3)^2/2) = 50/17
    t = stats.welch([30, 32, 34], [10, 11, 12])
    se, df = math.sqrt(5 / 3), 50 / 17
    assert t.effect == pytest.approx(21.0)
    assert t.p == pytest.approx(sps.t.sf(21 / se, df), rel=1e-9)
    # the interval is the 90% one (stats.PAIR_LEVEL): each end is the one-sided 95% bound of the test
    half = sps.t.ppf(0.95, df) * se
    assert 2.353 < sps.t.ppf(0.95, df) < 2.920  # between the tables' t_0.95 at 3 and at 2 df
    assert t.ci == pytest.approx((21 - half, 21 + half))
    assert t.ci == pytest.approx((17.937, 24.063), abs=1e-3)
    assert t.p_reverse == pytest.approx(1 - t.p)
    assert t.n == (3, 3) and t.test == stats.WELCH
    # scipy's own Welch interval agrees
    ref = sps.ttest_ind([30, 32, 34], [10, 11, 12], equal_var=False)
    assert t.ci == pytest.approx(tuple(ref.confidence_interval(0.90)))


def test_a_pair_holds_exactly_when_its_interval_is_above_zero():
    # the printed interval and the verdict never disagree: p < ALPHA <=> lower end > 0, and the
    # reverse p < ALPHA <=> upper end < 0 (Welch on seeds, and the ratio test against its bound)
    rng = np.random.default_rng(11)
    for _ in range(400):
        n_a, n_b = rng.integers(2, 7, size=2)
        a, b = rng.normal(rng.normal(0, 1.5), 1, n_a), rng.normal(0, rng.uniform(0.3, 2), n_b)
        t = stats.welch(a, b)
        assert (t.p < stats.ALPHA) == (t.ci[0] > 0) and (t.p_reverse < stats.ALPHA) == (t.ci[1] < 0)
        r = stats.ratio_test(np.exp(a), np.exp(b), 0.8)
        assert (r.p < stats.ALPHA) == (r.ci[1] < 0.8) and (r.p_reverse < stats.ALPHA) == (r.ci[0] > 0.8)


def test_welch_orientation_lower_is_better_and_small_samples():
    t = stats.welch([2.0, 2.2], [3.0, 3.2], lower_is_better=True)
    assert t.effect == pytest.approx(1.0) and t.p < 0.05
    assert stats.welch([1.0], [2.0, 3.0]) is None
    # no spread on either side: the difference is taken as it is
    same = stats.welch([100.0] * 3, [100.0] * 3)
    assert (same.p, same.p_reverse, same.ci) == (1.0, 1.0, (0.0, 0.0))
    apart = stats.welch([100.0] * 3, [90.0] * 3)
    assert (apart.p, apart.p_reverse) == (0.0, 1.0)


def test_welch_from_printed_mean_and_std_matches_scipy():
    t = stats.welch_from_stats((30.5, 1.1), (10.4, 0.71), 3)
    ref = sps.ttest_ind_from_stats(30.5, 1.1, 3, 10.4, 0.71, 3, equal_var=False, alternative="greater")
    assert t.p == pytest.approx(ref.pvalue) and t.effect == pytest.approx(20.1)


def test_ratio_test_on_log_times():
    a, b = [1.0, 1.1, 0.9], [4.0, 4.2, 3.8]
    t = stats.ratio_test(a, b, 0.6)
    gm = math.exp(np.mean(np.log(a)) - np.mean(np.log(b)))
    assert t.effect == pytest.approx(gm) and t.ci[0] < gm < t.ci[1]
    ref = sps.ttest_ind(np.log(a) - math.log(0.6), np.log(b), equal_var=False, alternative="less")
    assert t.p == pytest.approx(ref.pvalue) and t.p < 0.05
    assert stats.ratio_test([3.0, 3.2, 2.9], b, 0.6).p_reverse < 0.05  # ~0.76x: above 0.6


def test_ratio_ci_is_the_welch_interval_of_the_log_times():
    a, b = [0.65, 0.70, 0.62, 0.68], [2.4, 2.5, 2.3, 2.45, 2.42]
    ratio, lo, hi = stats.ratio_ci(a, b)
    ref = sps.ttest_ind(np.log(a), np.log(b), equal_var=False).confidence_interval(0.95)
    assert (ratio, lo, hi) == pytest.approx((math.exp(np.log(a).mean() - np.log(b).mean()), math.exp(ref.low), math.exp(ref.high)))
    assert stats.ratio_ci([1.0], b) is None


def test_holm_on_a_known_vector():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> 0.06 (monotone)
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([[0.01, 0.04], [0.2, 0.01]]) == pytest.approx(np.array([[0.02, 0.04], [0.2, 0.02]]))


def _test(p, p_reverse):
    return stats.PairTest(0.0, (0.0, 0.0), p, p_reverse, (3, 3), stats.WELCH)


def test_combine_is_intersection_union_with_holm_for_a_reversal():
    assert stats.combine([_test(0.01, 0.99), _test(0.04, 0.96)]) == (HOLDS, 1)
    assert stats.combine([_test(0.01, 0.99), _test(0.2, 0.8)]) == (UNSURE, 1)
    assert stats.combine([_test(0.01, 0.99), None]) == (UNSURE, 1)  # a pair with no test never holds
    # reverse p 0.03 alone is significant; with 2 pairs Holm makes it 0.06: not a counterexample
    assert stats.combine([_test(0.97, 0.03)])[0] == FAILS
    assert stats.combine([_test(0.97, 0.03), _test(0.5, 0.5)])[0] == UNSURE
    assert stats.combine([_test(0.99, 0.01), _test(0.5, 0.5)]) == (FAILS, 0)


def test_mean_ci_and_binomial_se():
    mean, half = stats.mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)  # t_0.975(2) sd / sqrt(n)
    assert stats.mean_ci([5.0]) == (5.0, None)
    assert stats.binomial_se(0.5, 100) == pytest.approx(0.05)
    assert stats.binomial_se(0.9, 400) == pytest.approx(0.015)


def _simulate(rng, sims: int, seeds: int, pairs: int, shift: float = 0.0, shared: bool = False):
    """Verdict codes (1 holds, -1 does not hold, 0 inconclusive) of ``sims`` claims of ``pairs``
    pairs, each cell ``seeds`` draws of N(0, 1) (the better side's mean ``shift``), judged by
    bench's own judging code (stats.welch_arrays, stats.decide). ``shared``: every pair has the
    same better cell (as "A beats each of B, C, ...")."""
    better = rng.normal(shift, 1.0, size=(sims, 1 if shared else pairs, seeds))
    than = rng.normal(0.0, 1.0, size=(sims, pairs, seeds))
    _, _, _, p, p_rev = stats.welch_arrays(better.mean(-1), better.var(-1, ddof=1), seeds, than.mean(-1), than.var(-1, ddof=1), seeds)
    return stats.decide(p, p_rev)


@pytest.mark.parametrize("seeds", [3, 5])
@pytest.mark.parametrize("shared", [False, True])
def test_null_false_verdict_rates_stay_at_or_below_alpha(seeds, shared):
    rng = np.random.default_rng(40 + seeds)
    for pairs in range(1, 8):
        codes = _simulate(rng, 10000, seeds, pairs, shared=shared)
        false_holds, false_fails = (codes == 1).mean(), (codes == -1).mean()
        assert false_holds <= 0.05, (pairs, false_holds)
        assert false_fails <= 0.05, (pairs, false_fails)


def test_a_two_sd_difference_at_five_seeds_holds_in_most_simulations():
    codes = _simulate(np.random.default_rng(7), 4000, 5, 1, shift=2.0)
    assert (codes == 1).mean() >= 0.80
    assert (codes == -1).mean() == 0.0


def test_the_single_pair_matches_the_vectorised_judging():
    rng = np.random.default_rng(3)
    a, b = rng.normal(1, 1, (20, 3)), rng.normal(0, 1, (20, 3))
    _, lo, hi, p, p_rev = stats.welch_arrays(a.mean(1), a.var(1, ddof=1), 3, b.mean(1), b.var(1, ddof=1), 3, level=stats.PAIR_LEVEL)
    for i in range(20):
        t = stats.welch(a[i], b[i])
        assert (t.p, t.p_reverse, *t.ci) == pytest.approx((p[i], p_rev[i], lo[i], hi[i]))


def test_paired_t_on_synthetic_outcomes():
    rng = np.random.default_rng(0)
    n = 500
    base = (rng.random((3, n)) < 0.6).astype(float)  # 3 seeds of B on 500 examples
    better = base.copy()
    wrong = np.flatnonzero(base.sum(0) == 0)  # the examples every seed of B gets wrong (~6%): A gets them right
    better[:, wrong] = 1.0
    t = stats.paired_t(better, base)
    true = len(wrong) / n  # each seed of A gets those right: the true difference
    assert t.effect == pytest.approx(true) and t.ci[0] <= true <= t.ci[1]
    assert t.p < 0.05 and t.p_reverse > 0.95 and t.test == stats.PAIRED and t.n == (3, 3)
    same = stats.paired_t(base, base)
    # the same runs on both sides: no difference, nothing is significant; the draws are symmetric in the sides
    assert same.effect == 0.0 and same.ci[0] == -same.ci[1] < 0 and same.p == same.p_reverse == 0.5
    # "B beats A" is exactly the reverse of "A beats B": the same draws, read the other way
    back = stats.paired_t(base, better)
    assert (back.effect, back.ci, back.p, back.p_reverse) == (-t.effect, (-t.ci[1], -t.ci[0]), t.p_reverse, t.p)
    # lower is better on the errors (1 - outcome): the same effect; the mirrored logits read the fixed draws
    # mirrored, so p agrees to the draws' resolution, not to the bit
    flipped = stats.paired_t(1 - better, 1 - base, lower_is_better=True)
    assert flipped.effect == pytest.approx(true) and flipped.p == pytest.approx(t.p, abs=0.01) and flipped.p < 0.05
    assert stats.paired_t(better[:1], base) is None
    with pytest.raises(ValueError):
        stats.paired_t(better[:, :10], base)


def _paired_t_reference(a, b):
    """The paired t test's variance and df computed the long way, in exact Fractions: each seed's
    mean, the two-way ANOVA residual of each side (X_ij - row_i - col_j + grand), the per-example
    difference of the sides' means."""
    from fractions import Fraction as F

    def side(x):
        k, n = len(x), len(x[0])
        row = [F(sum(r), n) for r in x]
        col = [F(sum(x[i][j] for i in range(k)), k) for j in range(n)]
        grand = F(sum(map(sum, x)), k * n)
        seed_var = sum((m - grand) ** 2 for m in row) / (k - 1)
        resid = sum((x[i][j] - row[i] - col[j] + grand) ** 2 for i in range(k) for j in range(n)) / ((k - 1) * (n - 1))
        return k, n, grand, seed_var, resid, col

    ka, n, ga, sa, resa, cola = side(a)
    kb, _, gb, sb, resb, colb = side(b)
    d = [x - y for x, y in zip(cola, colb)]
    dbar = sum(d) / n
    d_var = sum((x - dbar) ** 2 for x in d) / (n - 1)
    parts = [sa / ka, sb / kb, max(F(0), d_var - resa / ka - resb / kb) / n]
    var = sum(parts)
    seeds_df = (
        parts[0] ** 2 / (ka - 1) + parts[1] ** 2 / (kb - 1)
        if ka == kb  # Welch-Satterthwaite
        else (parts[0] + parts[1]) ** 2 / (min(ka, kb) - 1)
    )  # Hsu at unequal seeds
    df = var**2 / (seeds_df + parts[2] ** 2 / (n - 1))
    return ga - gb, var, df, parts[2]


def _sides():
    rng = np.random.default_rng(5)
    shared = rng.random(30) < 0.7  # examples most seeds get right: the sides' example means co-vary
    a = ((rng.random((3, 30)) < 0.8) & shared | (rng.random((3, 30)) < 0.2)).astype(int)
    b = ((rng.random((4, 30)) < 0.5) & shared | (rng.random((4, 30)) < 0.4)).astype(int)
    return a, b


def test_paired_t_student_matches_the_long_way_and_scipy_t():
    a, b = _sides()
    effect, var, df, examples = _paired_t_reference(a.tolist(), b.tolist())
    t = stats.paired_t_student_arrays(a, b)
    assert float(t[0]) == pytest.approx(float(effect), rel=1e-12)
    assert float(t[3]) == pytest.approx(sps.t.sf(float(effect) / math.sqrt(var), float(df)), rel=1e-9)
    half = sps.t.ppf(0.5 + stats.PAIR_LEVEL / 2, float(df)) * math.sqrt(var)
    assert (float(t[1]), float(t[2])) == pytest.approx((float(effect) - half, float(effect) + half), rel=1e-9)
    assert float(stats.examples_variance(a, b)) == pytest.approx(float(examples), rel=1e-12)
    for k in (3, 4):  # at equal seeds too (Welch-Satterthwaite rather than Hsu's df)
        effect, var, df, _ = _paired_t_reference(a[:k].tolist(), b[:k].tolist())
        assert float(stats.paired_t_student_arrays(a[:k], b[:k])[3]) == pytest.approx(
            sps.t.sf(float(effect) / math.sqrt(var), float(df)), rel=1e-9
        )
    # one example: no example part, the test is Welch's (scipy's) on the seeds' values
    one = stats.paired_t_student_arrays(a[:, :1], b[:3, :1])
    ref = sps.ttest_ind(a[:, 0], b[:3, 0], equal_var=False, alternative="greater")
    two_sided = sps.ttest_ind(a[:, 0], b[:3, 0], equal_var=False).confidence_interval(stats.PAIR_LEVEL)
    assert float(one[3]) == pytest.approx(ref.pvalue) and (float(one[1]), float(one[2])) == pytest.approx(tuple(two_sided))


def _pivot_reference(a, b, unit: float = 1.0):
    """The logit-normal pivot of paired_t_arrays computed the long way, one draw at a time in plain
    Python: the draws rebuilt from scipy's Sobol points as its docstring says, the logit-normal mean
    by numpy's own 12-point Gauss-Hermite rule (not stats' table), exp and log from math."""
    from numpy.polynomial.hermite_e import hermegauss
    from scipy.stats import qmc

    x, w = hermegauss(12)
    w = w / w.sum()

    def expit(v):
        return 1 / (1 + math.exp(-v)) if v >= 0 else math.exp(v) / (1 + math.exp(v))

    def m(mu, sigma):
        return sum(wi * expit(mu + sigma * xi) for xi, wi in zip(x, w))

    n = a.shape[1]
    total = n / unit
    u = (np.round(qmc.Sobol(6, scramble=False).random_base2(10) * 2048) + [1, 3, 5, 7, 9, 11]) % 2048 / 2048
    half = [
        dict(c=u[i, 0], za=sps.norm.ppf(u[i, 1]), zb=sps.norm.ppf(u[i, 2]), e=sps.t.ppf(u[i, 3], n - 1), ua=u[i, 4], ub=u[i, 5])
        for i in range(len(u))
    ]
    draws = half + [dict(c=d["c"], za=d["zb"], zb=d["za"], e=-d["e"], ua=d["ub"], ub=d["ua"]) for d in half]  # sides exchanged

    def side(x):
        k = len(x)
        sums = [float(r.sum()) for r in x]
        y = [math.log(s + 0.5) - math.log(total - s + 0.5) for s in sums]
        ybar = math.fsum(y) / k
        return k, sum(sums) / (k * total), ybar, math.fsum((v - ybar) ** 2 for v in y) / (k - 1)

    (ka, mean_a, ya, va), (kb, mean_b, yb, vb) = side(a), side(b)
    pa, pb = va / ka, vb / kb
    ex = float(stats.examples_variance(a, b)) * unit * unit
    shared = ka == kb >= stats.SHARED_FROM
    df = (pa + pb) ** 2 / (pa**2 / (ka - 1) + pb**2 / (kb - 1))

    def chi_scale(level, dof):
        return math.sqrt(dof / sps.chi2.ppf(level, dof))

    d = []
    for r in draws:
        if shared:
            lo = math.floor(df)
            loc_a = loc_b = chi_scale(r["c"], lo) + (df - lo) * (chi_scale(r["c"], lo + 1) - chi_scale(r["c"], lo))
            wide_a = wide_b = chi_scale(r["c"], ka - 1)
        else:
            loc_a = wide_a = chi_scale(r["ua"], ka - 1)
            loc_b = wide_b = chi_scale(r["ub"], kb - 1)
        at_a = mean_a + m(ya - r["za"] * loc_a * math.sqrt(pa), math.sqrt(va) * wide_a) - m(ya, math.sqrt(va))
        at_b = mean_b + m(yb - r["zb"] * loc_b * math.sqrt(pb), math.sqrt(vb) * wide_b) - m(yb, math.sqrt(vb))
        d.append(at_a - at_b - r["e"] * math.sqrt(ex))
    d.sort()
    j = math.ceil(stats.ALPHA * len(d))
    return d[j - 1] / unit, d[-j] / unit, sum(v <= 0 for v in d) / len(d), sum(v >= 0 for v in d) / len(d)


@pytest.mark.parametrize("ka, kb", [(3, 4), (2, 2), (4, 4)])
def test_paired_t_is_the_pivot_and_the_t_test_both(ka, kb):
    """paired_t_arrays against the long way: its p is the larger of the logit-normal pivot's and the
    paired t test's, its interval the hull of theirs (own scales at 3 vs 4 and 2 vs 2, a shared one at 4 vs 4)."""
    a, b = _sides()
    a, b = np.concatenate([a, a[:1]])[:ka], b[:kb]
    lo, hi, p, p_rev = _pivot_reference(a, b)
    _, lo_t, hi_t, p_t, p_rev_t = (float(x) for x in stats.paired_t_student_arrays(a, b))
    effect, lo_all, hi_all, p_all, p_rev_all = (float(x) for x in stats.paired_t_arrays(a, b))
    assert effect == pytest.approx(a.mean() - b.mean(), rel=1e-12)
    assert p_all == pytest.approx(max(p, p_t), abs=1.5 / stats.PIVOT_DRAWS)  # a draw within rounding of 0 may count either way
    assert p_rev_all == pytest.approx(max(p_rev, p_rev_t), abs=1.5 / stats.PIVOT_DRAWS)
    assert (lo_all, hi_all) == pytest.approx((min(lo, lo_t), max(hi, hi_t)), rel=1e-9)


def test_paired_t_on_right_tokens_reads_the_unit():
    """Right tokens an example with unit n / (all tokens): the effect is in right tokens an example,
    times unit the difference of the token accuracies; without the unit counts have no known range
    (the t test alone, named so); paired_t_arrays refuses shares above 1."""
    rng = np.random.default_rng(8)
    tokens = rng.integers(16, 65, 200)
    a = rng.binomial(tokens, 0.8, size=(4, 200))
    b = rng.binomial(tokens, 0.77, size=(4, 200))
    unit = 200 / tokens.sum()
    t = stats.paired_t(a, b, unit=unit)
    assert t.effect * unit == pytest.approx(a.sum(1).mean() / tokens.sum() - b.sum(1).mean() / tokens.sum(), rel=1e-12)
    assert t.test == stats.PAIRED and t.p < 0.05 and t.ci[0] * unit > 0
    plain = stats.paired_t(a, b)
    assert plain.test == stats.PAIRED_SCORES and plain.effect == t.effect
    with pytest.raises(ValueError):
        stats.paired_t_arrays(a, b)


def test_a_paired_pair_holds_exactly_when_its_interval_is_above_zero():
    """The pair test's printed interval and verdict never disagree (p < ALPHA <=> lower end > 0,
    reverse p < ALPHA <=> upper end < 0), near the ceiling, in the middle and near the floor."""
    rng = np.random.default_rng(12)
    for _ in range(60):
        ka, kb = rng.integers(2, 7, size=2)
        base = rng.uniform(0.02, 0.98)
        pa = np.clip(base + rng.normal(0, 0.05, (ka, 1)), 0, 1)
        pb = np.clip(base + rng.normal(rng.normal(0, 0.03), 0.03, (kb, 1)), 0, 1)
        a, b = (rng.random((ka, 300)) < pa).astype(int), (rng.random((kb, 300)) < pb).astype(int)
        t = stats.paired_t(a, b)
        assert (t.p < stats.ALPHA) == (t.ci[0] > 0) and (t.p_reverse < stats.ALPHA) == (t.ci[1] < 0)


def test_paired_t_is_exact_on_integer_outcomes():
    """0/100 outcomes: every sum is an exact integer and each estimate one division, so the verdict,
    the interval and p are the same bits whatever the order of the seeds and the examples (a
    summation order cannot move them), and the same as on 0/1 outcomes scaled after."""
    rng = np.random.default_rng(3)
    a = 100.0 * (rng.random((3, 400)) < 0.55)
    b = 100.0 * (rng.random((5, 400)) < 0.5)
    t = stats.paired_t(a, b)
    cols, sa, sb = rng.permutation(400), rng.permutation(3), rng.permutation(5)
    shuffled = stats.paired_t(a[sa][:, cols], b[sb][:, cols])
    assert (shuffled.effect, shuffled.ci, shuffled.p, shuffled.p_reverse) == (t.effect, t.ci, t.p, t.p_reverse)
    ones = stats.paired_t(a / 100, b / 100)
    assert ones.p == t.p and ones.p_reverse == t.p_reverse
    assert (100 * ones.effect, 100 * ones.ci[0], 100 * ones.ci[1]) == (t.effect, *t.ci)


def test_the_pivot_s_constants():
    """The Gauss-Hermite table is numpy's 12-point rule for the standard normal; the draws' levels
    are cell centres of a 1/2048 grid, each column a permutation of them, no two columns equal."""
    from numpy.polynomial.hermite_e import hermegauss

    x, w = hermegauss(12)
    assert np.array(stats._GH_NODES) == pytest.approx(x[6:], rel=1e-13)
    assert np.array(stats._GH_WEIGHTS) == pytest.approx(w[6:] / w.sum(), rel=1e-11)
    u = stats._levels()
    assert u.shape == (stats.PIVOT_DRAWS // 2, 6)
    for col in u.T:
        assert sorted(col * 2048) == list(range(1, 2048, 2))
    assert all((u[:, i] != u[:, j]).any() for i in range(6) for j in range(i))


def _calibration():
    """scripts/benchmarks/stats_calibration.py: the simulation the committed calibration table runs."""
    from script_helpers import load_script

    return load_script("scripts/benchmarks/stats_calibration.py")


@pytest.mark.parametrize(
    "key",
    [
        "normal:2v2:0.5:100:shared",
        "normal:3v3:2.5:1000:shared",
        "normal:5v5:8:100:independent",
        "ceiling:5v5:99:1/0.1:1000",
        "unequal:3v5:70:1/0.1:1000",
        "tokens:5v5:70:0.02/0.02:200",
        "chance:5v5:2:1/0.1:1000",
    ],
)
def test_paired_t_false_holds_stay_at_or_below_alpha(key):
    """A few cells of the calibration grid (results/stats_calibration.md has all of them): two
    models of equal mean, 2,000 simulated pairs; the count of false holds either way may exceed 5%
    of 2,000 only by what the simulation's own binomial error allows (its 99th percentile at a
    true 5%)."""
    cal = _calibration()
    index, cell = next((i, c) for i, c in enumerate(cal.cells()) if c.key == key)
    reps = 2000
    rates = cal.rates(np.random.default_rng([index, 1]), reps, cell)
    bound = sps.binom.ppf(0.99, reps, stats.ALPHA) / reps
    assert rates["new>"] <= bound and rates["new<"] <= bound, (rates["new>"], rates["new<"])
    if cell.scenario == "ceiling":  # the paired t test alone: a spread side's skew near 1 makes it hold too often
        assert rates["before>"] > 0.10
    if cell.scenario == "tokens":  # Welch on the seed means alone misses the shared test set
        assert rates["welch>"] > 0.20


def test_paired_t_sees_three_points_at_five_seeds():
    """3 points at 5 seeds a side, seed sd 0.5 points, 1,000 shared examples: the committed table's
    power is 84% (the paired t test alone 86%); 400 pairs here, never the wrong way."""
    cal = _calibration()
    index, cell = next((i, c) for i, c in enumerate(cal.cells()) if c.key == "normal:5v5:0.5:1000:shared")
    rates = cal.rates(np.random.default_rng([index, 2]), 400, cell, alternative=True)
    assert rates["new>"] >= 0.75 and rates["new<"] == 0.0


def test_failure_bound_is_clopper_pearson():
    # 0 of n: the rate r with (1 - r)^n = 0.05, by hand 1 - 0.05^(1/n)
    assert stats.failure_bound(0, 5) == pytest.approx(1 - 0.05 ** (1 / 5)) == pytest.approx(0.4507, abs=1e-4)
    assert stats.failure_bound(0, 10) == pytest.approx(1 - 0.05 ** (1 / 10))
    # 1 of 10: the r at which 1 or fewer failures have probability 0.05: (1 - r)^10 + 10 r (1 - r)^9 = 0.05
    from scipy.optimize import brentq

    r = brentq(lambda r: (1 - r) ** 10 + 10 * r * (1 - r) ** 9 - 0.05, 0.01, 0.99)
    assert stats.failure_bound(1, 10) == pytest.approx(r, rel=1e-9) == pytest.approx(0.3942, abs=1e-4)
    assert stats.failure_bound(5, 5) == 1.0
    assert stats.failure_bound(0, 5, level=0.9) == pytest.approx(1 - 0.1 ** (1 / 5))
    assert stats.failure_text(0, 5) == "0 of 5 seeds failed: a failure rate up to 45% is not excluded (95%)"
    with pytest.raises(ValueError):
        stats.failure_bound(6, 5)


def test_power_at_matches_the_noncentral_t_and_a_simulation():
    # no seeds' spread, the test set's se 1: the normal power Phi(effect / se - z_0.95)
    assert stats.power_at(3.0, 0.0, 5, 0.0, 5, examples_se=1.0) == pytest.approx(sps.norm.sf(1.6449 - 3.0), abs=1e-4)
    # +3 points, seed sds 2 and 3 over 5 seeds each: Welch's t on normal values, simulated
    rng = np.random.default_rng(21)
    a, b = rng.normal(3.0, 2.0, (20000, 5)), rng.normal(0.0, 3.0, (20000, 5))
    p = stats.welch_arrays(a.mean(1), a.var(1, ddof=1), 5, b.mean(1), b.var(1, ddof=1), 5)[3]
    simulated = (p < stats.ALPHA).mean()
    predicted = stats.power_at(3.0, 2.0, 5, 3.0, 5)
    assert predicted == pytest.approx(simulated, abs=3 * math.sqrt(simulated * (1 - simulated) / 20000) + 0.01)
    assert 0.4 < predicted < 0.7
    assert stats.power_at(0.0, 2.0, 5, 2.0, 5) == pytest.approx(stats.ALPHA, abs=0.005)
    assert stats.power_at(3.0, 2.0, 3, 2.0, 5) < stats.power_at(3.0, 2.0, 5, 2.0, 5)  # Hsu's df at unequal seeds


def test_aligned_outcomes_matches_examples_by_index():
    a = [{"index": np.array([2, 0, 1]), "correct": np.array([1.0, 0.0, 1.0])}] * 2
    b = [{"index": np.array([0, 1, 2, 3]), "correct": np.array([1.0, 1.0, 0.0, 1.0])}] * 2
    xa, xb = stats.aligned_outcomes(a, b)
    assert xa.tolist() == [[0.0, 1.0, 1.0]] * 2  # examples 0, 1, 2
    assert xb.tolist() == [[1.0, 1.0, 0.0]] * 2
    assert stats.aligned_outcomes(a, [{"index": np.array([9]), "correct": np.array([1.0])}]) is None
    assert stats.aligned_outcomes(a, [{"correct": np.array([1.0])}]) is None


def test_backfill_majority_regenerates_the_share_a_run_recorded(tmp_path):
    """scripts/backfill_majority.py on a committed record that has its shares, with them removed:
    it writes the same shares back, and nothing else changes."""
    import json

    from script_helpers import ROOT as root
    from script_helpers import load_script

    script = load_script("scripts/backfill_majority.py")
    original = (root / "results/runs/listops/small/gut/seed0-4295616f.json").read_text()
    rec = json.loads(original)
    assert "majority" in rec["metrics"]["len500_600"]
    for m in rec["metrics"].values():
        m.pop("majority", None)
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps(rec, indent=2) + "\n")
    filled, what = script.backfill(path, {})
    assert "len500_600 " in what
    assert json.dumps(filled, indent=2) + "\n" == original


def test_backfill_majority_counts_parity_s_chance_from_its_strings(tmp_path):
    """scripts/backfill_majority.py on a committed parity record (kind tag) with its token shares
    removed writes them back unchanged; and the bin1 share is what always guessing the most frequent
    prefix parity scores, counted here from the generated strings themselves."""
    import json

    from script_helpers import ROOT as root
    from script_helpers import load_script

    script = load_script("scripts/backfill_majority.py")
    found = sorted((root / "results/runs/parity/small/deltanet").glob("seed0-*.json"))
    original = next(p for p in found if json.loads(p.read_text())["config"]["task"]["params"].get("bin1_max_len") == 128).read_text()
    rec = json.loads(original)
    cfg = rec["config"]["task"]
    for m in rec["metrics"].values():
        for entry in [m, *(m.get("by_length") or {}).values()]:
            entry.pop("token_majority"), entry.pop("last_majority")
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps(rec, indent=2) + "\n")
    filled, what = script.backfill(path, {})
    assert what.startswith("token_majority val ")
    assert json.dumps(filled, indent=2) + "\n" == original
    task = script.task_class(cfg).build(cfg["name"], dict(cfg["params"]))
    strings = task.generate("bin1", np.random.default_rng(task.split_seed("bin1")))["tokens"]
    ones = [np.cumsum(np.asarray(t) == task.vocab.index("1")) for t in strings]  # 1s read after each prefix
    even, total = sum(int((c % 2 == 0).sum()) for c in ones), sum(len(c) for c in ones)
    assert filled["metrics"]["bin1"]["token_majority"] == pytest.approx(max(even, total - even) / total)
    assert filled["metrics"]["bin1"]["last_majority"] == 1.0  # every string is in the language: its last prefix is even
