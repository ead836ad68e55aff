"""The commands on a finished run's tested checkpoint: ``bench eval`` (batched or --stream) and
``bench generate``."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .common import _print_summary


def _device(accelerator: str | None, batched: bool = False) -> str | None:
    """``--accelerator`` of eval and generate, checked before any work: cpu, gpu (cuda) when torch
    sees a GPU, auto (eval: the GPU when there is one; streaming: the CPU); else one line."""
    import torch

    if accelerator in (None, "auto", "cpu"):
        return accelerator if batched else None
    if accelerator not in ("gpu", "cuda"):
        raise UserError(f"--accelerator {accelerator!r}: choose cpu, gpu or auto")
    if not torch.cuda.is_available():
        raise UserError(
            f"--accelerator {accelerator}: torch sees no CUDA device here; leave --accelerator out (or --accelerator cpu) to run on the CPU"
        )
    return "gpu" if batched else "cuda"


def cmd_eval(args, registry) -> int:
    """Each record's run tested again: batched through ``forward``, or with --stream through
    ``init_state`` / ``step``."""
    device = _device(args.accelerator, batched=not args.stream)
    for path in args.records:
        if args.stream:
            from ..generate import stream_evaluate

            result = stream_evaluate(Path(path), args.set or [], registry, device=device, out=args.out)
            print(f"record: {path} (streamed through step)\nwrote: {result['path']}")
        else:
            from ..runner.evaluate import evaluate_record

            result = evaluate_record(Path(path), args.set or [], registry, accelerator=device, out=args.out)
            print(f"record: {path}\ncheckpoint: {result['checkpoint']}\nwrote {result['path']}")
        _print_summary([result["record"]])
    return 0


def cmd_generate(args, registry) -> int:
    from ..generate import generate

    device = _device(args.accelerator)
    result = generate(Path(args.record), args.prompt, args.tokens, registry, device=device)
    print(" ".join(result["prompt"]) + " => " + " ".join(result["generated"]))
    return 0
