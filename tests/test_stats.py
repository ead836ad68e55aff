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
    # the same runs on both sides: no difference, nothing is significant
    assert same.effect == 0.0 and same.ci[0] < 0 < same.ci[1] and same.p == same.p_reverse == 0.5
    flipped = stats.paired_t(1 - better, 1 - base, lower_is_better=True)
    assert flipped.effect == pytest.approx(true) and flipped.p == pytest.approx(t.p)
    assert stats.paired_t(better[:1], base) is None
    with pytest.raises(ValueError):
        stats.paired_t(better[:, :10], base)


def _paired_t_reference(a, b):
    """The paired test's variance and df computed the long way, in exact Fractions: each seed's
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
    seeds_df = (parts[0] ** 2 / (ka - 1) + parts[1] ** 2 / (kb - 1) if ka == kb  # Welch-Satterthwaite
                else (parts[0] + parts[1]) ** 2 / (min(ka, kb) - 1))  # Hsu at unequal seeds
    df = var ** 2 / (seeds_df + parts[2] ** 2 / (n - 1))
    return ga - gb, var, df


def test_paired_t_matches_the_long_way_and_scipy_t():
    rng = np.random.default_rng(5)
    shared = rng.random(30) < 0.7  # examples most seeds get right: the sides' example means co-vary
    a = ((rng.random((3, 30)) < 0.8) & shared | (rng.random((3, 30)) < 0.2)).astype(int)
    b = ((rng.random((4, 30)) < 0.5) & shared | (rng.random((4, 30)) < 0.4)).astype(int)
    effect, var, df = _paired_t_reference(a.tolist(), b.tolist())
    t = stats.paired_t(a, b)
    assert t.effect == pytest.approx(float(effect), rel=1e-12)
    assert t.p == pytest.approx(sps.t.sf(float(effect) / math.sqrt(var), float(df)), rel=1e-9)
    half = sps.t.ppf(0.5 + stats.PAIR_LEVEL / 2, float(df)) * math.sqrt(var)
    assert t.ci == pytest.approx((float(effect) - half, float(effect) + half), rel=1e-9)
    assert (t.p < stats.ALPHA) == (t.ci[0] > 0)
    for k in (3, 4):  # at equal seeds too (Welch-Satterthwaite rather than Hsu's df)
        effect, var, df = _paired_t_reference(a[:k].tolist(), b[:k].tolist())
        assert stats.paired_t(a[:k], b[:k]).p == pytest.approx(sps.t.sf(float(effect) / math.sqrt(var), float(df)), rel=1e-9)
    # one example: no example part, the test is Welch's (scipy's) on the seeds' values
    one = stats.paired_t(a[:, :1], b[:3, :1])
    ref = sps.ttest_ind(a[:, 0], b[:3, 0], equal_var=False, alternative="greater")
    two_sided = sps.ttest_ind(a[:, 0], b[:3, 0], equal_var=False).confidence_interval(stats.PAIR_LEVEL)
    assert one.p == pytest.approx(ref.pvalue) and one.ci == pytest.approx(tuple(two_sided))


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


def _calibration():
    """scripts/benchmarks/stats_calibration.py: the simulation the committed calibration table runs."""
    from script_helpers import load_script

    return load_script("scripts/benchmarks/stats_calibration.py")


@pytest.mark.parametrize("seeds, n, sd, shared", [((2, 2), 100, 0.5, True), ((3, 3), 1000, 2.5, True), ((3, 3), 200, 1.0, True),
                                                  ((2, 5), 1000, 1.0, True), ((5, 5), 100, 8.0, False), ((3, 3), 1000, 5.0, False)])
def test_paired_t_false_holds_stay_at_or_below_alpha(seeds, n, sd, shared):
    """A few cells of the calibration grid (results/stats_calibration.md has all of them): two
    equal models, 2,000 simulated pairs; the count of false holds may exceed 5% of 2,000 only by
    what the simulation's own binomial error allows (its 99th percentile at a true 5%)."""
    reps = 2000
    paired, _ = _calibration().holds(np.random.default_rng([seeds[0], seeds[1], n]), reps, seeds, n, sd, shared)
    assert paired <= sps.binom.ppf(0.99, reps, stats.ALPHA), paired / reps


def test_paired_t_sees_a_two_sd_difference_at_five_seeds():
    paired, _ = _calibration().holds(np.random.default_rng(9), 400, (5, 5), 1000, 2.5, True, shift=5.0)
    assert paired / 400 >= 0.70


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
