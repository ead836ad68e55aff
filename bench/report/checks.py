"""Tables of checks (``kind: checks`` in bench/tables/*.yaml): a paper's stated properties, each with
its expected outcome, measured now or read from run records.

    checks:
      - claim: "1-layer causal NoPE: the last output is the same for any permutation of the prefix"
        source: "[NOPE §3 Q5]"
        compute: {test: last_output_prefix_permuted, model: nope, causal: true, params: {n_layers: 1}}
        expect: same                # same | differs | at_least_baseline
      - claim: "..."
        records: {model: nope, baseline: transformer, task: d2, split: bin1, metric: acc}
        expect: at_least_baseline   # model's mean >= baseline's mean on that split
      - claim: "..."
        status: "not implemented: why"

``compute`` builds the registry model with small sizes (d 32, 4 heads, d_ff 64, no dropout)
three times (seeds 0, 1, 2), feeds 8 random tokens and its permutation, and reports the worst
case over seeds: the largest change for ``same`` (passes below TOL), the smallest for
``differs`` (passes above TOL). Tests:

- ``permuted_outputs``: max |f(X)[π] - f(X[π])| over every position (permutation equivariance);
- ``last_output_prefix_permuted``: |f(X)_T - f(X')_T|, X' = X with positions 1..T-1 permuted;
- ``swap_first_two``: X' = X with its first two tokens swapped ([NOPE Fig. 1]); per position
  t >= 3 (after the pair, where the tokens are the same again) the change |f(X)_t - f(X')_t|
  (max of them for ``same``, min for ``differs``).

Claims of a results table (``claims:`` in bench/tables/*.yaml, schema in bench/report/tables.py): the
paper's qualitative findings over its cells, e.g. "TLB beats the Transformer on ListOps 500-600",
judged on our per-seed values by the tests of bench/report/stats.py (``RULE``): per pair a
one-sided Welch t-test over seeds (a paired bootstrap over seeds and examples where both cells
have per-example outcomes on the same examples), the effect with its 95% CI; a claim over
several pairs holds when every pair holds at alpha 0.05, does not hold when some pair is
significant the other way after Holm's correction over the pairs, and is inconclusive otherwise.

A pair whose two cells are both at chance (``~`` in the table: mean accuracy within 2 binomial
standard errors of the split's majority-class share, bench/report/cells.py:at_chance) is
inconclusive, whatever its p: the difference of two cells at chance is noise.

The paper's own numbers are judged by the same test from its printed mean ± std and its number
of runs (the table's ``paper_seeds``); a table that prints no spread is marked so.

A ratio claim (``ratio_at_most: r``, e.g. "GUT with halting at bound 40 costs <= 0.6x no-halt"),
judged by ``RATIO_RULE`` on the per-repeat times of a cost table: Welch on the logarithms, the
ratio of geometric means with its 95% CI; inconclusive besides when (``halt_depth_below: d``) the
better cell's mean halting depth is >= d: the claim's premise ("when the model halts early") is
absent.

A record check (``expect: at_least_baseline``) is the same one-sided Welch test of the model
against the baseline over seeds: holds when the model is significantly above, does not hold
when it is significantly below, inconclusive otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from ..errors import UserError
from ..schema import Schema
from . import stats
from .cells import CHANCE, STALE, at_chance, cell_records, current_config, majority_share, record_value, stale
from .stats import FAILS, HOLDS, UNSURE

TOL = 1e-4
ROUNDING = 1e-6  # a change below this is printed as "< 1e-6": float rounding, not a property
SIZES = {"d_model": 32, "n_heads": 4, "d_ff": 64, "dropout": 0.0}
VOCAB, LENGTH, SEEDS = 16, 8, (0, 1, 2)
EXPECT = {"same": "same (max abs Δ < 1e-4)", "differs": "differs (abs Δ > 1e-4)", "at_least_baseline": "model above baseline (one-sided Welch, p < 0.05)"}


@dataclass
class CheckEntry(Schema):
    claim: str
    source: str
    compute: Optional[dict] = None
    records: Optional[dict] = None
    status: Optional[str] = None
    expect: Optional[Literal["same", "differs", "at_least_baseline"]] = None


@dataclass
class ComputeEntry(Schema):
    test: str
    model: str
    causal: bool
    params: Optional[dict] = None


@dataclass
class RecordsEntry(Schema):
    model: str
    baseline: str
    task: str
    split: str
    metric: str


def check_specs(table) -> list[dict]:
    """The checks, validated, each with the models and tasks it names."""
    specs = []
    for i, c in enumerate(table.checks):
        where = f"tables/{table.name}.yaml, check {i + 1}"
        CheckEntry.from_mapping(c, where, "a check is {claim, source, one of compute | records | status, expect}")
        ways = [k for k in ("compute", "records", "status") if k in c]
        if len(ways) != 1:
            raise UserError(f"{where}: give exactly one of compute, records or status")
        spec = {**c, "models": [], "tasks": []}
        if "compute" in c:
            compute = ComputeEntry.from_mapping(c["compute"], f"{where}, compute")
            if compute.test not in TESTS or c.get("expect") not in ("same", "differs"):
                raise UserError(f"{where}: compute.test must be one of {', '.join(TESTS)} and expect same or differs")
            spec["models"] = [compute.model]
        elif "records" in c:
            r = RecordsEntry.from_mapping(c["records"], f"{where}, records")
            if c.get("expect") != "at_least_baseline":
                raise UserError(f"{where}: records needs model, baseline, task, split, metric, and expect at_least_baseline")
            spec["models"], spec["tasks"] = [r.model, r.baseline], [r.task]
        specs.append(spec)
    return specs


def record_cells(table) -> dict:
    """{(model, overrides): [task, ...]} that the record checks read (what --run trains)."""
    cells: dict = {}
    for spec in check_specs(table):
        if "records" in spec:
            for model in spec["models"]:
                cells.setdefault((model, ()), []).append(spec["records"]["task"])
    return cells


# ---- computed checks ------------------------------------------------------------------------

def _model(spec: dict, seed: int, registry):
    import torch

    from ..runner import build_model

    torch.manual_seed(seed)
    params = {**SIZES, **spec.get("params", {})}
    return build_model(spec["model"], vocab_size=VOCAB, causal=spec["causal"], registry=registry, **params).eval()


def _change(model, x, x2):
    import torch

    with torch.no_grad():
        return model(x).hidden[0], model(x2).hidden[0]  # (T, d) each


def permuted_outputs(model, x, gen):
    import torch

    perm = torch.randperm(LENGTH, generator=gen)
    a, b = _change(model, x, x[:, perm])
    return [float((a[perm] - b).abs().max())]


def last_output_prefix_permuted(model, x, gen):
    import torch

    perm = torch.cat([torch.randperm(LENGTH - 1, generator=gen), torch.tensor([LENGTH - 1])])
    a, b = _change(model, x, x[:, perm])
    return [float((a[-1] - b[-1]).abs().max())]


def swap_first_two(model, x, gen):
    x2 = x.clone()
    x2[0, 0], x2[0, 1] = x[0, 1], x[0, 0]
    a, b = _change(model, x, x2)
    return [float(d) for d in (a[2:] - b[2:]).abs().amax(dim=-1)]  # positions 3..T


TESTS = {"permuted_outputs": permuted_outputs, "last_output_prefix_permuted": last_output_prefix_permuted, "swap_first_two": swap_first_two}


def measure(spec: dict, expect: str, registry) -> float:
    """The worst case over seeds: the largest change when ``same`` is expected, else the smallest."""
    import torch

    worst = []
    for seed in SEEDS:
        gen = torch.Generator().manual_seed(seed)
        x = torch.randperm(VOCAB - 1, generator=gen)[:LENGTH].add(1).unsqueeze(0)  # distinct tokens, none is padding
        changes = TESTS[spec["test"]](_model(spec, seed, registry), x, gen)
        worst.append(max(changes) if expect == "same" else min(changes))
    return max(worst) if expect == "same" else min(worst)


# ---- record checks --------------------------------------------------------------------------

def _record_check(spec: dict, table, out: Path, preset: str, registry=None):
    """(measured text, status) for model vs baseline on one split (a one-sided Welch test over
    seeds, stats.welch); with a registry, records made with settings the registry no longer
    gives are marked as in results tables."""
    r = spec["records"]
    per_side, texts, majorities = [], [], []
    for model in (r["model"], r["baseline"]):
        ok = [x for x in cell_records(out, model, r["task"], preset, [], table.seeds) if x.get("status") == "ok"]
        values = [100 * v for v in (record_value(x, r["split"], r["metric"]) for x in ok) if v is not None]
        per_side.append(values)
        now = current_config(registry, model, r["task"], preset, []) if registry is not None and ok else None
        whys = sorted({why for why in (stale(x, now) for x in ok) if why}) if now else []
        majority = majority_share(ok, r["split"]) if r["metric"] == "acc" and values else None
        majorities.append(majority if majority and at_chance(sum(values) / len(values) / 100, majority) else None)
        mark = f" {STALE} ({'; '.join(whys)})" if whys else ""
        texts.append(_cell_text(model, values, 1) + mark + (f" {CHANCE}" if majorities[-1] else ""))
    measured = " vs ".join(texts) + f" % {r['metric']} on {r['task']}:{r['split']}"
    if not all(per_side):
        return measured, "missing records"
    if all(majorities):
        return f"{measured}: {both_at_chance(100 * majorities[0][0], 100 * majorities[1][0], 1)}", UNSURE
    test = stats.welch(*per_side)
    if test is None:
        return f"{measured}: n = {len(per_side[0])} vs {len(per_side[1])} (< 2 seeds a side): no test", UNSURE
    status = HOLDS if test.p < stats.ALPHA else FAILS if test.p_reverse < stats.ALPHA else UNSURE
    return f"{measured}: {test_text(test, 1, reverse=test.p_reverse if status == FAILS else None)}", status


def run_checks(table, out: Path, preset: str, registry) -> dict:
    rows = []
    for spec in check_specs(table):
        expect = spec.get("expect")
        if "status" in spec:
            measured, status = "—", spec["status"]
        elif "records" in spec:
            measured, status = _record_check(spec, table, out, preset, registry)
        else:
            value = measure(spec["compute"], expect, registry)
            # below 1e-6 a change is float rounding, whose last digits vary with the CPU: printed as a bound
            said = "< 1e-6 (float rounding)" if value < ROUNDING else f"= {value:.2g}"
            measured = f"{'max' if expect == 'same' else 'min'} abs Δ {said}"
            status = "pass" if (value < TOL if expect == "same" else value > TOL) else "FAIL"
        rows.append([spec["claim"], spec["source"], EXPECT.get(expect, "—"), measured, status])
    headers = ["check", "source", "expected", "measured", "status"]
    note = (f"computed checks: freshly initialised models (d 32, 4 heads), 8 tokens, worst of seeds {', '.join(map(str, SEEDS))}; "
            f"record checks: preset {preset}, seeds {','.join(map(str, table.seeds))}, records under {out}/runs "
            f"({STALE} = made with settings the registry no longer gives); source: {table.source}")
    return {"headers": headers, "rows": rows, "note": note, "csv": [dict(zip(headers, r)) for r in rows]}


def checks_summary(table, out: Path, preset: str) -> str:
    """For --list: how many checks of each kind, and how many record checks have records."""
    specs = check_specs(table)
    computed = sum("compute" in s for s in specs)
    record = [s for s in specs if "records" in s]
    have = sum(_record_check(s, table, out, preset)[1] != "missing records" for s in record)
    missing = len(specs) - computed - len(record)
    return f"{computed} computed, {have}/{len(record)} recorded, {missing} n/i"  # n/i: not implemented


# ---- claims over a results table's cells ----------------------------------------------------

RULE = ("per pair, a one-sided Welch t-test of A beating B over {over} (H1: mean_A > mean_B, < where lower is better; "
        "a paired bootstrap over seeds, then examples, where both cells have per-example outcomes on the same examples), "
        "the effect Δ = mean_A - mean_B with its 95% CI (Welch-Satterthwaite); a claim holds when every pair has p < 0.05 "
        "(intersection-union), does not hold when some pair is significant the other way after Holm's correction over "
        "the claim's pairs, and is inconclusive otherwise; a pair with < 2 values a side, or whose cells are both at chance "
        "(~), has no test; cells: mean ± 95% t-interval half-width (n); paper = the same test on its printed mean ± std {paper}")
RATIO_RULE = ("A costs <= r x B: Welch t on the logarithms of the timed repeats, H1: mean log A - mean log B < log r; "
              "ratio = geometric mean of A / of B with its 95% CI; inconclusive when the claim's premise (halting depth "
              "below a bound) is absent; paper: its means only, no spread printed")


def _p_text(p: float, label: str = "p") -> str:
    return f"{label} < 0.001" if p < 0.001 else f"{label} = {p:.3f}"


def test_text(t: stats.PairTest, digits: int, over: str = "seeds", ratio_to: float | None = None, reverse: float | None = None) -> str:
    """The effect, its 95% CI, the p-value (``reverse``: the Holm-adjusted p against the claim
    instead), n per side and the test."""
    p = _p_text(t.p) if reverse is None else _p_text(reverse, "reverse p (Holm)")
    n = f"n {t.n[0]} vs {t.n[1]} {over}"
    if ratio_to is not None:
        return f"ratio {t.effect:.2f} [95% CI {t.ci[0]:.2f}, {t.ci[1]:.2f}] vs ≤ {ratio_to:g}, {p}, {n}, {t.test}"
    f = f"{{:+.{digits}f}}"
    return f"Δ {f.format(t.effect)} [95% CI {f.format(t.ci[0])}, {f.format(t.ci[1])}], {p}, {n}, {t.test}"


def _cell_text(row: str, values: list[float], digits: int) -> str:
    if not values:
        return f"{row} — (0)"
    m, half = stats.mean_ci(values)
    return f"{row} {m:.{digits}f}" + ("" if half is None else f" ± {half:.{digits}f}") + f" ({len(values)})"


def both_at_chance(majority_a: float, majority_b: float, digits: int) -> str:
    """Why a pair of cells at chance has no test, with their majority-class shares."""
    shares = " / ".join(dict.fromkeys(f"{m:.{digits}f}%" for m in (majority_a, majority_b)))
    return f"both at chance (majority {shares}): no test"


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
    numbers = {"effect": None if t is None else t.effect, "ci_low": None if t is None else t.ci[0],
               "ci_high": None if t is None else t.ci[1], "p": None if t is None else (p_rev[i] if verdict == FAILS else t.p),
               "n": "" if t is None else f"{t.n[0]} vs {t.n[1]}", "test": "" if t is None else t.test}
    return verdict, decided, numbers


def _paper_test(a, b, claim, seeds: int | None):
    """(test or None, why none) on the paper's printed (mean, std or None) pair."""
    if a is None or b is None:
        return None, "not reported"
    if claim.ratio_at_most is not None or a[1] is None or b[1] is None:
        return None, "no spread printed"
    if not seeds:
        return None, "the paper's number of runs is not given (paper_seeds)"
    return stats.welch_from_stats(a, b, seeds, claim.lower_is_better), ""


