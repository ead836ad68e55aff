"""The tuning protocol (``bench tune --pruner sync``, bench/tune/protocol.py) replayed on the
committed curves of an exhaustive grid, against the grid's best on the table's metric and against
the search the tuned tables used (``--pruner asha``); docs/tuning.md, "The protocol".

    python scripts/benchmarks/protocol_replay.py [--grid results/grid4] [--search results] [--md FILE]

GRID holds studies run with ``--pruner none``: every value of the grid trained to the end on the
study's seed, each record with its validation curve (``val_history``) and the validation scores of
its selected weights (``metrics.val``). Training is deterministic (same settings and seed: the
same run), so a bracket over these values would have seen exactly these runs, paused at its rungs.
Per row (a study's model), the replay applies the protocol's own functions:

- rungs: ``rung_fractions`` of the grid's size (eta 2: 1/4, 1/2, 1 of a run for 4 values) at the
  run's validations (``rung_steps``);
- at each rung but the last, ``survivors`` (top half, ties and every value within 2 SE of the
  difference from the best, at the validation's size, kept). The score there is the objective
  where the curve holds it (a curve recorded by ``--pruner sync`` keeps it as ``objective``);
  the committed grid's curves hold only the validation token accuracy before the end, so the
  intermediate rungs of this replay rank on that (said in the output): the last rung is exact;
- at the last rung the objective (last-read accuracy, Table 3's metric) of each run's selected
  weights, exact; the values within the noise of the best are "in contention", and the protocol
  trains them on a second seed (not in the grid: the replay picks on the grid's seed and counts
  the second seed's cost, one full run per contender, in a column of its own);
- a pick at the grid's edge would bring one more value (``edge_step``): not in the grid's records,
  named, its cost not counted.

Per row: the protocol's pick, the grid's best on the table's metric (last-read accuracy of the
selected weights, seed 0), the cost in full runs (optimizer steps over one run's) without and with
the second seed, the old search's pick and cost (the tuned tables' studies under SEARCH, picked on
token accuracy), and for Table 1 (no exhaustive grid) the old search alone. Then the protocol's own
studies against the grid (Table 3's rows) and beside the old search (Table 1's rows). Only reads.

    python scripts/benchmarks/protocol_replay.py --rules [--search results] [--md FILE]

replays instead the rules against the trivial level (docs/tuning.md, "Against the trivial level") on
every committed study under SEARCH/studies and prints, per study and model, the pick the study made
and the pick the rules make from the same recorded runs. A sync study's bracket is run again by
bench/tune/sync.py's own state machine (``SyncWorker._next`` and what it calls), each run it asks
for answered from the recorded results: the old bracket's rung and second-seed scores, the runs'
records (validation history, metrics.val) and metrics.csv (training loss); the chance level is the
records' (``metrics.val.chance``, the split's best trivial strategy). Where the rules ask for a run
the study never trained (a value the old rule stopped at a rung the new one passes, a second seed the
old one did not train), the new pick is "needs training" and says which run. Another pruner's study
(asha, none: Optuna's trials) gets the rule for a model that learned nothing, as ``bench tune`` reads
it (``bench.tune.study.results``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.config import canonical_text  # noqa: E402
from bench.records import read_record, record_path  # noqa: E402
from bench.tune.protocol import edge_step, objective_value, rung_fractions, rung_steps, se, survivors, within_noise  # noqa: E402

OBJECTIVE = {"flipflop": "last_acc", "listops": "acc"}
COST_TARGET, AGREE_TARGET = 2.0, 0.8
T3 = ("t3cpu", "t3cpu-tlb3", "t3cpu-tlb25", "t3cpu-gutlb3", "t3cpu-gutlb25")
T1 = ("t1cpu", "t1cpu-ablations")
# the protocol's own studies of Table 3 (new runs, seeds 100-101) and the grid's study of the same rows
T3_PROTOCOL = {
    "t3cpu2": "t3cpu",
    "t3cpu2-tlb3": "t3cpu-tlb3",
    "t3cpu2-tlb25": "t3cpu-tlb25",
    "t3cpu2-gutlb3": "t3cpu-gutlb3",
    "t3cpu2-gutlb25": "t3cpu-gutlb25",
}
# the protocol's own studies of Table 1 (seeds 100-101) and the old search's study of the same rows
T1_PROTOCOL = {"t1cpu2": "t1cpu", "t1cpu2-ablations": "t1cpu-ablations"}


def label(model: str, meta: dict) -> str:
    chunk = next((s.split("=")[1] for s in meta["set"] if s.startswith("model.chunk_size=")), None)
    return f"{model} (chunk {chunk})" if chunk else model


def grid_runs(out: Path, study: str) -> tuple[dict, dict]:
    """The study's meta and, per model, per lr: its record (every value of the grid run to the end)."""
    meta = json.loads((out / "studies" / study / "study.json").read_text())
    values = [float(v) for v in meta["space"][0].split("=", 1)[1].strip("[]").split(",")]
    runs = {}
    for model in meta["models"]:
        runs[model] = {}
        for lr in values:
            path = record_path(out, model, meta["task"], meta["preset"], meta["seed"], [*meta["set"], f"train.lr={canonical_text(lr)}"])
            rec = read_record(path, quiet=True)
            if rec.get("status") != "ok":
                raise SystemExit(f"protocol_replay.py: {path} is not a finished run: the grid must be complete")
            runs[model][lr] = rec
    return meta, runs


