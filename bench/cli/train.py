"""The commands that train: ``bench run`` (one model on one task), ``compare`` and ``reproduce``
(with --run, the missing cells through the grid launcher)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UserError
from .common import _check_names, _fit, _names, _print_summary, _trainer_kwargs, note, parse_seeds


def cmd_run(args, registry) -> int:
    from ..grid_cell import Cell
    from ..runner.cell import plan_cell
    from ..runner.planning import check_logger

    seeds = parse_seeds(args)
    _check_names(registry, [args.model], [args.task])
    check_logger(args.logger)
    preset = args.preset or "small"
    # every seed planned (every check on the input) before the first line and any training; each plan is run as made
    plans = [
        plan_cell(
            Cell(args.model, args.task, preset, seed, tuple(args.set or ())),
            args.out,
            registry=registry,
            trainer_kwargs=_trainer_kwargs(args),
        )
        for seed in seeds
    ]
    chosen = "" if args.preset else " (the default; --preset smoke|small|paper to choose)"

    def announce(plan):  # the first line of each run, once its input is checked: the preset it trains with
        note(f"bench: {plan.model} on {plan.task}, preset {plan.preset}{chosen}, seed {plan.seed}: training into {plan.folder}")

    from ..runner.lifecycle import run_plan  # Lightning: loaded once every seed's input is checked

    records = []
    for plan in plans:
        rec = run_plan(plan, rerun=args.rerun, progress="none" if args.quiet else "auto", logger=args.logger, on_start=announce)
        if rec.get("rank", 0) != 0:
            continue  # other ranks of a multi-device run: rank 0 reports
        records.append(rec)
        if rec.get("skipped"):
            note(
                f"bench: {rec['model']} on {rec['task']}, preset {rec['preset']}{chosen}, seed {rec['seed']}: "
                "already finished (pass --rerun to train it again)"
            )
        print(f"record: {rec['path']}")
    if records:
        _print_summary(records)
    return 0 if all(r["status"] == "ok" for r in records) else 1


def cmd_compare(args, registry) -> int:
    from tabulate import tabulate

    from ..grid import plan_grid
    from ..records import other_code, overrides_tag
    from ..report.cells import OTHER_CODE_RULE, load_records
    from ..report.leaderboard import STAT_TEXT, chance_note, plot, seeds_note, stale_note, table, write_tables
    from ..report.stale import mark_stale

    models = _names(args.models, "models")
    tasks = _names(args.tasks, "tasks") if args.tasks else None
    _check_names(registry, models, tasks or [])
    if args.budget or args.at or args.plot in ("budget", "state"):
        return _compare_budget(args, registry, models, tasks)
    failed = []
    if args.run:
        if not tasks:
            raise _ask_for_tasks(args, registry, "--run needs --tasks to know what to train")
        profile = _grid_profile(args)
        grid = plan_grid(registry, models, tasks, parse_seeds(args), args.preset, args.set, Path(args.out), rerun=args.rerun)
        failed = _train_grid(args, registry, grid.todo, grid.incompatible, profile, f"{len(grid.finished)} already finished")
    tag = overrides_tag(args.set)
    records = load_records(Path(args.out), models, tasks, args.preset, tag)
    if not tasks:
        tasks = sorted({t for (_, t) in records})
    if not records:
        what = f"no records for models {', '.join(models)} with preset {args.preset!r} under {args.out}/runs"
        if not args.tasks:
            raise _ask_for_tasks(args, registry, what)
        raise UserError(f"{what}; train them with: {_compare_command(args, registry, run=True)}")
    stale = mark_stale(registry, records, args.preset, args.set)
    headers, rows = table(records, models, tasks, stat=args.stat)
    if args.state:
        headers, rows = _with_state(registry, args, records, models, tasks, headers, rows)
    text = seeds_note(records, models, tasks)
    if chance := chance_note(records, models, tasks):
        text += "; " + chance
    if stale:
        text += "; " + stale_note(stale, models, tasks, args)
    if any(other_code(r) for recs in records.values() for r in recs if r.get("status") == "ok"):
        text += "; " + OTHER_CODE_RULE
    print(tabulate(rows, headers=headers, tablefmt="github"))
    print(f"({text}; cells are {STAT_TEXT[args.stat]} in %)")
    if args.set:
        text += f"; overrides: {' '.join(args.set)}"
    md, csv_path = write_tables(Path(args.out), args.preset, models, tasks, headers, rows, text, tag, stat=args.stat)
    print(f"wrote {md} and {csv_path}")
    if args.plot == "length":
        for path in plot(Path(args.out), args.preset, records, models, tasks):
            print(f"wrote {path}")
    if failed:
        print(f"{len(failed)} cell(s) failed: " + "; ".join(c.name for c, _ in failed), file=sys.stderr)
    return 1 if failed else 0


CHEAP_TASK = "parity"  # the task a hint names as a quick first one (smoke preset: seconds to a minute a run, docs/presets.md)


def _compare_command(args, registry, run: bool = False, tasks: str | None = None, preset: str | None = None) -> str:
    """The ``bench compare`` command of ``args`` as it can be typed again (``tasks`` / ``preset``
    instead of the given ones; and --run)."""
    import shlex

    from ..parsing import default_out

    words = [
        "bench",
        "compare",
        "--models",
        args.models,
        "--tasks",
        tasks or args.tasks,
        "--preset",
        preset or args.preset,
        *(["--out", args.out] if args.out != default_out() else []),
        *(w for item in args.set or [] for w in ("--set", item)),
        *(["--seeds", args.seeds] if args.seeds else ["--seed", args.seed] if args.seed else []),
        *(["--run"] if run else []),
    ]
    return shlex.join(words)


def _ask_for_tasks(args, registry, why: str) -> UserError:
    """No --tasks where they are needed: ask for them (never choose), naming a quick first one."""
    cheap = CHEAP_TASK if CHEAP_TASK in registry.task_names() else registry.task_names()[0]
    return UserError(
        f"{why}; name the tasks with --tasks (bench list tasks shows them; every run's time depends on the task and "
        f"--preset, docs/presets.md) - a quick first one to try: {_compare_command(args, registry, True, cheap, 'smoke')}"
    )


def _with_state(registry, args, records, models, tasks, headers, rows):
    """``compare --state``: a column per task, the bytes of each model's streaming state (bench/budget.py)."""
    from ..budget import state_column

    for task in tasks:
        header, cells = state_column(registry, records, models, task, args.preset, args.set)
        headers, rows = [*headers, header], [[*row, cell] for row, cell in zip(rows, cells)]
    return headers, rows


