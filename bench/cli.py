"""Command line: bench run | compare | list | validate.

Bad input prints one line ("bench: error: ...") on stderr and exits with status 2."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import UserError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UserError(f"{message} (see '{self.prog} --help')")


def parse_seeds(args) -> list[int]:
    raw = args.seeds if args.seeds is not None else (str(args.seed) if args.seed is not None else "0")
    try:
        seeds = [int(s) for s in str(raw).split(",") if s.strip() != ""]
    except ValueError:
        raise UserError(f"seeds must be integers separated by commas (e.g. 0,1,2), got {raw!r}") from None
    if not seeds:
        raise UserError("no seed given; use --seed N or --seeds 0,1,2")
    return seeds


def _names(raw: str, what: str) -> list[str]:
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names:
        raise UserError(f"--{what} needs at least one name")
    return names


def _trainer_kwargs(args) -> dict:
    kw = {}
    for key in ("accelerator", "devices", "strategy", "num_nodes"):
        value = getattr(args, key, None)
        if value is not None:
            kw[key] = int(value) if key in ("num_nodes",) or (key == "devices" and str(value).isdigit()) else value
    return kw


def _check_names(registry, models: list[str], tasks: list[str]) -> None:
    for m in models:
        registry.model_entry(m)
    for t in tasks:
        registry.task_entry(t)


def cmd_run(args, registry) -> int:
    from .runner import run

    seeds = parse_seeds(args)
    _check_names(registry, [args.model], [args.task])
    records = []
    for seed in seeds:
        rec = run(
            model=args.model, task=args.task, preset=args.preset, seed=seed, out=args.out,
            overrides=args.set or None, registry=registry, trainer_kwargs=_trainer_kwargs(args), progress=not args.quiet,
        )
        records.append(rec)
        print(f"record: {rec['path']}")
    _print_summary(records)
    return 0 if all(r["status"] == "ok" for r in records) else 1


def _print_summary(records: list[dict]) -> None:
    from tabulate import tabulate

    rows = []
    for rec in records:
        if rec["status"] != "ok":
            rows.append([rec["seed"], "FAIL", rec.get("error", "")])
            continue
        for split in ["val", *rec["test_splits"]]:
            res = rec["metrics"][split]
            rows.append([rec["seed"], split, *(f"{100 * res[m]:.1f}" for m in rec["report_metrics"]), res["n"]])
    ok = next((r for r in records if r["status"] == "ok"), None)
    metrics = ok["report_metrics"] if ok else ["metric"]
    print(f"\n{records[0]['model']} on {records[0]['task']} ({records[0]['preset']} preset)")
    print(tabulate(rows, headers=["seed", "split", *(f"{m} % ↑" for m in metrics), "n"], tablefmt="simple"))
    if ok:
        print(
            f"params {ok['param_count']:,}  best epoch {ok['best_epoch']}  wall {ok['wall_time_s']:.1f}s  "
            f"train {ok['train_tokens_per_s'] or 0:,.0f} tokens/s"
        )


def cmd_compare(args, registry) -> int:
    from tabulate import tabulate

    from .report.leaderboard import load_records, plot, seeds_note, table, write_tables
    from .records import overrides_tag
    from .runner import run

    models = _names(args.models, "models")
    tasks = _names(args.tasks, "tasks") if args.tasks else None
    _check_names(registry, models, tasks or [])
    if args.run:
        if not tasks:
            raise UserError("--run needs --tasks to know what to train")
        seeds = parse_seeds(args)
        have = load_records(Path(args.out), models, tasks, args.preset, overrides_tag(args.set))
        for task in tasks:
            registry.preset(task, args.preset)
        for task in tasks:
            for model in models:
                done = {r["seed"] for r in have.get((model, task), [])}
                for seed in seeds:
                    if seed in done:
                        continue
                    print(f"== training {model} on {task} ({args.preset}), seed {seed}", flush=True)
                    try:
                        run(model=model, task=task, preset=args.preset, seed=seed, out=args.out, registry=registry, overrides=args.set or None,
                            trainer_kwargs=_trainer_kwargs(args), progress=not args.quiet)
                    except UserError as exc:  # e.g. a causal-only task for a bidirectional-only model
                        print(f"   skipped: {exc}", file=sys.stderr)
    records = load_records(Path(args.out), models, tasks, args.preset, overrides_tag(args.set))
    if not tasks:
        tasks = sorted({t for (_, t) in records})
    if not records:
        raise UserError(f"no records for models {', '.join(models)} with preset {args.preset!r} under {args.out}/runs; add --run to train them")
    headers, rows = table(records, models, tasks)
    note = seeds_note(records, models, tasks)
    print(tabulate(rows, headers=headers, tablefmt="github"))
    print(f"({note}; cells are mean ± std in %)")
    if args.set:
        note += f"; overrides: {' '.join(args.set)}"
    md, csv_path = write_tables(Path(args.out), args.preset, models, tasks, headers, rows, note, overrides_tag(args.set))
    print(f"wrote {md} and {csv_path}")
    if args.plot:
        for path in plot(Path(args.out), args.preset, records, models, tasks):
            print(f"wrote {path}")
    return 0


def cmd_list(args, registry) -> int:
    from tabulate import tabulate

    what = args.what or "all"
    if what in ("models", "all"):
        rows = []
        for name in registry.model_names():
            e = registry.model_entry(name)
            rows.append([name, e.get("base_name", " <- ".join(e["lineage"][1:]) or ""), e.get("description", "")])
        print(tabulate(rows, headers=["model", "based on", "description"], tablefmt="simple"))
    if what == "all":
        print()
    if what in ("tasks", "all"):
        rows = []
        for name in registry.task_names():
            e = registry.task_entry(name)
            rows.append([name, ",".join(e["presets"]), e.get("description", "")])
        print(tabulate(rows, headers=["task", "presets", "description"], tablefmt="simple"))
    return 0


def cmd_validate(args, registry) -> int:
    problems = registry.validate()
    if problems:
        for p in problems:
            print(f"bench: invalid registry: {p}", file=sys.stderr)
        return 2
    print(f"{registry.path}: {len(registry.model_names())} models and {len(registry.task_names())} tasks, all valid")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bench", description="Recurrent Transformer families side by side on one task suite.")
    p.add_argument("--registry", help="registry.yaml to use (default: the repository's, or $BENCH_REGISTRY)")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    def lightning_args(sp):
        g = sp.add_argument_group("Lightning (passed to the Trainer)")
        g.add_argument("--accelerator", help="cpu | gpu | auto ...")
        g.add_argument("--devices")
        g.add_argument("--strategy")
        g.add_argument("--num-nodes", dest="num_nodes")

    r = sub.add_parser("run", help="train and evaluate one model on one task")
    r.add_argument("--model", required=True)
    r.add_argument("--task", required=True)
    r.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    r.add_argument("--seed", help="one seed (default 0)")
    r.add_argument("--seeds", help="several seeds, e.g. 0,1,2")
    r.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override, e.g. model.d_model=64, train.lr=3e-4, data.n_train=500")
    r.add_argument("--out", default="results", help="output directory (records under OUT/runs)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    lightning_args(r)

    c = sub.add_parser("compare", help="leaderboard over models and tasks from run records")
    c.add_argument("--models", required=True)
    c.add_argument("--tasks")
    c.add_argument("--preset", default="small")
    c.add_argument("--out", default="results")
    c.add_argument("--run", action="store_true", help="first train the missing (model, task, seed) runs")
    c.add_argument("--seed")
    c.add_argument("--seeds", help="seeds for --run (default 0)")
    c.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="overrides for --run; the table reads records made with exactly these")
    c.add_argument("--plot", action="store_true", help="also plot accuracy (and halting depth) against input length")
    c.add_argument("--quiet", action="store_true")
    lightning_args(c)

    ls = sub.add_parser("list", help="list registry models and tasks")
    ls.add_argument("what", nargs="?", choices=["models", "tasks"])

    v = sub.add_parser("validate", help="check registry.yaml: inheritance, imports, parameters")
    v.add_argument("path", nargs="?")
    return p


def main(argv: list[str] | None = None) -> int:
    from .registry import Registry

    try:
        args = build_parser().parse_args(argv)
        if not args.command:
            raise UserError("choose a command: run, compare, list or validate (see 'bench --help')")
        registry = Registry(getattr(args, "path", None) or args.registry)
        handler = {"run": cmd_run, "compare": cmd_compare, "list": cmd_list, "validate": cmd_validate}[args.command]
        return handler(args, registry)
    except UserError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
