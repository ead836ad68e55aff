"""Families compared at equal budgets: each family's width chosen so that its parameter count, its
training FLOPs per token or its streaming state matches the Transformer's at given multiples
(`bench compare --budget params|flops|state --at 1x,2x,4x`), the accuracy of those runs against
the budget (``plot``, Zoology's figure), and the state column of `bench compare --state`.

What is matched, each measured on the model built as `bench run` builds it (fresh weights, CPU):

* params: every parameter of the model with the task's head (the record's ``param_count``);
* flops: the FLOPs of one training step (bench/cost/flops.py) on a batch of one sequence at the
  task's longest training length, divided by that length;
* state: the bytes of the streaming state for one stream after the task's longest test length
  (bench/runner/stream_state.py).

``width`` is Zoology's sweep instead of a match: every family at the given d_model values (d_ff in
proportion), its state bytes measured there, so that accuracy can be drawn against state size.

The reference is the Transformer at the preset's width; a family's width is its ``d_model`` (a
multiple of its ``n_heads``) with ``d_ff`` scaled in proportion, searched from the preset's width
by doubling or halving until the target is bracketed, then by bisection over the multiples of
``n_heads`` (every figure grows with the width), up to ``WIDTH_LIMIT`` times the preset's width.
The width whose figure is nearest the target (in ratio) is chosen; it must be within ``TOLERANCE``.
Where no multiple of ``n_heads`` is (a small preset's coarse grid: d_model 40 and 48 bracketing
2x a smoke Transformer at 0.77x and 1.11x), ``d_ff`` is freed at the two bracketing widths and
bisected over (every figure that depends on it grows with it), the nearest of those chosen.
A chosen width is a pair of ``--set`` overrides (none where it is the preset's own), so budget
runs are runs of their own identity, found and trained like any other."""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import resolve_run
from .errors import UserError

BUDGETS = ("params", "flops", "state", "width")
BUDGET_TEXT = {
    "params": "parameters",
    "flops": "training FLOPs per token",
    "state": "streaming state bytes",
    "width": "streaming state bytes",
}
FIGURE = {"params": "params", "flops": "flops", "state": "state", "width": "state"}  # what each budget measures
REFERENCE = "transformer"
TOLERANCE = 0.10
WIDTH_LIMIT = 16  # widest width searched: this many times the preset's d_model
log = logging.getLogger(__name__)


def parse_budget(raw: str) -> str:
    if raw not in BUDGETS:
        raise UserError(f"--budget {raw!r}: choose params, flops, state or width")
    return raw


def parse_at(budget: str, raw: str | None) -> list[float]:
    """--at: multiples of the Transformer's figure, or (``--budget width``) the d_model values."""
    if budget != "width":
        return parse_multiples(raw)
    from .cost.common import parse_positive_ints

    if raw is None:
        raise UserError("--budget width needs --at with the d_model values, e.g. --at 32,64,128")
    return [float(d) for d in parse_positive_ints(raw, "at", "32,64,128")]


def parse_multiples(raw: str | None) -> list[float]:
    """``1x,2x,4x`` (or ``0.5x``) -> [1.0, 2.0, 4.0]; each a finite number > 0 followed by its x (a
    bare ``64`` could be meant as a d_model: it is refused with the two readings)."""
    items = [s.strip() for s in str(raw or "1x,2x,4x").split(",") if s.strip()]
    values = []
    for item in items:
        match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([xX]?)", item)
        value = float(match.group(1)) if match else float("nan")
        if not (math.isfinite(value) and value > 0):
            raise UserError(f"--at takes multiples of the Transformer's budget above 0, e.g. 1x,2x,4x; got {item!r}")
        if not match.group(2):
            raise UserError(
                f"--at {item}: a multiple of the Transformer's budget is written with its x ({item}x; e.g. --at 1x,2x,4x); "
                f"for the d_model {item}, use --budget width --at {item}"
            )
        values.append(value)
    if not values:
        raise UserError("--at takes multiples of the Transformer's budget, e.g. 1x,2x,4x")
    return list(dict.fromkeys(values))


def multiple_text(m: float) -> str:
    return f"{m:g}x"


@dataclass(frozen=True)
class Width:
    """One family at one multiple of the reference's budget: its width, the figure measured there,
    the ratio of that figure to the reference's, and the --set items that give the width."""

    model: str
    task: str
    multiple: float | None  # None: a --budget width row
    d_model: int
    d_ff: int | None
    value: float
    ratio: float
    overrides: tuple[str, ...]
    length: int | None = None  # the sequence length the figure was measured at (flops, state)

    @property
    def label(self) -> str:
        return f"{self.model} @{multiple_text(self.multiple)}" if self.multiple is not None else f"{self.model} d={self.d_model}"


