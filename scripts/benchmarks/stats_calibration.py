"""How often bench's paired test says "holds" for two equal models (false holds), and for a model
2 seed-sds better (power), over a grid of seeds a side, seed sd, test examples and how the
examples are shared; writes the table to results/stats_calibration.md.

The simulated outcomes (``simulate``): a test set of n examples, example j correct with
probability p_j ~ Beta(3.5, 1.5) (mean 0.7), each model with its own per-example deviation
(N(0, 0.1), clipped to [0, 1]: two equal models that still differ example by example, so the
choice of test examples moves their difference), each seed of a model a shift N(0, sd points) of
every example's probability (what a training seed changes), each outcome a Bernoulli draw.
``shared``: every seed of both sides scores the same n examples (bench's tables: one test set per
split); ``independent``: each seed its own n examples. Under the alternative A's seeds are
shifted up by 2 sd points.

Each cell judges ``reps`` simulated pairs by bench's own code (bench/report/stats.py:
paired_t_arrays, one-sided at alpha 0.05, the rule of a one-pair claim) and, for comparison,
by Welch's t on the seed means (stats.welch_arrays); the Monte-Carlo standard error of a rate r
is sqrt(r (1 - r) / reps).

    OMP_NUM_THREADS=1 nice python scripts/benchmarks/stats_calibration.py             # the full grid
    python scripts/benchmarks/stats_calibration.py --reps 500 --out /tmp/cal.md        # quicker, noisier
    python scripts/benchmarks/stats_calibration.py --cells 5v5:0.5:100:shared --reps 40000 --seed 1 \
        --out results/stats_calibration_recheck.md                                     # some cells again, more pairs

``--cells`` (``AvB:sd:examples:sharing``, comma-separated) runs those cells only: a cell above 5% in
the grid is checked again with fresh draws (another ``--seed``) and more pairs, an estimate that the
selection of the cell does not bias.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from bench.report import stats  # noqa: E402

SEEDS = [(2, 2), (3, 3), (5, 5), (10, 10), (2, 10)]  # seeds of A, of B
SDS = [0.5, 2.5, 8.0]  # seed sd, accuracy points
EXAMPLES = [100, 1000, 5000]
SHARING = ["shared", "independent"]
CHUNK = 4_000_000  # outcomes drawn at once per side


#: p_j's distribution, Beta(3.5, 1.5), as its quantiles at 4,096 equally spaced levels: a draw is a
#: table lookup (a beta draw per example per seed would make the grid several times slower)
DIFFICULTY = sps.beta(3.5, 1.5).ppf((np.arange(4096) + 0.5) / 4096).astype(np.float32)


def simulate(rng: np.random.Generator, reps: int, seeds: tuple[int, int], n: int, sd: float, shared: bool,
             shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) 0/1 outcomes, (reps, seeds_A, n) and (reps, seeds_B, n) int8, of the model above;
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


def holds(rng: np.random.Generator, reps: int, seeds: tuple[int, int], n: int, sd: float, shared: bool,
          shift: float = 0.0) -> tuple[int, int]:
    """(pairs that hold by the paired test, by Welch on the seed means) of ``reps`` simulated pairs."""
    chunk = max(1, CHUNK // (max(seeds) * n))
    paired = welch = 0
    for start in range(0, reps, chunk):
        a, b = simulate(rng, min(chunk, reps - start), seeds, n, sd, shared, shift)
        paired += int((stats.paired_t_arrays(a, b)[3] < stats.ALPHA).sum())
        ma, mb = a.mean(-1), b.mean(-1)  # (reps, seeds): the seed means
        p = stats.welch_arrays(ma.mean(-1), ma.var(-1, ddof=1), seeds[0], mb.mean(-1), mb.var(-1, ddof=1), seeds[1])[3]
        welch += int((p < stats.ALPHA).sum())
    return paired, welch


def cell_key(seeds: tuple[int, int], sd: float, n: int, sharing: str) -> str:
    """A cell's name for --cells: 5v5:0.5:100:shared."""
    return f"{seeds[0]}v{seeds[1]}:{sd:g}:{n}:{sharing}"


