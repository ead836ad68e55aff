"""Command line: bench run | eval | compare | curves | cost | list | validate | explain.

Bad input prints one line ("bench: error: ...") on stderr and exits with status 2. A run or grid
stopped by SIGINT / SIGTERM checkpoints, says how to resume and exits with 130 / 143. Results
(records, tables) go to stdout; progress, notes and warnings to stderr.

Output: runs and leaderboards go to --out, by default $BENCH_OUT or ``out/`` (ignored by git),
never into the committed reference results under ``results/`` unless asked (``--out results``);
``bench reproduce`` reads those reference records by default (its --out defaults to results/ when
the current folder has one, i.e. in a checkout; elsewhere to $BENCH_OUT or ``out/``)."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from . import parsing
from .errors import RunInterrupted, UserError
from .parsing import OUT_ENV, default_out, reference_out, version  # noqa: F401 - default_out, OUT_ENV: part of the CLI's API
from .registry import Registry


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record comes (a redirected stderr, a test's capture)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler.__init__ sets it: always sys.stderr here
        pass


def notes_to_stderr() -> None:
    """The library's notes, warnings and progress lines (``bench.*`` loggers, INFO and up) on stderr,
    as written (they carry their own ``bench: ...`` prefixes); installed once per process."""
    notes = logging.getLogger("bench")
    if not any(isinstance(h, _Stderr) for h in notes.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        notes.addHandler(handler)
    if notes.level == logging.NOTSET or notes.level > logging.INFO:
        notes.setLevel(logging.INFO)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UserError(f"{message} (see '{self.prog} --help')")


def parse_seeds(args) -> list[int]:
    return parsing.parse_seeds(getattr(args, "seeds", None), getattr(args, "seed", None))


_names = parsing.parse_names


def _trainer_kwargs(args) -> dict:
    return parsing.trainer_kwargs(*(getattr(args, key, None) for key in ("accelerator", "devices", "strategy", "num_nodes")))


def _check_names(registry, models: list[str], tasks: list[str]) -> None:
    for m in models:
        registry.model_entry(m)
    for t in tasks:
        registry.task_entry(t)


def cmd_run(args, registry) -> int:
    from .cell import Cell
    from .runner import run_cell
    from .runner.lifecycle import check_logger, plan_run

    seeds = parse_seeds(args)
    _check_names(registry, [args.model], [args.task])
    check_logger(args.logger)
    preset = args.preset or "small"
    for seed in seeds:  # every check on the input, for every seed, before the first line and any training
        plan_run(args.model, args.task, preset, seed, args.out, args.set or None, registry, _trainer_kwargs(args))
    chosen = "" if args.preset else " (the default; --preset smoke|small|paper to choose)"

    def announce(plan):  # the first line of each run, once its input is checked: the preset it trains with
        note(f"bench: {plan.model} on {plan.task}, preset {plan.preset}{chosen}, seed {plan.seed}: training into {plan.folder}")
    records = []
    for seed in seeds:
        rec = run_cell(Cell(args.model, args.task, preset, seed, tuple(args.set or ())), args.out, registry=registry,
                       trainer_kwargs=_trainer_kwargs(args), rerun=args.rerun, progress="none" if args.quiet else "auto",
                       logger=args.logger, on_start=announce)
        if rec.get("rank", 0) != 0:
            continue  # other ranks of a multi-device run: rank 0 reports
        records.append(rec)
        if rec.get("skipped"):
            note(f"bench: {rec['model']} on {rec['task']}, preset {rec['preset']}{chosen}, seed {rec['seed']}: "
                 "already finished (pass --rerun to train it again)")
        print(f"record: {rec['path']}")
    if records:
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

    from .grid import plan_grid
    from .records import overrides_tag
    from .report.leaderboard import STAT_TEXT, load_records, mark_stale, plot, seeds_note, stale_note, table, write_tables

    models = _names(args.models, "models")
    tasks = _names(args.tasks, "tasks") if args.tasks else None
    _check_names(registry, models, tasks or [])
    failed = []
    if args.run:
        if not tasks:
            raise UserError("--run needs --tasks to know what to train")
        profile = _grid_profile(args)
        grid = plan_grid(registry, models, tasks, parse_seeds(args), args.preset, args.set, Path(args.out), rerun=args.rerun)
        failed = _train_grid(args, registry, grid.todo, grid.incompatible, profile, f"{len(grid.finished)} already finished")
    tag = overrides_tag(args.set)
    records = load_records(Path(args.out), models, tasks, args.preset, tag)
    if not tasks:
        tasks = sorted({t for (_, t) in records})
    if not records:
        raise UserError(f"no records for models {', '.join(models)} with preset {args.preset!r} under {args.out}/runs; add --run to train them")
    stale = mark_stale(registry, records, args.preset, args.set)
    headers, rows = table(records, models, tasks, stat=args.stat)
    text = seeds_note(records, models, tasks)
    if stale:
        text += "; " + stale_note(stale, models, tasks, args)
    print(tabulate(rows, headers=headers, tablefmt="github"))
    print(f"({text}; cells are {STAT_TEXT[args.stat]} in %)")
    if args.set:
        text += f"; overrides: {' '.join(args.set)}"
    md, csv_path = write_tables(Path(args.out), args.preset, models, tasks, headers, rows, text, tag, stat=args.stat)
    print(f"wrote {md} and {csv_path}")
    if args.plot:
        for path in plot(Path(args.out), args.preset, records, models, tasks):
            print(f"wrote {path}")
    if failed:
        print(f"{len(failed)} cell(s) failed: " + "; ".join(c.name for c, _ in failed), file=sys.stderr)
    return 1 if failed else 0


def _grid_profile(args) -> dict | None:
    """The grid options' checks (GRID_OPTIONS), before anything is planned: the SLURM profile, or None."""
    from .grid import launcher_profile

    if args.jobs < 1 or args.runs_per_gpu < 1:
        raise UserError("--jobs and --runs-per-gpu take a whole number >= 1")
    return launcher_profile(args.launcher, args.slurm_profile, args.slurm)