def replay(runs: dict, objective: str) -> dict:
    """The protocol on one row's runs: rungs, who went on, the pick, the contention, the cost."""
    lrs = list(runs)
    any_rec = next(iter(runs.values()))
    validations = [e["step"] for e in any_rec["val_history"]]
    full, n = validations[-1], any_rec["metrics"]["val"]["n"]
    steps = rung_steps(rung_fractions(len(lrs)), validations)
    alive, trace, cost, prev, exact = list(lrs), [], 0, 0, True
    for step in steps[:-1]:
        scores = {}
        for lr in alive:
            entry = next(e for e in runs[lr]["val_history"] if e["step"] == step)
            exact = exact and "objective" in entry
            scores[lr] = entry.get("objective", entry[runs[lr]["primary_metric"]])
        cost += len(alive) * (step - prev)
        prev = step
        kept = survivors(scores, n)
        trace.append((step, {lr: scores[lr] for lr in alive}, kept))
        alive = kept
    cost += len(alive) * (full - prev)
    final = {lr: objective_value(runs[lr]["metrics"]["val"], objective) for lr in alive}
    near = within_noise(final, n)
    pick = max(near, key=lambda lr: (final[lr], -lrs.index(lr)))
    second = len(near) if len(near) > 1 else 0
    return {
        "pick": pick,
        "final": final,
        "near": near,
        "trace": trace,
        "cost": cost / full,
        "second": second,
        "cost2": cost / full + second,
        "edge": edge_step(lrs, pick),
        "n": n,
        "exact": exact,
        "steps": steps,
    }


def old_search(out: Path, study: str) -> dict:
    """The tuned tables' search (--pruner asha): per model its pick, its cost in full runs, its trials."""
    import optuna

    from bench.tune.study import read_meta, storage, study_folder

    folder = study_folder(out, study)
    meta, store = read_meta(folder), storage(folder)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    best = json.loads((folder / "best.json").read_text())["models"]
    found = {}
    for model in meta["models"]:
        steps, seen, full, trace = 0, set(), None, []
        for t in optuna.load_study(study_name=model, storage=store).get_trials(deepcopy=False):
            path = t.user_attrs.get("record")
            if t.state.name not in ("COMPLETE", "PRUNED") or not path or path in seen:
                continue
            seen.add(path)
            rec = read_record(out / path, quiet=True)
            steps += rec.get("steps_run") or 0
            if t.state.name == "COMPLETE":
                full = rec["steps_run"]
            trace.append(canonical_text(t.params["train.lr"]) + ("" if t.state.name == "COMPLETE" else f" x{rec.get('steps_run')}"))
        found[model] = {
            "pick": best[model]["values"]["train.lr"] if model in best else None,
            "cost": steps / full if full else None,
            "trace": ", ".join(trace),
            "meta": meta,
        }
    return found


