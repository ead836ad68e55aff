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
judged on our per-seed values by one rule (``RULE``): for "A beats B" on a cell pair, with
d = mean_A - mean_B (mean_B - mean_A where lower is better) and s = max(std_A, std_B) (sample
std over seeds):

    holds          d >  s         (both cells with >= 2 seeds)
    does not hold  d < -s
    inconclusive   |d| <= s, or a cell with fewer than 2 seeds

A pair whose two cells are both at chance (``~`` in the table: mean accuracy within 2 standard
errors of the split's majority-class share, bench/report/cells.py:at_chance) is inconclusive,
whatever d: the difference of two cells at chance is noise.

A claim over several pairs ("each GUT ablation loses to GUT") holds when every pair holds, does
not hold when any pair does not, and is inconclusive otherwise. The same rule on the paper's
printed mean ± std says whether the paper's own numbers support the claim as encoded.

A ratio claim (``ratio_at_most: r``, e.g. "GUT with halting at bound 40 costs <= 0.6x no-halt"),
judged by ``RATIO_RULE`` on the per-seed (or, in a cost table, per-repeat) values a of the better
cell and b of the other: the ratio is median(a) / median(b), its range [min(a) / max(b),
max(a) / min(b)] (the worst pairings the spread allows):

    holds          max(a) / min(b) <= r
    does not hold  min(a) / max(b) >  r
    inconclusive   otherwise, or (``halt_depth_below: d``) when the better cell's mean halting
                   depth is >= d: the claim's premise ("when the model halts early") is absent
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from ..errors import UserError
from ..schema import Schema
from ..stats import mean_std
from .cells import STALE, cell_records, current_config, record_value, stale
from .leaderboard import mean_std_percent

TOL = 1e-4
SIZES = {"d_model": 32, "n_heads": 4, "d_ff": 64, "dropout": 0.0}
VOCAB, LENGTH, SEEDS = 16, 8, (0, 1, 2)
EXPECT = {"same": "same (max abs Δ < 1e-4)", "differs": "differs (abs Δ > 1e-4)", "at_least_baseline": "model ≥ baseline"}


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
    """(measured text, status) for model vs baseline on one split; with a registry, records made
    with settings the registry no longer gives are marked as in results tables."""
    r = spec["records"]
    means, texts = [], []
    for model in (r["model"], r["baseline"]):
        ok = [x for x in cell_records(out, model, r["task"], preset, [], table.seeds) if x.get("status") == "ok"]
        values = [v for v in (record_value(x, r["split"], r["metric"]) for x in ok) if v is not None]
        means.append(sum(values) / len(values) if values else None)
        now = current_config(registry, model, r["task"], preset, []) if registry is not None and ok else None
        whys = sorted({why for why in (stale(x, now) for x in ok) if why}) if now else []
        texts.append(f"{model} {mean_std_percent(values)} ({len(values)})" + (f" {STALE} ({'; '.join(whys)})" if whys else ""))
    measured = " vs ".join(texts) + f" % {r['metric']} on {r['task']}:{r['split']}"
    if None in means:
        return measured, "missing records"
    return measured, "holds" if means[0] >= means[1] else "does not hold"


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
            measured = f"{'max' if expect == 'same' else 'min'} abs Δ = {value:.2g}"
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

HOLDS, FAILS, UNSURE = "holds", "does not hold", "inconclusive"
RULE = ("A beats B when mean_A - mean_B > max(std_A, std_B) (sample std over seeds, >= 2 seeds each); does not hold when "
        "mean_B - mean_A > max(std_A, std_B); inconclusive otherwise; over several pairs: holds if every pair holds, "
        "does not hold if any does not; a pair whose cells are both at chance (~) is inconclusive; "
        "paper = the same rule on the paper's mean ± std")


def compare(mean_a: float, mean_b: float, spread: float, lower_is_better: bool = False, digits: int = 1) -> tuple[str, str]:
    """(verdict, why) for "A beats B" from the two means and the spread s they must differ by."""
    d = mean_b - mean_a if lower_is_better else mean_a - mean_b
    f = f"{{:.{digits}f}}"
    if d > spread:
        return HOLDS, f"Δ {d:+.{digits}f} > {f.format(spread)}"
    if d < -spread:
        return FAILS, f"Δ {d:+.{digits}f} < -{f.format(spread)}"
    return UNSURE, f"|Δ| {f.format(abs(d))} ≤ {f.format(spread)}"


def judge(a: list[float], b: list[float], lower_is_better: bool = False, digits: int = 1) -> tuple[str, str]:
    """(verdict, why) for "A beats B" from the per-seed values of the two cells."""
    if len(a) < 2 or len(b) < 2:
        return UNSURE, f"n = {len(a)} vs {len(b)} (< 2 seeds)"
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    return compare(ma, mb, max(sa, sb), lower_is_better, digits)


def judge_paper(a, b, lower_is_better: bool = False, digits: int = 1) -> tuple[str, str]:
    """The rule on the paper's (mean, std or None) pair; without a printed std, means only."""
    if a is None or b is None:
        return "n/r", "not reported"
    if a[1] is None or b[1] is None:
        verdict, why = compare(a[0], b[0], 0.0, lower_is_better, digits)
        return verdict, why + " (means only: no spread printed)"
    return compare(a[0], b[0], max(a[1], b[1]), lower_is_better, digits)


RATIO_RULE = ("A costs <= r x B holds when max(A) / min(B) <= r (even the worst pairing of the values: timed repeats in a cost "
              "table, seeds otherwise), does not hold when min(A) / max(B) > r, inconclusive otherwise or when the claim's "
              "premise (halting depth below a bound) is absent; ratio shown = median(A) / median(B); paper = its means' ratio")


def judge_ratio(a: list[float], b: list[float], at_most: float, depth: float | None = None,
                depth_below: float | None = None) -> tuple[str, str]:
    """(verdict, why) for "A / B <= at_most" on the values of the two cells (RATIO_RULE)."""
    if not a or not b:
        return UNSURE, f"n = {len(a)} vs {len(b)} (a cell has no value)"
    if depth_below is not None and (depth is None or depth >= depth_below):
        said = "not measured" if depth is None else f"{depth:.2f} >= {depth_below:g}"
        return UNSURE, f"premise absent: halting depth {said}"
    lo, hi, ratio = min(a) / max(b), max(a) / min(b), statistics.median(a) / statistics.median(b)
    depth_text = "" if depth is None else f"; halting depth {depth:.2f}" + ("" if depth_below is None else f" < {depth_below:g}")
    text = f"ratio {ratio:.2f} (range {lo:.2f}-{hi:.2f})"
    if hi <= at_most:
        return HOLDS, f"{text} ≤ {at_most:g}{depth_text}"
    if lo > at_most:
        return FAILS, f"{text} > {at_most:g}{depth_text}"
    return UNSURE, f"{text}: the range straddles {at_most:g}{depth_text}"


def judge_paper_ratio(a, b, at_most: float) -> tuple[str, str]:
    if a is None or b is None or not b[0]:
        return "n/r", "not reported"
    ratio = a[0] / b[0]
    return (HOLDS if ratio <= at_most else FAILS), f"ratio {ratio:.2f} {'≤' if ratio <= at_most else '>'} {at_most:g} (means)"


def _aggregate(results: list[tuple[str, str]]) -> tuple[str, str]:
    """One verdict over a claim's pairs, with the first pair that decides it."""
    if len(results) == 1:
        return results[0]
    verdicts = [v for v, _ in results]
    k, held, failed = len(results), verdicts.count(HOLDS), verdicts.count(FAILS)
    if held == k:
        return HOLDS, f"all {k} pairs hold"
    counts = f"of {k} pairs {held} hold, {failed} do not, {k - held - failed} inconclusive"
    first = next(why for v, why in results if v == (FAILS if failed else v) and v != HOLDS)
    return (FAILS if failed else UNSURE), f"{counts}; e.g. {first}"


def _cell_text(row: str, values: list[float], digits: int) -> str:
    if not values:
        return f"{row} — (0)"
    m, s = mean_std(values)
    return f"{row} {m:.{digits}f}" + ("" if s is None else f" ± {s:.{digits}f}") + f" ({len(values)})"


def both_at_chance(majority_a: float, majority_b: float, digits: int) -> tuple[str, str]:
    """(inconclusive, why) for a pair of cells at chance, with their majority-class shares."""
    shares = " / ".join(dict.fromkeys(f"{m:.{digits}f}%" for m in (majority_a, majority_b)))
    return UNSURE, f"both at chance (majority {shares})"


def run_claims(table, values: dict, depths: dict | None = None, over: str = "seeds", at_chance: dict | None = None) -> dict:
    """Each claim of a results table judged on ``values`` ({(row label, column label): (per-seed
    values in display units, stale)}) and on the paper's numbers. Comparisons naming a row the
    table no longer has (``--models``) are left out; a claim left with none is not shown.
    ``depths``: {(row, column): mean halting depth} for ratio claims' premises (cost tables);
    ``over``: what the values are samples of (seeds, or a cost table's timed repeats);
    ``at_chance``: {(row, column): majority-class share} of the cells at chance (build's)."""
    at_chance = at_chance or {}
    digits = 2 if table.unit == "min" else 1
    paper = {(r.label, c.label): p for r in table.rows for c, p in zip(table.columns, r.paper)}
    rows = []
    for claim in table.claims:
        pairs = [p for p in claim.comparisons if p.better in values and p.than in values]
        if not pairs:
            continue
        ours, theirs = [], []
        for p in pairs:
            (ra, ca), (rb, cb) = p.better, p.than
            where = ca if ca == cb else f"{ca} vs {cb}"
            va, stale_a = values[p.better]
            vb, stale_b = values[p.than]
            if claim.ratio_at_most is not None:
                verdict, why = judge_ratio(va, vb, claim.ratio_at_most, (depths or {}).get(p.better), claim.halt_depth_below)
            elif p.better in at_chance and p.than in at_chance:
                verdict, why = both_at_chance(at_chance[p.better], at_chance[p.than], digits)
            else:
                verdict, why = judge(va, vb, claim.lower_is_better, digits)
            mark = f" {STALE}" if stale_a or stale_b else ""
            ours.append((verdict, f"{_cell_text(ra, va, digits)} vs {_cell_text(rb, vb, digits)} on {where}{mark}: {why}"))
            if claim.ratio_at_most is not None:
                pv, pwhy = judge_paper_ratio(paper.get(p.better), paper.get(p.than), claim.ratio_at_most)
            else:
                pv, pwhy = judge_paper(paper.get(p.better), paper.get(p.than), claim.lower_is_better, digits)
            theirs.append((pv, f"{ra} vs {rb} on {where}: {pwhy}"))
        (verdict, why), (pverdict, _) = _aggregate(ours), _aggregate(theirs)
        rows.append([claim.text, claim.source, verdict, why, pverdict])
    headers = ["claim", "source", "ours", "why", "paper"]
    rule = RULE if over == "seeds" else RULE.replace("sample std over seeds, >= 2 seeds each", f"sample std over {over}, >= 2 each")
    if any(c.ratio_at_most is not None for c in table.claims):
        rule += "; ratio claims: " + RATIO_RULE
    return {"headers": headers, "rows": rows, "csv": [dict(zip(headers, r)) for r in rows], "rule": rule}