def _compare_budget(args, registry, models, tasks) -> int:
    """``compare --budget``: per task, every model's width at every multiple of the Transformer's
    budget (printed), its runs trained with --run, the table and (--plot budget) the plot."""
    from tabulate import tabulate

    from .. import budget
    from ..grid import plan_grid
    from ..report.leaderboard import STAT_TEXT, write_tables

    if args.plot == "state":  # accuracy against state bytes at several widths: the width sweep
        if args.budget not in (None, "width"):
            raise UserError(f"--plot state draws the width sweep (--budget width); with --budget {args.budget} use --plot budget")
        args.budget, args.at = "width", args.at or STATE_WIDTHS
    if not args.budget:
        raise UserError("--at and --plot budget go with --budget params|flops|state|width")
    if not tasks:
        raise UserError("--budget needs --tasks: the widths are chosen per task")
    kind = budget.parse_budget(args.budget)
    multiples = budget.parse_at(kind, args.at)
    profile = _grid_profile(args) if args.run else None
    plans = {task: budget.plan_budget(registry, models, task, args.preset, args.set, kind, multiples) for task in tasks}
    for task, widths in plans.items():  # the chosen widths, as the --set items of their runs
        for w in widths:
            print(
                f"{task} {w.label}: d_model={w.d_model}"
                + (f" d_ff={w.d_ff}" if w.d_ff else "")
                + f", {w.ratio:.3f}x the Transformer's {budget.FIGURE[kind]}: "
                + (" ".join(f"--set {s}" for s in w.overrides) or "(the preset's width)")
            )
    failed = []
    if args.run:
        todo, incompatible, finished = [], [], 0
        for task, widths in plans.items():
            for w in widths:
                grid = plan_grid(
                    registry,
                    [w.model],
                    [task],
                    parse_seeds(args),
                    args.preset,
                    budget.run_overrides(w, args.set),
                    Path(args.out),
                    rerun=args.rerun,
                )
                todo, incompatible, finished = todo + grid.todo, incompatible + grid.incompatible, finished + len(grid.finished)
        failed = _train_grid(args, registry, todo, incompatible, profile, f"{finished} already finished")
    for task, widths in plans.items():
        records = budget.load(Path(args.out), widths, args.preset, args.set)
        headers, rows = budget.budget_table(widths, records, kind, args.stat)
        text = (
            f"{task}: widths at {', '.join(map(budget.multiple_text, multiples))} the Transformer's {budget.BUDGET_TEXT[kind]}"
            if kind != "width"
            else f"{task}: d_model {', '.join(f'{d:g}' for d in multiples)}; state bytes x the Transformer's"
        )
        print(tabulate(rows, headers=headers, tablefmt="github"))
        print(f"({text}; cells are {STAT_TEXT[args.stat]} in %)")
        labels = [w.label for w in widths]
        md, csv_path = write_tables(Path(args.out), args.preset, labels, [task], headers, rows, text, f"budget-{kind}", stat=args.stat)
        print(f"wrote {md} and {csv_path}")
        if args.plot:  # --plot or --plot budget: the budget plot
            for path in budget.plot(Path(args.out), args.preset, widths, records, kind):
                print(f"wrote {path}")
    if failed:
        print(f"{len(failed)} cell(s) failed: " + "; ".join(c.name for c, _ in failed), file=sys.stderr)
    return 1 if failed else 0


