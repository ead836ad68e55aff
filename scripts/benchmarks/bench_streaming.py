"""Streaming (``step``) against recomputing ``forward`` on the whole prefix, per generated token.

    OMP_NUM_THREADS=1 python scripts/benchmarks/bench_streaming.py                     # prefix 256, 16 new tokens, CPU
    python scripts/benchmarks/bench_streaming.py --prefix 512 --new 32 --out results/perf/streaming_cpu.md

Every causal family this script lists, at its registry defaults (d 128, 4 heads; XL segments and
memory of 64, BRT blocks of 32), dropout 0, eval mode, batch 1. After a prefix of P tokens, each
of the next N tokens costs either one ``step`` (the state carried) or one ``forward`` on all P + k
tokens (what a model without a streaming path has to do). The two are timed in turn within each
repetition (machine-load drift hits both alike); the median per token is reported, with the ratio.
The last column checks that both give the same states (max |step - forward| over the N tokens).
``--read-pooled`` also reads every step's ``pooled`` (the model's sequence summary), which TLB and
GUTLB compute only when read (a memory update on the partial chunk): the decoding cost before that.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import bench  # noqa: E402
from scripts._bench_util import emit, seconds  # noqa: E402

MODELS = (
    "transformer",
    "nope",
    "rsa-transformer",
    "transformer-star",
    "xl",
    "rsa-xl",
    "brt",
    "rsa-brt",
    "tlb",
    "rsa-tlb",
    "gutlb",
    "ut",
    "gut",
    "r-transformer",
    "lstm",
    "gru",
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--prefix", type=int, default=256)
    p.add_argument("--new", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--read-pooled", action="store_true", help="read each step's pooled (TLB / GUTLB compute it on demand: a memory update mid-chunk)"
    )
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    P, N = args.prefix, args.new
    rows = []
    for name in args.models.split(","):
        torch.manual_seed(0)
        model = bench.build_model(name, vocab_size=16, causal=True, dropout=0.0).eval()
        tokens = torch.randint(0, 16, (1, P + N))
        with torch.no_grad():
            _, prefix_state = model.step(tokens[:, :P], model.init_state(1))
            streamed, recomputed, diff = [], [], 0.0

            def by_step():
                state, outs = prefix_state, []
                for k in range(N):
                    out, state = model.step(tokens[:, P + k : P + k + 1], state)
                    outs.append(out.hidden[:, -1])
                    if args.read_pooled:
                        out.pooled  # noqa: B018 (computed on this read)
                return outs

            def by_forward():
                return [model(tokens[:, : P + k + 1]).hidden[:, -1] for k in range(N)]

            for _ in range(args.reps):
                streamed.append(seconds(device, by_step) / N)
                recomputed.append(seconds(device, by_forward) / N)
            diff = max((a - b).abs().max().item() for a, b in zip(by_step(), by_forward()))
        s, f = statistics.median(streamed), statistics.median(recomputed)
        rows.append(f"| {name} | {s * 1e3:.2f} | {f * 1e3:.2f} | {f / s:.1f}x | {diff:.1e} |")
    head = (
        f"Per generated token after a prefix of {P} (next {N} tokens, batch 1, {args.threads} thread(s), "
        f"median of {args.reps})\n\n| model | step ms | forward on prefix ms | step speed-up | max abs diff |\n|---|---|---|---|---|"
    )
    emit("\n".join([head, *rows]), args.out)


if __name__ == "__main__":
    main()