def grid(reps: int, power_reps: int, seed: int = 0, only: set[str] | None = None):
    """One row per cell (those named in ``only``, else all): seeds, sd, n, sharing, false holds and
    power of both tests (fractions)."""
    rows = []
    for s, seeds in enumerate(SEEDS):
        for d, sd in enumerate(SDS):
            for e, n in enumerate(EXAMPLES):
                for h, sharing in enumerate(SHARING):
                    if only is not None and cell_key(seeds, sd, n, sharing) not in only:
                        continue
                    rng = np.random.default_rng([seed, s, d, e, h])
                    fp = holds(rng, reps, seeds, n, sd, sharing == "shared")
                    power = holds(rng, power_reps, seeds, n, sd, sharing == "shared", shift=2 * sd)
                    rows.append({"seeds": seeds, "sd": sd, "n": n, "sharing": sharing, "fp": fp[0] / reps,
                                 "fp_welch": fp[1] / reps, "power": power[0] / power_reps, "power_welch": power[1] / power_reps})
                    print(f"{seeds} sd {sd} n {n} {sharing}: false holds {rows[-1]['fp']:.3f} (Welch {rows[-1]['fp_welch']:.3f}), "
                          f"power {rows[-1]['power']:.3f}", flush=True)
    return rows


def report(rows: list[dict], reps: int, power_reps: int, command: str) -> str:
    """The Markdown table with its heading, the worst cell named."""
    from tabulate import tabulate

    se = math.sqrt(stats.ALPHA * (1 - stats.ALPHA) / reps)
    worst = max(rows, key=lambda r: (r["fp"], -r["power"]))
    over = [r for r in rows if r["fp"] > stats.ALPHA]
    beyond = [r for r in rows if r["fp"] > stats.ALPHA + 2 * se]

    def cell(r):
        return f"{r['seeds'][0]} vs {r['seeds'][1]} seeds, sd {r['sd']:g}, {r['n']:,} examples, {r['sharing']}"

    table = tabulate([[f"{r['seeds'][0]} vs {r['seeds'][1]}", f"{r['sd']:g}", f"{r['n']:,}", r["sharing"], f"{100 * r['fp']:.2f}",
                       f"{100 * r['power']:.1f}", f"{100 * r['fp_welch']:.2f}", f"{100 * r['power_welch']:.1f}"] for r in rows],
                     headers=["seeds A vs B", "seed sd (points)", "examples", "examples are", "false holds %",
                              "power % at 2 sd", "Welch on seed means: false holds %", "Welch: power %"],
                     tablefmt="github", disable_numparse=True)
    return "\n".join([
        "# Calibration of the paired test (bench/report/stats.py: paired_t)",
        "",
        f"`{command}`",
        "",
        f"Two equal models (false holds) and A 2 seed-sds better (power), {reps:,} simulated pairs per cell for the false-holds "
        f"rate (Monte-Carlo SE {100 * se:.2f} points at a true 5%) and {power_reps:,} for power (SE at most "
        f"{100 * math.sqrt(0.25 / power_reps):.1f} points); one-sided at alpha {stats.ALPHA}, the rule of a one-pair claim. "
        "The simulation: scripts/benchmarks/stats_calibration.py's docstring.",
        "",
        f"Worst cell: {cell(worst)}: false holds {100 * worst['fp']:.2f}%, power {100 * worst['power']:.1f}%. "
        f"Cells above 5%: {len(over)} of {len(rows)}; above 5% by more than 2 Monte-Carlo SEs: {len(beyond)}. "
        f"Highest false-holds rate of Welch on the seed means: {100 * max(r['fp_welch'] for r in rows):.2f}%.",
        "",
        table,
        "",
    ])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=2000, help="simulated null pairs per cell (default 2000)")
    p.add_argument("--power-reps", type=int, default=500, help="simulated pairs per cell under the alternative (default 500)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("results/stats_calibration.md"))
    p.add_argument("--cells", help="only these cells, e.g. 5v5:0.5:100:shared,10v10:2.5:1000:shared (default: the whole grid)")
    args = p.parse_args()
    if args.reps < 1 or args.power_reps < 1:
        print("stats_calibration: --reps and --power-reps must be >= 1", file=sys.stderr)
        return 2
    only = set(args.cells.split(",")) if args.cells else None
    known = {cell_key(a, sd, n, h) for a in SEEDS for sd in SDS for n in EXAMPLES for h in SHARING}
    if only is not None and only - known:
        print(f"stats_calibration: --cells: no cell {sorted(only - known)[0]!r} in the grid; e.g. {sorted(known)[0]}", file=sys.stderr)
        return 2
    rows = grid(args.reps, args.power_reps, args.seed, only)
    command = " ".join(["python", "scripts/benchmarks/stats_calibration.py", *sys.argv[1:]])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(rows, args.reps, args.power_reps, command))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
