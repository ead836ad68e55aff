"""The commands on a finished run's tested checkpoint: ``bench eval`` (batched or --stream) and
``bench generate``."""
from __future__ import annotations

from pathlib import Path

from .common import _print_summary


def cmd_eval(args, registry) -> int:
    from ..runner.evaluate import evaluate_record

    if args.stream:
        return _eval_stream(args, registry)
    for path in args.records:
        result = evaluate_record(Path(path), args.set or [], registry, accelerator=args.accelerator, out=args.out)
        print(f"record: {path}\ncheckpoint: {result['checkpoint']}\nwrote {result['path']}")
        _print_summary([result["record"]])
    return 0


def _eval_stream(args, registry) -> int:
    from ..generate import stream_evaluate

    device = None if args.accelerator in (None, "auto", "cpu") else "cuda"
    for path in args.records:
        result = stream_evaluate(Path(path), args.set or [], registry, device=device, out=args.out)
        print(f"record: {path} (streamed through step)\nwrote: {result['path']}")
        _print_summary([result["record"]])
    return 0


def cmd_generate(args, registry) -> int:
    from ..generate import generate

    device = None if args.accelerator in (None, "auto", "cpu") else "cuda"
    result = generate(Path(args.record), args.prompt, args.tokens, registry, device=device)
    print(" ".join(result["prompt"]) + " => " + " ".join(result["generated"]))
    return 0
