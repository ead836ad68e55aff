"""Our Transformer against a peer (lucidrains/x-transformers) at matched sizes, and its MFU.

    python scripts/benchmarks/bench_peer.py --device cuda --dtype bf16 --lengths 512,2048 --compile
    python scripts/benchmarks/bench_peer.py --device cpu --d-model 64 --layers 2 --heads 4 --lengths 64 --batch 2 --reps 3

The same causal language model is built four ways (each skipped with a line when it cannot run):

* ``ours-sdpa``:  bench/models/transformer.py with RoPE and the default attention backend (torch SDPA);
* ``ours-xformers``: the same weights' architecture with ``attn_backend=xformers`` (CUDA + xformers);
* ``x-transformers``: ``TransformerWrapper(Decoder(...))`` with rotary positions, flash (SDPA)
  attention and the same d, heads, depth, feed-forward width (GELU), i.e. the peer a researcher
  would otherwise pick;
* ``--compile`` adds ``+compile`` rows: each of the above under ``torch.compile``.

Step = forward + next-token cross-entropy + backward + AdamW step. The variants are stepped in
turn within each repetition and the median per variant is reported, with the ratio to
``ours-sdpa`` (eager). Throughput in tokens/s; model FLOPs per token = 6 N + 12 L T d (N = weights
of the matrix products, head included; the attention term as in PaLM App. B and nanoGPT, counting
the full T x T score matrix), MFU = achieved FLOP/s over ``--peak-tflops`` (default: H100 SXM
dense bf16, 989 TFLOP/s) and over the same run's measured 8192^3 bf16 matrix product.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from bench.models.layers import xformers_unusable  # noqa: E402
from bench.models.transformer import Transformer  # noqa: E402
from scripts._bench_util import emit, seconds  # noqa: E402

DTYPES = {"fp32": None, "bf16": torch.bfloat16}


class Ours(torch.nn.Module):
    """Backbone + LM head, so both sides carry the same weights (our head is a plain Linear)."""

    def __init__(self, args, backend: str):
        super().__init__()
        self.backbone = Transformer(
            args.vocab,
            True,
            d_model=args.d_model,
            n_heads=args.heads,
            n_layers=args.layers,
            d_ff=args.d_ff,
            dropout=0.0,
            pos_encoding="rope",
            attn_backend=backend,
            max_len=max(args.lengths),
        )
        self.head = torch.nn.Linear(args.d_model, args.vocab)

    def forward(self, tokens):  # (B, T) -> (B, T, vocab)
        return self.head(self.backbone(tokens).hidden)


def peer(args):
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(
        num_tokens=args.vocab,
        max_seq_len=max(args.lengths),
        use_abs_pos_emb=False,
        attn_layers=Decoder(
            dim=args.d_model,
            depth=args.layers,
            heads=args.heads,
            attn_dim_head=args.d_model // args.heads,
            ff_mult=args.d_ff // args.d_model,
            rotary_pos_emb=True,
            attn_flash=True,
        ),
    )


def builders(args) -> dict:
    """name -> (constructor, reason it cannot run or None)."""
    try:
        import x_transformers  # noqa: F401

        xt_missing = None
    except ImportError:
        xt_missing = "x-transformers is not installed (pip install x-transformers)"
    xf_missing = xformers_unusable()
    return {
        "ours-sdpa": (lambda: Ours(args, "sdpa"), None),
        "ours-xformers": (lambda: Ours(args, "xformers"), xf_missing),
        "x-transformers": (lambda: peer(args), xt_missing),
    }


def matmul_params(model) -> int:
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def make_step(model, dtype, compiled: bool):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    fwd = torch.compile(model) if compiled else model

    def step(tokens):
        with torch.autocast(tokens.device.type, dtype=dtype, enabled=dtype is not None):
            logits = fwd(tokens[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def matmul_tflops(device) -> float | None:
    """bf16 8192^3 product, mean of 10 after 3 warm-ups: what this GPU reaches at best."""
    if device.type != "cuda":
        return None
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    return 2 * 8192**3 * 10 / (time.perf_counter() - t0) / 1e12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="512,2048")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d-ff", type=int, default=None, help="default 4 x d-model")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES), help="bf16: autocast, as bench run's precision=bf16-mixed")
    ap.add_argument("--compile", action="store_true", help="add torch.compile'd rows")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="the GPU's dense bf16 peak (H100 SXM: 989)")
    ap.add_argument("--out", default=None, help="also write the table (Markdown) to this file")
    args = ap.parse_args()
    args.lengths = [int(t) for t in args.lengths.split(",")]
    args.d_ff = args.d_ff or 4 * args.d_model
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_peer: --device cuda asked for, but torch sees no CUDA device; use --device cpu")
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} thread(s)"
    measured_peak = matmul_tflops(device)

    rows, notes = [], []
    for T in args.lengths:
        steps, params = {}, {}
        for name, (build, missing) in builders(args).items():
            if missing:
                notes.append(f"{name}: skipped, {missing}")
                continue
            for compiled in (False, True) if args.compile else (False,):
                torch.manual_seed(0)
                model = build().to(device)
                key = name + ("+compile" if compiled else "")
                steps[key], params[key] = make_step(model, dtype, compiled), matmul_params(model)
        tokens = torch.randint(0, args.vocab, (args.batch, T + 1), device=device)
        for step in steps.values():  # warm-up: kernels, cuDNN/cuBLAS plans, compilation
            for _ in range(3):
                step(tokens)
        times = {k: [] for k in steps}
        for _ in range(args.reps):
            for k, step in steps.items():
                times[k].append(seconds(device, step, tokens))
        base = statistics.median(times["ours-sdpa"])
        for k in steps:
            med = statistics.median(times[k])
            tok_s = args.batch * T / med
            tflops = (6 * params[k] + 12 * args.layers * T * args.d_model) * tok_s / 1e12
            rows.append((T, k, params[k], med, med / base, tok_s, tflops))
            print(
                f"T={T:5d} {k:24s} params {params[k] / 1e6:6.2f}M step {med * 1e3:8.2f} ms  "
                f"{med / base:5.2f}x  {tok_s / 1e3:8.1f}k tok/s  {tflops:7.1f} TFLOP/s",
                flush=True,
            )
        del steps
        if device.type == "cuda":
            torch.cuda.empty_cache()

    mfu_cols = dtype is torch.bfloat16 and device.type == "cuda"
    head = "| T | variant | matmul params (M) | step (ms) | vs ours-sdpa | tokens/s (k) | model TFLOP/s |" + (
        f" MFU vs {args.peak_tflops:.0f} | MFU vs measured {measured_peak:.0f} |" if mfu_cols else ""
    )
    lines = [
        f"Causal LM step (fwd + bwd + AdamW), {args.layers} layers, d={args.d_model}, {args.heads} heads, d_ff={args.d_ff}, "
        f"vocab {args.vocab}, batch {args.batch}, {where}, {args.dtype}, torch {torch.__version__}, "
        f"{args.reps} reps (median)",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for T, k, n, med, ratio, tok_s, tflops in rows:
        line = f"| {T} | {k} | {n / 1e6:.2f} | {med * 1e3:.2f} | {ratio:.2f}x | {tok_s / 1e3:.1f} | {tflops:.1f} |"
        if mfu_cols:
            line += f" {100 * tflops / args.peak_tflops:.1f}% | {100 * tflops / measured_peak:.1f}% |"
        lines.append(line)
    lines += [""] + [f"- {n}" for n in dict.fromkeys(notes)]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
