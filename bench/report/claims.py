"""The claims of a table (``claims:`` in bench/tables/*.yaml, parsed by bench/report/table_parts.py):
the paper's qualitative findings over its cells, e.g. "TLB beats the Transformer on ListOps
500-600", judged on our per-seed values by the tests of bench/report/stats.py (``RULE``): per
pair a one-sided Welch t-test over seeds (a paired t test over seeds and examples where both
cells have per-example outcomes on the same examples: stats.paired_t), the effect with its 90% CI (each end the
test's one-sided 95% bound: a pair holds exactly when the CI is above 0); a claim over
several pairs holds when every pair holds at alpha 0.05, does not hold when some pair is
significant the other way after Holm's correction over the pairs, and is inconclusive otherwise.

A pair whose two cells are both at chance (``~`` in the table: the mean does not clear the split's
chance level, the best trivial strategy's score, by the margin of bench/report/cells.py:at_chance) is
inconclusive, whatever its p: the difference of two cells at chance is noise.

The paper's own numbers are judged by the same test from its printed mean ± std and its number
of runs (the table's ``paper_seeds``); a table that prints no spread is marked so.

A ratio claim (``ratio_at_most: r``, e.g. "GUT with halting at bound 40 costs <= 0.6x no-halt"),
judged by ``RATIO_RULE`` on the per-repeat times of a cost table: Welch on the logarithms, the
ratio of geometric means with its 90% CI; inconclusive besides when (``halt_depth_below: d``) the
better cell's mean halting depth is >= d: the claim's premise ("when the model halts early") is
absent.

An open question (``questions:`` in the file, a claim with ``question``) is tested the same way,
pair by pair, and printed as ``measured`` with every pair's effect, CI and p: no verdict, since
no paper claims a direction (``QUESTION_RULE``).

A verdict some of whose cells have fewer seeds than the table plans (``seeds:``) is marked
``provisional`` ("2-3 of 5 seeds"): it is the verdict of the seeds present, and the claims CSV
says so in its own column, so that a partly trained table cannot pass for a finished one.

Any table kind with cells judges its claims here (``run_claims``); the texts of a test
(``test_text``, ``cell_text``, ``both_at_chance``) are shared with the record checks of
bench/report/checks.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.stats import norm

from . import stats
from .cells import STALE
from .stats import FAILS, HOLDS, UNSURE

RULE = (
    "per pair, a one-sided Welch t-test of A beating B over {over} (H1: mean_A > mean_B, < where lower is better; "
    "a paired t over seeds and examples where both cells have per-example outcomes on the same examples: its variance the "
    "seeds' plus the test examples' sampling, calibrated in results/stats_calibration.md), "
    "the effect Δ = mean_A - mean_B with its 90% CI (each end the one-sided "
    "95% bound, so a pair has p < 0.05 exactly when its CI is above 0); a claim holds when every pair has p < 0.05 "
    "(intersection-union), does not hold when some pair is significant the other way after Holm's correction over "
    "the claim's pairs, and is inconclusive otherwise; a pair with < 2 values a side, or whose cells are both at chance "
    "(~), has no test; cells: mean ± 95% t-interval half-width (n); paper = the same test on its printed mean ± std {paper}"
)
MEASURED = "measured"
QUESTION_RULE = (
    f"open questions: each pair tested as a claim would be (H1: the first named above the second), its effect, CI and "
    f"one-sided p printed as {MEASURED}, without a verdict"
)
RATIO_RULE = (
    "A costs <= r x B: Welch t on the logarithms of the timed repeats, H1: mean log A - mean log B < log r; "
    "ratio = geometric mean of A / of B with its 90% CI; inconclusive when the claim's premise (halting depth "
    "below a bound) is absent; paper: its means only, no spread printed"
)

RELIABILITY_RULE = (
    "reliability claims (A fails less often than B): per pair, Fisher's exact test, one-sided, on the seeds that "
    "learned (k learned of n, the cells' rule) of A against B (H1: A's share that learned is higher), Δ = the "
    "difference of those shares in points, no interval; combined over pairs as any claim"
)
UNADJUSTED = "unadjusted only"
TABLE_HOLM_RULE = (
    "p (Holm, table) = each claim's p (its weakest pair's; 1 where a pair has no test) adjusted by Holm's step-down "
    "method over the table's {m} claims (open questions left out); a claim that holds at p < 0.05 but not after "
    f"that adjustment is marked holds ({UNADJUSTED})"
)

PROVISIONAL = "provisional"
PROVISIONAL_RULE = (
    f"{PROVISIONAL} = some cell the claim compares has fewer seeds than the table plans ({{planned}}): "
    "the verdict is that of the seeds present and may change as the others land"
)


def _short_of_plan(pairs, values: dict, planned: int | None) -> str:
    """ "2-3 of 5 seeds" when a cell the pairs compare has fewer seeds than ``planned``, else ""."""
    if not planned:
        return ""
    counts = [len(values[cell][0]) for cell in dict.fromkeys(c for p in pairs for c in (p.better, p.than))]
    lo, hi = min(counts), max(counts)
    if lo >= planned:
        return ""
    return f"{lo if lo == hi else f'{lo}-{hi}'} of {planned} seeds"


def _p_text(p: float, label: str = "p") -> str:
    return f"{label} < 0.001" if p < 0.001 else f"{label} = {p:.3f}"


def effect_text(
    effect: float,
    ci: tuple[float, float],
    p: float,
    digits: int,
    ratio_to: float | None = None,
    reverse: bool = False,
    p_label: str | None = None,
    level: float = stats.PAIR_LEVEL,
) -> str:
    """The effect, its CI at ``level`` (a one-sided test's: stats.PAIR_LEVEL) and the p-value
    (``reverse``: ``p`` is the Holm-adjusted p against the claim; ``p_label``: another name for
    ``p``), as a claim's test prints them."""
    p_text = _p_text(p, p_label or ("reverse p (Holm)" if reverse else "p"))
    ci_name = f"{100 * level:.0f}% CI"
    if ratio_to is not None:
        return f"ratio {effect:.2f} [{ci_name} {ci[0]:.2f}, {ci[1]:.2f}] vs ≤ {ratio_to:g}, {p_text}"
    f = f"{{:+.{digits}f}}"
    return f"Δ {f.format(effect)} [{ci_name} {f.format(ci[0])}, {f.format(ci[1])}], {p_text}"


def test_text(t: stats.PairTest, digits: int, over: str = "seeds", ratio_to: float | None = None, reverse: float | None = None) -> str:
    """The effect, its 90% CI, the p-value (``reverse``: the Holm-adjusted p against the claim
    instead), n per side and the test (a reliability test: the learned counts, no interval)."""
    if t.test == stats.FISHER:
        p_text = _p_text(t.p if reverse is None else reverse, "p" if reverse is None else "reverse p (Holm)")
        la, lb = t.ci  # a Fisher test's "interval" holds the learned counts
        return f"learned {la:g} of {t.n[0]} vs {lb:g} of {t.n[1]} seeds, Δ {t.effect:+.{digits}f} points, {p_text}, {t.test}"
    numbers = effect_text(t.effect, t.ci, t.p if reverse is None else reverse, digits, ratio_to, reverse is not None)
    return f"{numbers}, n {t.n[0]} vs {t.n[1]} {over}, {t.test}"


def digits_of(table) -> int:
    """The decimals a table's claims print their effects with: 2 for minutes, 1 for percentages."""
    return 2 if table.unit == "min" else 1


def cell_text(row: str, values: list[float], digits: int) -> str:
    if not values:
        return f"{row} — (0)"
    m, half = stats.mean_ci(values)
    return f"{row} {m:.{digits}f}" + ("" if half is None else f" ± {half:.{digits}f}") + f" ({len(values)})"


def both_at_chance(chance_a, chance_b, digits: int) -> str:
    """Why a pair of cells at chance has no test, with their chance levels in % (numbers, or
    cells.Chance in display units, whose strategies are named)."""
    levels = " / ".join(dict.fromkeys(f"{float(c[0] if isinstance(c, tuple) else c):.{digits}f}%" for c in (chance_a, chance_b)))
    names = " / ".join(dict.fromkeys(c.strategy for c in (chance_a, chance_b) if hasattr(c, "strategy")))
    return f"both at chance (chance {levels}{': ' + names if names else ''}): no test"


def _aggregate(tests: list, texts: list[str], digits: int, over: str, ratio_to: float | None) -> tuple[str, str, dict]:
    """(verdict, why, the deciding pair's numbers) over a claim's pairs (stats.combine); ``texts``
    names each pair's cells, and says why a pair without a test has none."""
    verdict, i = stats.combine(tests)
    p_rev = stats.holm([1.0 if t is None else t.p_reverse for t in tests])
    k = len(tests)

    def line(j):
        t = tests[j]
        if t is None:
            return texts[j]
        return f"{texts[j]}: {test_text(t, digits, over, ratio_to, p_rev[j] if verdict == FAILS else None)}"

    decided = line(i)
    if k > 1:
        each = stats.verdicts(tests)
        counts = f"of {k} pairs {each.count(HOLDS)} hold, {each.count(FAILS)} do not, {each.count(UNSURE)} inconclusive"
        lead = "strongest reversal:" if verdict == FAILS else "weakest:" if tests[i] is not None else "e.g."
        decided = f"{counts}; {lead} {decided}"
    t = tests[i] if i is not None else None
    numbers = {
        "effect": None if t is None else t.effect,
        "ci_low": None if t is None else t.ci[0],
        "ci_high": None if t is None else t.ci[1],
        "p": None if t is None else (p_rev[i] if verdict == FAILS else t.p),
        "n": "" if t is None else f"{t.n[0]} vs {t.n[1]}",
        "test": "" if t is None else t.test,
    }
    return verdict, decided, numbers


def _measured(tests: list, texts: list[str], digits: int, over: str) -> tuple[str, dict]:
    """(every pair's numbers, the first tested pair's numbers) of an open question: no verdict."""
    lines = [texts[j] if t is None else f"{texts[j]}: {test_text(t, digits, over)}" for j, t in enumerate(tests)]
    t = next((t for t in tests if t is not None), None)
    numbers = {
        "effect": None if t is None else t.effect,
        "ci_low": None if t is None else t.ci[0],
        "ci_high": None if t is None else t.ci[1],
        "p": None if t is None else t.p,
        "n": "" if t is None else f"{t.n[0]} vs {t.n[1]}",
        "test": "" if t is None else t.test,
    }
    return "; ".join(lines), numbers


def _paper_test(a, b, claim, seeds: int | None):
    """(test or None, why none) on the paper's printed (mean, std or None) pair."""
    if a is None or b is None:
        return None, "not reported"
    if claim.ratio_at_most is not None or a[1] is None or b[1] is None:
        return None, "no spread printed"
    if not seeds:
        return None, "the paper's number of runs is not given (paper_seeds)"
    return stats.welch_from_stats(a, b, seeds, claim.lower_is_better), ""


def _scaled(test: stats.PairTest | None, factor: float) -> stats.PairTest | None:
    """A test of scores in one unit expressed in another (effect and interval times ``factor`` > 0;
    p is the same: the test is scale-equivariant)."""
    if test is None:
        return None
    return dataclasses.replace(test, effect=test.effect * factor, ci=(test.ci[0] * factor, test.ci[1] * factor))


def paired_scores(a: dict | None, b: dict | None) -> tuple[float, np.ndarray, np.ndarray] | None:
    """(unit, A's seeds x examples scores, B's) of two cells with per-example scores on the same data
    and the same unit, aligned on the examples both scored (cells.cell_scores); None otherwise."""
    if not a or not b or "missing" in a or "missing" in b or a["data"] != b["data"] or a["unit"] != b["unit"]:
        return None
    both = stats.aligned_outcomes(a["seeds"], b["seeds"], key="score")
    return None if both is None else (a["unit"], *both)


def _judge_pair(
    pair,
    claim,
    values: dict,
    depths: dict,
    at_chance: dict,
    outcomes: dict,
    digits: int,
    scale: float,
    over: str,
    learned: dict | None = None,
) -> tuple[stats.PairTest | None, str]:
    """(our test of one pair or None, the text naming its cells, with why it has no test)."""
    (ra, ca), (rb, cb) = pair.better, pair.than
    where = ca if ca == cb else f"{ca} vs {cb}"
    va, stale_a = values[pair.better]
    vb, stale_b = values[pair.than]
    mark = f" {STALE}" if stale_a or stale_b else ""
    text = f"{cell_text(ra, va, digits)} vs {cell_text(rb, vb, digits)} on {where}{mark}"
    test, why = None, ""
    if claim.ratio_at_most is not None:
        depth = depths.get(pair.better)
        if claim.halt_depth_below is not None and (depth is None or depth >= claim.halt_depth_below):
            said = "not measured" if depth is None else f"{depth:.2f} >= {claim.halt_depth_below:g}"
            why = f"premise absent: halting depth {said}"
        else:
            test = stats.ratio_test(va, vb, claim.ratio_at_most)
            if depth is not None:
                text += f" (halting depth {depth:.2f})"
    elif claim.fails_less:
        if pair.better in (learned or {}) and pair.than in learned:
            (la, na), (lb, nb) = learned[pair.better], learned[pair.than]
            test = stats.fisher_learned(la, na, lb, nb)
        else:
            why = "no chance level recorded: the seeds that learned are not counted"
    elif pair.better in at_chance and pair.than in at_chance:
        why = both_at_chance(at_chance[pair.better], at_chance[pair.than], digits)
    elif lost := [
        f"{cell[0]} on {cell[1]} ({outcomes[cell]['missing']})"
        for cell in (pair.better, pair.than)
        if "missing" in (outcomes.get(cell) or {})
    ]:
        why = f"outcomes files missing: {'; '.join(lost)}: no test"
    elif (both := paired_scores(outcomes.get(pair.better), outcomes.get(pair.than))) is not None:
        unit, a, b = both
        test = _scaled(stats.paired_t(a, b, claim.lower_is_better, unit=unit), unit * scale)
    else:
        test = stats.welch(va, vb, claim.lower_is_better)
    if test is None and not why:
        why = f"n = {len(va)} vs {len(vb)} (< 2 {over} a side): no test"
    return test, f"{text}: {why}" if why else text


def _paper_verdict(tests: list, texts: list[str], digits: int, seeds: int | None) -> tuple[str, str]:
    """(verdict, why) of the paper's own numbers over a claim's pairs; without any test, the reason."""
    if all(t is None for t in tests):
        reasons = {text.rpartition(": ")[2] for text in texts}
        verdict = "n/r" if reasons == {"not reported"} else next(iter(sorted(reasons - {"not reported"})))
        return verdict, verdict
    verdict, why, _ = _aggregate(tests, texts, digits, f"runs (paper_seeds {seeds})", None)
    return verdict, why


def _learned_differ(pairs, learned: dict) -> str:
    """ "learned seeds differ: A 5 of 5 vs B 3 of 5 on C; ..." over the pairs whose two cells differ
    in the share of their seeds that learned (cells.learned), else "". The share, not the count: 4 of
    4 against 3 of 3 (a seed still missing) is no difference, 5 of 5 against 4 of 5 is."""
    said = []
    for p in pairs:
        if p.better not in learned or p.than not in learned:
            continue
        (la, na), (lb, nb) = learned[p.better], learned[p.than]
        if la * nb != lb * na:  # la / na != lb / nb, exactly
            (ra, ca), (rb, cb) = p.better, p.than
            said.append(f"{ra} {la} of {na} vs {rb} {lb} of {nb} on {ca if ca == cb else f'{ca} vs {cb}'}")
    return "learned seeds differ: " + "; ".join(said) if said else ""


POWER_EFFECT = 3.0  # points: the effect whose power an inconclusive claim prints


def _not_excluded(pairs, learned: dict) -> str:
    """What the seeds of a claim's better cells cannot exclude: per better cell, how many of its
    seeds failed (did not learn) and the highest failure rate those seeds leave possible
    (stats.failure_text): a family that fails on a share of seeds below that bound could hold the
    claim by the luck of its draws."""
    said = []
    for cell in dict.fromkeys(p.better for p in pairs):
        if cell in learned:
            k, n = learned[cell]
            said.append(f"{cell[0]} on {cell[1]}: {stats.failure_text(n - k, n)}")
    return "what its seeds leave open: " + "; ".join(said) if said else ""


def _power(ours: list, pairs, values: dict, scale: float) -> str:
    """The power of the deciding tested pair of an inconclusive claim to find A ``POWER_EFFECT``
    points better at its cells' own seed spreads and test-set noise (stats.power_at), or ""."""
    tested = [(t, p) for (t, _), p in zip(ours, pairs) if t is not None and t.test != stats.FISHER]
    if not tested or scale != 100.0:
        return ""
    test, pair = max(tested, key=lambda tp: tp[0].p)
    (va, _), (vb, _) = values[pair.better], values[pair.than]
    if len(va) < 2 or len(vb) < 2:
        return ""
    sd_a, sd_b = float(np.std(va, ddof=1)), float(np.std(vb, ddof=1))
    seeds2 = sd_a**2 / len(va) + sd_b**2 / len(vb)
    se = (test.ci[1] - test.ci[0]) / (2 * norm.ppf(0.5 + stats.PAIR_LEVEL / 2))  # the test's own standard error
    examples_se = max(0.0, se**2 - seeds2) ** 0.5
    power = stats.power_at(POWER_EFFECT, sd_a, len(va), sd_b, len(vb), examples_se)
    return f"power to find +{POWER_EFFECT:g} points at these spreads: {100 * power:.0f}%"


def run_claims(
    table,
    values: dict,
    depths: dict | None = None,
    over: str = "seeds",
    at_chance: dict | None = None,
    outcomes: dict | None = None,
    learned: dict | None = None,
) -> dict:
    """Each claim of a table judged on ``values`` ({(row label, column label): (per-seed values in
    display units, stale)}) and on the paper's numbers: headers, rows, CSV rows and the rule.
    Comparisons naming a row the table no longer has (``--models``) are left out; a claim left
    with none is not shown. ``depths``: {(row, column): mean halting depth} for ratio claims'
    premises (cost tables); ``over``: what the values are samples of (seeds, or a cost table's
    timed repeats); ``at_chance``: {(row, column): chance level in display units (a number, or
    cells.Chance naming its strategy)} of the cells at chance;
    ``outcomes``: {(row, column): [per-seed {"index", "correct"}, ...]} where every seed has
    per-example outcomes (then a pair of such cells on the same examples is tested paired);
    ``learned``: {(row, column): (seeds that learned, seeds)} of the cells whose metric has a chance
    level (the verdict line names the pairs that differ in it; a reliability claim tests it).

    Over the table: each judged claim's p (its weakest pair's, 1 for a pair without a test) is
    adjusted by Holm over the table's claims (``TABLE_HOLM_RULE``); a claim that holds only before
    that adjustment is marked ``UNADJUSTED``."""
    digits, scale = digits_of(table), 1.0 if table.unit == "min" else 100.0
    paper = {(r.label, c.label): p for r in table.rows for c, p in zip(table.columns, r.paper)}
    seeds = getattr(table, "paper_seeds", None)
    planned = len(table.seeds) if over == "seeds" and getattr(table, "seeds", None) else None
    rows, csv_rows, claim_p = [], [], []
    for claim in table.claims:
        pairs = [p for p in claim.comparisons if p.better in values and p.than in values]
        if not pairs:
            continue
        ours = [
            _judge_pair(p, claim, values, depths or {}, at_chance or {}, outcomes or {}, digits, scale, over, learned or {}) for p in pairs
        ]
        theirs = []
        for p in pairs:
            (ra, ca), (rb, cb) = p.better, p.than
            ptest, pwhy = _paper_test(paper.get(p.better), paper.get(p.than), claim, seeds)
            theirs.append((ptest, f"{ra} vs {rb} on {ca if ca == cb else f'{ca} vs {cb}'}" + (f": {pwhy}" if pwhy else "")))
        if claim.question:
            (why, numbers), verdict = _measured([t for t, _ in ours], [x for _, x in ours], digits, over), MEASURED
            pverdict = pwhy = "open question"
        else:
            verdict, why, numbers = _aggregate([t for t, _ in ours], [x for _, x in ours], digits, over, claim.ratio_at_most)
            pverdict, pwhy = _paper_verdict([t for t, _ in theirs], [x for _, x in theirs], digits, seeds)
        differ = _learned_differ(pairs, learned or {})
        why = f"{why}; {differ}" if differ and not claim.fails_less else why
        if not claim.question and not claim.fails_less and claim.ratio_at_most is None:
            caveat = (
                _not_excluded(pairs, learned or {}) if verdict == HOLDS else _power(ours, pairs, values, scale) if verdict == UNSURE else ""
            )
            why = f"{why}; {caveat}" if caveat else why
        short = _short_of_plan(pairs, values, planned)
        shown, why = (f"{verdict} ({PROVISIONAL})", f"{PROVISIONAL}: {short}; {why}") if short else (verdict, why)
        rows.append([claim.text, claim.source, shown, why, pverdict, ""])
        csv_rows.append(
            {
                "claim": claim.text,
                "source": claim.source,
                "ours": verdict,
                "why": why,
                **numbers,
                "provisional": short,
                "paper": pverdict,
                "paper_why": pwhy,
                "p_table_holm": None,
                "holds_unadjusted_only": False,
            }
        )
        claim_p.append(None if claim.question else max(1.0 if t is None else t.p for t, _ in ours))
    judged = [i for i, p in enumerate(claim_p) if p is not None]
    adjusted = stats.holm([claim_p[i] for i in judged]) if judged else []
    for i, adj in zip(judged, adjusted):
        csv_rows[i]["p_table_holm"] = float(adj)
        rows[i][5] = _p_text(float(adj), "p").removeprefix("p ").removeprefix("= ")
        if csv_rows[i]["ours"] == HOLDS and adj >= stats.ALPHA:
            csv_rows[i]["holds_unadjusted_only"] = True
            rows[i][2] = rows[i][2].replace(HOLDS, f"{HOLDS} ({UNADJUSTED})", 1)
    headers = ["claim", "source", "ours", "why", "paper", "ours: p (Holm, table)"]
    paper_rule = f"and the paper's {seeds} runs per cell" if seeds else "(the paper's number of runs not given: no test)"
    rule = RULE.format(over=over, paper=paper_rule)
    if any(c.ratio_at_most is not None for c in table.claims):
        rule += "; ratio claims: " + RATIO_RULE
    if any(c.question for c in table.claims):
        rule += "; " + QUESTION_RULE
    if any(r["provisional"] for r in csv_rows):
        rule += "; " + PROVISIONAL_RULE.format(planned=planned)
    if any(c.fails_less for c in table.claims):
        rule += "; " + RELIABILITY_RULE
    if judged:
        rule += "; " + TABLE_HOLM_RULE.format(m=len(judged))
    return {"headers": headers, "rows": rows, "csv": csv_rows, "rule": rule}
