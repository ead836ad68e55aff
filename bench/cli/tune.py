"""``bench tune``: an Optuna study per model on one task and preset (bench/tune), its best
settings printed and written as a registry overlay; ``--report`` draws the study."""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import UserError
from ..parsing import check_name
from .common import _check_names, _names, note

#: the most trials per model a study takes (each is a run)
MAX_TRIALS = 10_000
#: where and since when the running bench tune writes (the line a stopped command ends with)
TUNE_STARTED: dict = {}
#: what the summary says of a model whose every score is at the validation's chance level (no pick)
NOTHING_LEARNED = "nothing learned"


def cmd_tune(args, registry) -> int:
    import importlib.util

    from tabulate import tabulate

    from ..config import canonical_overrides
    from ..grid import launcher_profile
    from ..records import ensure_writable
    from ..tune import launch, live_workers, study_folder
    from ..tune.protocol import rung_fractions
    from ..tune.study import PRUNERS, check_journal, check_meta, create, read_meta, results

    if importlib.util.find_spec("optuna") is None:
        raise UserError('bench tune needs Optuna: pip install "bench[tune]"')
    _check_names(registry, [], [args.task])
    preset = args.preset
    registry.preset(args.task, preset)
    if args.study is not None and not args.study.strip():
        raise UserError("--study is empty; give the study a name (it lives in OUT/studies/NAME), or leave --study out for TASK-PRESET")
    name = args.study or f"{args.task}-{preset}"
    check_name(name, "study", "--study")  # the study lives in OUT/studies/NAME
    folder = study_folder(Path(args.out), name)
    if args.report:
        return _report(folder, name)
    if not args.models:
        raise UserError("--models is needed to tune (e.g. --models transformer,ut)")
    models = _names(args.models, "models")
    _check_names(registry, models, [])
    if len(set(models)) != len(models):
        raise UserError(f"--models {args.models!r} names a model twice")
    if args.trials is not None and args.trials < 1:
        raise UserError(f"--trials takes a whole number >= 1, got {args.trials}")
    if args.trials is not None and args.trials > MAX_TRIALS:
        raise UserError(
            f"--trials {args.trials}: at most {MAX_TRIALS} trials per model (each trial is a run: {MAX_TRIALS} runs of the "
            f"{args.preset} preset are already days of CPU); give a number <= {MAX_TRIALS}, or a --grid, which is tuned whole"
        )
    if args.jobs < 1:
        raise UserError(f"--jobs takes a whole number >= 1, got {args.jobs}")
    if args.pruner is not None and args.pruner not in PRUNERS:
        raise UserError(f"--pruner {args.pruner!r}: choose one of {', '.join(PRUNERS)}")
    if not 0 <= args.seed < 2**32:
        raise UserError(f"--seed takes a whole number from 0 to 4294967295, got {args.seed}")
    from ..tune.space import check_space, parse_space

    params = parse_space(args.space, args.grid)
    fixed = canonical_overrides(args.set)
    check_space(params, registry, models, args.task, preset, fixed)
    grid = all(p.kind == "grid" for p in params)
    size = 1
    for p in params:
        size *= len(p.args)
    pruner = args.pruner or ("sync" if grid else "asha")
    if pruner == "sync" and not grid:
        raise UserError("--pruner sync tunes a grid (every configuration reaches each rung): give --grid, or another --pruner for --space")
    if pruner == "sync" and args.trials is not None and args.trials != size:
        raise UserError(f"--pruner sync runs every configuration of the grid ({size}); leave --trials out")
    if pruner == "sync" and not 0 <= args.seed < 2**32 - 1:
        raise UserError(f"--seed takes a whole number from 0 to 4294967294 with --pruner sync (it also trains seed + 1), got {args.seed}")
    trials = args.trials if args.trials is not None else (size if grid else 8)
    objective = _objective(registry, models[0], args.task, preset, fixed, args.objective)
    meta = {
        "task": args.task,
        "preset": preset,
        "models": models,
        "space": [p.text for p in params],
        "set": fixed,
        "seed": args.seed,
        "pruner": pruner,
        "trials": trials,
        "objective": objective,
    }
    if pruner == "sync":
        from ..tune.sync import ETA, Z, tuning_seeds

        meta["protocol"] = {"eta": ETA, "z": Z, "seeds": tuning_seeds(meta)}
    profile = launcher_profile(args.launcher, args.slurm_profile, args.slurm)
    ensure_writable(Path(args.out))
    continued = check_meta(folder, meta)  # before anything is written: a study of other settings is refused
    check_journal(folder, live=live_workers(Path(args.out), name) > 0)  # a damaged study is one line, before anything is written
    if pruner == "sync":
        from ..tune.sync import brackets

        brackets(folder)  # a damaged bracket.json, alike
    meta["validation"] = _validation(registry, meta, models[0], args.val_reason)  # its size: one line when under 1,000
    create(folder, meta)
    have = read_meta(folder)
    if continued and (have["trials"] != trials or have.get("validation") != meta["validation"]):
        from ..records import write_json_atomic

        # more (or fewer) trials: the same study, continued; the validation's size or reason alone: only that key
        write_json_atomic(folder / "study.json", meta if have["trials"] != trials else {**have, "validation": meta["validation"]})
    how = (
        f"synchronous successive halving (rungs at {', '.join(f'{f:g}' for f in rung_fractions(size))} of a run, eta "
        f"{meta['protocol']['eta']}, stopped only beyond {meta['protocol']['z']:g} SE of the best; seeds {meta['protocol']['seeds']})"
        if pruner == "sync"
        else f"pruner {pruner}"
    )
    note(
        f"bench: tuning {', '.join(models)} on {args.task} ({preset} preset): {trials} trial(s) each, "
        f"{'grid' if grid else 'TPE'} over {' '.join(p.text for p in params)}, objective: validation {objective}, {how}"
        f"{', continuing study ' + name if continued else ''}; study in {folder}"
    )
    TUNE_STARTED.update(out=Path(args.out), t0=time.time())
    launch(Path(args.out), name, registry, jobs=args.jobs, launcher=args.launcher, profile=profile)
    others = live_workers(Path(args.out), name)
    rows = results(Path(args.out), name)
    for r in rows:
        r["val_chance"] = _val_chance(Path(args.out), r, objective)
    print(
        tabulate(
            [
                [
                    r["model"],
                    NOTHING_LEARNED if r.get("nothing_learned") else _values(r["best"]),
                    _val_text(r),
                    f"{r['complete'] + r['pruned'] + r['failed']} ({r['complete']} finished, {r['pruned']} pruned, {r['failed']} failed)",
                    r["record"] or "—",
                ]
                for r in rows
            ],
            headers=["model", "best setting", "val % ↑ (chance)", "trials", "best record (under OUT)"],
            tablefmt="github",
            disable_numparse=True,
        )
    )
    if any(r["val_chance"] for r in rows):
        from ..report.cells import CHANCE, CHANCE_SES, LEARNED_SHARE

        still = [r["model"] for r in rows if r["val_chance"] and r["val_chance"]["at_chance"]]
        print(
            f"(chance: the best record's validation chance level p, the best trivial strategy's score; {CHANCE} = the best "
            f"setting's validation score does not clear p by max({CHANCE_SES} SE, {LEARNED_SHARE:g} x (1 - p)), SE = sqrt(p(1-p)/n), "
            f"n = the validation examples){': at chance on validation: ' + ', '.join(still) if still else ''}"
        )
    if pruner == "sync":
        _print_budget(folder, models)
    _print_evidence(rows)
    nothing = [r["model"] for r in rows if r.get("nothing_learned")]
    for r in rows:
        if r.get("nothing_learned"):
            note(
                f"bench: {r['model']}: {NOTHING_LEARNED}: {r['nothing_learned']['why']}; no tuned value is written for it "
                "(tuned.yaml and best.json's models leave it out, best.json's nothing_learned names it: a table reads its row "
                "as not tuned)"
            )
    best = {r["model"]: r["best"] for r in rows if r["best"] is not None}
    if others:
        note(
            f"bench: study {name} is still held by {others} other worker(s) (another bench tune on it): the table above is not final "
            f"and tuned.yaml / best.json are not written; run the same command when they are done"
        )
        return 1
    if best:
        from ..tune.overlay import overlay, tuned_name, write_best, write_overlay

        path = folder / "tuned.yaml"
        sets = "".join(f" --set {s}" for s in fixed)
        from ..tune.overlay import tuning_seeds

        finals = ",".join(str(s) for s in [s for s in range(len(tuning_seeds(meta)) + 3) if s not in tuning_seeds(meta)][:3])
        command = (
            f"bench compare --registry {path} --models {','.join(tuned_name(m) for m in best)} --tasks {args.task} "
            f"--preset {preset}{sets} --out {args.out} --seeds {finals} --run"
        )
        write_overlay(path, overlay(registry, meta, best, name), meta, command)
        write_best(folder, meta, rows)
        print(f"wrote {path}; train the final seeds at the tuned settings with:\n  {command}")
    elif nothing:
        from ..tune.overlay import write_best

        (folder / "tuned.yaml").unlink(missing_ok=True)  # no model learned: no tuned setting to give
        print(f"wrote {write_best(folder, meta, rows)} (no model has a tuned value)")
    missing = [r["model"] for r in rows if r["best"] is None and not r.get("nothing_learned")]
    if missing:
        note(f"bench: no finished trial for {', '.join(missing)} (see the study's logs); run the same command to go on")
    return 0 if not missing else 1


