"""The argument parser: every command's options (``bench --help``)."""

from __future__ import annotations

import argparse

from ..errors import UserError
from ..parsing import OUT_ENV, default_out, version


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UserError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bench", description="Recurrent Transformer families side by side on one task suite.")
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}", help="print bench's version and exit")
    registry_help = (
        "your registry.yaml, extending the shipped one and plugins' (new entries, or replacing those of the "
        "same name; several files a.yaml,b.yaml, e.g. tuned overlays, are merged key by key; default: "
        "$BENCH_REGISTRY, if set)"
    )
    p.add_argument("--registry", metavar="FILE", help=registry_help)
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
    gg.add_argument(
        "--slurm",
        action="append",
        metavar="KEY=VALUE",
        help="--launcher slurm: one profile setting, e.g. partition=gpu (over the profile's)",
    )
    gg.add_argument("--rerun", action="store_true", help="--run: train every cell again, finished or not")
    lightning_args(grid)

    r = sub.add_parser("run", help="train and evaluate one model on one task")
    r.add_argument("--model", required=True, help="a registry model, e.g. transformer (see bench list)")
    r.add_argument("--task", required=True, help="a registry task, e.g. parity (see bench list)")
    r.add_argument("--preset", help="smoke | small | paper (default: small)")
    r.add_argument("--seed", help="one seed (default 0)")
    r.add_argument("--seeds", help="several seeds, e.g. 0,1,2")
    r.add_argument(
        "--set", action="append", metavar="SECTION.KEY=VALUE", help="override, e.g. model.d_model=64, train.lr=3e-4, data.n_train=500"
    )
    r.add_argument("--out", default=default_out(), help=f"output folder, records under OUT/runs (default: ${OUT_ENV}, else out/)")
    r.add_argument(
        "--quiet", action="store_true", help="no progress output (default: a bar on a terminal, one line per validation otherwise)"
    )
    r.add_argument("--rerun", action="store_true", help="train again even if a finished record exists (discards its checkpoints)")
    r.add_argument(
        "--logger",
        default="csv",
        choices=["csv", "tensorboard", "wandb", "mlflow", "none"],
        help="curve log beside the record (default csv); tensorboard, wandb (offline unless $WANDB_MODE is set) and "
        "mlflow (a file store under the run's folder unless $MLFLOW_TRACKING_URI is set) add theirs to the CSV",
    )
    lightning_args(r)

    e = sub.add_parser("eval", help="re-evaluate finished runs' tested checkpoints (optionally on other data)")
    e.add_argument("records", nargs="+", metavar="RECORD", help="run record(s), e.g. out/runs/parity/small/transformer/seed0.json")
    e.add_argument(
        "--set", action="append", metavar="data.KEY=VALUE", help="data parameters to evaluate on instead, e.g. data.test_lengths=[100,200]"
    )
    e.add_argument("--accelerator", help="cpu | gpu | auto (one device)")
    e.add_argument("--stream", action="store_true", help="score through the model's streaming path (init_state / step), token by token")
    e.add_argument(
        "--out",
        help="folder for eval.json (default: beside the record, or for a record under the checkout's results/, "
        f"${OUT_ENV} or out/ at the record's runs/ path)",
    )

    g = sub.add_parser("generate", help="greedy decoding from an LM run's tested checkpoint, through the streaming path")
    g.add_argument("record", metavar="RECORD", help="run record of an LM task (copy, flip-flop)")
    g.add_argument("--prompt", required=True, help="space-separated symbols of the task's vocabulary, e.g. 's3 s7 s1 <sep>'")
    g.add_argument("--tokens", type=int, default=10, help="how many tokens to generate (default 10)")
    g.add_argument("--accelerator", help="cpu | gpu (default cpu)")

    c = sub.add_parser("compare", help="leaderboard over models and tasks from run records", parents=[grid])
    c.add_argument("--models", required=True, help="registry models, comma-separated: the table's rows")
    c.add_argument("--tasks", help="registry tasks, comma-separated (default: every task with records; needed by --run)")
    c.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    c.add_argument(
        "--out",
        default=default_out(),
        help=f"output folder, records under OUT/runs, tables under OUT/leaderboards (default: ${OUT_ENV}, else out/)",
    )
    c.add_argument("--run", action="store_true", help="first train the missing (model, task, seed) runs")
    c.add_argument("--seed", help="one seed for --run (default 0)")
    c.add_argument("--seeds", help="seeds for --run (default 0)")
    c.add_argument(
        "--set", action="append", metavar="SECTION.KEY=VALUE", help="overrides for --run; the table reads records made with exactly these"
    )
    c.add_argument(
        "--plot",
        nargs="?",
        const="length",
        choices=["length", "budget", "state"],
        help="also plot: accuracy (and halting depth) against input length (--plot, --plot length), or with "
        "--budget accuracy against the budget per family (--plot budget), or accuracy against streaming state bytes "
        "per family at the --at widths (--plot state: --budget width, --at 32,64,128 by default; Zoology's figure)",
    )
    c.add_argument("--stat", default="mean", choices=["mean", "median", "both"], help="cell summary over seeds (default mean ± std)")
    c.add_argument("--quiet", action="store_true", help="(kept for compatibility: cells always log to files)")
    cb = c.add_argument_group("budgets (bench/budget.py)")
    cb.add_argument(
        "--budget",
        choices=["params", "flops", "state", "width"],
        help="each model at the width (d_model, d_ff in proportion) whose parameters / training FLOPs per token / "
        "streaming state bytes match the Transformer's at the --at multiples (within 10%%): rows = (model, multiple); "
        "width: each model at the --at d_model values, its state bytes measured (Zoology's sweep)",
    )
    cb.add_argument(
        "--at",
        help="--budget: multiples of the Transformer's figure at its preset width (default 1x,2x,4x); "
        "--budget width: d_model values, e.g. 32,64,128",
    )
    cb.add_argument(
        "--state",
        action="store_true",
        help="a column per task: the bytes of each model's streaming state after the task's longest test length",
    )

    cu = sub.add_parser("curves", help="plot validation metric against step for runs (from their metrics.csv)")
    cu.add_argument("--models", required=True, help="registry models, comma-separated")
    cu.add_argument("--tasks", "--task", dest="tasks", required=True, help="registry tasks, comma-separated (one plot each)")
    cu.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    cu.add_argument("--out", default=default_out(), help=f"output folder, records under OUT/runs (default: ${OUT_ENV}, else out/)")
    cu.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="the overrides the runs were made with")
    cu.add_argument("--metric", default="val_metric", help="column of metrics.csv to draw (default val_metric; also train_loss, lr)")

    rp = sub.add_parser("reproduce", help="a paper's table (tables/*.yaml): our records beside the paper's numbers", parents=[grid])
    rp.add_argument("table", nargs="?", help="table name, e.g. rsa-table2 (see --list)")
    rp.add_argument(
        "--list",
        dest="list_tables",
        action="store_true",
        help="list the tables (their files only: under a second; a broken file is listed as BROKEN, with its problem)",
    )
    rp.add_argument(
        "--records",
        action="store_true",
        help="with --list: also count each table's cells with records (reads every record: seconds to a minute)",
    )
    rp.add_argument(
        "--full", action="store_true", help="with --list: whole descriptions (default: cut to the terminal's width, 100 columns when piped)"
    )
    rp.add_argument("--preset", help="use this preset instead of the table's (a proxy: the note says so)")
    rp.add_argument("--models", help="only the rows of these models")
    rp.add_argument("--seeds", help="these seeds instead of the table's, e.g. 0 or 0,1,2")
    rp.add_argument(
        "--set",
        action="append",
        metavar="SECTION.KEY=VALUE",
        help="an override for every cell, after the table's own (e.g. a proxy with more data)",
    )
    rp.add_argument(
        "--out",
        help="folder holding runs/; tables go to OUT/reproduce/ (default: records read from results/, the committed "
        f"reference records, when the current folder has it, else ${OUT_ENV} or out/; tables written to "
        f"${OUT_ENV} or out/, and with --run trained into and written to results/)",
    )
    rp.add_argument("--run", action="store_true", help="first train the table's missing (row, column, seed) runs")
    rp.add_argument(
        "--check-stale",
        action="store_true",
        help="also resolve every cell as bench run would today and mark † the records made with settings the registry no "
        "longer gives (imports the model classes; without it the table reads only what the records hold)",
    )
    rp.add_argument(
        "--writeups",
        action="store_true",
        help="rebuild every table the write-ups in OUT (OUT/*.md) name in a bench:table block, each by the command "
        "its generated file names, and fill every block (bench/report/writeup.py)",
    )

    co = sub.add_parser("cost", help="step time, memory, ops and host syncs per model and length (--halting, --stream)")
    co.add_argument(
        "--models",
        help="registry models, e.g. ut,gut,tlb (transformer, the reference, is always added); "
        "a model with its own settings: tlb:chunk_size=100[:memory_slots=10]",
    )
    co.add_argument(
        "--task",
        default="flipflop",
        help="the task whose preset sizes the models and whose head and loss are used (default flipflop: a causal "
        "token task that runs at any length, the one of results/cost/)",
    )
    co.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    co.add_argument("--lengths", default="512", help="sequence lengths, e.g. 1024,2048,4096 (default 512)")
    co.add_argument("--batch", type=int, help="batch size (default: the preset's train.batch_size)")
    co.add_argument(
        "--device",
        default="auto",
        help="auto | cpu | cuda (default auto: the GPU when torch sees one, as `bench run`; the CPU with --kernels)",
    )
    co.add_argument("--dtype", default="fp32", help="fp32 | bf16 (autocast) (default fp32)")
    co.add_argument("--compile", action="store_true", help="torch.compile the backbone; compile + first step reported apart")
    co.add_argument(
        "--kernels",
        action="store_true",
        help="CPU: kernel calls per step from torch.profiler, eager and (with --compile) compiled (inductor's kernels + aten calls)",
    )
    co.add_argument("--repeats", type=int, default=3, help="timed steps per model and length, interleaved across models (default 3)")
    co.add_argument("--warmup", type=int, default=1, help="untimed steps after the counted one (default 1)")
    co.add_argument("--halting", action="store_true", help="HALT Table 5: modes halt / upperbound / no-halt at --bounds")
    co.add_argument("--bounds", default="10,20,40", help="--halting: max_layers bounds (default 10,20,40)")
    co.add_argument("--stream", action="store_true", help="prefill and per-token decoding of streaming models (init_state / step)")
    co.add_argument(
        "--decode-tokens", dest="decode_tokens", type=int, default=32, help="--stream: single-token steps per repeat (default 32)"
    )
    co.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override for every model, e.g. model.max_len=8192")
    co.add_argument(
        "--out",
        default=f"{default_out()}/cost",
        help=f"folder for the .md / .csv / .json (default ${OUT_ENV}/cost, else out/cost; "
        "--out results/cost adds to the reference results)",
    )
    co.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    rep = sub.add_parser("report", help="the results folder as one offline web page: tables, claims, curves, cost, records")
    rep.add_argument("--out", help="results folder with runs/ and reproduce/ (default: the checkout's results/)")
    rep.add_argument("--to", help="the HTML file to write (default: OUT/report.html)")
    rep.add_argument("--tables", help="only these tables (names or file stems under OUT/reproduce, comma-separated)")

    ls = sub.add_parser("list", help="list registry models and tasks")
    ls.add_argument("what", nargs="?", choices=["models", "tasks"], help="only the models or only the tasks (default: both)")
    ls.add_argument("--full", action="store_true", help="whole descriptions (default: cut to the terminal's width, 100 columns when piped)")

    v = sub.add_parser("validate", help="check the registry (shipped, plugins, yours): inheritance, imports, parameters")
    v.add_argument("path", nargs="?", help="a registry file to check with the shipped one (as --registry; default: the shipped one)")

    tu = sub.add_parser(
        "tune",
        help="tune settings per model (Optuna): each trial a run, selected on validation, pruned; the best per model as a registry overlay",
    )
    tu.add_argument("--models", help="registry models, comma-separated: one study each")
    tu.add_argument("--task", required=True, help="a registry task, e.g. flipflop")
    tu.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    tu.add_argument(
        "--space",
        action="append",
        metavar="KEY=DIST(ARGS)",
        help="a sampled setting (TPE), e.g. train.lr=loguniform(1e-4,1e-2); DIST: loguniform, uniform, int, logint, "
        "choice (or categorical); repeat for several",
    )
    tu.add_argument("--grid", action="append", metavar="KEY=[V,...]", help="every value (GridSampler), e.g. train.lr=[1e-4,3e-4,1e-3]")
    tu.add_argument("--trials", type=int, help="trials per model, in all (default 8; a grid: its size); a rerun continues to it")
    tu.add_argument("--jobs", type=int, default=1, help="workers sharing the study: local processes, or SLURM jobs (default 1)")
    tu.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="a fixed override for every trial, as for bench run")
    tu.add_argument("--seed", type=int, default=0, help="the trials' seed (runs and sampler; default 0)")
    tu.add_argument(
        "--pruner",
        help="sync (the default for --grid: synchronous successive halving, noise-aware, two seeds where it decides; docs/tuning.md) | "
        "asha | hyperband | none (Optuna's; asha is the default for --space)",
    )
    tu.add_argument(
        "--objective",
        help="the validation metric selected on: the one the table reports, e.g. last_acc, or METRIC@lengths for its mean over the "
        "validation's length bins (default: the task's reported metric)",
    )
    tu.add_argument(
        "--val-reason",
        dest="val_reason",
        metavar="TEXT",
        help="why the study selects on a validation split under 1,000 examples (bench tune warns below it): recorded in study.json",
    )
    tu.add_argument("--study", help="the study's name: OUT/studies/NAME (default TASK-PRESET)")
    tu.add_argument(
        "--launcher", default="local", choices=["local", "slurm"], help="where workers run (slurm: --jobs jobs through submitit)"
    )
    tu.add_argument("--slurm-profile", dest="slurm_profile", help="--launcher slurm: YAML with partition, time ... (as for compare --run)")
    tu.add_argument("--slurm", action="append", metavar="KEY=VALUE", help="--launcher slurm: one profile setting over the profile's")
    tu.add_argument(
        "--out",
        default=default_out(),
        help=f"output folder: trials' records under OUT/runs, the study under OUT/studies (default: ${OUT_ENV}, else out/)",
    )
    tu.add_argument(
        "--report",
        action="store_true",
        help="only report the study: expected best validation against trials "
        "(Dodge et al. 2019) and score against lr (report.md, report.png)",
    )

    da = sub.add_parser("data", help="check the files a task reads from you: bench data check --task lra-text --root PATH")
    dsub = da.add_subparsers(dest="data_command", metavar="check", parser_class=_Parser, required=True)
    dc = dsub.add_parser("check", help="say which layout of a task's files is under --root, or in one line what is missing")
    dc.add_argument("--task", required=True, help="lra-text | lra-retrieval | lra-image, lra for those three; lra-listops (release files)")
    dc.add_argument("--root", required=True, help="the folder you downloaded to (the one you give as $BENCH_LRA_DIR)")

    x = sub.add_parser("explain", help="every resolved value of a run's config and where it comes from")
    x.add_argument("--model", required=True, help="a registry model, e.g. rsa-transformer-I")
    x.add_argument("--task", required=True, help="a registry task, e.g. parity")
    x.add_argument("--preset", default="small", help="smoke | small | paper (default: small)")
    x.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="overrides, as for bench run")
    for command in sub.choices.values():  # also after the command (bench compare --registry FILE ...)
        command.add_argument("--registry", metavar="FILE", default=argparse.SUPPRESS, help=registry_help)
    return p