def protocol_studies(grid: Path, search: Path) -> tuple[list[dict], list[str]]:
    """The studies ``bench tune --pruner sync`` ran for Table 3's rows (new runs on seeds 100-101,
    the bracket in their bracket.json) against the exhaustive grid's runs of the same rows (seed 0):
    per row the pick, the grid's best on the table's metric, agreement (exact, or within 2 SE at the
    validation's size), the steps the bracket trained in full runs (second seed and any edge
    extension included), the values trained on the second seed. A study not finished yet is named."""
    from bench.tune.sync import budget

    rows, waiting = [], []
    for study, grid_study in T3_PROTOCOL.items():
        folder = search / "studies" / study
        if not (folder / "best.json").exists():
            waiting.append(study)
            continue
        meta, runs = grid_runs(grid, grid_study)
        objective = OBJECTIVE[meta["task"]]
        for model, b in json.loads((folder / "bracket.json").read_text()).items():
            grid_final = {lr: objective_value(rec["metrics"]["val"], objective) for lr, rec in runs[model].items()}
            best = max(grid_final, key=lambda lr: (grid_final[lr], -list(grid_final).index(lr)))
            pick = b["configs"][b["pick"]]["values"]["train.lr"]
            n = next(iter(runs[model].values()))["metrics"]["val"]["n"]
            at = grid_final.get(pick)
            tie = at is not None and at >= grid_final[best] - 2 * se(grid_final[best], at, n)
            ext = b.get("extension") or {}
            rows.append(
                {
                    "row": label(model, meta),
                    "pick": pick,
                    "best": best,
                    "agree": pick == best,
                    "tie": tie,
                    "regret": None if at is None else grid_final[best] - at,
                    "cost": budget(b)["full_runs"],
                    "second": [b["configs"][k]["values"]["train.lr"] for k in sorted(b["second"])],
                    "extension": ext.get("value"),
                    "selection": b.get("selection") or {},
                    "configs": b["configs"],
                }
            )
    return rows, waiting


def protocol_text(rows: list[dict], waiting: list[str]) -> str:
    """The protocol's own studies against the grid: a summary line and a row each."""
    from tabulate import tabulate

    if not rows:
        return "No study of the protocol has finished yet (" + ", ".join(waiting) + ")."
    n = len(rows)
    agree, ties = sum(r["agree"] for r in rows), sum(r["agree"] or r["tie"] for r in rows)
    cheap = sum(r["cost"] <= COST_TARGET for r in rows)
    both = sum(r["agree"] and r["cost"] <= COST_TARGET for r in rows)
    mean = sum(r["cost"] for r in rows) / n
    head = (
        f"Picks the grid's best: {agree}/{n} ({100 * agree / n:.0f}%); the grid's best or within 2 SE of it: {ties}/{n}; "
        f"cost {mean:.2f} full runs per row on average (max {max(r['cost'] for r in rows):.2f}, {cheap}/{n} at <= {COST_TARGET:g}x); "
        f"agrees at <= {COST_TARGET:g}x: {both}/{n}. Target (>= {AGREE_TARGET:.0%} of rows agree at <= {COST_TARGET:g}x): "
        + ("met" if both / n >= AGREE_TARGET else "not met")
        + "."
        + (f" Not finished: {', '.join(waiting)}." if waiting else "")
    )
    body = [
        [
            r["row"],
            canonical_text(r["pick"]),
            canonical_text(r["best"]),
            "yes" if r["agree"] else ("within 2 SE" if r["tie"] else ("not in the grid" if r["regret"] is None else "no")),
            "—" if r["regret"] is None else f"{100 * r['regret']:.1f}",
            f"{r['cost']:.2f}",
            ", ".join(canonical_text(x) for x in r["second"]) or "—",
            ", ".join(f"{k.split('=', 1)[1]} {pct(v)}" for k, v in r["selection"].items()),
            canonical_text(r["extension"]) if r["extension"] is not None else "—",
        ]
        for r in rows
    ]
    headers = [
        "row",
        "the study picks",
        "grid's best (last-read, seed 0)",
        "agree",
        "regret on the grid (pts)",
        "cost (full runs)",
        "2nd seed",
        "selected on (val last-read %)",
        "edge: added",
    ]
    return head + "\n\n" + tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def rung_trace(b: dict) -> str:
    """A finished bracket's rungs: per rung step each configuration that reached it with its score
    (x: stopped there)."""
    parts = []
    for r, step in sorted(b["steps"].items(), key=lambda kv: int(kv[0])):
        here = [
            (c["values"]["train.lr"], c["scores"][r], not c["alive"] and c.get("stopped_at") == step)
            for c in b["configs"].values()
            if r in c["scores"]
        ]
        if here:
            parts.append(f"step {step}: " + ", ".join(f"{canonical_text(lr)} {pct(v)}{' x' if x else ''}" for lr, v, x in here))
    return "; ".join(parts)


