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

A record check (``expect: at_least_baseline``) is the same one-sided Welch test of the model
against the baseline over seeds: holds when the model is significantly above, does not hold
when it is significantly below, inconclusive otherwise. Given the stale check's answer
(bench/report/stale.py), a side whose records the registry no longer gives is marked † with the
changed settings.

``ChecksTable`` is the kind: it loads the ``checks`` list, names the models and tasks they read,
plans the runs the record checks read (``--run``) and builds one line per check (no claims).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..config import parse_overrides
from ..errors import UserError
from ..schema import Schema
from . import stats
from .cells import CHANCE, STALE, at_chance, cell_records, chance_level, record_value
from .claims import both_at_chance, cell_text, test_text
from .stats import FAILS, HOLDS, UNSURE
from .table_kind import TableKind

TOL = 1e-4
ROUNDING = 1e-6  # a change below this is printed as "< 1e-6": float rounding, not a property
SIZES = {"d_model": 32, "n_heads": 4, "d_ff": 64, "dropout": 0.0}
VOCAB, LENGTH, SEEDS = 16, 8, (0, 1, 2)
EXPECT = {
    "same": "same (max abs Δ < 1e-4)",
    "differs": "differs (abs Δ > 1e-4)",
    "at_least_baseline": "model above baseline (one-sided Welch, p < 0.05)",
}


@dataclass
class CheckEntry(Schema):
    claim: str
    source: str
    compute: dict | None = None
    records: dict | None = None
    status: str | None = None
    expect: Literal["same", "differs", "at_least_baseline"] | None = None


@dataclass
class ComputeEntry(Schema):
    test: str
    model: str
    causal: bool
    params: dict | None = None


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


def record_runs(table) -> list[tuple[str, str, list[str]]]:
    """(model, task, overrides) of both sides of every record check: the runs whose records it reads."""
    return [
        (model, s["records"]["task"], [])
        for s in check_specs(table)
        if "records" in s
        for model in (s["records"]["model"], s["records"]["baseline"])
    ]


def _record_check(spec: dict, table, out: Path, preset: str, stale: dict | None = None):
    """(measured text, status) for model vs baseline on one split (a one-sided Welch test over
    seeds, stats.welch); with the stale check's answer (``stale``: {run: {seed: the changed
    settings}}, bench/report/stale.py), records made with settings the registry no longer gives
    are marked as in results tables."""
    r = spec["records"]
    per_side, texts, majorities = [], [], []
    for model in (r["model"], r["baseline"]):
        ok = [x for x in cell_records(out, model, r["task"], preset, [], table.seeds) if x.get("status") == "ok"]
        values = [100 * v for v in (record_value(x, r["split"], r["metric"]) for x in ok) if v is not None]
        per_side.append(values)
        by_seed = (stale or {}).get((model, r["task"], ()), {})
        whys = sorted({by_seed[x["seed"]] for x in ok if by_seed.get(x["seed"])})
        majority = chance_level(ok, r["split"], r["metric"]) if values else None
        majorities.append(majority if majority and at_chance(sum(values) / len(values) / 100, majority) else None)
        mark = f" {STALE} ({'; '.join(whys)})" if whys else ""
        texts.append(cell_text(model, values, 1) + mark + (f" {CHANCE}" if majorities[-1] else ""))
    measured = " vs ".join(texts) + f" % {r['metric']} on {r['task']}:{r['split']}"
    if not all(per_side):
        return measured, "missing records"
    if all(majorities):
        return f"{measured}: {both_at_chance(*(m._replace(level=100 * m.level) for m in majorities), 1)}", UNSURE
    test = stats.welch(*per_side)
    if test is None:
        return f"{measured}: n = {len(per_side[0])} vs {len(per_side[1])} (< 2 seeds a side): no test", UNSURE
    status = HOLDS if test.p < stats.ALPHA else FAILS if test.p_reverse < stats.ALPHA else UNSURE
    return f"{measured}: {test_text(test, 1, reverse=test.p_reverse if status == FAILS else None)}", status


def run_checks(table, out: Path, preset: str, registry, stale: dict | None = None) -> dict:
    rows = []
    for spec in check_specs(table):
        expect = spec.get("expect")
        if "status" in spec:
            measured, status = "—", spec["status"]
        elif "records" in spec:
            measured, status = _record_check(spec, table, out, preset, stale)
        else:
            value = measure(spec["compute"], expect, registry)
            # below 1e-6 a change is float rounding, whose last digits vary with the CPU: printed as a bound
            said = "< 1e-6 (float rounding)" if value < ROUNDING else f"= {value:.2g}"
            measured = f"{'max' if expect == 'same' else 'min'} abs Δ {said}"
            status = "pass" if (value < TOL if expect == "same" else value > TOL) else "FAIL"
        rows.append([spec["claim"], spec["source"], EXPECT.get(expect, "—"), measured, status])
    headers = ["check", "source", "expected", "measured", "status"]
    note = (
        f"computed checks: freshly initialised models (d 32, 4 heads), 8 tokens, worst of seeds {', '.join(map(str, SEEDS))}; "
        f"record checks: preset {preset}, seeds {','.join(map(str, table.seeds))}, records under {out}/runs "
        f"({STALE} = made with settings the registry no longer gives); source: {table.source}"
    )
    return {"headers": headers, "rows": rows, "note": note, "csv": [dict(zip(headers, r)) for r in rows]}


def checks_summary(table, out: Path, preset: str) -> str:
    """For --list: how many checks of each kind, and how many record checks have records."""
    specs = check_specs(table)
    computed = sum("compute" in s for s in specs)
    record = [s for s in specs if "records" in s]
    have = sum(_record_check(s, table, out, preset)[1] != "missing records" for s in record)
    missing = len(specs) - computed - len(record)
    return f"{computed} computed, {have}/{len(record)} recorded, {missing} n/i"  # n/i: not implemented


# ---- the kind -------------------------------------------------------------------------------


class ChecksTable(TableKind):
    """A table of checks (the module docstring): one line per check, no cells and no claims."""

    name = "checks"

    def load(self, table, spec, raw, preset, where):
        table.checks = list(spec.checks or [])
        if not table.checks:
            raise UserError(f"{where}: a checks table needs a non-empty 'checks' list")

    def names(self, table):
        specs = check_specs(table)
        return [m for s in specs for m in s.get("models", [])], [t for s in specs for t in s.get("tasks", [])]

    def check_overrides(self, table, registry, preset, overrides):
        parse_overrides(overrides)

    def runs(self, table, out, preset):
        return record_cells(table)

    def record_runs(self, table, out, preset):
        return record_runs(table)

    def build(self, table, registry, preset, out, stem, stale=None):
        return run_checks(table, out, preset, registry, stale)

    def summary(self, table, out, stale=None):
        return checks_summary(table, out, table.preset)
