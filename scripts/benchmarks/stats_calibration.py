"""How often bench's pair test says "holds" for two models of equal mean accuracy (false holds), and
for one 3 points better (power), over seven scenarios of seeds and examples; writes the table to
results/stats_calibration.md.

Every cell simulates per-example outcomes of two models (seeds x examples, the examples shared by
every seed of both sides, as bench's tables have them, except the "independent" cells of the
first scenario) and judges each simulated pair by bench's own code, both ways ("A beats B" and
"B beats A"; under the null either is a false hold): the pair test (bench/report/stats.py:
paired_t_arrays), the paired t test it replaced on the scores' own scale (before:
stats.paired_t_student_arrays) and Welch's t on the seed means (stats.welch_arrays). One-sided at
alpha 0.05, the rule of a one-pair claim; the Monte-Carlo standard error of a rate r is
sqrt(r (1 - r) / reps).

The scenarios:

- ``normal``: the earlier grid. A test set of n examples, example j right with probability
  p_j ~ Beta(3.5, 1.5) (mean 0.7), each model with its own per-example deviation (N(0, 0.1),
  clipped to [0, 1]), each seed a shift N(0, sd points) of every example's probability, each
  outcome a Bernoulli draw; ``shared`` (one test set) or ``independent`` (one per seed).
- the logit model of every other scenario: example j of seed i of a model right with probability
  expit(mu + e_j + d_j + s_i), e_j ~ N(0, 1.5) the example's difficulty (shared by both models),
  d_j ~ N(0, dev) the model's own per-example deviation (dev 0.5 unless said), s_i ~ N(0, sd) the
  seed's effect on the logit scale, each side its own sd; mu of each side set so that its mean
  accuracy over examples and seeds is the cell's (so both sides have the same mean under the null,
  however they spread). ``ceiling``: 99%, one side spread and one tight; ``spread``: 70% and 90%,
  unequal spreads; ``unequal``: fewer seeds on the spread side (2 vs 5, 3 vs 5, 3 vs 10); ``tokens``:
  16-64 scored tokens an example (binomial given the example's probability; tested on the right
  tokens per example, unit n / tokens), tiny seed effects and a large dev: the test set dominates;
  ``chance``: 2%, 10% and 50%, unequal spreads.
- ``bimodal``: A fails to chance (every outcome a coin flip: 50%) on a share of its seeds, its
  other seeds logit-normal (sd 0.1) around the accuracy that gives A's mean; B stable (sd 0.1). Under
  the null both means are 85%: false holds of "A beats B"; under the alternative B is 3 points
  better: the power of "B beats A" and how often "A beats B" holds instead. No test on a handful of
  seeds can calibrate this: five seeds miss a 10% failure rate 59% of the time
  (stats.failure_bound says what they can exclude). These cells are reported, not counted.

Power: A 3 points better (B 3 points lower where A would pass 99.5%), with the power that
stats.power_at predicts from the simulated cell's seed sds and test-set standard error beside it.

    OMP_NUM_THREADS=1 nice python scripts/benchmarks/stats_calibration.py                     # every cell
    python scripts/benchmarks/stats_calibration.py --reps 500 --power-reps 200 --out /tmp/cal.md  # quicker, noisier
    python scripts/benchmarks/stats_calibration.py --cells ceiling:5v5:99:1/0.1:1000 --reps 40000 --seed 1 \\
        --out results/stats_calibration_recheck.md                                            # some cells again
    python scripts/benchmarks/stats_calibration.py --candidates --out /tmp/candidates.md     # the methods compared

``--cells`` (comma-separated keys as the table's first column prints them) runs those cells only: a
cell above 5% in the full run is checked again with fresh draws (another ``--seed``) and more pairs,
an estimate that the selection of the cell does not bias. ``--candidates`` judges a few cells by
the methods considered for the pair test (``candidates``) and writes that comparison instead.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import optimize
from scipy import special as spx
from scipy import stats as sps

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from bench.report import stats  # noqa: E402

CHUNK = 4_000_000  # outcomes drawn at once per side
EFFECT = 0.03  # power: A this much better (a share)
EX_SD = 1.5  # the examples' difficulty on the logit scale (logit model)

#: p_j's distribution, Beta(3.5, 1.5), as its quantiles at 4,096 equally spaced levels: a draw is a
#: table lookup (a beta draw per example per seed would make the grid several times slower)
DIFFICULTY = sps.beta(3.5, 1.5).ppf((np.arange(4096) + 0.5) / 4096).astype(np.float32)
#: standard normal quantiles at 20,001 equally spaced levels: a logit-normal mean by their average
_NORMAL = sps.norm.ppf((np.arange(20001) + 0.5) / 20001)


class Cell(NamedTuple):
    """One cell of the grid: ``scenario``, seeds of A and B, examples; ``sd`` (normal: the seeds'
    shift in points) and ``shared``; or the logit model's ``acc`` (both sides' mean under the null),
    the seed sds on the logit scale ``sd_a`` and ``sd_b``, ``dev``, ``tokens`` (scored tokens an
    example, lowest and highest) and ``fail`` (bimodal: A's share of seeds at chance)."""

    scenario: str
    seeds: tuple[int, int]
    n: int
    sd: float = 0.0
    shared: bool = True
    acc: float = 0.0
    sd_a: float = 0.0
    sd_b: float = 0.0
    dev: float = 0.5
    tokens: tuple[int, int] | None = None
    fail: float = 0.0

    @property
    def key(self) -> str:
        """The cell's name for --cells: normal:5v5:0.5:100:shared, ceiling:5v5:99:1/0.1:1000, bimodal:5v5:85:10%."""
        ka, kb = self.seeds
        if self.scenario == "normal":
            return f"normal:{ka}v{kb}:{self.sd:g}:{self.n}:{'shared' if self.shared else 'independent'}"
        if self.scenario == "bimodal":
            return f"bimodal:{ka}v{kb}:{100 * self.acc:g}:{100 * self.fail:g}%"
        return f"{self.scenario}:{ka}v{kb}:{100 * self.acc:g}:{self.sd_a:g}/{self.sd_b:g}:{self.n}"

    @property
    def calibratable(self) -> bool:
        return self.scenario != "bimodal"


def cells() -> list[Cell]:
    """Every cell of the committed table, in its order."""
    out = [
        Cell("normal", seeds, n, sd=sd, shared=shared)
        for seeds in [(2, 2), (3, 3), (5, 5), (10, 10), (2, 10)]
        for sd in [0.5, 2.5, 8.0]
        for n in [100, 1000, 5000]
        for shared in [True, False]
    ]
    out += [Cell("ceiling", (k, k), 1000, acc=0.99, sd_a=sa, sd_b=sb) for k in [2, 3, 4, 5, 10] for sa, sb in [(0.5, 0.05), (1.0, 0.1)]]
    out += [Cell("ceiling", (5, 5), n, acc=0.99, sd_a=1.0, sd_b=0.1) for n in [200, 5000]]
    out += [Cell("ceiling", (k, k), 1000, acc=0.99, sd_a=1.0, sd_b=1.0) for k in [3, 5]]
    out += [
        Cell("spread", (k, k), 1000, acc=acc, sd_a=sa, sd_b=sb)
        for acc in [0.7, 0.9]
        for k in [3, 4, 5, 10]
        for sa, sb in [(0.6, 0.05), (1.0, 0.1)]
    ]
    out += [Cell("unequal", seeds, 1000, acc=acc, sd_a=1.0, sd_b=0.1) for acc in [0.7, 0.99] for seeds in [(2, 5), (3, 5), (3, 10)]]
    out += [
        Cell("tokens", (k, k), n, acc=acc, sd_a=sd, sd_b=sd, dev=1.0 if sd < 0.05 else 0.5, tokens=(16, 64))
        for acc in [0.7, 0.95]
        for k in [3, 5, 10]
        for n, sd in [(200, 0.02), (1000, 0.05)]
    ]
    out += [Cell("chance", (k, k), 1000, acc=acc, sd_a=1.0, sd_b=0.1) for acc in [0.02, 0.1, 0.5] for k in [3, 5, 10]]
    out += [Cell("bimodal", (k, k), 1000, acc=0.85, sd_a=0.1, sd_b=0.1, fail=q) for q in [0.1, 0.2] for k in [2, 3, 5, 10]]
    return out


def simulate(
    rng: np.random.Generator, reps: int, seeds: tuple[int, int], n: int, sd: float, shared: bool, shift: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) 0/1 outcomes, (reps, seeds_A, n) and (reps, seeds_B, n) int8, of the ``normal`` model;
    ``shift``: A's mean shift in accuracy points. float32 draws (the simulation, not the test)."""

    def difficulty(rows: int) -> np.ndarray:
        return DIFFICULTY[rng.integers(0, len(DIFFICULTY), size=(reps, rows, n), dtype=np.uint16)]

    shared_base = difficulty(1) if shared else None

    def side(k: int, up: float) -> np.ndarray:
        rows = 1 if shared else k  # (reps, 1 or seeds, n): one test set, or one per seed
        base = shared_base if shared else difficulty(k)
        p = np.clip(base + np.float32(0.1) * rng.standard_normal(size=(reps, rows, n), dtype=np.float32), 0.0, 1.0)
        p = p + ((up + sd * rng.standard_normal(size=(reps, k, 1), dtype=np.float32)) / 100.0).astype(np.float32)  # each seed's shift
        return (rng.random((reps, k, n), dtype=np.float32) < p).astype(np.int8)

    ka, kb = seeds
    return side(ka, shift), side(kb, 0.0)


def logit_mu(target: float, sd: float) -> float:
    """mu with E[expit(mu + sd W)] = target (W standard normal): a side's mean accuracy over its
    examples and seeds, sd the total of the logit model's sds."""
    return optimize.brentq(lambda m: float(spx.expit(m + sd * _NORMAL).mean()) - target, -30.0, 30.0, xtol=1e-12)


def targets(cell: Cell, alternative: bool) -> tuple[float, float]:
    """(A's mean accuracy, B's): equal under the null; A 3 points better under the alternative (B 3
    points lower where A would pass 99.5%); bimodal: B 3 points better."""
    if not alternative:
        return cell.acc, cell.acc
    if cell.scenario == "bimodal":
        return cell.acc, cell.acc + EFFECT
    return (cell.acc + EFFECT, cell.acc) if cell.acc + EFFECT <= 0.995 else (cell.acc, cell.acc - EFFECT)


def simulate_logit(rng: np.random.Generator, reps: int, cell: Cell, alternative: bool = False):
    """(A, B, unit) of the logit model: outcomes (reps, seeds, n) (int8; right tokens an example,
    int16, where the cell has tokens) and what a side's mean score is multiplied by to give its
    accuracy (None for 0/1 outcomes; n / the scored tokens, a (reps,) array)."""
    ka, kb = cell.seeds
    n = cell.n
    acc_a, acc_b = targets(cell, alternative)
    floor = 0.5
    mu_a = logit_mu((acc_a - cell.fail * floor) / (1 - cell.fail), math.sqrt(EX_SD**2 + cell.dev**2 + cell.sd_a**2))
    mu_b = logit_mu(acc_b, math.sqrt(EX_SD**2 + cell.dev**2 + cell.sd_b**2))
    e = EX_SD * rng.standard_normal((reps, 1, n), dtype=np.float32)
    tokens = None if cell.tokens is None else rng.integers(cell.tokens[0], cell.tokens[1] + 1, size=(reps, 1, n))

    def side(k: int, mu: float, sd: float, fail: float) -> np.ndarray:
        logit = (
            mu
            + e
            + cell.dev * rng.standard_normal((reps, 1, n), dtype=np.float32)
            + sd * rng.standard_normal((reps, k, 1), dtype=np.float32)
        )
        p = spx.expit(logit)
        if fail:
            p = np.where(rng.random((reps, k, 1)) < fail, np.float32(floor), p)
        if tokens is None:
            return (rng.random((reps, k, n), dtype=np.float32) < p).astype(np.int8)
        return rng.binomial(np.broadcast_to(tokens, (reps, k, n)), p).astype(np.int16)

    a, b = side(ka, mu_a, cell.sd_a, cell.fail), side(kb, mu_b, cell.sd_b, 0.0)
    return a, b, None if tokens is None else n / tokens.sum((-2, -1))


def draw(rng: np.random.Generator, reps: int, cell: Cell, alternative: bool = False):
    """(A, B, unit) of a cell's model (``simulate`` or ``simulate_logit``)."""
    if cell.scenario == "normal":
        return (*simulate(rng, reps, cell.seeds, cell.n, cell.sd, cell.shared, 100 * EFFECT if alternative else 0.0), None)
    return simulate_logit(rng, reps, cell, alternative)


def judge(a: np.ndarray, b: np.ndarray, unit) -> dict[str, np.ndarray]:
    """Each pair's verdicts, (reps,) booleans: "new" / "before" / "welch" with ">" (A beats B) or "<"
    (B beats A); and what stats.power_at reads: the seed shares' variances and the test set's part."""
    ka, kb = a.shape[-2], b.shape[-2]
    u = np.ones(len(a)) if unit is None else np.asarray(unit)
    new = stats.paired_t_arrays(a, b, unit=unit)
    before = stats.paired_t_student_arrays(a, b)
    ma, mb = a.mean(-1) * u[:, None], b.mean(-1) * u[:, None]  # (reps, seeds): the seed shares
    welch = stats.welch_arrays(ma.mean(-1), ma.var(-1, ddof=1), ka, mb.mean(-1), mb.var(-1, ddof=1), kb)
    out = {}
    for name, r in (("new", new), ("before", before), ("welch", welch)):
        out[name + ">"], out[name + "<"] = r[3] < stats.ALPHA, r[4] < stats.ALPHA
    out["var_a"], out["var_b"] = ma.var(-1, ddof=1), mb.var(-1, ddof=1)
    out["examples"] = stats.examples_variance(a, b) * u * u
    return out


def rates(rng: np.random.Generator, reps: int, cell: Cell, alternative: bool = False) -> dict[str, float]:
    """``judge``'s verdicts over ``reps`` simulated pairs of a cell, as shares; the variances averaged."""
    chunk = max(1, CHUNK // (max(cell.seeds) * cell.n))
    sums: dict[str, float] = {}
    for start in range(0, reps, chunk):
        for name, x in judge(*draw(rng, min(chunk, reps - start), cell, alternative)).items():
            sums[name] = sums.get(name, 0.0) + float(np.sum(x))
    return {name: total / reps for name, total in sums.items()}


def run(cell: Cell, index: int, reps: int, power_reps: int, seed: int = 0) -> dict:
    """One cell: false holds (null) and power (alternative) of the three tests, power_at's prediction."""
    rng = np.random.default_rng([seed, index])
    null = rates(rng, reps, cell)
    alt = rates(rng, power_reps, cell, alternative=True)
    ka, kb = cell.seeds
    sd_a, sd_b, ex = math.sqrt(alt["var_a"]), math.sqrt(alt["var_b"]), math.sqrt(alt["examples"])
    if cell.scenario == "bimodal":  # B is the better side
        predicted = stats.power_at(EFFECT, sd_b, kb, sd_a, ka, ex)
    else:
        predicted = stats.power_at(EFFECT, sd_a, ka, sd_b, kb, ex)
    row = {
        "cell": cell,
        "reps": reps,
        "power_reps": power_reps,
        "predicted": predicted,
        **{f"fp {k}": v for k, v in null.items()},
        **{f"alt {k}": v for k, v in alt.items()},
    }
    print(
        f"{cell.key}: false holds new {100 * null['new>']:.2f}/{100 * null['new<']:.2f}%, before "
        f"{100 * null['before>']:.2f}/{100 * null['before<']:.2f}%, Welch {100 * null['welch>']:.2f}/{100 * null['welch<']:.2f}%; "
        f"power new {100 * alt['new>']:.1f}% / {100 * alt['new<']:.1f}%, predicted {100 * predicted:.1f}%",
        flush=True,
    )
    return row


def se(rate: float, reps: int) -> float:
    return math.sqrt(max(rate * (1 - rate), stats.ALPHA * (1 - stats.ALPHA) / 4) / reps)


def worst(rows: list[dict], test: str) -> tuple[dict, str, float]:
    """(row, direction, rate) of the highest false-holds rate of ``test`` over calibratable cells."""
    best = max(((r, d, r[f"fp {test}{d}"]) for r in rows if r["cell"].calibratable for d in "><"), key=lambda x: x[2])
    return best


def describe(cell: Cell) -> str:
    ka, kb = cell.seeds
    if cell.scenario == "normal":
        return f"normal seeds, {ka} vs {kb}, sd {cell.sd:g} points, {cell.n:,} examples {'shared' if cell.shared else 'independent'}"
    text = f"{cell.scenario}, {ka} vs {kb} seeds, {100 * cell.acc:g}%, logit sds {cell.sd_a:g} / {cell.sd_b:g}, {cell.n:,} examples"
    return text + (f", {cell.tokens[0]}-{cell.tokens[1]} tokens an example" if cell.tokens else "")


SECTIONS = {
    "normal": "Normal seeds (the earlier grid): seed shifts N(0, sd points) on the probability scale, equal on both sides",
    "ceiling": "Near the 99% ceiling, one side spread (A, logit sd 0.5 or 1) and one tight (B); two cells with both spread",
    "spread": "Unequal seed spreads on the logit scale at 70% and 90%",
    "unequal": "Unequal seed counts, the spread side (A) the smaller",
    "tokens": "The token path: 16-64 scored tokens an example, the shared test set dominating (tested on right tokens per example)",
    "chance": "Near chance: 2%, 10% and 50%, A spread (logit sd 1), B tight (0.1)",
}


def _pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:.{digits}f}"


def report(rows: list[dict], command: str) -> str:
    """The Markdown tables with their heading: the worst calibratable cells before and after named."""
    from tabulate import tabulate

    reps, power_reps = rows[0]["reps"], rows[0]["power_reps"]
    calibratable = [r for r in rows if r["cell"].calibratable]
    lines = [
        "# Calibration of the pair test (bench/report/stats.py: paired_t)",
        "",
        f"`{command}`",
        "",
        f"Two models of equal mean accuracy (false holds, both ways: A > B and B > A; {reps:,} simulated pairs a cell, "
        f"Monte-Carlo SE {_pct(math.sqrt(stats.ALPHA * (1 - stats.ALPHA) / reps))} points at a true 5%) and A 3 points better "
        f"(power, {power_reps:,} pairs, SE at most {_pct(math.sqrt(0.25 / power_reps), 1)} points); one-sided at alpha "
        f"{stats.ALPHA}, the rule of a one-pair claim. **after**: the pair test (stats.paired_t_arrays: the "
        "logit-normal pivot and the paired t test, both); **before**: the paired t test it replaced "
        "(stats.paired_t_student_arrays); Welch: Welch's t on the seed means alone. The simulation: "
        "scripts/benchmarks/stats_calibration.py's docstring.",
        "",
    ]
    if calibratable:
        summary = []
        for test, name in (("new", "after (the pair test)"), ("before", "before (paired t)"), ("welch", "Welch on the seed means")):
            r, d, rate = worst(calibratable, test)
            over = sum(r2[f"fp {test}{d2}"] > stats.ALPHA for r2 in calibratable for d2 in "><")
            beyond = sum(r2[f"fp {test}{d2}"] > stats.ALPHA + 2 * se(stats.ALPHA, reps) for r2 in calibratable for d2 in "><")
            summary.append(
                f"- **{name}**: worst cell {describe(r['cell'])}, {'A > B' if d == '>' else 'B > A'}: false holds "
                f"{_pct(rate)}% (SE {_pct(se(rate, reps))}); rates above 5%: {over} of {2 * len(calibratable)}, "
                f"above 5% by more than 2 SEs: {beyond}."
            )
        lines += [f"Calibratable cells: {len(calibratable)} (every scenario but the bimodal one), each with two rates:", "", *summary, ""]
    for scenario, title in SECTIONS.items():
        part = [r for r in rows if r["cell"].scenario == scenario]
        if not part:
            continue
        table = [
            [
                r["cell"].key,
                _pct(r["fp new>"]),
                _pct(r["fp new<"]),
                _pct(se(max(r["fp new>"], r["fp new<"]), reps)),
                _pct(r["fp before>"]),
                _pct(r["fp before<"]),
                _pct(r["fp welch>"]),
                _pct(r["fp welch<"]),
                _pct(r["alt new>"], 1),
                _pct(r["alt before>"], 1),
                _pct(r["predicted"], 1),
                _pct(r["alt welch>"], 1),
            ]
            for r in part
        ]
        lines += [
            f"## {title}",
            "",
            tabulate(
                table,
                headers=[
                    "cell",
                    "after: A > B %",
                    "after: B > A %",
                    "MC SE",
                    "before: A > B %",
                    "before: B > A %",
                    "Welch: A > B %",
                    "Welch: B > A %",
                    "power +3 after %",
                    "power +3 before %",
                    "power_at %",
                    "Welch power %",
                ],
                tablefmt="github",
                disable_numparse=True,
            ),
            "",
        ]
    bimodal = [r for r in rows if r["cell"].scenario == "bimodal"]
    if bimodal:
        table = []
        for r in bimodal:
            cell = r["cell"]
            k = cell.seeds[0]
            table.append(
                [
                    cell.key,
                    f"{100 * cell.fail:g}%",
                    _pct((1 - cell.fail) ** k, 0),
                    f"< {100 * stats.failure_bound(0, k):.0f}%",
                    _pct(r["fp new>"]),
                    _pct(r["fp before>"]),
                    _pct(r["fp welch>"]),
                    _pct(r["alt new<"], 1),
                    _pct(r["alt before<"], 1),
                    _pct(r["alt new>"], 1),
                    _pct(r["alt before>"], 1),
                    _pct(r["predicted"], 1),
                ]
            )
        lines += [
            "## Bimodal families: not calibratable",
            "",
            'A fails to chance (50%) on a share of its seeds; B is stable. Null: the same mean (85%): how often "A beats B" '
            'holds. Alternative: B 3 points better: how often "B beats A" holds (power) and how often "A beats B" holds '
            "instead (reversed). Where A's seeds show no failure (the share given), A's mean over them is its working seeds' "
            "mean, above B's; no test on these seeds can tell, and the bound says what they leave open (0 failed of k seeds: "
            "stats.failure_bound(0, k), one-sided 95%).",
            "",
            tabulate(
                table,
                headers=[
                    "cell",
                    "A's seeds failing",
                    "no failure among A's seeds %",
                    "0 of k failed allows",
                    "null: A > B after %",
                    "before %",
                    "Welch %",
                    "B +3: B > A after %",
                    "before %",
                    "reversed: A > B after %",
                    "before %",
                    "power_at %",
                ],
                tablefmt="github",
                disable_numparse=True,
            ),
            "",
        ]
    return "\n".join(lines)


# The methods considered for the pair test, each judging a simulated pair from its seed shares (reps, seeds),
# the test set's variance of the difference (reps,) and the shares' totals: (p for A > B, p for B > A).


def _logit_t(sa, sb, ex, totals):
    """Welch's t on the seeds' empirical logits, the test set's part moved to the logit scale by the
    delta method at the pooled share (H0: equal mean logits)."""
    ka, kb = sa.shape[-1], sb.shape[-1]
    ya, yb = (spx.logit((s * t[:, None] + 0.5) / (t[:, None] + 1.0)) for s, t in ((sa, totals), (sb, totals)))
    pooled = np.clip((sa.sum(-1) + sb.sum(-1)) / (ka + kb), 1e-6, 1 - 1e-6)
    pa, pb, pe = ya.var(-1, ddof=1) / ka, yb.var(-1, ddof=1) / kb, ex / (pooled * (1 - pooled)) ** 2
    var = pa + pb + pe
    df = var**2 / ((pa**2 / (ka - 1) + pb**2 / (kb - 1) if ka == kb else (pa + pb) ** 2 / (min(ka, kb) - 1)) + 1e-300)
    t = (ya.mean(-1) - yb.mean(-1)) / np.sqrt(var)
    return sps.t.sf(t, df), sps.t.cdf(t, df)


def _studentized(sa, sb, ex):
    """(mean_A - mean_B) / sqrt(s_A^2 / k_A + s_B^2 / k_B + test set) over the last axis."""
    var = sa.var(-1, ddof=1) / sa.shape[-1] + sb.var(-1, ddof=1) / sb.shape[-1] + ex
    return (sa.mean(-1) - sb.mean(-1)) / np.sqrt(np.maximum(var, 1e-300))


def _permutation(sa, sb, ex, totals):
    """The studentized statistic over every split of the pooled seeds into k_A and k_B (seed labels
    exchanged; above 2,000 splits, the observed one and 1,999 fixed others): p = the share of splits
    at or above the observed one."""
    ka, kb = sa.shape[-1], sb.shape[-1]
    pooled = np.concatenate([sa, sb], -1)
    if math.comb(ka + kb, ka) <= 2000:
        splits = [list(c) for c in itertools.combinations(range(ka + kb), ka)]
    else:
        pick = np.random.default_rng(12345)
        splits = [list(range(ka))] + [sorted(pick.permutation(ka + kb)[:ka].tolist()) for _ in range(1999)]
    rest = [[i for i in range(ka + kb) if i not in c] for c in splits]
    obs = _studentized(sa, sb, ex)[:, None]
    above, below = np.zeros(len(sa)), np.zeros(len(sa))
    for i in range(0, len(splits), 250):
        t = _studentized(pooled[:, splits[i : i + 250]], pooled[:, rest[i : i + 250]], ex[:, None])  # (reps, splits)
        above += (t >= obs - 1e-12).sum(-1)
        below += (t <= obs + 1e-12).sum(-1)
    return above / len(splits), below / len(splits)


def _bootstrap_t(sa, sb, ex, totals, draws: int = 2000):
    """Bootstrap-t over seeds, each side resampled within itself (2,000 fixed resamples): p = the
    share of (delta* - delta) / se* at or above the observed t."""
    ka, kb = sa.shape[-1], sb.shape[-1]
    pick = np.random.default_rng(12345)
    ia, ib = pick.integers(0, ka, (draws, ka)), pick.integers(0, kb, (draws, kb))
    obs = _studentized(sa, sb, ex)[:, None]
    delta = (sa.mean(-1) - sb.mean(-1))[:, None]
    above, below = np.zeros(len(sa)), np.zeros(len(sa))
    for i in range(0, draws, 250):
        ra, rb = sa[:, ia[i : i + 250]], sb[:, ib[i : i + 250]]  # (reps, 250, k)
        var = ra.var(-1, ddof=1) / ka + rb.var(-1, ddof=1) / kb + ex[:, None]
        t_star = (ra.mean(-1) - rb.mean(-1) - delta) / np.sqrt(np.maximum(var, 1e-300))
        above += (t_star >= obs).sum(-1)
        below += (t_star <= obs).sum(-1)
    return above / draws, below / draws


def _fiducial(sa, sb, ex, totals, n: int):
    """The generalized pivot with each side's own chi-square for both its location and its spread
    (the logit-normal Behrens-Fisher pivot) at every seed count: stats.paired_t_arrays below
    stats.SHARED_FROM seeds a side or at unequal seed counts."""
    ka, kb = sa.shape[-1], sb.shape[-1]
    z_a, z_b, e, own_a, own_b, _ = stats._draws(ka, kb, n)
    out = []
    for s, k, z, w in ((sa, ka, z_a, own_a), (sb, kb, z_b, own_b)):
        y, v = stats._side(s * totals[:, None], totals, k)
        sd = np.sqrt(v)[:, None]
        out.append(
            s.mean(-1)[:, None]
            + stats._logit_normal_mean(y[:, None] - z * w * sd / math.sqrt(k), sd * w)
            - stats._logit_normal_mean(y, np.sqrt(v))[:, None]
        )
    d = out[0] - out[1] - e * np.sqrt(ex)[:, None]
    return (d <= 0).mean(-1), (d >= 0).mean(-1)


def _pivot_alone(a, b, unit, shared_from: int = stats.SHARED_FROM):
    """The logit-normal pivot of stats.paired_t_arrays without the paired t test beside it, its
    locations sharing one scale at equal seed counts from ``shared_from`` seeds a side."""
    ra, rb, _, _, examples = stats._sums_and_examples(np.asarray(a), np.asarray(b))
    saved, stats.SHARED_FROM = stats.SHARED_FROM, shared_from
    try:
        return stats._pivot_arrays(ra, rb, examples, a.shape[-1], stats.PAIR_LEVEL, unit)[2:]
    finally:
        stats.SHARED_FROM = saved


CANDIDATES = [
    "ceiling:5v5:99:1/0.1:1000",
    "ceiling:3v3:99:1/0.1:1000",
    "ceiling:2v2:99:1/0.1:1000",
    "unequal:2v5:99:1/0.1:1000",
    "unequal:3v5:70:1/0.1:1000",
    "spread:5v5:70:0.6/0.05:1000",
    "spread:3v3:90:1/0.1:1000",
    "chance:5v5:2:1/0.1:1000",
    "tokens:5v5:70:0.05/0.05:1000",
    "normal:2v2:0.5:1000:shared",
    "normal:3v3:0.5:100:shared",
    "normal:5v5:2.5:1000:shared",
    "normal:10v10:8:100:shared",
    "normal:2v10:2.5:1000:shared",
]
METHODS = [
    "paired t (before)",
    "Welch t on seed logits",
    "studentized permutation",
    "bootstrap-t",
    "pivot: own scales at every k",
    "pivot: shared scale at every equal k",
    f"pivot: shared from {stats.SHARED_FROM} a side",
    "pivot and paired t (after)",
]


def candidates(reps: int, power_reps: int, seed: int = 0) -> list[dict]:
    """Each of CANDIDATES judged by each of METHODS: false holds both ways and power at +3 points."""
    by_key = {c.key: (i, c) for i, c in enumerate(cells())}
    rows = []
    for key in CANDIDATES:
        index, cell = by_key[key]
        row = {"cell": cell}
        rng = np.random.default_rng([seed, index, 7])
        for what, count in (("null", reps), ("alt", power_reps)):
            a, b, unit = draw(rng, count, cell, what == "alt")
            u = np.ones(count) if unit is None else np.asarray(unit)
            totals = cell.n / u
            sa, sb = a.sum(-1) / totals[:, None], b.sum(-1) / totals[:, None]
            ex = stats.examples_variance(a, b) * u * u
            results = [
                stats.paired_t_student_arrays(a, b)[3:],
                _logit_t(sa, sb, ex, totals),
                _permutation(sa, sb, ex, totals),
                _bootstrap_t(sa, sb, ex, totals),
                _fiducial(sa, sb, ex, totals, cell.n),
                _pivot_alone(a, b, unit, 2),
                _pivot_alone(a, b, unit),
                stats.paired_t_arrays(a, b, unit=unit)[3:],
            ]
            for method, (p, p_rev) in zip(METHODS, results):
                row[what, method] = (float(np.mean(p < stats.ALPHA)), float(np.mean(p_rev < stats.ALPHA)))
        rows.append(row)
        print(key, {m: row["null", m] for m in METHODS}, flush=True)
    return rows


def candidates_report(rows: list[dict], reps: int, power_reps: int, command: str) -> str:
    from tabulate import tabulate

    table = [[r["cell"].key, *(f"{_pct(max(r['null', m]))} / {_pct(r['alt', m][0], 1)}" for m in METHODS)] for r in rows]
    return "\n".join(
        [
            "# The methods considered for the pair test",
            "",
            f"`{command}`",
            "",
            f"Each cell of scripts/benchmarks/stats_calibration.py (keys as in results/stats_calibration.md): the higher of the two "
            f"false-holds rates (A > B, B > A) over {reps:,} null pairs (SE {_pct(math.sqrt(stats.ALPHA * (1 - stats.ALPHA) / reps))} points "
            f'at 5%) / the power of "A beats B" with A 3 points better over {power_reps:,} pairs, in %.',
            "",
            tabulate(table, headers=["cell", *METHODS], tablefmt="github", disable_numparse=True),
            "",
        ]
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=4000, help="simulated null pairs per cell (default 4000)")
    p.add_argument("--power-reps", type=int, default=1000, help="simulated pairs per cell under the alternative (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("results/stats_calibration.md"))
    p.add_argument("--cells", help="only these cells (keys as the table prints them, comma-separated; default: every cell)")
    p.add_argument("--candidates", action="store_true", help="compare the methods considered on a few cells instead")
    args = p.parse_args()
    if args.reps < 1 or args.power_reps < 1:
        print("stats_calibration: --reps and --power-reps must be >= 1", file=sys.stderr)
        return 2
    command = " ".join(["python", "scripts/benchmarks/stats_calibration.py", *sys.argv[1:]])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.candidates:
        rows = candidates(args.reps, args.power_reps, args.seed)
        args.out.write_text(candidates_report(rows, args.reps, args.power_reps, command))
        print(f"wrote {args.out}")
        return 0
    grid = cells()
    only = set(args.cells.split(",")) if args.cells else None
    known = {c.key for c in grid}
    if only is not None and only - known:
        print(f"stats_calibration: --cells: no cell {sorted(only - known)[0]!r} in the grid; e.g. {grid[0].key}", file=sys.stderr)
        return 2
    rows = [run(c, i, args.reps, args.power_reps, args.seed) for i, c in enumerate(grid) if only is None or c.key in only]
    args.out.write_text(report(rows, command))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