def table1_studies(search: Path, old_t1: dict) -> str:
    """The protocol's own studies of Table 1's rows (no exhaustive grid to check them against)
    beside the old search of the same rows: per row the old pick and cost, the protocol's pick,
    its cost in full runs (second seed and any edge extension included), its rungs, the values
    trained on the second seed and the validation score each contender was selected on. OLD_T1: the
    old studies' ``old_search``, already read for the old picks' table."""
    from tabulate import tabulate

    from bench.tune.sync import budget

    body, waiting = [], []
    for study, old_study in T1_PROTOCOL.items():
        folder = search / "studies" / study
        if not (folder / "best.json").exists():
            waiting.append(study)
            continue
        old = old_t1[old_study]
        for model, b in json.loads((folder / "bracket.json").read_text()).items():
            ext = b.get("extension") or {}
            body.append(
                [
                    model,
                    canonical_text(old[model]["pick"]),
                    f"{old[model]['cost']:.2f}",
                    canonical_text(b["configs"][b["pick"]]["values"]["train.lr"]),
                    f"{budget(b)['full_runs']:.2f}",
                    rung_trace(b),
                    ", ".join(canonical_text(b["configs"][k]["values"]["train.lr"]) for k in sorted(b["second"])) or "—",
                    ", ".join(f"{k.split('=', 1)[1]} {pct(v)}" for k, v in (b.get("selection") or {}).items()),
                    canonical_text(ext["value"]) if ext.get("value") is not None else "—",
                ]
            )
    if not body:
        return "No study of the protocol for Table 1 has finished yet (" + ", ".join(waiting) + ")."
    table = tabulate(
        body,
        headers=[
            "row",
            "old pick",
            "old cost (full runs)",
            "the study picks",
            "cost (full runs)",
            "rungs (val acc %, x: stopped)",
            "2nd seed",
            "selected on (val acc %, mean of 2 seeds)",
            "edge: added",
        ],
        tablefmt="github",
        disable_numparse=True,
    )
    return table + (f"\n\nNot finished: {', '.join(waiting)}." if waiting else "")


def run_s(rec: dict) -> float:
    """A finished run's cost in seconds: its wall time, or, for a resumed run (whose wall time is its
    last part's), its training time summed over the parts."""
    return rec["train_time_s"] if rec.get("resumed_from") else rec["wall_time_s"]


def full_run_s(out: Path, study: str, model: str, seeds=range(5)) -> float:
    """The mean cost (s) of the row's finished runs at its tuned setting (the tuned table's seeds)."""
    best = json.loads((out / "studies" / study / "best.json").read_text())
    values = best["models"][model]["values"]
    sets = [*best["set"], *(f"{k}={canonical_text(v)}" for k, v in sorted(values.items()))]
    recs = [read_record(record_path(out, model, best["task"], best["preset"], seed, sets), quiet=True) for seed in seeds]
    costs = [run_s(r) for r in recs if r.get("status") == "ok"]
    return sum(costs) / len(costs)