def run_claims(table, values: dict, depths: dict | None = None, over: str = "seeds", at_chance: dict | None = None,
               outcomes: dict | None = None) -> dict:
    """Each claim of a results table judged on ``values`` ({(row label, column label): (per-seed
    values in display units, stale)}) and on the paper's numbers. Comparisons naming a row the
    table no longer has (``--models``) are left out; a claim left with none is not shown.
    ``depths``: {(row, column): mean halting depth} for ratio claims' premises (cost tables);
    ``over``: what the values are samples of (seeds, or a cost table's timed repeats);
    ``at_chance``: {(row, column): majority-class share} of the cells at chance (build's);
    ``outcomes``: {(row, column): [per-seed {"index", "correct"}, ...]} where every seed has
    per-example outcomes (then a pair of such cells on the same examples is tested paired)."""
    at_chance, outcomes = at_chance or {}, outcomes or {}
    digits = 2 if table.unit == "min" else 1
    paper = {(r.label, c.label): p for r in table.rows for c, p in zip(table.columns, r.paper)}
    seeds = getattr(table, "paper_seeds", None)
    rows, csv_rows = [], []
    for claim in table.claims:
        pairs = [p for p in claim.comparisons if p.better in values and p.than in values]
        if not pairs:
            continue
        ours, ours_text, theirs, theirs_text = [], [], [], []
        ratio = claim.ratio_at_most
        for p in pairs:
            (ra, ca), (rb, cb) = p.better, p.than
            where = ca if ca == cb else f"{ca} vs {cb}"
            va, stale_a = values[p.better]
            vb, stale_b = values[p.than]
            mark = f" {STALE}" if stale_a or stale_b else ""
            text = f"{_cell_text(ra, va, digits)} vs {_cell_text(rb, vb, digits)} on {where}{mark}"
            test, why = None, ""
            if ratio is not None:
                depth = (depths or {}).get(p.better)
                if claim.halt_depth_below is not None and (depth is None or depth >= claim.halt_depth_below):
                    said = "not measured" if depth is None else f"{depth:.2f} >= {claim.halt_depth_below:g}"
                    why = f"premise absent: halting depth {said}"
                else:
                    test = stats.ratio_test(va, vb, ratio)
                    if depth is not None:
                        text += f" (halting depth {depth:.2f})"
            elif p.better in at_chance and p.than in at_chance:
                why = both_at_chance(at_chance[p.better], at_chance[p.than], digits)
            elif p.better in outcomes and p.than in outcomes and (pair := stats.aligned_outcomes(outcomes[p.better], outcomes[p.than])):
                scale = 100.0 if table.unit == "%" else 1.0
                test = stats.paired_bootstrap(pair[0] * scale, pair[1] * scale, claim.lower_is_better)
            else:
                test = stats.welch(va, vb, claim.lower_is_better)
            if test is None and not why:
                why = f"n = {len(va)} vs {len(vb)} (< 2 {over} a side): no test"
            ours.append(test)
            ours_text.append(f"{text}: {why}" if why else text)
            ptest, pwhy = _paper_test(paper.get(p.better), paper.get(p.than), claim, seeds)
            theirs.append(ptest)
            theirs_text.append(f"{ra} vs {rb} on {where}" + (f": {pwhy}" if pwhy else ""))
        verdict, why, numbers = _aggregate(ours, ours_text, digits, over, ratio)
        if all(t is None for t in theirs):
            reasons = {text.rpartition(": ")[2] for text in theirs_text}
            pverdict = "n/r" if reasons == {"not reported"} else next(iter(sorted(reasons - {"not reported"})))
            pwhy = pverdict
        else:
            pverdict, pwhy, _ = _aggregate(theirs, theirs_text, digits, f"runs (paper_seeds {seeds})", None)
        rows.append([claim.text, claim.source, verdict, why, pverdict])
        csv_rows.append({"claim": claim.text, "source": claim.source, "ours": verdict, "why": why, **numbers,
                         "paper": pverdict, "paper_why": pwhy})
    headers = ["claim", "source", "ours", "why", "paper"]
    paper_rule = (f"and the paper's {seeds} runs per cell" if seeds else "(the paper's number of runs not given: no test)")
    rule = RULE.format(over=over, paper=paper_rule)
    if any(c.ratio_at_most is not None for c in table.claims):
        rule += "; ratio claims: " + RATIO_RULE
    return {"headers": headers, "rows": rows, "csv": csv_rows, "rule": rule}
