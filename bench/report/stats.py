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
- where both cells have per-example scores on the same test examples, the pair test
  (``paired_t``): the paired t test over seeds and examples (the difference of the cells' means,
  its variance the between-seed variance of each side's seed means plus what the choice of test
  examples adds to a difference measured on the same examples) and a logit-normal pivot (each
  side's seeds logit-normal, so that a side whose seeds spread near 0% or 100% has the skewed mean
  it has there), a pair holding only where both hold it; its false "holds" rate is at 5% or below,
  within the simulation's error, over the scenarios of scripts/benchmarks/stats_calibration.py
  (results/stats_calibration.md), except families that fail on some of their seeds, which no test
  on a handful of seeds can calibrate (``failure_bound`` says what the seeds exclude);
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

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

ALPHA = 0.05
LEVEL = 0.95  # a cell's t interval, a cost ratio's, and a two-sided test's (bench/report/against.py)
PAIR_LEVEL = 1 - 2 * ALPHA  # a one-sided test's interval: each end is its one-sided bound at ALPHA
WELCH, PAIRED, LOG_WELCH = "Welch t", "paired t (seeds + examples)", "Welch t on log times"
PAIRED_SCORES = "paired t on the scores (seeds + examples)"  # paired_t on scores of no known range: the t test alone
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
    df = safe**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1) + ~spread)  # Welch-Satterthwaite
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
    """ "A / B <= at_most" on positive repeated measurements (times): Welch on the logarithms;
    effect and CI are ratios of geometric means; ``p`` is for ratio < at_most."""
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    if len(la) < 2 or len(lb) < 2:
        return None
    d, (lo, hi), p_above, p_below = _welch_stats(
        la.mean(), la.var(ddof=1), len(la), lb.mean(), lb.var(ddof=1), len(lb), shift=math.log(at_most)
    )
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
    if x.size and np.all(np.isfinite(x)) and np.all(x == np.round(x)) and np.abs(x).max() < 2**31:
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


def _sums_and_examples(a: np.ndarray, b: np.ndarray):
    """(A's seed sums (..., seeds_A), B's, A's total, B's, the example part) of two seeds x
    examples arrays: the test set's variance of the difference of the sides' means, in the
    scores' units squared. It is the example part of a seeds x examples random-effects model per
    side (X_ij = mu + seed_i + example_j + noise_ij): the variance over examples of (A's mean over
    its seeds - B's), less what the seeds' noise puts in it (each side's two-way ANOVA residual
    mean square over its seeds), over n, floored at 0. A test set is a sample of examples: two
    equal models still differ example by example, and on a finite test set that difference does
    not cancel. Exact int64 sums on integers, one division each."""
    ka, n = a.shape[-2:]
    kb = b.shape[-2]
    a, b = (x.astype(np.int64) if x.dtype.kind in "biu" else x for x in (a, b))  # squares of int8 counts would wrap
    ra, ca, ta, qa, ra2, ca2 = _two_way(a)
    rb, cb, tb, qb, rb2, cb2 = _two_way(b)
    if n < 2:
        return ra, rb, ta, tb, np.zeros(np.shape(ta))
    z = kb * ca - ka * cb  # (..., examples): (kA kB) x the example's mean_A - mean_B
    f = float
    resid_a = (ka * n * qa - ka * ra2 - n * ca2 + ta * ta).astype(f) / (ka * n * (ka - 1) * (n - 1))
    resid_b = (kb * n * qb - kb * rb2 - n * cb2 + tb * tb).astype(f) / (kb * n * (kb - 1) * (n - 1))
    z_var = (n * (z * z).sum(-1) - z.sum(-1) ** 2).astype(f) / (n * (n - 1) * (ka * kb) ** 2)
    return ra, rb, ta, tb, np.maximum(0.0, z_var - resid_a / ka - resid_b / kb) / n


def examples_variance(a, b) -> np.ndarray:
    """The variance that the choice of test examples adds to the difference of two cells' means,
    in the scores' units squared, over the leading axes of ``a`` (..., seeds_A, examples) and
    ``b`` (..., seeds_B, examples) on the same examples (the example part of ``paired_t_arrays``);
    its square root is ``power_at``'s ``examples_se``."""
    return _sums_and_examples(np.asarray(a), np.asarray(b))[4]