def plan(rows: list[dict], t1: list[list], seeds: int = 5) -> str:
    """CPU hours of the re-tune: per row (protocol cost with the second seed + ``seeds`` final runs) x
    its full run's wall time (the committed records'). Table 3's rows: the replay's cost; Table 1's
    (no replay): Table 3's mean, and the worst case (every value to the end on both seeds, and one
    extension through every rung: 2 x 4 + 1 = 9 full runs)."""
    from tabulate import tabulate

    mean2 = sum(r["cost2"] for r in rows) / len(rows)
    body, total, worst = [], 0.0, 0.0
    for r in rows:
        wall = r["wall"]
        hours = (r["cost2"] + seeds) * wall / 3600
        body.append(["3", r["row"], f"{wall:.0f}", f"{r['cost2']:.2f}", str(seeds), f"{hours:.2f}", f"{(9 + seeds) * wall / 3600:.2f}"])
        total, worst = total + hours, worst + (9 + seeds) * wall / 3600
    for row in t1:
        wall = row[-1]
        hours = (mean2 + seeds) * wall / 3600
        body.append(
            ["1", row[0], f"{wall:.0f}", f"{mean2:.2f} (Table 3's mean)", str(seeds), f"{hours:.2f}", f"{(9 + seeds) * wall / 3600:.2f}"]
        )
        total, worst = total + hours, worst + (9 + seeds) * wall / 3600
    body.append(["", "all", "", "", "", f"{total:.1f}", f"{worst:.1f}"])
    return tabulate(
        body,
        headers=["table", "row", "one full run (s)", "tuning (full runs, 2nd seed incl.)", "final seeds", "CPU hours", "worst case"],
        tablefmt="github",
        disable_numparse=True,
    )


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def main() -> None:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grid", type=Path, default=ROOT / "results" / "grid4", help="the exhaustive grid's OUT (default results/grid4)")
    p.add_argument("--search", type=Path, default=ROOT / "results", help="the OUT of the tuned tables' studies (default results)")
    p.add_argument("--md", help="also write the tables to this Markdown file")
    p.add_argument("--rules", action="store_true", help="the rules against the trivial level on every committed study: old pick, new pick")
    args = p.parse_args()
    if args.rules:
        text = rules_text(args.search)
        print(text)
        if args.md:
            Path(args.md).write_text("# " + " ".join(["python", *sys.argv]) + "\n\n" + text + "\n")
        return
    rows, t1 = [], []
    exact = True
    for study in T3:
        meta, runs = grid_runs(args.grid, study)
        old = old_search(args.search, study)
        for model, found in runs.items():
            objective = OBJECTIVE[meta["task"]]
            r = replay(found, objective)
            exact = exact and r["exact"]
            grid_final = {lr: objective_value(rec["metrics"]["val"], objective) for lr, rec in found.items()}
            best = max(grid_final, key=lambda lr: (grid_final[lr], -list(found).index(lr)))
            tie = grid_final[r["pick"]] >= grid_final[best] - 2 * se(grid_final[best], grid_final[r["pick"]], r["n"])
            o = old[model]
            rows.append(
                {
                    "row": label(model, meta),
                    "pick": r["pick"],
                    "wall": sum(map(run_s, found.values())) / len(found),
                    "best": best,
                    "agree": r["pick"] == best,
                    "tie": tie,
                    "regret": grid_final[best] - grid_final[r["pick"]],
                    "cost": r["cost"],
                    "cost2": r["cost2"],
                    "near": r["near"],
                    "trace": "; ".join(
                        f"step {s}: " + ", ".join(f"{canonical_text(lr)} {pct(v)}{'' if lr in kept else ' x'}" for lr, v in sc.items())
                        for s, sc, kept in r["trace"]
                    ),
                    "finals": ", ".join(f"{canonical_text(lr)} {pct(v)}" for lr, v in r["final"].items()),
                    "edge": r["edge"],
                    "old": o["pick"],
                    "old_cost": o["cost"],
                    "old_agree": o["pick"] == best,
                    "old_trace": o["trace"],
                    "grid": ", ".join(f"{canonical_text(lr)} {pct(v)}" for lr, v in grid_final.items()),
                }
            )
    old_t1 = {study: old_search(args.search, study) for study in T1}
    for study in T1:
        for model, o in old_t1[study].items():
            t1.append(
                [label(model, o["meta"]), canonical_text(o["pick"]), f"{o['cost']:.2f}", o["trace"], full_run_s(args.search, study, model)]
            )
    n = len(rows)
    agree, ties = sum(r["agree"] for r in rows), sum(r["tie"] for r in rows)
    cheap = sum(r["cost"] <= COST_TARGET for r in rows)
    both = sum(r["agree"] and r["cost"] <= COST_TARGET for r in rows)
    mean = sum(r["cost"] for r in rows) / n
    mean2 = sum(r["cost2"] for r in rows) / n
    old_agree = sum(r["old_agree"] for r in rows)
    old_mean = sum(r["old_cost"] for r in rows) / n
    summary = tabulate(
        [
            [
                "the protocol (--pruner sync)",
                f"{agree}/{n} ({100 * agree / n:.0f}%)",
                f"{ties}/{n}",
                f"{mean:.2f}",
                f"{max(r['cost'] for r in rows):.2f}",
                f"{cheap}/{n}",
                f"{both}/{n}",
                f"{mean2:.2f}",
                f"{max(r['cost2'] for r in rows):.2f}",
            ],
            [
                "the tuned tables' search (--pruner asha)",
                f"{old_agree}/{n} ({100 * old_agree / n:.0f}%)",
                "—",
                f"{old_mean:.2f}",
                f"{max(r['old_cost'] for r in rows):.2f}",
                f"{sum(r['old_cost'] <= COST_TARGET for r in rows)}/{n}",
                f"{sum(r['old_agree'] and r['old_cost'] <= COST_TARGET for r in rows)}/{n}",
                "—",
                "—",
            ],
        ],
        headers=[
            "search",
            "picks the grid's best",
            "within 2 SE of it",
            "mean cost (full runs)",
            "max",
            f"<= {COST_TARGET:g}x",
            f"agrees at <= {COST_TARGET:g}x",
            "with 2nd seed: mean",
            "max",
        ],
        tablefmt="github",
        disable_numparse=True,
    )
    target = (
        f"Target: the grid's best for >= {AGREE_TARGET:.0%} of rows at <= {COST_TARGET:g}x one full run per row: "
        + ("met" if both / n >= AGREE_TARGET else f"not met ({both}/{n} rows agree at <= {COST_TARGET:g}x)")
        + "."
    )
    note = "Rung scores before the last: " + (
        "the objective, as recorded."
        if exact
        else "validation token accuracy (the committed curves hold no last-read accuracy before the end); "
        "the last rung: last-read accuracy of each run's selected weights (exact)."
    )
    per_row = tabulate(
        [
            [
                r["row"],
                canonical_text(r["pick"]),
                canonical_text(r["best"]),
                "yes" if r["agree"] else ("tie" if r["tie"] else "no"),
                f"{100 * r['regret']:.1f}",
                f"{r['cost']:.2f}",
                ", ".join(canonical_text(x) for x in r["near"]),
                f"{r['cost2']:.2f}",
                canonical_text(r["edge"]) if r["edge"] is not None else "—",
                canonical_text(r["old"]),
                f"{r['old_cost']:.2f}",
                "yes" if r["old_agree"] else "no",
            ]
            for r in rows
        ],
        headers=[
            "row",
            "protocol picks",
            "grid's best (last-read)",
            "agree",
            "regret (pts)",
            "cost",
            "in contention",
            "cost with 2nd seed",
            "edge: would add",
            "old pick",
            "old cost",
            "old agrees",
        ],
        tablefmt="github",
        disable_numparse=True,
    )
    traces = tabulate(
        [[r["row"], r["trace"], r["finals"], r["grid"], r["old_trace"]] for r in rows],
        headers=[
            "row",
            "rungs (x: stopped)",
            "last rung (last-read %)",
            "the grid (last-read %, seed 0)",
            "old search (x: pruned at step)",
        ],
        tablefmt="github",
        disable_numparse=True,
    )
    t1_table = tabulate(
        [row[:-1] for row in t1],
        headers=["Table 1 row", "old pick", "old cost (full runs)", "old search (x: pruned at step)"],
        tablefmt="github",
        disable_numparse=True,
    )
    text = (
        summary
        + "\n\n"
        + target
        + " "
        + note
        + "\n\n"
        + per_row
        + "\n\n"
        + traces
        + "\n\nTable 1 has no exhaustive grid, and the old search stopped most values at the first validation, before the "
        "protocol's first rung: it is not replayable; its old picks and costs:\n\n"
        + t1_table
        + "\n\nThe re-tune of Tables 3 and 1 by the protocol with 5 final seeds, in CPU hours of one thread (a full run's wall "
        "time: the mean of its committed finished runs, a resumed one by its summed training time; on 2 shared cores):\n\n" + plan(rows, t1)
    )
    protocol_rows, waiting = protocol_studies(args.grid, args.search)
    text += (
        "\n\nThe protocol's own studies of Table 3's rows (`bench tune --pruner sync`, new runs on seeds 100-101, "
        "`scripts/retune_halt_cpu.sh 3`) against the same grid: exact at every rung (their curves hold the objective), "
        "on other seeds than the grid's, so a pick within the noise of the grid's best is as good a pick as the grid can tell:"
        "\n\n" + protocol_text(protocol_rows, waiting)
    )
    text += (
        "\n\nThe protocol's own studies of Table 1's rows (`bench tune --pruner sync`, seeds 100-101, "
        "`scripts/retune_halt_cpu.sh 1`) beside the old search of the same rows (`--pruner asha`, seed 0, picked on "
        "validation accuracy, which is Table 1's metric too): no exhaustive grid checks either:\n\n" + table1_studies(args.search, old_t1)
    )
    print(text)
    if args.md:
        Path(args.md).write_text("# " + " ".join(["python", *sys.argv]) + "\n\n" + text + "\n")