STATE_WIDTHS = "32,64,128"  # --plot state's d_model values when --at is not given


def _grid_profile(args) -> dict | None:
    """The grid options' checks (GRID_OPTIONS), before anything is planned: the SLURM profile, or None."""
    from ..grid import launcher_profile

    if args.jobs < 1 or args.runs_per_gpu < 1:
        raise UserError("--jobs and --runs-per-gpu take a whole number >= 1")
    return launcher_profile(args.launcher, args.slurm_profile, args.slurm)


def _train_grid(args, registry, todo: list, incompatible: list, profile: dict | None, finished: str = "") -> list:
    """The one grid call of `compare --run` and `reproduce --run`: notes, then the cells through
    the launcher; returns the failed cells."""
    from ..grid import run_grid

    skipped: dict[tuple[str, str], list[str]] = {}  # (task, why) -> the models skipped for it: one line each
    for cell, why in incompatible:
        models = skipped.setdefault((cell.task, why), [])
        models += [cell.model] if cell.model not in models else []
    for (task, why), models in skipped.items():
        note(f"skipped: {', '.join(models)} on {task}: {why}")
    skipped_text = f", {len(incompatible)} skipped (above)" if incompatible else ""
    note(f"grid: {len(todo)} to train" + (f", {finished}" if finished else "") + skipped_text)
    return run_grid(
        registry,
        todo,
        Path(args.out),
        jobs=args.jobs,
        launcher=args.launcher,
        runs_per_gpu=args.runs_per_gpu,
        trainer_args=_trainer_kwargs(args),
        rerun=args.rerun,
        profile=profile,
    )


def _fill_writeups(out: Path, registry) -> int:
    """``bench reproduce --writeups``: every table a write-up in ``out`` names, rebuilt from the
    records by the command its generated Markdown names (with this ``out``), then every block filled."""
    import shlex

    from ..records import ensure_writable
    from ..report import reproduce
    from ..report.outputs import command_of
    from .parser import build_parser

    ensure_writable(out)
    filled = []
    for name, md in reproduce.blocks_tables(out).items():
        command = command_of(md.read_text())
        if not command:
            raise UserError(f"{md} names no 'bench reproduce ...' command under its title: rebuild it with bench reproduce")
        args = build_parser().parse_args(shlex.split(command)[1:])
        table, preset, own = reproduce.select_table(
            args.table,
            registry,
            args.preset,
            _names(args.models, "models") if args.models else None,
            parse_seeds(args) if args.seeds is not None else None,
            args.set,
            out,
        )
        command = reproduce.command_text(table, out, args.preset, args.models, args.seeds, args.set, args.check_stale)
        result = reproduce.reproduce(table, own, preset, out, command, args.set, check_stale=args.check_stale)
        filled += [p for p in result["paths"] if p.parent == out]
        print(f"rebuilt {name}: " + ", ".join(str(p) for p in result["paths"] if p.parent.name == "reproduce" and p.suffix == ".md"))
    filled += reproduce.fill_writeups(out)
    print("write-ups filled: " + (", ".join(sorted({str(p) for p in filled})) or "none changed"))
    return 0


