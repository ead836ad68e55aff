"""Which pruner a learning-rate search should use, measured without training: Optuna's pruners
replayed on the validation curves of an exhaustive grid (docs/tuning.md, "Which pruner").

    python scripts/pruner_replay.py GRID_OUT [--search SEARCH_OUT] [--studies a,b] [--md FILE]

GRID_OUT holds studies run with ``--pruner none``: every grid value trained to the end, so each
trial's record holds its whole validation curve (``val_history``: the study's primary metric at
every validation). Training is deterministic (same config and seed: the same run, bitwise on the
CPU), so a search with any pruner would have seen exactly these curves, cut where it pruned. For
each row (a study's model) and each pruner below, the search is replayed with Optuna itself: a
fresh in-memory study with the study's own sampler (``bench.tune.study.make_sampler``: the grid in
the order ``bench tune`` runs it), the pruner, and an objective that reports the recorded curve
step by step and stops where ``should_prune`` says so. Per pruner:

- steps: the optimizer steps the search would train, over one full run's (a pruned trial costs
  the step it was stopped at; a finished one, its whole run);
- agree: the rows where the search picks the grid's learning rate (the best validation score of
  the finished trials, as ``bench tune`` picks: a record's score is its best validation
  checkpoint's, the one it keeps);
- regret: the grid's best validation score minus that of the run the search picked, in points
  (what a wrong pick costs; 0 where they agree).

With ``--search``, the replay of ``asha`` (bench's pruner, ``bench.tune.study.make_pruner``) is
checked against the search that was really run: the same trials pruned at the same steps. Only
reads; nothing is trained, nothing written under either OUT.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from tuning_cost import trials  # noqa: E402

from bench.config import canonical_text  # noqa: E402


def pruners(full_steps: int) -> dict[str, object]:
    """The pruners compared, by name: bench's asha (rungs from step 1: compared at every validation
    from the first), successive halving whose first rung is half the run, Optuna's median and 25th-
    percentile pruners (against the trials before, from the first validation), Hyperband, none."""
    import optuna

    from bench.tune.study import make_pruner

    return {
        "asha (bench)": make_pruner("asha"),
        "asha, first rung at 1/2": optuna.pruners.SuccessiveHalvingPruner(min_resource=full_steps // 2),
        "median": optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0),
        "percentile 25": optuna.pruners.PercentilePruner(25.0, n_startup_trials=1, n_warmup_steps=0),
        "median from 1/2": optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=full_steps // 2 - 1),
        "hyperband": make_pruner("hyperband"),
        "none": make_pruner("none"),
    }


def replay(meta: dict, curves: dict[str, tuple[list[tuple[int, float]], float]], pruner, model: str) -> list[dict]:
    """The search ``pruner`` would have run over these curves: per trial its values' key, the step
    it stopped at (its last step if it finished) and its final score (None if pruned). The study is
    named as ``bench tune`` names it (the model): Hyperband puts a trial in a bracket by a hash of
    the study's name and the trial's number."""
    import optuna

    from bench.tune.study import make_sampler, space_of, target

    params = space_of(meta)
    study = optuna.create_study(study_name=model, direction="maximize", sampler=make_sampler(meta), pruner=pruner)
    ran = []

    def objective(trial):
        key = key_of({p.key: p.suggest(trial) for p in params})
        curve, final = curves[key]
        for step, value in curve:
            trial.report(value, step)
            if trial.should_prune():
                ran.append({"key": key, "stopped": step, "final": None})
                raise optuna.TrialPruned()
        ran.append({"key": key, "stopped": curve[-1][0], "final": final})
        return final

    study.optimize(objective, n_trials=target(meta))
    return ran


def key_of(values: dict) -> str:
    return " ".join(f"{k}={canonical_text(v)}" for k, v in sorted(values.items()))


def picked(ran: list[dict]) -> str | None:
    done = [r for r in ran if r["final"] is not None]
    return max(done, key=lambda r: r["final"])["key"] if done else None  # max keeps the first on ties, as bench tune


def main() -> None:
    import optuna
    from _bench_util import emit
    from tabulate import tabulate

    from bench.tune.study import read_meta, study_folder, study_names, target

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("grid", type=Path, help="the OUT of the studies run exhaustively (--pruner none)")
    p.add_argument("--search", type=Path, help="the OUT of the same studies searched with --pruner asha: checks the replay")
    p.add_argument("--studies", help="comma list (default: every study in GRID/studies)")
    p.add_argument("--md", help="also write the tables to this Markdown file")
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = args.studies.split(",") if args.studies else study_names(args.grid)
    rows, checks = [], []
    for name in names:
        meta = read_meta(study_folder(args.grid, name))
        for model, found in trials(args.grid, name).items():
            done = [t for t in found if t["state"] == "COMPLETE"]
            if len({key_of(t["values"]) for t in done}) < target(meta):
                print(f"pruner_replay.py: {model} ({name}): the grid is not finished; left out", file=sys.stderr)
                continue
            primary = done[0]["record"]["primary_metric"]
            curves = {key_of(t["values"]): ([(e["step"], e[primary]) for e in t["record"]["val_history"]], t["val"]) for t in done}
            full = max(c[-1][0] for c, _ in curves.values())
            best_key = max(done, key=lambda t: (t["val"], -t["number"]))
            best = {"key": key_of(best_key["values"]), "val": best_key["val"]}
            finals = {k: v for k, (_, v) in curves.items()}
            for pname, pruner in pruners(full).items():
                ran = replay(meta, curves, pruner, model)
                pick = picked(ran)
                rows.append(
                    {
                        "row": f"{model} ({name})",
                        "pruner": pname,
                        "steps": sum(r["stopped"] for r in ran) / full,
                        "pick": pick,
                        "best": best["key"],
                        "regret": 100 * (best["val"] - finals[pick]),
                        "trace": ", ".join(
                            f"{r['key'].split('=')[-1]}{'' if r['final'] is not None else ' x' + str(r['stopped'])}" for r in ran
                        ),
                    }
                )
            if args.search:
                real = trials(args.search, name).get(model, [])
                asha = replay(meta, curves, pruners(full)["asha (bench)"], model)
                want = sorted((key_of(t["values"]), t["record"].get("steps_run")) for t in real)
                got = sorted((r["key"], r["stopped"]) for r in asha)
                checks.append([f"{model} ({name})", "yes" if want == got else f"no: search {want}, replay {got}"])
    per_row = tabulate(
        [
            [
                r["row"],
                r["pruner"],
                r["trace"],
                f"{r['steps']:.2f}",
                r["pick"].split("=")[-1],
                r["best"].split("=")[-1],
                f"{r['regret']:.1f}",
            ]
            for r in rows
        ],
        headers=[
            "row (study)",
            "pruner",
            "trials in order (x: pruned at step)",
            "steps / full run",
            "picks",
            "grid's best",
            "regret (pts)",
        ],
        tablefmt="github",
        disable_numparse=True,
    )
    summary = []
    for pname in dict.fromkeys(r["pruner"] for r in rows):
        mine = [r for r in rows if r["pruner"] == pname]
        summary.append(
            [
                pname,
                f"{statistics.mean(r['steps'] for r in mine):.2f}",
                f"{max(r['steps'] for r in mine):.2f}",
                f"{sum(r['steps'] <= 2.0 for r in mine)}/{len(mine)}",
                f"{sum(r['pick'] == r['best'] for r in mine)}/{len(mine)}",
                f"{statistics.mean(r['regret'] for r in mine):.2f}",
                f"{max(r['regret'] for r in mine):.1f}",
            ]
        )
    text = (
        tabulate(
            summary,
            headers=["pruner", "mean steps / full run", "max", "<= 2x", "picks the grid's lr", "mean regret (pts)", "max regret (pts)"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n\n"
        + per_row
    )
    if checks:
        text += (
            "\n\nThe replay of asha against the search really run ("
            + str(args.search)
            + "):\n\n"
            + tabulate(checks, headers=["row (study)", "same trials, same steps"], tablefmt="github", disable_numparse=True)
        )
    emit(text, args.md)


if __name__ == "__main__":
    main()