def _train_grid(args, registry, todo: list, incompatible: list, profile: dict | None, finished: str = "") -> list:
    """The one grid call of `compare --run` and `reproduce --run`: notes, then the cells through
    the launcher; returns the failed cells."""
    from .grid import run_grid

    for cell, why in incompatible:
        note(f"skipped: {cell.model} on {cell.task}: {why}")
    note(f"grid: {len(todo)} to train" + (f", {finished}" if finished else ""))
    return run_grid(registry, todo, Path(args.out), jobs=args.jobs, launcher=args.launcher, runs_per_gpu=args.runs_per_gpu,
                    trainer_args=_trainer_kwargs(args), rerun=args.rerun, profile=profile)


def cmd_eval(args, registry) -> int:
    from .runner.evaluate import evaluate_record

    if args.stream:
        return _eval_stream(args, registry)
    for path in args.records:
        result = evaluate_record(Path(path), args.set or [], registry, accelerator=args.accelerator)
        print(f"record: {path}\ncheckpoint: {result['checkpoint']}\nwrote {result['path']}")
        _print_summary([result["record"]])
    return 0


def _eval_stream(args, registry) -> int:
    from .generate import stream_evaluate

    device = None if args.accelerator in (None, "auto", "cpu") else "cuda"
    for path in args.records:
        result = stream_evaluate(Path(path), args.set or [], registry, device=device)
        print(f"record: {path} (streamed through step)\nwrote: {result['path']}")
        _print_summary([result["record"]])
    return 0


def cmd_generate(args, registry) -> int:
    from .generate import generate

    device = None if args.accelerator in (None, "auto", "cpu") else "cuda"
    result = generate(Path(args.record), args.prompt, args.tokens, registry, device=device)
    print(" ".join(result["prompt"]) + " => " + " ".join(result["generated"]))
    return 0


def cmd_curves(args, registry) -> int:
    from .report.curves import draw_curves

    models = _names(args.models, "models")
    tasks = _names(args.tasks, "tasks")
    _check_names(registry, models, tasks)
    for path in draw_curves(Path(args.out), models, tasks, args.preset, args.set or None, metric=args.metric):
        print(f"wrote {path}")
    return 0