def _list_tables(args, out: Path, registry) -> int:
    """``reproduce --list``: the table files only (bench/report/table_file.py: no torch, no record
    read); with --records, each table's cells with records counted (bench/report/reproduce.py)."""
    from tabulate import tabulate

    if args.records:
        from ..report import reproduce

        headers, rows = ["table", "preset", "with records", "description"], reproduce.list_tables(out, registry=registry)
    else:
        from ..report.table_file import list_files

        headers, rows = ["table", "preset", "kind", "written", "description"], list_files(out)
    print(tabulate(_fit(rows, headers, args.full), headers=headers, tablefmt="simple"))
    broken = [row[0] for row in rows if "BROKEN" in row[1:4]]
    if broken:
        note(f"bench: warning: {len(broken)} table file(s) cannot be read: {', '.join(broken)} (the description says why)")
    return 0


def cmd_reproduce(args, registry) -> int:
    from tabulate import tabulate

    from ..parsing import default_out, reference_out

    out = Path(args.out or reference_out())  # where the records are read (and, with --run, trained into)
    tables_out = Path(args.out) if args.out else out if args.run else Path(default_out())  # the reference tables only when asked
    if args.list_tables:
        return _list_tables(args, out, registry)
    if args.records:
        raise UserError("--records goes with --list (bench reproduce --list --records)")
    if args.writeups:
        if args.table or args.run:
            raise UserError("--writeups rebuilds the tables the write-ups name from their records: give no table name and no --run")
        if not args.out:
            raise UserError("--writeups rewrites the write-ups (*.md) of the folder it reads: name it, e.g. --out results (the checkout's)")
        return _fill_writeups(out, registry)
    if not args.table:
        raise UserError("name a table (e.g. bench reproduce rsa-table2), or pass --list or --writeups")
    from ..records import ensure_writable
    from ..report import reproduce

    profile = _grid_profile(args)
    for folder in {out, tables_out} if args.run else {tables_out}:
        ensure_writable(folder)
    models = _names(args.models, "models") if args.models else None
    seeds = parse_seeds(args) if args.seeds is not None else None
    table, preset, registry = reproduce.select_table(args.table, registry, args.preset, models, seeds, args.set, out)
    failed = []
    if args.run and reproduce.measures(table):  # measured now, not trained (a cost table: bench/report/cost_table.py)
        path = reproduce.measure_cost(
            table, registry, preset, out, args.set, progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True)
        )
        print(f"measured: {path}", file=sys.stderr)
    elif args.run:
        todo, incompatible = reproduce.plan(table, registry, preset, out, rerun=args.rerun)
        failed = _train_grid(args, registry, todo, incompatible, profile)
    command = reproduce.command_text(table, out, args.preset, args.models, args.seeds, args.set, args.check_stale)
    result = reproduce.reproduce(table, registry, preset, out, command, args.set, tables_out=tables_out, check_stale=args.check_stale)
    print(f"{result['title']}\n")
    print(tabulate(result["rows"], headers=result["headers"], tablefmt="github", disable_numparse=True))
    print(f"({result['note']})")
    if result["claims"]:
        claims = result["claims"]
        print(f"\nThe paper's claims (rule: {claims['rule']}):\n")
        print(tabulate(claims["rows"], headers=claims["headers"], tablefmt="github", disable_numparse=True))
    print("wrote " + ", ".join(map(str, result["paths"])))
    if failed:
        print(f"{len(failed)} run(s) failed: " + "; ".join(c.name for c, _ in failed), file=sys.stderr)
    return 1 if failed else 0
