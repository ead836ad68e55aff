"""Command line: bench run | eval | generate | compare | reproduce | tune | curves | cost | list | validate | explain | data.

Bad input prints one line ("bench: error: ...") on stderr and exits with status 2. A run or grid
stopped by SIGINT / SIGTERM checkpoints, says how to resume and exits with 130 / 143. Results
(records, tables) go to stdout; progress, notes and warnings to stderr.

Output: runs and leaderboards go to --out, by default $BENCH_OUT or ``out/`` (ignored by git),
never into the committed reference results under ``results/`` unless asked (``--out results``);
``bench reproduce`` reads those reference records by default (its --out defaults to results/ when
the current folder has one, i.e. in a checkout; elsewhere to $BENCH_OUT or ``out/``)."""

from __future__ import annotations

import os
import signal
import sys

from ..errors import RunInterrupted, UserError, one_line_exit
from ..parsing import check_launcher_env
from ..registry import Registry
from .common import notes_to_stderr
from .cost import cmd_cost
from .data import cmd_data
from .evaluate import cmd_eval, cmd_generate
from .info import cmd_curves, cmd_explain, cmd_list, cmd_validate
from .parser import build_parser
from .report import cmd_report
from .train import cmd_compare, cmd_reproduce, cmd_run
from .tune import TUNE_STARTED, cmd_tune


def main(argv: list[str] | None = None) -> int:
    # Light on purpose: each handler imports what it needs, so --help, list, validate and
    # explain never import Lightning (tests/test_packaging.py); RunInterrupted lives in errors.
    notes_to_stderr()
    handlers = {
        "run": cmd_run,
        "eval": cmd_eval,
        "compare": cmd_compare,
        "curves": cmd_curves,
        "list": cmd_list,
        "validate": cmd_validate,
        "generate": cmd_generate,
        "explain": cmd_explain,
        "reproduce": cmd_reproduce,
        "cost": cmd_cost,
        "tune": cmd_tune,
        "report": cmd_report,
        "data": cmd_data,
    }
    args = None
    try:
        args = build_parser().parse_args(argv)
        if not args.command:
            raise UserError(f"choose a command: {', '.join(handlers)} (see 'bench --help')")
        check_launcher_env()
        for option in ("out", "to", "registry", "path", "record", "records", "table"):  # empty paths and names
            given = getattr(args, option, None)
            if any(not str(value).strip() for value in (given if isinstance(given, list) else [given]) if value is not None):
                what = {
                    "out": "--out is empty; give a folder, e.g. --out out",
                    "to": "--to is empty; give the HTML file to write, e.g. --to report.html, or leave --to out for OUT/report.html",
                    "registry": "--registry is empty; give a registry.yaml file",
                    "table": "the table name is empty; see bench reproduce --list",
                }.get(option, "")
                raise UserError(
                    what
                    or f"a {'registry' if option == 'path' else 'record'} path is empty; give a "
                    f"{'registry.yaml file' if option == 'path' else 'run record, e.g. out/runs/parity/small/lstm/seed0.json'}"
                )
        registry = Registry(getattr(args, "path", None) or args.registry)
        return handlers[args.command](args, registry)
    except (UserError, RunInterrupted) as exc:
        return one_line_exit(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C, or a grid stopped by a signal (bench.grid.Stopped)
        trains = args is not None and (args.command == "run" or getattr(args, "run", False) and args.command in ("compare", "reproduce"))
        if args is not None and args.command == "tune" and TUNE_STARTED:
            from ..tune import written_since

            records, ckpts = written_since(TUNE_STARTED["out"], TUNE_STARTED["t0"])
            print(
                f"bench: interrupted; the workers have stopped (a run in training after writing its checkpoint). Written under "
                f"{TUNE_STARTED['out']}/runs since the command started: {records} run record(s), {ckpts} resume checkpoint(s); the "
                "study keeps its progress: run the same command again to continue",
                file=sys.stderr,
            )
            return 128 + getattr(exc, "signum", signal.SIGINT)
        summary = getattr(exc, "summary", None)  # a grid's own account of what it wrote (bench/grid/common.py: Stopped)
        if not summary:
            summary = (
                "bench: interrupted; finished runs keep their records and the others their last checkpoints: run the same "
                "command again to resume"
                if trains
                else "bench: interrupted; nothing was written (its files are written when it is done)"
            )
        print(summary, file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)
    except BrokenPipeError:  # `bench compare ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