#: the pair test's fixed draws (``_draws``): this many, the second half the first with the two sides exchanged
PIVOT_DRAWS = 2048
#: from this many seeds a side, at equal seed counts, the two sides' locations share one Welch-Satterthwaite scale
SHARED_FROM = 3
#: the positive nodes of the 12-point Gauss-Hermite rule for the standard normal (probabilists' Hermite
#: polynomial He_12) and their weights (summing to 1/2; the negative nodes mirror them), to 17 digits
_GH_NODES = (0.44440300194413895, 1.3403751971516167, 2.2594644510007993, 3.2237098287700974, 4.2718258479322815, 5.500901704467748)
_GH_WEIGHTS = (
    0.32166436151283,
    0.14696704804532998,
    0.02911668791236415,
    0.002203380687533199,
    4.837184922590628e-05,
    1.499927167637168e-07,
)


@functools.lru_cache(maxsize=1)
def _levels() -> np.ndarray:
    """(PIVOT_DRAWS / 2, 6) probability levels: the first 1,024 points of Sobol's sequence in 6
    dimensions (unscrambled: whole multiples of 1/1024), each column moved by its own odd multiple
    of 1/2048 (mod 1), so that every column is the 1,024 centres (2i + 1) / 2048 in some order and no
    two columns coincide. Exact binary fractions: the same on any machine."""
    from scipy.stats import qmc

    grid = np.round(qmc.Sobol(6, scramble=False).random_base2(10) * 2048).astype(np.int64)
    return ((grid + np.array([1, 3, 5, 7, 9, 11])) % 2048) / 2048.0


def _scale(level: np.ndarray, df: float) -> np.ndarray:
    """sqrt(df / chi2_df) at each probability level: a sample sd's pivot, sigma = s * this."""
    return np.sqrt(df / sps.chi2.ppf(level, df))


@functools.lru_cache(maxsize=64)
def _draws(ka: int, kb: int, n: int) -> tuple[np.ndarray, ...]:
    """The pivot's PIVOT_DRAWS fixed draws for ka vs kb seeds on n examples: (z_A, z_B, the test
    set's t_(n-1), A's own scale (k_A - 1 df), B's own (k_B - 1 df), the shared scale at df 1, 2,
    ..., k_A + k_B - 1 (rows)). Columns of ``_levels``: 0 the shared scale, 1 and 2 the sides'
    normal draws, 3 the test set's, 4 and 5 the sides' own scales. The second half of the draws is
    the first with A and B exchanged and the test set's draw negated, so that "A beats B" and "B
    beats A" read the same draws: the test of one is exactly the reverse of the other."""
    u = _levels()
    z1, z2 = sps.norm.ppf(u[:, 1]), sps.norm.ppf(u[:, 2])
    e = sps.t.ppf(u[:, 3], n - 1) if n > 1 else np.zeros(len(u))
    own_a = np.concatenate([_scale(u[:, 4], ka - 1), _scale(u[:, 5], ka - 1)])
    own_b = np.concatenate([_scale(u[:, 5], kb - 1), _scale(u[:, 4], kb - 1)])
    shared = np.stack([np.tile(_scale(u[:, 0], df), 2) for df in range(1, ka + kb)])
    return np.concatenate([z1, z2]), np.concatenate([z2, z1]), np.concatenate([e, -e]), own_a, own_b, shared


