"""``bench tune``: an Optuna study per model on one task and preset (bench/tune), its best
settings printed and written as a registry overlay; ``--report`` draws the study."""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .common import _check_names, _names, note


def cmd_tune(args, registry) -> int:
    import importlib.util

    from tabulate import tabulate

    from ..config import canonical_overrides
    from ..grid import launcher_profile
    from ..records import ensure_writable
    from ..tune import launch, study_folder
    from ..tune.study import PRUNERS, check_meta, create, read_meta, results

    if importlib.util.find_spec("optuna") is None:
        raise UserError('bench tune needs Optuna: pip install "bench[tune]"')
    _check_names(registry, [], [args.task])
    preset = args.preset
    registry.preset(args.task, preset)
    name = args.study or f"{args.task}-{preset}"
    if "/" in name or name.startswith("."):
        raise UserError(f"--study {name!r}: a name, not a path (the study lives in OUT/studies/NAME)")
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
    if args.jobs < 1:
        raise UserError(f"--jobs takes a whole number >= 1, got {args.jobs}")
    if args.pruner not in PRUNERS:
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
    trials = args.trials if args.trials is not None else (size if grid else 8)
    meta = {"task": args.task, "preset": preset, "models": models, "space": [p.text for p in params], "set": fixed,
            "seed": args.seed, "pruner": args.pruner, "trials": trials}
    profile = launcher_profile(args.launcher, args.slurm_profile, args.slurm)
    ensure_writable(Path(args.out))
    continued = check_meta(folder, meta)  # before anything is written: a study of other settings is refused
    create(folder, meta)
    if continued and read_meta(folder)["trials"] != trials:
        from ..records import write_json_atomic

        write_json_atomic(folder / "study.json", meta)  # more (or fewer) trials: the same study, continued
    note(f"bench: tuning {', '.join(models)} on {args.task} ({preset} preset): {trials} trial(s) each, "
         f"{'grid' if grid else 'TPE'} over {' '.join(p.text for p in params)}, pruner {args.pruner}"
         f"{', continuing study ' + name if continued else ''}; study in {folder}")
    launch(Path(args.out), name, registry, jobs=args.jobs, launcher=args.launcher, profile=profile)
    rows = results(Path(args.out), name)
    print(tabulate([[r["model"], _values(r["best"]), f"{100 * r['val']:.1f}" if r["val"] is not None else "—",
                     f"{r['complete'] + r['pruned'] + r['failed']} ({r['complete']} finished, {r['pruned']} pruned, {r['failed']} failed)",
                     r["record"] or "—"] for r in rows],
                   headers=["model", "best setting", "val % ↑", "trials", "best record (under OUT)"], tablefmt="github",
                   disable_numparse=True))
    best = {r["model"]: r["best"] for r in rows if r["best"] is not None}
    if best:
        from ..tune.overlay import overlay, tuned_name, write_best, write_overlay

        path = folder / "tuned.yaml"
        sets = "".join(f" --set {s}" for s in fixed)
        command = (f"bench compare --registry {path} --models {','.join(tuned_name(m) for m in best)} --tasks {args.task} "
                   f"--preset {preset}{sets} --out {args.out} --seeds 0,1,2 --run")
        write_overlay(path, overlay(registry, meta, best, name), meta, command)
        write_best(folder, meta, rows)
        print(f"wrote {path}; train the final seeds at the tuned settings with:\n  {command}")
    missing = [r["model"] for r in rows if r["best"] is None]
    if missing:
        note(f"bench: no finished trial for {', '.join(missing)} (see the study's logs); run the same command to go on")
    return 0 if not missing else 1


def _values(values: dict | None) -> str:
    from ..config import canonical_text

    return " ".join(f"{k}={canonical_text(v)}" for k, v in values.items()) if values else "—"


def _report(folder: Path, name: str) -> int:
    from tabulate import tabulate

    from ..tune.report import table, write_report
    from ..tune.study import read_meta, results

    meta = read_meta(folder)
    rows = results(folder.parent.parent, name)
    if not any(r["trials"] for r in rows):
        raise UserError(f"study {name!r} has no finished trial yet; run bench tune first")
    headers, body = table(rows)
    print(f"Study {name}: expected best validation (%) after n trials (Dodge et al. 2019), "
          f"{meta['task']} ({meta['preset']} preset)\n")
    print(tabulate(body, headers=headers, tablefmt="github", disable_numparse=True))
    metric = _metric(folder.parent.parent, rows)
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
