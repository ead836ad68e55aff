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


def test_paired_bootstrap_on_synthetic_outcomes():
    rng = np.random.default_rng(0)
    n = 500
    base = (rng.random((3, n)) < 0.6).astype(float)  # 3 seeds of B on 500 examples
    better = base.copy()
    wrong = np.flatnonzero(base.sum(0) == 0)  # the examples every seed of B gets wrong (~6%): A gets them right
    better[:, wrong] = 1.0
    t = stats.paired_bootstrap(better, base, n_boot=2000)
    true = len(wrong) / n  # each seed of A gets those right: the true difference
    assert t.effect == pytest.approx(true) and t.ci[0] <= true <= t.ci[1]
    assert t.p < 0.05 and t.p_reverse > 0.95 and t.test == stats.PAIRED and t.n == (3, 3)
    same = stats.paired_bootstrap(base, base, n_boot=500)
    # the same runs on both sides: the seeds still vary between draws, nothing is significant
    assert same.effect == 0.0 and same.ci[0] < 0 < same.ci[1] and min(same.p, same.p_reverse) > 0.3
    flipped = stats.paired_bootstrap(1 - better, 1 - base, lower_is_better=True, n_boot=500)
    assert flipped.effect == pytest.approx(true) and flipped.p < 0.05
    assert stats.paired_bootstrap(better[:1], base, n_boot=10) is None
    with pytest.raises(ValueError):
        stats.paired_bootstrap(better[:, :10], base)


def test_paired_bootstrap_is_exact_on_integer_outcomes():
    """Every draw of 0/100 outcomes is the correctly rounded rational mean_A - mean_B, so the
    interval and p are the same bits on any CPU (a BLAS kernel's summation order cannot move
    them) and a tie is exactly 0. Reference: the same resamples in Python's exact Fractions."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    n, n_boot = 40, 300
    a = 100.0 * (rng.random((3, n)) < 0.5)
    b = 100.0 * (rng.random((2, n)) < 0.5)
    t = stats.paired_bootstrap(a, b, n_boot=n_boot, seed=7)
    draw = np.random.default_rng(7)  # the draws paired_bootstrap makes, in its order
    counts = draw.multinomial(n, np.full(n, 1.0 / n), size=n_boot)
    pick_a, pick_b = draw.integers(0, 3, size=(3, n_boot)), draw.integers(0, 2, size=(2, n_boot))
    exact = []
    for d in range(n_boot):
        def mean(x, pick):
            return Fraction(sum(int(x[s] @ counts[d]) for s in pick[:, d]), len(pick) * n)
        exact.append(mean(a, pick_a) - mean(b, pick_b))
    assert t.p == (1 + sum(e <= 0 for e in exact)) / (1 + n_boot)
    assert t.p_reverse == (1 + sum(e >= 0 for e in exact)) / (1 + n_boot)
    assert any(e == 0 for e in exact)  # the ties this test is about: counted on both sides
    lo, hi = np.quantile(np.array([float(e) for e in exact]), [0.5 - stats.PAIR_LEVEL / 2, 0.5 + stats.PAIR_LEVEL / 2])
    assert t.ci == (lo, hi)


def test_aligned_outcomes_matches_examples_by_index():
    a = [{"index": np.array([2, 0, 1]), "correct": np.array([1.0, 0.0, 1.0])}] * 2
    b = [{"index": np.array([0, 1, 2, 3]), "correct": np.array([1.0, 1.0, 0.0, 1.0])}] * 2
    xa, xb = stats.aligned_outcomes(a, b)
    assert xa.tolist() == [[0.0, 1.0, 1.0]] * 2  # examples 0, 1, 2
    assert xb.tolist() == [[1.0, 1.0, 0.0]] * 2
    assert stats.aligned_outcomes(a, [{"index": np.array([9]), "correct": np.array([1.0])}]) is None
    assert stats.aligned_outcomes(a, [{"correct": np.array([1.0])}]) is None


def test_backfill_majority_regenerates_the_share_a_run_recorded(tmp_path):
    """scripts/history/backfill_majority.py on a committed record that has its shares, with them removed:
    it writes the same shares back, and nothing else changes."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("backfill_majority", root / "scripts" / "history" / "backfill_majority.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
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