def _logit_normal_mean(mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """E[expit(mu + sigma W)], W standard normal, by the 12-point Gauss-Hermite rule (scipy.special.expit:
    the same bits on any CPU, which numpy's SIMD exp does not promise); elementwise."""
    from scipy.special import expit

    total = np.zeros(np.broadcast_shapes(np.shape(mu), np.shape(sigma)))
    for x, w in zip(_GH_NODES, _GH_WEIGHTS):
        total += w * (expit(mu + sigma * x) + expit(mu - sigma * x))
    return total


def _side(sums: np.ndarray, total, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance with ddof 1) of a side's seed logits log(s + 1/2) - log(total - s + 1/2), s its
    seeds' sums over ``total`` (..., seeds): exactly negated where right and wrong trade places; the
    logarithms by scipy.special.xlogy (C's log: the same bits on any CPU), summed in sorted order, so
    in any order of the seeds the same bits."""
    from scipy.special import xlogy

    y = np.sort(xlogy(1.0, sums + 0.5) - xlogy(1.0, np.asarray(total, float)[..., None] - sums + 0.5), axis=-1)
    mean = y.sum(-1) / k
    return mean, ((y - mean[..., None]) ** 2).sum(-1) / (k - 1)


def _pivot(sums_a, sums_b, total, examples, n: int, level: float):
    """(CI low, CI high, p, p reverse) of the pair test, in shares, from each side's per-seed sums
    (..., seeds) over ``total`` units a seed (a seed's share: its sum / total) and the test set's
    variance of the difference of the shares ``examples`` (...): ``paired_t_arrays`` says how."""
    ka, kb = sums_a.shape[-1], sums_b.shape[-1]
    total = np.asarray(total, float)
    z_a, z_b, e, own_a, own_b, shared = _draws(ka, kb, n)
    mean_a = np.sort(sums_a, axis=-1).sum(-1) / (ka * total)  # in sorted order: the same bits in any order of the seeds
    mean_b = np.sort(sums_b, axis=-1).sum(-1) / (kb * total)
    ya, va = _side(sums_a, total, ka)
    yb, vb = _side(sums_b, total, kb)
    pa, pb = va / ka, vb / kb
    if ka == kb >= SHARED_FROM:  # one scale for both locations at Welch-Satterthwaite's df; the spreads' at k - 1 df, the same level
        spread = pa + pb > 0
        df = np.where(spread, (pa + pb) ** 2 / np.where(spread, pa**2 / (ka - 1) + pb**2 / (kb - 1), 1.0), float(ka - 1))
        low = np.clip(np.floor(df).astype(int), 1, ka + kb - 2)
        frac = np.clip(df - low, 0.0, 1.0)[..., None]
        loc_a = loc_b = shared[low - 1] * (1.0 - frac) + shared[low] * frac  # linear in df between whole dfs
        wide_a = wide_b = shared[ka - 2]
    else:  # each side its own pivot (location and spread at its own level)
        loc_a, wide_a, loc_b, wide_b = own_a, own_a, own_b, own_b
    sd_a, sd_b = np.sqrt(va), np.sqrt(vb)
    at_a = mean_a[..., None] + (
        _logit_normal_mean(ya[..., None] - z_a * loc_a * np.sqrt(pa)[..., None], sd_a[..., None] * wide_a)
        - _logit_normal_mean(ya, sd_a)[..., None]
    )
    at_b = mean_b[..., None] + (
        _logit_normal_mean(yb[..., None] - z_b * loc_b * np.sqrt(pb)[..., None], sd_b[..., None] * wide_b)
        - _logit_normal_mean(yb, sd_b)[..., None]
    )
    d = (at_a - at_b) - e * np.sqrt(examples)[..., None]
    m = d.shape[-1]
    j = math.ceil((1 - level) / 2 * m)  # p < (1 - level) / 2 exactly when the j-th smallest draw is above 0
    ordered = np.sort(d, axis=-1)
    return ordered[..., j - 1], ordered[..., m - j], (d <= 0).sum(-1) / m, (d >= 0).sum(-1) / m


def _student(ra, rb, ta, tb, examples, ka: int, kb: int, n: int, level: float):
    """(effect, CI low, CI high, p, p reverse) of the paired t test on the scores' own scale, from
    ``_sums_and_examples``' sums: ``paired_t_student_arrays``."""
    ra2, rb2 = (ra * ra).sum(-1), (rb * rb).sum(-1)
    f = float
    effect = (kb * ta - ka * tb).astype(f) / (ka * kb * n)  # one division of exact integers
    seeds_a = (ka * ra2 - ta * ta).astype(f) / (n * n * ka * (ka - 1)) / ka  # s_A^2 / k_A
    seeds_b = (kb * rb2 - tb * tb).astype(f) / (n * n * kb * (kb - 1)) / kb
    var = seeds_a + seeds_b + examples
    spread = var > 0
    safe = np.where(spread, var, 1.0)
    seeds_df = seeds_a**2 / (ka - 1) + seeds_b**2 / (kb - 1) if ka == kb else (seeds_a + seeds_b) ** 2 / (min(ka, kb) - 1)
    df = safe**2 / (seeds_df + examples**2 / max(n - 1, 1) + ~spread)
    se = np.sqrt(safe)
    half = np.where(spread, sps.t.ppf(0.5 + level / 2, df) * se, 0.0)
    t = effect / se
    p = np.where(spread, sps.t.sf(t, df), np.where(effect > 0, 0.0, 1.0))
    p_rev = np.where(spread, sps.t.cdf(t, df), np.where(effect < 0, 0.0, 1.0))
    return effect, effect - half, effect + half, p, p_rev


def _pivot_arrays(ra, rb, examples, n: int, level: float, unit):
    """(CI low, CI high, p, p reverse) of the logit-normal pivot (``_pivot``) in the scores' units,
    over the leading axes of the seed sums ``ra`` (..., seeds_A) and ``rb``, 256 pairs at a time
    (the draws take 256 x PIVOT_DRAWS floats an array)."""
    ka, kb = ra.shape[-1], rb.shape[-1]
    lead = np.shape(ra)[:-1]
    unit = np.broadcast_to(np.asarray(1.0 if unit is None else unit, float), lead).reshape(-1)
    total = n / unit  # units a seed: its share is its sum / total
    whole = np.round(total)
    total = np.where(np.abs(total - whole) <= 1e-9 * whole, whole, total)  # whole positions stay whole
    sums_a, sums_b = ra.reshape(-1, ka), rb.reshape(-1, kb)
    slack = 1e-9 * total[:, None]
    for sums in (sums_a, sums_b):
        if (sums < -slack).any() or (sums > total[:, None] + slack).any():
            raise ValueError("paired_t_arrays: a seed's share (its mean score times unit) is outside [0, 1]")
    sums_a, sums_b = np.clip(sums_a, 0, total[:, None]), np.clip(sums_b, 0, total[:, None])
    examples = np.reshape(examples, -1) * unit * unit  # in shares^2
    parts = [
        _pivot(sums_a[i : i + 256], sums_b[i : i + 256], total[i : i + 256], examples[i : i + 256], n, level)
        for i in range(0, len(total), 256)
    ]
    lo, hi, p, p_rev = (np.concatenate([part[i] for part in parts]) for i in range(4))
    return (lo / unit).reshape(lead), (hi / unit).reshape(lead), p.reshape(lead), p_rev.reshape(lead)


def paired_t_arrays(a, b, level: float = PAIR_LEVEL, unit=None):
    """(effect, CI low, CI high, p for effect > 0, p for effect < 0), elementwise over the leading
    axes of ``a`` (..., seeds_A, examples) and ``b`` (..., seeds_B, examples), column j of both
    the same test example; effect = mean_A - mean_B in the scores' units. The test of
    ``paired_t``; ``unit``: what a score's mean is multiplied by to give a share in [0, 1] (1 for
    0/1 correctness; examples / scored positions for right tokens an example), a number or an
    array over the leading axes; None: 1.

    Two tests, and a pair holds only where both hold it (intersection-union: the rate of false
    holds is at most the lower of the two's): p is the larger of their p-values, the interval the
    hull of their intervals, so that p < (1 - level) / 2 exactly when the interval lies above 0.

    - The paired t test on the scores (``paired_t_student_arrays``): right where the seeds' values
      are near normal, wrong where a side's seeds spread near 0 or 1 (its mean is skewed there).
    - The logit-normal pivot (``_pivot``): each side's seed shares a_i (the mean of seed i's scores
      times ``unit``) taken as logit-normal, y_i = log(sum_i + 1/2) - log(total - sum_i + 1/2)
      normal, and the side's mean share as m(mu, sigma) = E[expit(mu + sigma W)] (W standard
      normal, 12-point Gauss-Hermite). Over PIVOT_DRAWS fixed draws (``_draws``) each side's mean
      is drawn as

          its mean share + m(ybar - z s l / sqrt(k), s w) - m(ybar, s),

      ybar and s the mean and sd of its y_i over its k seeds, z standard normal, l and w chi
      scales: below SHARED_FROM seeds a side or at unequal seed counts each side its own, l = w
      = sqrt((k - 1) / chi2_(k-1)) (its generalized pivotal quantity); at equal counts from
      SHARED_FROM seeds, l = sqrt(df / chi2_df) shared by both sides at Welch-Satterthwaite's df
      over the two sides' s^2 / k, and w = sqrt((k - 1) / chi2_(k-1)) at the same level (in the
      linear limit Welch's t). D* = A's - B's less t_(n-1) times the test set's standard error
      (``examples_variance``); p = the share of draws with D* <= 0 (p reverse: D* >= 0), the
      interval's ends the draws at rank ceil(PIVOT_DRAWS (1 - level) / 2) from either end.

    On integer scores (0/1 correctness, right tokens) every sum is an exact int64, and the seeds'
    logits are summed in sorted order, so the verdict, the interval and p are the same bits in any
    order of seeds or examples. Where nothing varies the difference is taken as it is (p 0 or 1)."""
    a, b = np.asarray(a), np.asarray(b)
    ka, n = a.shape[-2:]
    kb = b.shape[-2]
    if ka < 2 or kb < 2:
        raise ValueError(f"paired_t_arrays wants 2 seeds a side or more, got {ka} and {kb}")
    ra, rb, ta, tb, examples = _sums_and_examples(a, b)
    effect, lo_t, hi_t, p_t, p_rev_t = _student(ra, rb, ta, tb, examples, ka, kb, n, level)
    lo, hi, p, p_rev = _pivot_arrays(ra, rb, examples, n, level, unit)
    return effect, np.minimum(lo, lo_t), np.maximum(hi, hi_t), np.maximum(p, p_t), np.maximum(p_rev, p_rev_t)


def paired_t_student_arrays(a, b, level: float = PAIR_LEVEL):
    """The same shape of answer as ``paired_t_arrays`` from the paired t test on the scores' own
    scale: the difference of the cells' means, its variance s_A^2 / k_A + s_B^2 / k_B (the seed
    means' between-seed variances) plus the test set's part (``examples_variance``), t quantiles
    at Welch-Satterthwaite's df over the three parts (k_A - 1, k_B - 1, n - 1; the seeds' two as
    one part of min(k_A, k_B) - 1 df where the seed counts differ, Hsu's choice). One of the two
    tests ``paired_t_arrays`` asks; alone, ``paired_t``'s test of scores of no known range."""
    a, b = np.asarray(a), np.asarray(b)
    ka, n = a.shape[-2:]
    kb = b.shape[-2]
    return _student(*_sums_and_examples(a, b), ka, kb, n, level)


def _paired_scores(a: np.ndarray, b: np.ndarray, unit: float | None):
    """(A's scores, B's, their unit, the common divisor g) as the pair test takes them: exact integers
    over g where every score is whole (``_integers``), and the unit, where not given, known for
    shares in [0, 1] (1) and percentages of 0/1 outcomes (0.01); None: no known range."""
    both = np.concatenate([a, b])
    if unit is None and both.size and 0 <= both.min() and both.max() <= 1:
        unit = 1.0
    elif unit is None and both.size and np.isin(both, (0.0, 100.0)).all():
        unit = 0.01
    ints, g = _integers(both)
    return ints[: len(a)], ints[len(a) :], unit, g


def _paired_arrays(first, second, unit: float | None, g: float, level: float):
    """The pair test's arrays (``paired_t_arrays``; without a unit, the paired t test alone)."""
    return paired_t_student_arrays(first, second, level) if unit is None else paired_t_arrays(first, second, level, unit=unit * g)


def paired_t(a, b, lower_is_better: bool = False, unit: float | None = None) -> PairTest | None:
    """ "A beats B" from per-example scores on the same examples: ``a`` (seeds_A, examples),
    ``b`` (seeds_B, examples), column i of both the same test example; the one-sided test of
    ``paired_t_arrays`` (the paired t test and the logit-normal pivot, both), its interval at
    PAIR_LEVEL, effect and interval in the scores' units. ``unit``: what a score's mean is
    multiplied by to give a share in [0, 1] (cells.example_scores' unit: 1 for 0/1 correctness,
    examples / scored positions for right tokens an example). Without it, scores in [0, 1] are
    shares and scores of 0 or 100 are percentages of 0/1 outcomes; other scores have no known range
    and get the paired t test alone (``paired_t_student_arrays``, test PAIRED_SCORES). None below 2
    seeds a side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"paired_t wants (seeds, examples) arrays over the same examples, got {a.shape} and {b.shape}")
    if len(a) < 2 or len(b) < 2:
        return None
    first, second, unit, g = _paired_scores(a, b, unit)
    if lower_is_better:  # "B beats A"
        first, second = second, first
    effect, lo, hi, p, p_rev = (float(x) for x in _paired_arrays(first, second, unit, g, PAIR_LEVEL))
    return PairTest(g * effect, (g * lo, g * hi), p, p_rev, (len(a), len(b)), PAIRED if unit is not None else PAIRED_SCORES)


def paired_two_sided(a, b, unit: float | None = None, level: float = LEVEL) -> tuple[float, float, float, float] | None:
    """(effect, CI low, CI high at ``level``, two-sided p) of the test of ``paired_t`` asked in both
    directions ("A differs from B": p = 2 x the smaller one-sided p), effect and interval in the
    scores' units; what a comparison without a claimed direction prints (bench/report/against.py).
    None below 2 seeds a side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return None
    first, second, unit, g = _paired_scores(a, b, unit)
    effect, lo, hi, p, p_rev = (float(x) for x in _paired_arrays(first, second, unit, g, level))
    return g * effect, g * lo, g * hi, min(1.0, 2 * min(p, p_rev))


def failure_bound(failed: int, n: int, level: float = LEVEL) -> float:
    """The exact one-sided upper bound at ``level`` on the share of seeds that fail, from ``failed``
    of ``n`` seeds (Clopper-Pearson: the rate at which ``failed`` or fewer failures have probability
    1 - level; 1 where every seed failed). 0 of 5 at 95%: 1 - 0.05^(1/5) = 0.451."""
    if not 0 <= failed <= n or n < 1:
        raise ValueError(f"failure_bound wants 0 <= failed <= n and n >= 1, got {failed} of {n}")
    return 1.0 if failed == n else float(sps.beta.ppf(level, failed + 1, n - failed))


def failure_text(failed: int, n: int, level: float = LEVEL) -> str:
    """What ``failed`` of ``n`` seeds say about a family's failure rate: "0 of 5 seeds failed: a
    failure rate up to 45% is not excluded (95%)"."""
    bound = failure_bound(failed, n, level)
    return f"{failed} of {n} seeds failed: a failure rate up to {100 * bound:.0f}% is not excluded ({100 * level:.0f}%)"


def power_at(effect: float, sd_a: float, k_a: int, sd_b: float, k_b: int, examples_se: float = 0.0, alpha: float = ALPHA) -> float:
    """The power of a one-sided pair test at ``alpha`` to find "A beats B" where A is truly ``effect``
    better, the seeds' values spreading by ``sd_a`` and ``sd_b`` (sample sds, in the effect's units)
    over ``k_a`` and ``k_b`` seeds, the test set adding ``examples_se`` (the standard error of the
    difference that the choice of test examples makes; 0 where the seeds dominate): the noncentral
    t, P(T' > t_(1-alpha, df)), T' ~ t(df, effect / se), se^2 = sd_a^2 / k_a + sd_b^2 / k_b +
    examples_se^2, df Welch-Satterthwaite's over the seeds (Hsu's min(k_a, k_b) - 1 where the seed
    counts differ; the test set's part taken as known). That is the power of Welch's t, which the
    pair test is where the shares are far from 0 and 1; near them the pair test allows for skew and
    has less."""
    pa, pb = sd_a**2 / k_a, sd_b**2 / k_b
    se2 = pa + pb + examples_se**2
    if se2 <= 0:
        return 1.0 if effect > 0 else 0.0
    if pa + pb == 0:
        df = math.inf
    elif k_a == k_b:
        df = se2**2 / (pa**2 / (k_a - 1) + pb**2 / (k_b - 1))
    else:
        df = se2**2 / ((pa + pb) ** 2 / (min(k_a, k_b) - 1))
    if math.isinf(df):
        return float(sps.norm.sf(sps.norm.ppf(1 - alpha) - effect / math.sqrt(se2)))
    return float(sps.nct.sf(sps.t.ppf(1 - alpha, df), df, effect / math.sqrt(se2)))


def fisher_learned(learned_a: int, n_a: int, learned_b: int, n_b: int) -> PairTest:
    """ "A fails less often than B": Fisher's exact test (scipy.stats.fisher_exact), one-sided, on
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
