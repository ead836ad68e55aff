"""Whether runs that differ only by some data settings trained the same: for each record with the
given ``--set`` overrides, its twin without them (same model, task, preset, seed and every other
override), compared on what training decided: the validation curve (every validation's step and
scores), the selected step and score, the steps run.

    python scripts/same_training.py --set data.n_test=1000 --out results mqar z60 modular-arithmetic

A larger test set changes what a run is scored on, not what it learns (the test draws are apart
from the training and validation streams, bench/tasks/draws.py); but a run trained again need not
repeat an older record bit for bit (bench/tables/probes-cpu-1000.yaml's header has a case), so
which re-tested runs hold the same training as the ones they replace is read here from the
records. Prints one line per task (pairs, the same, differing) and each differing pair with the
machines the two ran on where the records name them (``device.cpu`` / ``device.isa``: two vector
units round differently, and a run can part from its twin after many steps); exit status 1 if any
pair differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

DECIDED = ("val_history", "best_step", "best_val", "steps_run", "epochs_run")


def twin_key(rec: dict, given: set[str]) -> tuple:
    """The record's cell and seed with the ``given`` overrides left out."""
    rest = tuple(sorted(o for o in rec.get("overrides") or [] if o not in given))
    return rec["model"], rec["task"], rec["preset"], rec["seed"], rest


def pairs(out: Path, tasks: list[str], given: set[str]) -> dict[str, list[tuple[Path, Path]]]:
    """Per task, (record with the ``given`` overrides, its twin without them), finished runs only."""
    with_set, without = {}, {}
    for task in tasks:
        for path in sorted((out / "runs" / task).glob("*/*/*.json")):
            rec = json.loads(path.read_text())
            if rec.get("status") != "ok":
                continue
            has = given <= set(rec.get("overrides") or [])
            (with_set if has else without)[twin_key(rec, given)] = path
    found = defaultdict(list)
    for key, path in with_set.items():
        if key in without:
            found[key[1]].append((path, without[key]))
    return found


def differences(a: dict, b: dict) -> list[str]:
    """What training decided differently in two records (empty: the same)."""
    return [field for field in DECIDED if a.get(field) != b.get(field)]


def machines(a: dict, b: dict) -> str:
    """Where two records ran, as far as they say: the same processor and ISA, what differs, or
    which record does not name them (records made before bench wrote ``device.cpu`` / ``isa``)."""
    da, db = a.get("device") or {}, b.get("device") or {}
    missing = [name for name, d in (("record", da), ("twin", db)) if "isa" not in d]
    if missing:
        return f"not recorded in the {' and the '.join(missing)}"
    diff = [f"{key} {da.get(key)} vs {db.get(key)}" for key in ("cpu", "isa") if da.get(key) != db.get(key)]
    return "; ".join(diff) if diff else "the same cpu and isa"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="+", help="tasks whose records to pair, e.g. mqar z60")
    parser.add_argument(
        "--set",
        dest="given",
        action="append",
        required=True,
        metavar="KEY=VALUE",
        help="the override(s) the re-tested runs have and their twins lack, e.g. data.n_test=1000",
    )
    parser.add_argument("--out", default="results", help="the results folder holding runs/ (default: results)")
    args = parser.parse_args(argv)
    out, given = Path(args.out), set(args.given)
    if not (out / "runs").is_dir():
        print(f"same_training: {out}/runs is not a folder; give --out the results folder that holds runs/", file=sys.stderr)
        return 2
    found = pairs(out, args.tasks, given)
    rows, differing = [], []
    for task in args.tasks:
        same = 0
        for new, old in found.get(task, []):
            a, b = json.loads(new.read_text()), json.loads(old.read_text())
            diff = differences(a, b)
            if diff:
                differing.append([str(new.relative_to(out)), str(old.relative_to(out)), ", ".join(diff), machines(a, b)])
            else:
                same += 1
        n = len(found.get(task, []))
        rows.append([task, n, same, n - same])
    print(
        f"Records with {' '.join(sorted(given))} against their twins without it, under {out}/runs: "
        f"the same training = equal {', '.join(DECIDED)}.\n"
    )
    print(tabulate(rows, headers=["task", "pairs", "the same", "differ"], tablefmt="github"))
    if differing:
        print()
        print(tabulate(differing, headers=["record", "twin", "differs in", "machines"], tablefmt="github"))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
