"""One worker of a study: ``python -m bench.tune OUT STUDY [--index I] [--threads T] [--registry FILE] [--command C]``
(``bench tune --jobs N`` and its SLURM jobs start these). Exit status 0 when the study has its
trials, 2 on bad input, 130 / 143 when stopped by a signal (the running trial is re-queued)."""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys

from ..errors import RunInterrupted, UserError, one_line_exit


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tune", description=__doc__)
    p.add_argument("out")
    p.add_argument("study")
    p.add_argument("--index", type=int, default=0, help="the worker's number (its sampler's seed offset)")
    p.add_argument("--threads", type=int, help="train.num_threads of its runs")
    p.add_argument("--registry", help="the registry file the study was made with")
    p.add_argument("--command", help="the bench tune command that started the worker, which its trials' records name")
    args = p.parse_args(argv)
    if args.command:  # records name the command a user would type again (bench.records.command_line reads sys.argv)
        sys.argv = shlex.split(args.command)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("bench").addHandler(handler)
    logging.getLogger("bench").setLevel(logging.INFO)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a run checkpoints on either (GracefulStop)
    from ..registry import Registry
    from . import worker_class

    try:
        trained = worker_class(args.out, args.study)(
            args.out, args.study, Registry(args.registry), index=args.index, threads=args.threads
        ).run()
    except (UserError, RunInterrupted) as exc:
        return one_line_exit(exc)
    except KeyboardInterrupt:
        return 130
    print(f"worker {args.index}: {trained} run(s) trained", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
