"""The statistics of bench's verdicts and cells, in one place: every claim, cell and cost ratio
of ``bench reproduce`` is judged or summarised here (scipy.stats for the distributions).

A pair "A beats B" (A's cell above B's; below where lower is better):

- over seeds, a one-sided Welch t-test (``welch``: scipy.stats.ttest_ind_from_stats with
  equal_var=False) of H1: mean_A - mean_B > 0, and its mirror (H1: < 0) for "does not hold";
  the effect is the difference of means with its Welch-Satterthwaite interval at ``PAIR_LEVEL``
  (90%: two-sided, so that each end is the one-sided 95% bound of the test at ``ALPHA``: a pair
  holds exactly when its interval's lower end is above 0, and its reverse p is below ALPHA
  exactly when the upper end is below 0; a 95% interval beside a one-sided p of 0.03 would reach
  below 0 and read as a contradiction);
- where both cells have per-example outcomes on the same test examples, a paired t test over
  seeds and examples (``paired_t``): the difference of the cells' means, its variance the
  between-seed variance of each side's seed means plus what the choice of test examples adds to
  a difference measured on the same examples (a seeds x examples random-effects decomposition),
  t quantiles at Welch-Satterthwaite's df (Hsu's min(k) - 1 for the seeds where the sides have
  different numbers of seeds); its false "holds" rate is at 5% or below, within the simulation's
  error, at 2-10 seeds a side, seed sd 0.5-8 points and 100-5,000 examples, measured by
  scripts/benchmarks/stats_calibration.py (results/stats_calibration.md);
- a ratio "A costs <= r x B" (``ratio_test``): Welch on the logarithms of the timed repeats,
  H1: mean log A - mean log B < log r; the ratio shown is that of the geometric means, with its
  interval at ``PAIR_LEVEL`` (it holds exactly when the upper end is below r).

A claim over several pairs (``combine``, ``decide``), at level ``ALPHA``: it holds when every pair holds at
ALPHA (intersection-union: the false "holds" rate stays <= ALPHA without correction); it does
not hold when some pair is significant in the other direction after Holm's correction over the
claim's pairs (``holm``); otherwise it is inconclusive. A pair with no test (fewer than 2 values
a side, both cells at chance, a number not reported) counts as neither.

A cell (``mean_ci``): the mean over seeds with a 95% t interval. A t interval rather than a
bootstrap one: at 3 seeds the bootstrap has 10 distinct resamples and its percentile interval is
far too narrow, while the t interval is exact for normal noise and wide where n is small. Beside
it the test set's binomial standard error of one run's accuracy (``binomial_se``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

ALPHA = 0.05
LEVEL = 0.95  # a cell's t interval, a cost ratio's, and a two-sided test's (bench/report/against.py)
PAIR_LEVEL = 1 - 2 * ALPHA  # a one-sided test's interval: each end is its one-sided bound at ALPHA
WELCH, PAIRED, LOG_WELCH = "Welch t", "paired t (seeds + examples)", "Welch t on log times"
FISHER = "Fisher exact on learned seeds"
HOLDS, FAILS, UNSURE = "holds", "does not hold", "inconclusive"


@dataclass(frozen=True)
class PairTest:
    """One pair's test: ``effect`` = mean_A - mean_B oriented so that > 0 is the claim's direction
    (a ratio test: the ratio of geometric means), its interval at PAIR_LEVEL, the one-sided p-values for the
    claim (``p``) and against it (``p_reverse``), the values per side and the test's name."""
    effect: float
    ci: tuple[float, float]
    p: float
    p_reverse: float
    n: tuple[int, int]
    test: str


