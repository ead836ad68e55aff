"""``bench cost``: what a model costs to train (LRA Table 2's shape), --halting (HALT Table 5),
--stream (prefill, per-token decoding, state); the measurements are bench/cost/'s."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UserError
from .common import _check_names, _names


def cmd_cost(args, registry) -> int:
    from tabulate import tabulate

    from ..cost import HALTING_MODELS, Row, Setup, parse_positive_ints, run_cost

    if args.halting and args.stream:
        raise UserError("--halting and --stream are separate measurements; give one of them")
    mode = "halting" if args.halting else "streaming" if args.stream else "training"
    models = _names(args.models, "models", settings=True) if args.models else (list(HALTING_MODELS) if args.halting else None)
    if models is None:
        raise UserError("--models is required (e.g. --models transformer,ut,gut); --halting defaults to ut,gut,gutlb")
    rows = [Row.parse(m) for m in models]  # tlb:chunk_size=100: a model with its own settings
    _check_names(registry, [r.model for r in rows], [args.task])
    setup = Setup(
        task=args.task,
        preset=args.preset,
        lengths=parse_positive_ints(args.lengths, "lengths", "512,1024"),
        batch=args.batch,
        device=args.device,
        dtype=args.dtype,
        compile=args.compile,
        kernels=args.kernels,
        repeats=args.repeats,
        warmup=args.warmup,
        overrides=args.set or [],
    )
    bounds = parse_positive_ints(args.bounds, "bounds", "10,20,40") if args.halting else None
    result = run_cost(
        registry,
        rows,
        setup,
        Path(args.out),
        mode=mode,
        bounds=bounds,
        decode_tokens=args.decode_tokens,
        progress=None if args.quiet else lambda msg: print(f"  {msg}", file=sys.stderr, flush=True),
    )
    for key, value in result["header"].items():
        print(f"# {key}: {', '.join(value) if isinstance(value, list) else value}")
    print(tabulate(result["table"], headers=result["headers"], tablefmt="simple", disable_numparse=True))
    for path in result["files"]:
        print(f"wrote {path}")
    return 0