def cmd_list(args, registry) -> int:
    from tabulate import tabulate

    what = args.what or "all"
    if what in ("models", "all"):
        from .registry import import_model_class, static_class_attrs

        rows = []
        flags = ("supports_causal", "supports_streaming")
        for name in registry.model_names():
            e = registry.model_entry(name)
            try:  # read from the source when it can be (no torch for a listing), else from the class
                cls = static_class_attrs(e["target"], flags) or {f: getattr(import_model_class(e["target"], f"models.{name}"), f) for f in flags}
                streams = "yes" if all(cls[f] for f in flags) else "no"  # init_state / step (causal)
            except UserError:  # a broken target: `bench validate` says why; the listing still shows the entry
                streams = "?"
            rows.append([name, e["lineage"][1] if len(e["lineage"]) > 1 else "", streams, e.get("description", "")])
        headers = ["model", "based on", "streams", "description"]
        print(tabulate(_fit(rows, headers, args.full), headers=headers, tablefmt="simple"))
    if what == "all":
        print()
    if what in ("tasks", "all"):
        rows = []
        for name in registry.task_names():
            e = registry.task_entry(name)
            rows.append([name, ",".join(e["presets"]), e.get("description", "")])
        headers = ["task", "presets", "description"]
        print(tabulate(_fit(rows, headers, args.full), headers=headers, tablefmt="simple"))
    return 0


def _fit(rows: list[list[str]], headers: list[str], full: bool) -> list[list[str]]:
    """The last column (a description) cut with '...' so that a row fits the terminal's width
    (100 columns when the output is not a terminal); ``full`` keeps every word."""
    import shutil

    if full or not rows:
        return rows
    width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
    lead = sum(max(*(len(str(r[i])) for r in rows), len(headers[i]) + 2) + 2 for i in range(len(headers) - 1))  # tabulate pads headers by 2
    room = max(20, width - lead)
    return [[*r[:-1], r[-1] if len(r[-1]) <= room else r[-1][: room - 3].rstrip() + "..."] for r in rows]


def cmd_validate(args, registry) -> int:
    problems = registry.validate()
    if problems:
        for p in problems:
            print(f"bench: invalid registry: {p}", file=sys.stderr)
        return 2
    print(f"{' + '.join(registry.sources)}: {len(registry.model_names())} models and {len(registry.task_names())} tasks, all valid")
    return 0


def cmd_explain(args, registry) -> int:
    import json

    from tabulate import tabulate

    from .config import resolve_run

    _check_names(registry, [args.model], [args.task])
    config = resolve_run(registry, args.model, args.task, args.preset, args.set or None)
    m, t = config.model, config.task
    print(f"{m.name} ({m.target}) on {t.name} ({t.target}), preset {config.preset}")
    rows = [[section, key, value if isinstance(value, str) else json.dumps(value), source]
            for section, key, value, source in config.explain()]
    print(tabulate(rows, headers=["section", "key", "value", "source"], tablefmt="simple", disable_numparse=True))
    return 0


