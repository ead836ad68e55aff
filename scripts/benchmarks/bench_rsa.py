"""RSA vs plain attention: training-step time and peak memory, side by side in one run.

    python scripts/benchmarks/bench_rsa.py                       # T = 512, 2048, 8192 on CPU
    python scripts/benchmarks/bench_rsa.py --lengths 512 --reps 3 --out results/perf/rsa_cpu.md
    python scripts/benchmarks/bench_rsa.py --device cuda --dtype bf16 --batch 8 --reps 20   # GPU, bf16 autocast
    python scripts/benchmarks/bench_rsa.py --device cuda --compile   # adds plain+compile, rsa+compile (torch.compile)

Three variants of the same causal Transformer (bench/models/transformer.py, 2 layers, d=128, 4 heads):
``plain`` (no REM), ``rsa`` (REM P V by FFT, the default path) and ``rsa-dense`` (P built as
H x T x T matrices, the paper's App. D.1 construction). Step = forward + backward + Adam step.

Time: the variants are stepped in turn within each repetition (so machine-load drift hits all
of them alike) and the median per variant is reported, with the ratio to ``plain``.
Memory: bytes autograd saves for backward in one forward (distinct storages), i.e. the step's
activation memory; the dense REM's H x T x T matrices show up there, the FFT path's O(T hd) buffers too.
On CUDA the allocator's peak during one step (weights, optimiser state and workspaces included) is
reported beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from bench.models.transformer import Transformer  # noqa: E402
from scripts._bench_util import emit, seconds  # noqa: E402

VARIANTS = {"plain": None, "rsa": "fft", "rsa-dense": "dense"}  # variant -> REM path
DENSE_MAX_T = 4096  # dense REMs at 8192 need > 4 GB per step: too much for a shared CPU machine
DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def build(variant: str, args):
    torch.manual_seed(0)
    path = VARIANTS[variant.removesuffix("+compile")]
    rsa = None if path is None else {"kinds": args.kinds, "mu_init": 1.0, "lag_cap": 200, "path": path}
    model = Transformer(
        args.vocab,
        True,
        d_model=args.d_model,
        n_heads=args.heads,
        n_layers=args.layers,
        d_ff=args.d_ff,
        dropout=0.0,
        pos_encoding="xpos",
        rsa=rsa,
    ).to(args.device)
    head = torch.nn.Linear(args.d_model, args.vocab).to(args.device)
    opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-4)
    return (torch.compile(model) if variant.endswith("+compile") else model), head, opt


def autocast(device: torch.device, dtype):
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def next_token_loss(model, head, tokens, dtype=None):
    with autocast(tokens.device, dtype):
        h = model(tokens).hidden
        return torch.nn.functional.cross_entropy(head(h[:, :-1]).flatten(0, 1).float(), tokens[:, 1:].flatten())


def step(model, head, opt, tokens, dtype=None):
    loss = next_token_loss(model, head, tokens, dtype)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def peak_step_bytes(built, tokens, dtype) -> int | None:
    """CUDA allocator peak over one step (None on CPU, which keeps no such counter)."""
    if tokens.device.type != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step(*built, tokens, dtype)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def saved_bytes(model, head, tokens, dtype=None) -> int:
    """Bytes autograd keeps for backward in one forward (distinct storages): the activation
    memory of a step, deterministic and comparable across variants (CPU has no allocator peak)."""
    seen = {}

    def pack(t):
        try:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):  # e.g. tensors without storage
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        next_token_loss(model, head, tokens, dtype)
    return sum(seen.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="512,2048,8192")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=None, help="default 2 x d-model")
    ap.add_argument("--kinds", default="2,1,1,0,0,0", help="RSA head counts k1..k6 (sum <= heads)")
    ap.add_argument("--vocab", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES), help="bf16 / fp16: autocast, as bench run's precision=bf16-mixed")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--dense-max", type=int, default=DENSE_MAX_T, help="longest T for the dense-REM variant")
    ap.add_argument("--compile", action="store_true", help="add plain+compile and rsa+compile (torch.compile) rows")
    ap.add_argument("--out", default=None, help="also write the table (Markdown) to this file")
    args = ap.parse_args()
    variants_all = list(VARIANTS) + (["plain+compile", "rsa+compile"] if args.compile else [])
    lengths = [int(t) for t in args.lengths.split(",")]
    args.kinds = [int(k) for k in args.kinds.split(",")]
    args.d_ff = args.d_ff or 2 * args.d_model
    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_rsa: --device cuda asked for, but torch sees no CUDA device; use --device cpu")
    args.device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    where = torch.cuda.get_device_name(args.device) if args.device.type == "cuda" else f"CPU, {args.threads} thread(s)"

    rows = []
    for T in lengths:
        variants = [v for v in variants_all if v != "rsa-dense" or T <= args.dense_max]
        built = {v: build(v, args) for v in variants}
        tokens = torch.randint(0, args.vocab, (args.batch, T), device=args.device)
        times = {v: [] for v in variants}
        for v in variants:
            for _ in range(1 if args.device.type == "cpu" and "compile" not in v else 3):  # warm-up: kernels, cuFFT plans, compilation
                step(*built[v], tokens, dtype)
        reps = args.reps if T <= 2048 else max(2, args.reps // 2)
        for _ in range(reps):
            for v in variants:
                times[v].append(seconds(tokens.device, step, *built[v], tokens, dtype))
        base = statistics.median(times["plain"])
        for v in variants_all:
            if v not in times:
                gb = 3 * 4 * args.layers * sum(args.kinds) * T * T / 2**30  # P, its grad and P@V's saved copy, fp32
                rows.append((T, v, None, None, None, f"skipped (dense REMs would need ~{gb:.0f} GB)"))
                continue
            med = statistics.median(times[v])
            mem = None if args.no_memory else saved_bytes(*built[v][:2], tokens, dtype) / 2**20
            peak = None if args.no_memory else peak_step_bytes(built[v], tokens, dtype)
            peak = None if peak is None else peak / 2**20
            rows.append((T, v, med, mem, peak, f"{med / base:.2f}x"))
            print(
                f"T={T:5d} {v:10s} step {med * 1e3:9.2f} ms  ratio {med / base:5.2f}x  "
                f"saved for backward {'-' if mem is None else f'{mem:8.1f} MB'}"
                f"{'' if peak is None else f'  CUDA peak {peak:8.1f} MB'}",
                flush=True,
            )
        del built
        if args.device.type == "cuda":
            torch.cuda.empty_cache()

    lines = [
        f"RSA step time / activation memory, causal Transformer {args.layers} layers, d={args.d_model}, "
        f"{args.heads} heads, d_ff={args.d_ff} (RSA kinds {','.join(map(str, args.kinds))}, K=200), batch {args.batch}, "
        f"{where}, {args.dtype}, torch {torch.__version__}, {args.reps} reps (median)",
        "",
        "| T | variant | step (ms) | vs plain | activation memory saved for backward (MB) | CUDA peak in a step (MB) |",
        "|---|---|---|---|---|---|",
    ]
    for T, v, med, mem, peak, note in rows:
        lines.append(
            f"| {T} | {v} | {'-' if med is None else f'{med * 1e3:.2f}'} | {note} | "
            f"{'-' if mem is None else f'{mem:.1f}'} | {'-' if peak is None else f'{peak:.1f}'} |"
        )
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