# ---- the rules against the trivial level, on the committed studies ------------------------------------------


class NeedsTraining(Exception):
    """The rules ask for a run the study never trained (its text: which)."""


def recorded_run(out: Path, meta: dict, model: str, old: dict, kind: str, entry: dict, rung) -> dict:
    """What ``SyncWorker._train`` would return for this task, from what the study recorded; NeedsTraining
    when it recorded nothing for it."""
    from bench.tune.study import trial_overrides
    from bench.tune.sync import key_of, train_losses

    key, seed = key_of(entry["values"]), entry.get("seed", meta["seed"])
    path = record_path(out, model, meta["task"], meta["preset"], seed, trial_overrides(meta, entry["values"]))
    rec = read_record(path, quiet=True) if path.exists() else {}
    history = {e["step"]: e.get("objective", e.get(rec.get("primary_metric"))) for e in rec.get("val_history") or []}
    last = len(old["fractions"]) - 1
    base = {"n": old["n"], "total": old["full_steps"], "record": str(path.relative_to(out))}
    if kind == "second":
        found = (old["second"].get(key) or {}).get("score")
        if found is None and rec.get("status") == "ok":
            found = objective_value(rec["metrics"]["val"], meta["objective"])
        if found is None:
            raise NeedsTraining(f"{key} on seed {seed}")
        return {**base, "step": old["full_steps"], "score": found, "curve": history, "losses": train_losses(path)}
    step = int(old["steps"][str(rung)])
    mine = old["configs"].get(key) or {}
    score = (mine.get("scores") or {}).get(str(rung))
    if score is None and rung == last and rec.get("status") == "ok":
        score = objective_value(rec["metrics"]["val"], meta["objective"])
    if score is None and rung < last and step in history:
        score = history[step]
    if score is None:
        where = f" (the old bracket stopped it at step {mine['stopped_at']})" if mine.get("stopped_at") else ""
        raise NeedsTraining(f"{key} to step {step}{where}")
    out_run = {
        **base,
        "step": step,
        "score": score,
        "curve": {s: v for s, v in history.items() if s <= step},
        "losses": train_losses(path, step),
    }
    if mine.get("failed"):
        out_run["failed"] = mine["failed"]
    return out_run