def cmd_cost(args, registry) -> int:
    """`bench cost`: training step cost (LRA Table 2's shape), --halting (HALT Table 5), --stream."""
    from tabulate import tabulate

    from .cost import HALTING_MODELS, Setup, model_of, parse_positive_ints, run_cost

    if args.halting and args.stream:
        raise UserError("--halting and --stream are separate measurements; give one of them")
    mode = "halting" if args.halting else "streaming" if args.stream else "training"
    models = _names(args.models, "models") if args.models else (list(HALTING_MODELS) if args.halting else None)
    if models is None:
        raise UserError("--models is required (e.g. --models transformer,ut,gut); --halting defaults to ut,gut,gutlb")
    _check_names(registry, [model_of(m) for m in models], [args.task])
    setup = Setup(task=args.task, preset=args.preset, lengths=parse_positive_ints(args.lengths, "lengths", "512,1024"),
                  batch=args.batch, device=args.device, dtype=args.dtype, compile=args.compile, kernels=args.kernels, repeats=args.repeats,
                  warmup=args.warmup, overrides=args.set or [])
    bounds = parse_positive_ints(args.bounds, "bounds", "10,20,40") if args.halting else None
    result = run_cost(registry, models, setup, Path(args.out), mode=mode, bounds=bounds, decode_tokens=args.decode_tokens,
                      progress=None if args.quiet else lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
    for key, value in result["header"].items():
        print(f"# {key}: {', '.join(value) if isinstance(value, list) else value}")
    print(tabulate(result["table"], headers=result["headers"], tablefmt="simple", disable_numparse=True))
    for path in result["files"]:
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bench", description="Recurrent Transformer families side by side on one task suite.")
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}", help="print bench's version and exit")
    p.add_argument("--registry", metavar="FILE",
                   help="your registry.yaml, extending the shipped one and plugins' (new entries, or replacing those of the "
                        "same name; default: $BENCH_REGISTRY, if set)")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    def lightning_args(sp):
        g = sp.add_argument_group("Lightning (passed to the Trainer)")
        g.add_argument("--accelerator", help="cpu | gpu | auto ...")
        g.add_argument("--devices", help="devices per node: a number, a list such as 0,1, or auto")
        g.add_argument("--strategy", help="auto | ddp | fsdp ... (several devices)")
        g.add_argument("--num-nodes", dest="num_nodes", help="machines taking part in one run (default 1)")

    # the grid options, one parent for every command that trains missing cells (compare, reproduce)
    grid = argparse.ArgumentParser(add_help=False)
    gg = grid.add_argument_group("grid (with --run: how the missing cells are trained)")
    gg.add_argument("--jobs", type=int, default=1, help="--run: cells trained at the same time (default 1)")
    gg.add_argument("--runs-per-gpu", dest="runs_per_gpu", type=int, default=1, help="--run on GPUs: cells sharing one GPU")
    gg.add_argument("--launcher", default="local", choices=["local", "slurm"], help="--run: where cells run (slurm: through submitit)")
    gg.add_argument("--slurm-profile", dest="slurm_profile", help="--launcher slurm: YAML with partition, time, array parallelism ...")
    gg.add_argument("--slurm", action="append", metavar="KEY=VALUE", help="--launcher slurm: one profile setting, e.g. partition=gpu (over the profile's)")
    gg.add_argument("--rerun", action="store_true", help="--run: train every cell again, finished or not")
    lightning_args(grid)

    r = sub.add_parser("run", help="train and evaluate one model on one task")
    r.add_argument("--model", required=True, help="a registry model, e.g. transformer (see bench list)")
    r.add_argument("--task", required=True, help="a registry task, e.g. parity (see bench list)")
    r.add_argument("--preset", help="smoke | small | paper (default: small)")
    r.add_argument("--seed", help="one seed (default 0)")
    r.add_argument("--seeds", help="several seeds, e.g. 0,1,2")
    r.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override, e.g. model.d_model=64, train.lr=3e-4, data.n_train=500")
    r.add_argument("--out", default=default_out(), help=f"output folder, records under OUT/runs (default: ${OUT_ENV}, else out/)")
    r.add_argument("--quiet", action="store_true", help="no progress output (default: a bar on a terminal, one line per validation otherwise)")
    r.add_argument("--rerun", action="store_true", help="train again even if a finished record exists (discards its checkpoints)")
    r.add_argument("--logger", default="csv", choices=["csv", "tensorboard", "wandb", "mlflow", "none"],
                   help="curve log beside the record (default csv); tensorboard, wandb (offline unless $WANDB_MODE is set) and "
                        "mlflow (a file store under the run's folder unless $MLFLOW_TRACKING_URI is set) add theirs to the CSV")
    lightning_args(r)

    e = sub.add_parser("eval", help="re-evaluate finished runs' tested checkpoints (optionally on other data)")
    e.add_argument("records", nargs="+", metavar="RECORD", help="run record(s), e.g. out/runs/parity/small/transformer/seed0.json")
    e.add_argument("--set", action="append", metavar="data.KEY=VALUE", help="data parameters to evaluate on instead, e.g. data.test_lengths=[100,200]")
    e.add_argument("--accelerator", help="cpu | gpu | auto (one device)")
    e.add_argument("--stream", action="store_true", help="score through the model's streaming path (init_state / step), token by token")

    g = sub.add_parser("generate", help="greedy decoding from an LM run's tested checkpoint, through the streaming path")
    g.add_argument("record", metavar="RECORD", help="run record of an LM task (copy, flip-flop)")
    g.add_argument("--prompt", required=True, help="space-separated symbols of the task's vocabulary, e.g. 's3 s7 s1 <sep>'")
    g.add_argument("--tokens", type=int, default=10, help="how many tokens to generate (default 10)")
    g.add_argument("--accelerator", help="cpu | gpu (default cpu)")

    c = sub.add_parser("compare", help="leaderboard over models and tasks from run records", parents=[grid])
    c.add_argument("--models", required=True, help="registry models, comma-separated: the table's rows")
    c.add_argument("--tasks", help="registry tasks, comma-separated (default: every task with records; needed by --run)")
    c.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    c.add_argument("--out", default=default_out(), help=f"output folder, records under OUT/runs, tables under OUT/leaderboards (default: ${OUT_ENV}, else out/)")
    c.add_argument("--run", action="store_true", help="first train the missing (model, task, seed) runs")
    c.add_argument("--seed", help="one seed for --run (default 0)")
    c.add_argument("--seeds", help="seeds for --run (default 0)")
    c.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="overrides for --run; the table reads records made with exactly these")
    c.add_argument("--plot", action="store_true", help="also plot accuracy (and halting depth) against input length")
    c.add_argument("--stat", default="mean", choices=["mean", "median", "both"], help="cell summary over seeds (default mean ± std)")
    c.add_argument("--quiet", action="store_true", help="(kept for compatibility: cells always log to files)")

    cu = sub.add_parser("curves", help="plot validation metric against step for runs (from their metrics.csv)")
    cu.add_argument("--models", required=True, help="registry models, comma-separated")
    cu.add_argument("--tasks", "--task", dest="tasks", required=True, help="registry tasks, comma-separated (one plot each)")
    cu.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    cu.add_argument("--out", default=default_out(), help=f"output folder, records under OUT/runs (default: ${OUT_ENV}, else out/)")
    cu.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="the overrides the runs were made with")
    cu.add_argument("--metric", default="val_metric", help="column of metrics.csv to draw (default val_metric; also train_loss, lr)")

    rp = sub.add_parser("reproduce", help="a paper's table (tables/*.yaml): our records beside the paper's numbers", parents=[grid])
    rp.add_argument("table", nargs="?", help="table name, e.g. rsa-table2 (see --list)")
    rp.add_argument("--list", dest="list_tables", action="store_true", help="list the tables and how many cells have records")
    rp.add_argument("--full", action="store_true", help="with --list: whole descriptions (default: cut to the terminal's width, 100 columns when piped)")
    rp.add_argument("--preset", help="use this preset instead of the table's (a proxy: the note says so)")
    rp.add_argument("--models", help="only the rows of these models")
    rp.add_argument("--seeds", help="these seeds instead of the table's, e.g. 0 or 0,1,2")
    rp.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                    help="an override for every cell, after the table's own (e.g. a proxy with more data)")
    rp.add_argument("--out", default=reference_out(),
                    help="folder holding runs/; tables go to OUT/reproduce/ (default: results/, the committed reference records, "
                         f"when the current folder has it, else ${OUT_ENV} or out/)")
    rp.add_argument("--run", action="store_true", help="first train the table's missing (row, column, seed) runs")

    co = sub.add_parser("cost", help="step time, memory, ops and host syncs per model and length (--halting, --stream)")
    co.add_argument("--models", help="registry models, e.g. ut,gut,tlb (transformer, the reference, is always added); "
                           "a model with its own settings: tlb:chunk_size=100[:memory_slots=10]")
    co.add_argument("--task", required=True, help="the task whose preset sizes the models and whose head and loss are used")
    co.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    co.add_argument("--lengths", default="512", help="sequence lengths, e.g. 1024,2048,4096 (default 512)")
    co.add_argument("--batch", type=int, help="batch size (default: the preset's train.batch_size)")
    co.add_argument("--device", default="cpu", help="cpu | cuda (default cpu)")
    co.add_argument("--dtype", default="fp32", help="fp32 | bf16 (autocast) (default fp32)")
    co.add_argument("--compile", action="store_true", help="torch.compile the backbone; compile + first step reported apart")
    co.add_argument("--kernels", action="store_true",
                    help="CPU: kernel calls per step from torch.profiler, eager and (with --compile) compiled (inductor's kernels + aten calls)")
    co.add_argument("--repeats", type=int, default=3, help="timed steps per model and length, interleaved across models (default 3)")
    co.add_argument("--warmup", type=int, default=1, help="untimed steps after the counted one (default 1)")
    co.add_argument("--halting", action="store_true", help="HALT Table 5: modes halt / upperbound / no-halt at --bounds")
    co.add_argument("--bounds", default="10,20,40", help="--halting: max_layers bounds (default 10,20,40)")
    co.add_argument("--stream", action="store_true", help="prefill and per-token decoding of streaming models (init_state / step)")
    co.add_argument("--decode-tokens", dest="decode_tokens", type=int, default=32, help="--stream: single-token steps per repeat (default 32)")
    co.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override for every model, e.g. model.max_len=8192")
    co.add_argument("--out", default=reference_out("cost"),
                    help=f"folder for the .md / .csv / .json (default results/cost when the current folder has results/, else ${OUT_ENV}/cost or out/cost)")
    co.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    ls = sub.add_parser("list", help="list registry models and tasks")
    ls.add_argument("what", nargs="?", choices=["models", "tasks"], help="only the models or only the tasks (default: both)")
    ls.add_argument("--full", action="store_true", help="whole descriptions (default: cut to the terminal's width, 100 columns when piped)")

    v = sub.add_parser("validate", help="check the registry (shipped, plugins, yours): inheritance, imports, parameters")
    v.add_argument("path", nargs="?", help="a registry file to check with the shipped one (as --registry; default: the shipped one)")

    x = sub.add_parser("explain", help="every resolved value of a run's config and where it comes from")
    x.add_argument("--model", required=True, help="a registry model, e.g. rsa-transformer-I")
    x.add_argument("--task", required=True, help="a registry task, e.g. parity")
    x.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    x.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="overrides, as for bench run")
    return p