def welch_arrays(ma, va, na, mb, vb, nb, shift=0.0, level: float = LEVEL):
    """(effect, CI low, CI high, p for effect > shift, p for effect < shift), elementwise over
    arrays of two samples' means, variances (sample, ddof 1) and sizes; effect = ma - mb. Where
    neither side has any spread the difference is taken as it is (p 0 or 1)."""
    ma, va, na, mb, vb, nb = np.broadcast_arrays(*(np.asarray(x, float) for x in (ma, va, na, mb, vb, nb)))
    effect = ma - mb
    se2 = va / na + vb / nb
    spread = se2 > 0
    safe = np.where(spread, se2, 1.0)
    df = safe ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1) + ~spread)  # Welch-Satterthwaite
    half = np.where(spread, sps.t.ppf(0.5 + level / 2, df) * np.sqrt(safe), 0.0)
    sa, sb = np.sqrt(np.where(spread, va, 1.0)), np.sqrt(np.where(spread, vb, 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = sps.ttest_ind_from_stats(ma - shift, sa, na, mb, sb, nb, equal_var=False, alternative="greater").pvalue
        p_rev = sps.ttest_ind_from_stats(ma - shift, sa, na, mb, sb, nb, equal_var=False, alternative="less").pvalue
    p = np.where(spread, p, np.where(effect > shift, 0.0, 1.0))
    p_rev = np.where(spread, p_rev, np.where(effect < shift, 0.0, 1.0))
    return effect, effect - half, effect + half, p, p_rev


def _welch_stats(ma, va, na, mb, vb, nb, shift: float = 0.0) -> tuple[float, tuple[float, float], float, float]:
    """One pair's Welch test as a PairTest holds it: the interval at PAIR_LEVEL."""
    effect, lo, hi, p, p_rev = (float(x) for x in welch_arrays(ma, va, na, mb, vb, nb, shift, PAIR_LEVEL))
    return effect, (lo, hi), p, p_rev


def welch(a, b, lower_is_better: bool = False) -> PairTest | None:
    """One-sided Welch t-test of "A beats B" over the per-seed values; None below 2 values a side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return None
    if lower_is_better:
        a, b = -a, -b
    effect, ci, p, p_rev = _welch_stats(a.mean(), a.var(ddof=1), len(a), b.mean(), b.var(ddof=1), len(b))
    return PairTest(effect, ci, p, p_rev, (len(a), len(b)), WELCH)


def welch_from_stats(a: tuple[float, float], b: tuple[float, float], n: int, lower_is_better: bool = False) -> PairTest:
    """The same test from printed (mean, sample std) pairs of ``n`` runs each (a paper's table)."""
    sign = -1.0 if lower_is_better else 1.0
    effect, ci, p, p_rev = _welch_stats(sign * a[0], a[1] ** 2, n, sign * b[0], b[1] ** 2, n)
    return PairTest(effect, ci, p, p_rev, (n, n), WELCH)


def ratio_test(a, b, at_most: float) -> PairTest | None:
    """"A / B <= at_most" on positive repeated measurements (times): Welch on the logarithms;
    effect and CI are ratios of geometric means; ``p`` is for ratio < at_most."""
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    if len(la) < 2 or len(lb) < 2:
        return None
    d, (lo, hi), p_above, p_below = _welch_stats(la.mean(), la.var(ddof=1), len(la), lb.mean(), lb.var(ddof=1), len(lb),
                                                 shift=math.log(at_most))
    return PairTest(math.exp(d), (math.exp(lo), math.exp(hi)), p_below, p_above, (len(la), len(lb)), LOG_WELCH)


def ratio_ci(a, b, level: float = LEVEL) -> tuple[float, float, float] | None:
    """(geometric mean of a / geometric mean of b, its CI at ``level``) from positive repeated
    measurements (Welch on the logarithms, as ``ratio_test``); None below 2 values a side."""
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    if len(la) < 2 or len(lb) < 2:
        return None
    d, lo, hi, _, _ = welch_arrays(la.mean(), la.var(ddof=1), len(la), lb.mean(), lb.var(ddof=1), len(lb), level=level)
    return math.exp(d), math.exp(lo), math.exp(hi)


def _integers(x: np.ndarray) -> tuple[np.ndarray, float]:
    """(x as exact int64 over its greatest common divisor, that divisor) where every value of x
    is an integer (0/1 correctness, or it times 100); (x, 1.0) otherwise."""
    if x.size and np.all(np.isfinite(x)) and np.all(x == np.round(x)) and np.abs(x).max() < 2 ** 31:
        ints = np.round(x).astype(np.int64)
        g = int(np.gcd.reduce(np.abs(ints).ravel())) or 1
        return ints // g, float(g)
    return x, 1.0


def _two_way(x):
    """The sums of a (..., seeds, examples) array that the paired test reads: each seed's sum
    (..., seeds), each example's sum (..., examples), the total, the sum of squares, and the sums
    of the squared seed and example sums (exact on integers: int64, in any order)."""
    rows, cols = x.sum(-1), x.sum(-2)
    return rows, cols, rows.sum(-1), (x * x).sum((-2, -1)), (rows * rows).sum(-1), (cols * cols).sum(-1)


def paired_t_arrays(a, b, level: float = PAIR_LEVEL):
    """(effect, CI low, CI high, p for effect > 0, p for effect < 0), elementwise over the leading
    axes of ``a`` (..., seeds_A, examples) and ``b`` (..., seeds_B, examples), column j of both
    the same test example; effect = mean_A - mean_B. The t test of ``paired_t``.

    The variance of the effect is the sum of three estimated parts (a seeds x examples random
    effects model per side, X_ij = mu + seed_i + example_j + noise_ij):

    - s_A^2 / k_A and s_B^2 / k_B, the between-seed variances of the seed means (ddof 1), which
      hold the seeds' spread and each run's own example noise (noise / n);
    - the example part, what the test set's sampling of examples adds to a difference measured on
      the same examples: the variance over examples of (mean over A's seeds - mean over B's
      seeds), less what the seeds' noise puts in it (the two-way ANOVA's residual mean square of
      each side over its seeds), over n, floored at 0;

    with Welch-Satterthwaite's degrees of freedom over the three (k_A - 1, k_B - 1 and n - 1):
    t quantiles at k - 1 df where the seeds dominate, normal ones where the examples do. Where
    the sides have different numbers of seeds the two seed parts count as one of min(k_A, k_B) - 1
    df (Hsu's conservative choice: Welch's df is liberal there, 5.6% false holds at 2 vs 5 seeds
    of equal spread, 7.4% at 2 vs 10, against <= 5% at equal seeds). Each end
    of the interval at ``level`` is the one-sided bound of the test at (1 - level) / 2.

    On integer inputs every sum is an exact int64 and every estimate one float division of exact
    integers, so the verdict, the interval and p are the same bits on any CPU and in any order of
    seeds or examples. Where the variance is 0 the difference is taken as it is (p 0 or 1)."""
    a, b = np.asarray(a), np.asarray(b)
    ka, n = a.shape[-2:]
    kb = b.shape[-2]
    ra, ca, ta, qa, ra2, ca2 = _two_way(a)
    rb, cb, tb, qb, rb2, cb2 = _two_way(b)
    z = kb * ca - ka * cb  # (..., examples): (kA kB) x the example's mean_A - mean_B
    f = float
    effect = (kb * ta - ka * tb).astype(f) / (ka * kb * n)
    seeds_a = (ka * ra2 - ta * ta).astype(f) / (n * n * ka * (ka - 1)) / ka  # s_A^2 / k_A
    seeds_b = (kb * rb2 - tb * tb).astype(f) / (n * n * kb * (kb - 1)) / kb
    if n > 1:
        resid_a = (ka * n * qa - ka * ra2 - n * ca2 + ta * ta).astype(f) / (ka * n * (ka - 1) * (n - 1))
        resid_b = (kb * n * qb - kb * rb2 - n * cb2 + tb * tb).astype(f) / (kb * n * (kb - 1) * (n - 1))
        z_var = (n * (z * z).sum(-1) - z.sum(-1) ** 2).astype(f) / (n * (n - 1) * (ka * kb) ** 2)
        examples = np.maximum(0.0, z_var - resid_a / ka - resid_b / kb) / n
    else:
        examples = np.zeros_like(effect)
    var = seeds_a + seeds_b + examples
    spread = var > 0
    safe = np.where(spread, var, 1.0)
    if ka == kb:  # Welch-Satterthwaite over the three parts
        seeds_df = seeds_a ** 2 / (ka - 1) + seeds_b ** 2 / (kb - 1)
    else:  # Hsu's conservative min(k_A, k_B) - 1 for the seeds' part: Welch's df is liberal at unequal seeds (5.6% at 2 vs 5)
        seeds_df = (seeds_a + seeds_b) ** 2 / (min(ka, kb) - 1)
    df = safe ** 2 / (seeds_df + examples ** 2 / max(n - 1, 1) + ~spread)
    se = np.sqrt(safe)
    half = np.where(spread, sps.t.ppf(0.5 + level / 2, df) * se, 0.0)
    t = effect / se
    p = np.where(spread, sps.t.sf(t, df), np.where(effect > 0, 0.0, 1.0))
    p_rev = np.where(spread, sps.t.cdf(t, df), np.where(effect < 0, 0.0, 1.0))
    return effect, effect - half, effect + half, p, p_rev


def paired_t(a, b, lower_is_better: bool = False) -> PairTest | None:
    """"A beats B" from per-example scores on the same examples: ``a`` (seeds_A, examples),
    ``b`` (seeds_B, examples), column i of both the same test example; one-sided t test of the
    difference of the two cells' means with its variance from the seeds and from the examples
    (``paired_t_arrays``), its interval at PAIR_LEVEL. Calibrated by simulation at 2-10 seeds a
    side, 100-5,000 examples, shared or independent examples (scripts/benchmarks/stats_calibration.py,
    results/stats_calibration.md). None below 2 seeds a side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"paired_t wants (seeds, examples) arrays over the same examples, got {a.shape} and {b.shape}")
    if len(a) < 2 or len(b) < 2:
        return None
    if lower_is_better:
        a, b = -a, -b
    both, g = _integers(np.concatenate([a, b]))
    effect, lo, hi, p, p_rev = (float(x) for x in paired_t_arrays(both[:len(a)], both[len(a):]))
    return PairTest(g * effect, (g * lo, g * hi), p, p_rev, (len(a), len(b)), PAIRED)


def fisher_learned(learned_a: int, n_a: int, learned_b: int, n_b: int) -> PairTest:
    """"A fails less often than B": Fisher's exact test (scipy.stats.fisher_exact), one-sided, on
    the 2x2 table of seeds that learned and did not (H1: A's share that learned is higher; the
    reverse p for lower). The effect is the difference of the learned shares in points; ``ci``
    holds the two learned counts (the test has no interval on that scale)."""
    table = [[learned_a, n_a - learned_a], [learned_b, n_b - learned_b]]
    p = float(sps.fisher_exact(table, alternative="greater").pvalue)
    p_rev = float(sps.fisher_exact(table, alternative="less").pvalue)
    effect = 100.0 * (learned_a / n_a - learned_b / n_b)
    return PairTest(effect, (float(learned_a), float(learned_b)), p, p_rev, (n_a, n_b), FISHER)


def aligned_outcomes(runs_a: list[dict], runs_b: list[dict], key: str = "correct") -> tuple[np.ndarray, np.ndarray] | None:
    """(seeds_A, examples) and (seeds_B, examples) arrays of ``key`` over the examples every run
    scored (by ``index``), for ``paired_t``; None when the runs share no example."""
    runs = runs_a + runs_b
    if not runs or any(key not in r or "index" not in r for r in runs):
        return None
    common = np.asarray(runs[0]["index"])
    for r in runs[1:]:
        common = np.intersect1d(common, r["index"])
    if not len(common):
        return None

    def rows(side):
        out = []
        for r in side:
            index, values = np.asarray(r["index"]), np.asarray(r[key], float)
            order = np.argsort(index)
            out.append(values[order][np.searchsorted(index[order], common)])
        return np.stack(out)

    return rows(runs_a), rows(runs_b)


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values along the last axis, in the given order: sorted
    ascending, the k-th smallest (k from 0) is multiplied by (m - k), made non-decreasing,
    capped at 1."""
    p = np.asarray(pvalues, float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1)
    stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * np.take_along_axis(p, order, -1), axis=-1))
    adjusted = np.empty_like(stepped)
    np.put_along_axis(adjusted, order, stepped, -1)
    return adjusted


def decide(p, p_reverse, alpha: float = ALPHA) -> np.ndarray:
    """The verdict of claims from their pairs' one-sided p-values (last axis: the pairs; 1.0 for
    a pair with no test): 1 holds (every pair p < alpha), -1 does not hold (some pair's reverse p
    < alpha after Holm over the pairs), 0 inconclusive."""
    p, p_reverse = np.asarray(p, float), np.asarray(p_reverse, float)
    holds = (p < alpha).all(-1)
    fails = (holm(p_reverse) < alpha).any(-1)
    return np.where(holds, 1, np.where(fails, -1, 0))


def combine(tests: list[PairTest | None], alpha: float = ALPHA) -> tuple[str, int | None]:
    """(verdict, index of the pair that decides it) over a claim's pairs (None: a pair with no
    test), by ``decide``: when it holds, the weakest pair; when it does not, the pair with the
    smallest Holm-adjusted reverse p; otherwise the weakest pair that had a test."""
    p = np.array([1.0 if t is None else t.p for t in tests])
    p_rev = np.array([1.0 if t is None else t.p_reverse for t in tests])
    code = int(decide(p, p_rev, alpha))
    if code == 1:
        return HOLDS, int(np.argmax(p))
    if code == -1:
        return FAILS, int(np.argmin(holm(p_rev)))
    tested = [i for i, t in enumerate(tests) if t is not None and t.p >= alpha]
    return UNSURE, max(tested, key=lambda i: p[i]) if tested else next(i for i, t in enumerate(tests) if t is None)


def verdicts(tests: list[PairTest | None], alpha: float = ALPHA) -> list[str]:
    """Each pair's own verdict, the reverse p adjusted by Holm over the pairs (as ``combine``)."""
    p_rev = holm([1.0 if t is None else t.p_reverse for t in tests])
    return [UNSURE if t is None else HOLDS if t.p < alpha else FAILS if r < alpha else UNSURE for t, r in zip(tests, p_rev)]


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """(mean, sample std) of a non-empty list; the std is None for a single value."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def mean_ci(values, level: float = LEVEL) -> tuple[float, float | None]:
    """(mean, half-width of its t interval at ``level``) over seeds; the half-width is None below 2 values."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return float(v.mean()), None
    return float(v.mean()), float(sps.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))


def binomial_se(p: float, n: int) -> float:
    """Standard error of an accuracy p measured on n examples: sqrt(p (1 - p) / n)."""
    return math.sqrt(p * (1 - p) / n)