def replay_bracket(out: Path, meta: dict, model: str, old: dict, chance) -> dict:
    """The model's bracket run again by SyncWorker's state machine on the recorded runs: the new
    bracket, or, when the rules ask for runs the study never trained, the bracket where it waits
    for them with ``needs``: every such run it asks for at that point (held, as another worker's
    would be, so that the bracket hands out the rest)."""
    import bench.tune.sync as sync

    worker = sync.SyncWorker.__new__(sync.SyncWorker)
    worker.meta, worker.registry, worker.out, worker.id = meta, None, out, "replay"
    saved = sync.validation_chance
    sync.validation_chance = lambda registry, m, name: chance
    b, needs = sync.new_bracket(meta), []
    try:
        while True:
            task = worker._next(model, b)
            if task is None:
                return {**b, "needs": "; ".join(needs)} if needs else b
            kind, entry, rung = task
            here = worker._entry(b, kind, entry)
            try:
                result = recorded_run(out, meta, model, old, kind, entry, rung)
            except NeedsTraining as exc:
                here["holder"] = "not trained"
                needs.append(str(exc))
                continue
            worker._store(b, kind, here, rung, result)
    finally:
        sync.validation_chance = saved


def study_chance(out: Path, meta: dict, model: str, old: dict):
    """The chance level of the study's objective on its validation, from the first of the model's
    recorded runs that keeps one (every run of a study has the same validation split)."""
    from bench.tune.validation import record_chance

    for c in [*old.get("configs", {}).values(), *old.get("second", {}).values()]:
        found = record_chance(out, c.get("record"), meta.get("objective"))
        if found is not None:
            return found
    return None