def cmd_reproduce(args, registry) -> int:
    from tabulate import tabulate

    from .records import ensure_writable
    from .report import reproduce

    out = Path(args.out)
    if args.list_tables:
        headers = ["table", "preset", "with records", "description"]
        print(tabulate(_fit(reproduce.list_tables(out, registry=registry), headers, args.full), headers=headers, tablefmt="simple"))
        return 0
    if not args.table:
        raise UserError("name a table (e.g. bench reproduce rsa-table2) or pass --list")
    profile = _grid_profile(args)
    ensure_writable(out)
    models = _names(args.models, "models") if args.models else None
    seeds = parse_seeds(args) if args.seeds is not None else None
    table, preset = reproduce.select_table(args.table, registry, args.preset, models, seeds, args.set)
    failed = []
    if args.run and table.kind == "cost":  # measured, not trained (bench/report/cost_table.py)
        path = reproduce.measure_cost(table, registry, preset, out, args.set,
                                      progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
        print(f"measured: {path}", file=sys.stderr)
    elif args.run:
        todo, incompatible = reproduce.plan(table, registry, preset, out, rerun=args.rerun)
        failed = _train_grid(args, registry, todo, incompatible, profile)
    command = reproduce.command_text(table, out, args.preset, args.models, args.seeds, args.set)
    result = reproduce.reproduce(table, registry, preset, out, command, args.set)
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


def main(argv: list[str] | None = None) -> int:
    # Light on purpose: each handler imports what it needs, so --help, list, validate and
    # explain never import Lightning (tests/test_packaging.py); RunInterrupted lives in errors.
    notes_to_stderr()
    handlers = {"run": cmd_run, "eval": cmd_eval, "compare": cmd_compare, "curves": cmd_curves, "list": cmd_list, "validate": cmd_validate, "generate": cmd_generate,
                "explain": cmd_explain,
                "reproduce": cmd_reproduce, "cost": cmd_cost}
    try:
        args = build_parser().parse_args(argv)
        if not args.command:
            raise UserError(f"choose a command: {', '.join(handlers)} (see 'bench --help')")
        registry = Registry(getattr(args, "path", None) or args.registry)
        return handlers[args.command](args, registry)
    except UserError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except RunInterrupted as exc:
        print(f"bench: stopped by {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt as exc:  # Ctrl-C, or a grid stopped by a signal (bench.grid.Stopped)
        print("bench: interrupted; run the same command again to resume from the last checkpoints", file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)
    except BrokenPipeError:  # `bench compare ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