def _objective(registry, model: str, task: str, preset: str, fixed: list[str], given: str | None) -> str:
    """The study's objective: --objective, else the metric the task's tables report (its first
    report metric, e.g. flip-flop's last_acc), checked against the metrics its validation has
    (its report metrics, then the rates every split records: a table may report parity's
    per-prefix token_acc though parity's own tables show acc)."""
    import importlib

    from ..config import resolve_run
    from ..records import SPLIT_RATES
    from ..tune.protocol import parse_objective

    target = resolve_run(registry, model, task, preset, fixed).task.target
    module, _, cls = target.partition(":")
    task_cls = getattr(importlib.import_module(module), cls)
    known = list(dict.fromkeys([*getattr(task_cls, "report_metrics", ()), task_cls.metric, *SPLIT_RATES]))
    if given is None:
        return known[0]
    metric, _ = parse_objective(given)
    if metric not in known:
        raise UserError(f"--objective {given!r}: {task}'s validation reports {', '.join(known)}; name one of them")
    return given.strip()


def _validation(registry, meta: dict, model: str, reason: str | None) -> dict | None:
    """The validation split's size against MIN_VAL (bench/tune/validation.py): one line when it is
    smaller, naming the data setting that raises it, and what the study records ({"n", "minimum",
    "settings", "reason"}; None when the split cannot be read here, which the runs will then say)."""
    from ..tune.validation import MIN_VAL, resolved, size_warning, val_columns, val_size_settings

    if reason is not None and not reason.strip():
        raise UserError("--val-reason is empty; say why the study selects on a validation split under 1,000 examples")
    config = resolved(registry, meta, model)
    try:
        n = val_columns(config)[2]
    except (UserError, OSError, ValueError, ZeroDivisionError, IndexError) as exc:  # the runs will say it in their words
        note(f"bench: the validation split's size cannot be read before the runs ({exc})")
        return None
    settings = val_size_settings(config)
    line = size_warning(n, settings, reason and reason.strip())
    if line:
        note(line)
    return {"n": n, "minimum": MIN_VAL, "settings": settings, "reason": (reason.strip() if reason and n < MIN_VAL else None)}