def rules_rows(out: Path) -> list[dict]:
    """Per committed study and model: the old pick, the new one, and why they differ."""
    from bench.tune.study import read_meta, results, study_folder, study_names
    from bench.tune.sync import brackets, evidence_text

    rows = []
    for study in study_names(out):
        folder = study_folder(out, study)
        meta = read_meta(folder)
        try:
            best = json.loads((folder / "best.json").read_text())
        except (OSError, ValueError):
            continue
        picks = {m: v["values"] for m, v in best["models"].items()}
        if meta.get("pruner") == "sync":
            state = brackets(folder)
            for model in meta["models"]:
                old = state[model]
                chance = study_chance(out, meta, model, old)
                new = replay_bracket(out, meta, model, old, chance)
                rows.append(rules_row(study, model, picks.get(model), old, new, chance))
        else:
            for r in results(out, study):
                new = {"pick": None if r["best"] is None else r["best"], "nothing_learned": r.get("nothing_learned")}
                text = (
                    evidence_text({"pick": None, "nothing_learned": r["nothing_learned"]})
                    if r.get("nothing_learned")
                    else f"pruner {meta.get('pruner')}: of the rules only 'nothing learned' applies, and a trial clears the trivial level"
                )
                rows.append(
                    {
                        "study": study,
                        "model": r["model"],
                        "pruner": meta.get("pruner"),
                        "old": values_text(picks.get(r["model"])),
                        "new": "nothing learned" if r.get("nothing_learned") else values_text(new["pick"]),
                        "changed": bool(r.get("nothing_learned")) and r["model"] in picks,
                        "why": text,
                        "passed": "—",
                    }
                )
    return rows


def values_text(values) -> str:
    return "—" if not values else " ".join(f"{k}={canonical_text(v)}" for k, v in sorted(values.items()))


def rules_row(study: str, model: str, old_pick, old: dict, new: dict, chance) -> dict:
    """One line of the rules' replay for a sync bracket."""
    from bench.tune.sync import evidence_text

    passed = ", ".join(str(d["step"]) for d in new.get("decisions", []) if d.get("passed")) or "—"
    level = "no chance level recorded" if chance is None else f"chance {pct(chance[0])}"
    if "needs" in new:
        return {
            "study": study,
            "model": model,
            "pruner": "sync",
            "old": values_text(old_pick),
            "new": "needs training",
            "changed": None,
            "why": f"{level}; the rules ask for {new['needs']}",
            "passed": passed,
        }
    if new.get("nothing_learned"):
        return {
            "study": study,
            "model": model,
            "pruner": "sync",
            "old": values_text(old_pick),
            "new": "nothing learned",
            "changed": old_pick is not None,
            "why": f"{new['nothing_learned']['why']}; best {pct(new['nothing_learned']['best'])}",
            "passed": passed,
        }
    pick = new["configs"][new["pick"]]["values"] if new.get("pick") else None
    changed = pick != old_pick
    why = evidence_text(new.get("evidence") or {})
    return {
        "study": study,
        "model": model,
        "pruner": "sync",
        "old": values_text(old_pick),
        "new": values_text(pick),
        "changed": changed,
        "why": f"{level}; {why}",
        "passed": passed,
    }


def rules_text(out: Path) -> str:
    """The rules' replay as Markdown: the studies and models whose pick the rules change, those they
    cannot tell without training, and those they keep (flagged or not), each once."""
    from tabulate import tabulate

    rows = rules_rows(out)
    changed = [r for r in rows if r["changed"]]
    unknown = [r for r in rows if r["changed"] is None]
    kept = [r for r in rows if r["changed"] is False]
    flagged = [r for r in kept if "FLAGGED" in r["why"]]
    head = (
        f"{len(rows)} rows (study, model) in {len({r['study'] for r in rows})} committed studies: the rules change "
        f"{len(changed)} picks, cannot tell {len(unknown)} without training runs the studies never trained, keep "
        f"{len(kept)} ({len(flagged)} of them flagged). The chance level: each study's records' (metrics.val.chance)."
    )

    def table(selected):
        return tabulate(
            [[r["study"], r["model"], r["pruner"], r["old"], r["new"], r["passed"], r["why"]] for r in selected],
            headers=["study", "model", "pruner", "old pick", "new pick", "rungs passed (step)", "why / what the pick rests on"],
            tablefmt="github",
            disable_numparse=True,
        )

    parts = [head]
    for title, selected in (
        ("Picks the rules change:", changed),
        ("Picks the rules cannot tell without training (the new pick needs the run named):", unknown),
        ("Picks the rules keep:", kept),
    ):
        if selected:
            parts += [title, table(selected)]
    return "\n\n".join(parts)


if __name__ == "__main__":
    main()