class Meter:
    """The budget figure of a registry model at a width on one task (cached per (model, d_model))."""

    def __init__(self, registry, task: str, preset: str, overrides: list[str] | None, budget: str):
        from .cost import Setup
        from .runner.build import instantiate_task

        self.registry, self.task, self.preset = registry, task, preset
        self.budget = FIGURE[parse_budget(budget)]
        self.overrides = list(overrides or [])
        self.setup = Setup(task, preset, [1], batch=1, device="cpu", overrides=self.overrides)
        self.length = None
        if self.budget != "params":
            from .runner.stream_state import longest_test_length

            task_obj = instantiate_task(resolve_run(registry, REFERENCE, task, preset, self.overrides).task)
            self.length = longest_test_length(task_obj, None if self.budget == "state" else ["train"])
        self.cache: dict = {}

    def base(self, model: str) -> tuple[int, int | None, int]:
        """(d_model, d_ff or None, n_heads or 1) the preset gives ``model``."""
        params = resolve_run(self.registry, model, self.task, self.preset, self.overrides).model.params
        return params["d_model"], params.get("d_ff"), params.get("n_heads") or 1

    def d_ff(self, model: str, d_model: int) -> int | None:
        """``model``'s d_ff at ``d_model``: the preset's, scaled in proportion (None: it has none)."""
        d0, ff0, _ = self.base(model)
        return max(1, round(d_model * ff0 / d0)) if ff0 else None

    def width_sets(self, model: str, d_model: int, d_ff: int | None = None) -> tuple[str, ...]:
        """The --set items of ``model`` at ``d_model`` (and ``d_ff``, default: in proportion); none
        at the preset's width."""
        if d_model == self.base(model)[0] and d_ff is None:
            return ()
        ff = d_ff or self.d_ff(model, d_model)
        return (f"model.d_model={d_model}",) + ((f"model.d_ff={ff}",) if ff else ())

    def __call__(self, model: str, d_model: int, d_ff: int | None = None) -> float | None:
        """The figure at ``d_model`` (``d_ff``: default in proportion); None where the family
        cannot be built at that width."""
        key = (model, d_model, d_ff)
        if key not in self.cache:
            try:
                self.cache[key] = self._measure(model, list(self.width_sets(model, d_model, d_ff)))
            except UserError:
                if d_model == self.base(model)[0]:
                    raise  # the preset's own width: not a width problem
                self.cache[key] = None
        return self.cache[key]

    def _measure(self, model: str, sets: list[str]) -> float:
        from .cost import Row, random_batch, training_step
        from .cost.flops import step_flops
        from .models.base import StreamingUnsupported
        from .runner.stream_state import stream_state_bytes

        with torch.random.fork_rng(devices=[]):
            step = training_step(self.registry, Row(model, tuple(sets)), self.setup)
            if self.budget == "params":
                return float(sum(p.numel() for p in step.module.parameters()))
            if self.budget == "flops":
                batch = random_batch(step.task, 1, self.length, torch.device("cpu"), torch.Generator().manual_seed(0))
                return step_flops(step, batch) / self.length
            try:
                return float(stream_state_bytes(step.backbone, self.length))
            except StreamingUnsupported as exc:
                raise UserError(f"--budget state: {model} cannot stream ({exc}); leave it out or choose --budget params|flops") from None