def _print_evidence(rows: list[dict]) -> None:
    """Per model, what its pick rests on: seeds and scores (bench/tune/sync.py: evidence_text), and its flags."""
    from ..tune.sync import evidence_text

    lines = []
    for r in rows:
        found = {"pick": None, "nothing_learned": r["nothing_learned"]} if r.get("nothing_learned") else r.get("evidence")
        if found:
            lines.append(f"  {r['model']}: {evidence_text(found)}")
    if lines:
        print("\nWhat each pick rests on (validation objective, %, per tuning seed):")
        print("\n".join(lines))


def _print_budget(folder: Path, models: list[str]) -> None:
    """Per row: the rungs (step: configurations that reached it), the second seed's configurations,
    the grid's extension and the steps trained, in full runs: the same rungs for every row."""
    from tabulate import tabulate

    from ..tune.sync import brackets, budget

    state = brackets(folder)
    body = []
    for model in models:
        if model not in state:
            continue
        b = budget(state[model])
        ext = b["extension"] or {}
        extended = f"{ext['key']}={ext['value']}" + (" (refused: outside the domain)" if "refused" in ext else "") if "key" in ext else "—"
        body.append(
            [
                model,
                ", ".join(f"{s}: {n}" for s, n in b["rungs"]),
                ", ".join(str(s) for s in b["passed"]) or "—",
                ", ".join(b["second"]) or "—",
                extended,
                str(b["steps"]),
                f"{b['full_runs']:.2f}",
            ]
        )
    print("\nBudget per row (every row: the same configurations and rungs):")
    print(
        tabulate(
            body,
            headers=[
                "model",
                "rungs (step: configurations)",
                "passed (none above chance)",
                "second seed",
                "grid extended",
                "steps trained",
                "full runs",
            ],
            tablefmt="github",
            disable_numparse=True,
        )
    )


