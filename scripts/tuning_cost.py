"""The cost of tuning, measured: a pruned learning-rate search against the exhaustive grid it
stands for (docs/tuning.md, "The plan for the tuned HALT tables"; issue: every family at its own
tuned learning rate).

    python scripts/tuning_cost.py SEARCH_OUT GRID_OUT [--studies t3cpu,t3cpu-tlb3,...] [--md results/tuning-cost.md]

SEARCH_OUT holds the search studies (``bench tune ... --pruner asha``), GRID_OUT the same studies
run exhaustively (``--pruner none``, another ``--out``): ``OUT/studies/<study>/`` with their
journals, and the trials' records under ``OUT/runs``. Per row (a study's model):

- search s: the sum of ``train_time_s`` over every trial the search ran (finished and pruned, each
  record once), and ``/ full`` that over one full run's: the exhaustive grid's run at the lr the
  search picked (``/ mean``: over the mean of the grid's runs). The same in optimizer steps
  (``steps_run``), which does not depend on the machine's load: the time ratios do (trials ran
  beside other jobs on shared cores);
- the lr the search picked and the lr the exhaustive grid picks: the best validation score of
  finished trials (the study's primary metric, as ``bench tune`` picks), and whether they agree.

At the end the rows whose search cost at most 2x one full run (in time and in steps) and the share
of rows whose picks agree; rows whose exhaustive grid is not finished are shown and left out of
both. Only reads: Optuna's journals are opened read-only, nothing is written under either OUT.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench.config import canonical_text  # noqa: E402
from bench.records import read_record  # noqa: E402

COST_TARGET, AGREE_TARGET = 2.0, 0.8


def trials(out: Path, study: str) -> dict[str, list[dict]]:
    """Per model of the study: its trials, each {state, values, val, record (the record's dict)},
    a re-queued trial's run once."""
    import optuna

    from bench.tune.study import read_meta, storage, study_folder

    folder = study_folder(out, study)
    meta, store = read_meta(folder), storage(folder)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    found = {}
    for model in meta["models"]:
        rows, seen = [], set()
        for t in optuna.load_study(study_name=model, storage=store).get_trials(deepcopy=False):
            path = t.user_attrs.get("record")
            if t.state.name not in ("COMPLETE", "PRUNED") or not path or path in seen:
                continue
            seen.add(path)
            rows.append(
                {
                    "number": t.number,
                    "state": t.state.name,
                    "values": dict(t.params),
                    "val": t.value,
                    "record": read_record(out / path, quiet=True),
                }
            )
        found[model] = rows
    return found


def pick(rows: list[dict]) -> dict | None:
    """The trial bench tune picks: the best validation score of the finished trials, the first on ties."""
    done = [r for r in rows if r["state"] == "COMPLETE"]
    return max(done, key=lambda r: (r["val"], -r["number"])) if done else None


def values_text(values: dict) -> str:
    return " ".join(f"{canonical_text(v)}" for _, v in sorted(values.items()))


def ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}" if b else "—"


def row(study: str, model: str, search: list[dict], grid: list[dict], size: int) -> dict:
    chosen, best = pick(search), pick(grid)
    full = [g for g in grid if g["state"] == "COMPLETE"]
    finished = len(full) == size
    at = next((g for g in full if chosen and g["values"] == chosen["values"]), None)
    time_s = sum(r["record"].get("train_time_s") or 0.0 for r in search)
    steps = sum(r["record"].get("steps_run") or 0 for r in search)
    one_time = at["record"].get("train_time_s") if at else None
    mean_time = statistics.mean(g["record"]["train_time_s"] for g in full) if full else None
    one_steps = at["record"].get("steps_run") if at else None
    agree = finished and chosen is not None and best is not None and chosen["values"] == best["values"]
    return {
        "row": f"{model} ({study})",
        "trials": f"{sum(r['state'] == 'COMPLETE' for r in search)} + {sum(r['state'] == 'PRUNED' for r in search)} pruned",
        "time_s": time_s,
        "one_time": one_time,
        "mean_time": mean_time,
        "steps": steps,
        "one_steps": one_steps,
        "finished": finished,
        "agree": agree,
        "search_lr": values_text(chosen["values"]) if chosen else "—",
        "search_val": chosen["val"] if chosen else None,
        "grid_lr": values_text(best["values"]) if best else "—",
        "grid_val": best["val"] if best else None,
        "grid_done": "" if finished else f", {len(full)}/{size} run",
    }


def main() -> None:
    from _bench_util import emit
    from tabulate import tabulate

    from bench.tune.study import read_meta, study_folder, study_names, target

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("search", type=Path, help="the OUT of the pruned search studies")
    p.add_argument("grid", type=Path, help="the OUT of the same studies run exhaustively (--pruner none)")
    p.add_argument("--studies", help="comma list (default: every study in SEARCH/studies that GRID/studies also has)")
    p.add_argument("--md", help="also write the table to this Markdown file (its first line: the command)")
    args = p.parse_args()
    names = args.studies.split(",") if args.studies else sorted(set(study_names(args.search)) & set(study_names(args.grid)))
    if not names:
        sys.exit(f"tuning_cost.py: no study in both {args.search}/studies and {args.grid}/studies")
    rows = []
    for name in names:
        meta = read_meta(study_folder(args.search, name))
        grid_meta = read_meta(study_folder(args.grid, name))
        if any(meta[k] != grid_meta[k] for k in ("task", "preset", "models", "space", "set")):
            sys.exit(f"tuning_cost.py: study {name} of {args.grid} tunes other settings than {args.search}'s")
        search, grid = trials(args.search, name), trials(args.grid, name)
        rows += [row(name, m, search[m], grid[m], target(grid_meta)) for m in meta["models"]]
    body = [
        [
            r["row"],
            r["trials"],
            f"{r['time_s']:.0f}",
            f"{r['one_time']:.0f}" if r["one_time"] else "—",
            ratio(r["time_s"], r["one_time"]),
            ratio(r["time_s"], r["mean_time"]),
            f"{r['steps']} / {r['one_steps'] or '—'}",
            ratio(r["steps"], r["one_steps"]),
            r["search_lr"] + (f" ({100 * r['search_val']:.1f})" if r["search_val"] is not None else ""),
            r["grid_lr"] + (f" ({100 * r['grid_val']:.1f}{r['grid_done']})" if r["grid_val"] is not None else ""),
            ("yes" if r["agree"] else "no") if r["finished"] else "—",
        ]
        for r in rows
    ]
    headers = [
        "row (study)",
        "search trials",
        "search s",
        "full run s",
        "/ full",
        "/ mean",
        "steps: search / full",
        "/ full (steps)",
        "search picks (val %)",
        "grid picks (val %)",
        "agree",
    ]
    done = [r for r in rows if r["finished"] and r["one_time"]]
    cheap_time = sum(r["time_s"] <= COST_TARGET * r["one_time"] for r in done)
    cheap_steps = sum(r["steps"] <= COST_TARGET * r["one_steps"] for r in done)
    agree = sum(r["agree"] for r in done)
    summary = (
        f"{len(done)} of {len(rows)} rows with the exhaustive grid finished: search <= {COST_TARGET:g}x one full run in "
        f"optimizer steps for {cheap_steps}/{len(done)} (about the time at equal load: a row's trials differ only in their values), "
        f"in train time as measured for {cheap_time}/{len(done)} (load-dependent)"
        + (
            f" (all rows: {sum(r['steps'] for r in done) / sum(r['one_steps'] for r in done):.2f}x in steps, "
            f"{sum(r['time_s'] for r in done) / sum(r['one_time'] for r in done):.2f}x in time)"
            if done
            else ""
        )
        + f"; the search picks the grid's lr for {agree}/{len(done)}"
        + (f" = {100 * agree / len(done):.0f}% of rows (target >= {100 * AGREE_TARGET:.0f}%)" if done else "")
    )
    note = (
        f"Search: {args.search}/studies, exhaustive grid: {args.grid}/studies; time = train_time_s (shared cores: load-dependent), "
        "steps = steps_run; / full: over the grid's run at the lr the search picked, / mean: over the mean of the grid's runs; "
        "picks: best validation score of finished trials."
    )
    emit(tabulate(body, headers=headers, tablefmt="github", disable_numparse=True) + "\n\n" + note + "\n\n" + summary, args.md)


if __name__ == "__main__":
    from bench.errors import UserError

    try:
        main()
    except UserError as exc:
        sys.exit(f"tuning_cost.py: {exc}")