def search_width(meter: Meter, model: str, target: float) -> tuple[int, int | None]:
    """(d_model, d_ff): the d_model (a multiple of n_heads, up to WIDTH_LIMIT x the preset's) whose
    figure is nearest ``target`` in ratio, d_ff None (in proportion); where none is within
    TOLERANCE, the d_ff nearest it at the bracketing widths (search_d_ff); else UserError."""
    d0, _, heads = meter.base(model)
    k_max = max(1, WIDTH_LIMIT * d0 // heads)

    def value(k: int) -> float | None:
        return meter(model, k * heads)

    def valid(k: int, lo: int, hi: int) -> int | None:  # the buildable k nearest k within [lo, hi]
        for j in sorted(range(lo, hi + 1), key=lambda j: (abs(j - k), j)):
            if value(j) is not None:
                return j
        return None

    k = max(1, d0 // heads)
    below = above = None  # buildable ks with figures below / at or above the target
    while True:  # bracket the target by halving or doubling
        if value(k) >= target:
            above = k
            nxt = None if below is not None or k == 1 else valid(k // 2, 1, k - 1)
        else:
            below = k
            nxt = None if above is not None or k >= k_max else valid(min(2 * k, k_max), k + 1, k_max)
        if nxt is None:
            break
        k = nxt
    while below is not None and above is not None and above - below > 1:  # bisection
        mid = valid((below + above) // 2, below + 1, above - 1)
        if mid is None:
            break
        if value(mid) >= target:
            above = mid
        else:
            below = mid
    best = min((k for k in (below, above) if k is not None), key=lambda k: abs(math.log(value(k) / target)))
    if abs(value(best) / target - 1) <= TOLERANCE:
        return best * heads, None
    freed = search_d_ff(meter, model, [k * heads for k in (below, above) if k is not None], target)
    if freed is not None:
        return freed
    reached = ", ".join(f"d_model={k * heads}: {value(k) / target:.2f}x the target" for k in (below, above) if k is not None)
    raise UserError(
        f"{model} cannot match the target {meter.budget} ({target:,.0f}) on {meter.task} within "
        f"{TOLERANCE:.0%} at any d_model from {heads} to {k_max * heads}, nor with d_ff freed ({reached}); "
        f"leave it out or change --at"
    )


def search_d_ff(meter: Meter, model: str, widths: list[int], target: float) -> tuple[int, int] | None:
    """(d_model, d_ff) within TOLERANCE of ``target``, d_model one of ``widths`` and d_ff bisected
    from 1 to WIDTH_LIMIT x its proportional value (the figure grows with d_ff); the nearest in
    ratio of those found, None where the family has no d_ff or none comes within TOLERANCE."""
    found = []
    for d in widths:
        ff0 = meter.d_ff(model, d)
        if not ff0 or meter(model, d, 1) is None:
            continue
        lo, hi = 1, WIDTH_LIMIT * ff0
        if meter(model, d, lo) > target or (meter(model, d, hi) or 0) < target:
            ends = [f for f in (lo, hi) if meter(model, d, f) is not None]
        else:
            while hi - lo > 1:  # figure(lo) <= target < figure(hi)
                mid = (lo + hi) // 2
                if (meter(model, d, mid) or math.inf) <= target:
                    lo = mid
                else:
                    hi = mid
            ends = [lo, hi]
        found += [(d, f) for f in ends]
    if not found:
        return None
    d, f = min(found, key=lambda df: abs(math.log(meter(model, *df) / target)))
    return (d, f) if abs(meter(model, d, f) / target - 1) <= TOLERANCE else None


def plan_budget(
    registry, models: list[str], task: str, preset: str, overrides: list[str] | None, budget: str, multiples: list[float]
) -> list[Width]:
    """Every model's width at every multiple of the reference Transformer's figure (at its preset
    width); with ``budget`` width, every model at the d_model values ``multiples``."""
    meter = Meter(registry, task, preset, overrides, budget)
    reference = meter(REFERENCE, meter.base(REFERENCE)[0])
    widths = []
    for model in models:
        if budget == "width":
            widths += [_at_width(meter, model, int(d), reference) for d in multiples]
            continue
        for m in multiples:
            d, free = search_width(meter, model, m * reference)
            ff, value = free or meter.d_ff(model, d), meter(model, d, free)
            widths.append(Width(model, task, m, d, ff, value, value / reference, meter.width_sets(model, d, free), meter.length))
            log.debug(
                f"bench: budget {budget} {multiple_text(m)} on {task}: {model} at d_model={d}"
                f"{f', d_ff={ff}' if ff else ''}: {value / reference:.3f}x the Transformer's"
            )
    return widths


def _at_width(meter: Meter, model: str, d: int, reference: float) -> Width:
    d0, _, heads = meter.base(model)
    meter(model, d0)  # a family that cannot stream says so here
    if d % heads or meter(model, d) is None:
        raise UserError(
            f"{model} cannot be built at d_model={d}"
            + (f" (a multiple of its n_heads={heads} is needed)" if d % heads else "")
            + "; choose other --at widths"
        )
    value = meter(model, d)
    return Width(model, meter.task, None, d, meter.d_ff(model, d), value, value / reference, meter.width_sets(model, d), meter.length)


def run_overrides(width: Width, overrides: list[str] | None) -> list[str]:
    """The --set items of a budget run: the user's, then the width's."""
    return [*(overrides or []), *width.overrides]


# ---- reports -----------------------------------------------------------------------------------
def load(out: Path, widths: list[Width], preset: str, overrides: list[str] | None) -> dict:
    """{(label, task): [record, ...]} of every width's runs."""
    from .records import overrides_tag
    from .report.cells import load_records

    found = {}
    for w in widths:
        recs = load_records(out, [w.model], [w.task], preset, overrides_tag(run_overrides(w, overrides)))
        found[(w.label, w.task)] = recs.get((w.model, w.task), [])
    return found


def _figure(value: float, budget: str) -> str:
    if FIGURE[budget] == "state":
        return _bytes(value)
    return f"{value / 1e6:,.3f} M" if value >= 1e5 else f"{value:,.0f}"


def _bytes(n: float) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def budget_table(widths: list[Width], records: dict, budget: str, stat: str = "mean") -> tuple[list[str], list[list[str]]]:
    """Rows = (family, multiple): its width, its figure and ratio to the Transformer's, then the
    leaderboard's cells (bench/report/leaderboard.py) of its runs."""
    from .report.leaderboard import table

    task = widths[0].task
    headers, rows = table(records, [w.label for w in widths], [task], stat=stat)
    name = {"params": "params", "flops": "FLOPs/token", "state": "state", "width": "state"}[budget]
    headers = [headers[0], "d_model", "d_ff", name, "x transformer", *headers[1:]]
    rows = [[row[0], w.d_model, w.d_ff or "", _figure(w.value, budget), f"{w.ratio:.3g}", *row[1:]] for w, row in zip(widths, rows)]
    return headers, rows


def drawn_metric(record: dict) -> str:
    """The metric a budget plot draws from a record: the first its task reports, else the primary."""
    return (record.get("report_metrics") or [record.get("primary_metric", "acc")])[0]


def plot(out: Path, preset: str, widths: list[Width], records: dict, budget: str) -> list[Path]:
    """Accuracy (each test split's reported metric: the records' first ``report_metrics``, e.g.
    flip-flop's last-read accuracy, else the primary metric) against the budget figure, one line
    per family, the mean over seeds with its 95% t interval (bench/report/stats.py: mean_ci), log x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report.stats import mean_ci

    task, length = widths[0].task, widths[0].length
    ok = {key: [r for r in recs if r.get("status") == "ok"] for key, recs in records.items()}
    first = next((r for recs in ok.values() for r in recs), None)
    if first is None:
        return []
    splits, metric = first.get("test_splits") or [], drawn_metric(first)
    fig, axes = plt.subplots(1, len(splits), figsize=(4.6 * len(splits), 3.8), squeeze=False)
    for ax, split in zip(axes[0], splits):
        for i, model in enumerate(dict.fromkeys(w.model for w in widths)):
            points = []
            for w in (w for w in widths if w.model == model):
                values = [r["metrics"].get(split, {}).get(metric) for r in ok.get((w.label, task), [])]
                values = [v for v in values if v is not None]
                if values:
                    mean, half = mean_ci(values)
                    points.append((w.value, mean, half or 0.0))
            if points:
                xs, ys, errs = zip(*sorted(points))
                # ten colours, then the same colours dashed with another marker: each family its own line
                ax.errorbar(
                    xs,
                    ys,
                    yerr=errs,
                    capsize=3,
                    label=model,
                    color=f"C{i % 10}",
                    marker="os^Dv"[i // 10 % 5],
                    linestyle=("-", "--")[i // 10 % 2],
                )
        ax.set_xscale("log")
        ax.set_xlabel(BUDGET_TEXT[budget] + (f" (after {length} tokens)" if FIGURE[budget] == "state" and length else ""))
        ax.set_ylabel(f"{split} {metric}")
        ax.set_title(f"{task} ({preset})")
        ax.grid(alpha=0.3, which="both")
    axes[0][-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    folder = Path(out) / "leaderboards" / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{preset}--{task}--budget-{budget}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def state_column(registry, records: dict, models: list[str], task: str, preset: str, overrides=None) -> tuple[str, list[str]]:
    """`bench compare --state`: the header and one cell per model, the bytes of its streaming state
    after the task's longest test length, from its records' ``stream_state`` (measured now, at the
    registry's settings, for records made before it was recorded: marked *)."""
    cells, lengths = [], set()
    for model in models:
        recs = [r for r in records.get((model, task), []) if r.get("status") == "ok"]
        state = next((r["stream_state"] for r in recs if isinstance(r.get("stream_state"), dict)), None)
        mark = ""
        if state is None and recs:
            from .cost.state import model_state  # the model is built only for a record that lacks its state

            state, mark = model_state(registry, model, task, preset, overrides), " *"
        if state is None:
            cells.append("—")
            continue
        lengths.add(state.get("length"))
        cells.append("no streaming" if state.get("bytes") is None else _bytes(state["bytes"]) + mark)
    at = "/".join(str(n) for n in sorted(x for x in lengths if x is not None))
    return f"{task} state" + (f" @{at}" if at else ""), cells