def _values(values: dict | None) -> str:
    from ..config import canonical_text

    return " ".join(f"{k}={canonical_text(v)}" for k, v in values.items()) if values else "—"


def _val_chance(out: Path, row: dict, objective: str) -> dict | None:
    """The best setting's validation score against its record's chance level on validation (the
    tables' ``~`` rule, bench/report/cells.py): {"p", "n", "at_chance"}; None without a record or
    a chance level (a metric without one, e.g. a loss)."""
    from ..records import read_record
    from ..report.cells import LENGTH_AVERAGED, at_chance, chance_level
    from ..tune.protocol import parse_objective

    if not row["record"] or row["val"] is None or not (out / row["record"]).exists():
        return None
    metric, how = parse_objective(objective)
    level = chance_level([read_record(out / row["record"], quiet=True)], "val", LENGTH_AVERAGED + metric if how else metric)
    if level is None:
        return None
    return {"p": level[0], "n": level[1], "at_chance": at_chance(row["val"], level)}


def _val_text(row: dict) -> str:
    if row["val"] is None:
        return "—"
    chance = row.get("val_chance")
    if not chance:
        return f"{100 * row['val']:.1f}"
    from ..report.cells import CHANCE

    return f"{100 * row['val']:.1f}{' ' + CHANCE if chance['at_chance'] else ''} ({100 * chance['p']:.1f})"


def _report(folder: Path, name: str) -> int:
    from tabulate import tabulate

    from ..tune.report import table, write_report
    from ..tune.study import read_meta, results

    meta = read_meta(folder)
    rows = results(folder.parent.parent, name)
    if not any(r["trials"] for r in rows):
        raise UserError(f"study {name!r} has no finished trial yet; run bench tune first")
    headers, body = table(rows)
    print(f"Study {name}: expected best validation (%) after n trials (Dodge et al. 2019), {meta['task']} ({meta['preset']} preset)\n")
    print(tabulate(body, headers=headers, tablefmt="github", disable_numparse=True))
    metric = meta.get("objective") or _metric(folder.parent.parent, rows)
    md, png = write_report(folder, rows, metric)
    print(f"wrote {md} and {png}")
    return 0


def _metric(out: Path, rows: list[dict]) -> str:
    from ..records import read_record

    for r in rows:
        if r["record"]:
            rec = read_record(out / r["record"], quiet=True)
            if rec.get("primary_metric"):
                return rec["primary_metric"]
    return "metric"
