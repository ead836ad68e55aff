"""RSA vs plain attention: training-step time and peak memory, side by side in one run.

    python scripts/bench_rsa.py                       # T = 512, 2048, 8192 on CPU
    python scripts/bench_rsa.py --lengths 512 --reps 3 --out results/perf/rsa_cpu.md

Three variants of the same causal Transformer (models/transformer.py, 2 layers, d=128, 4 heads):
``plain`` (no REM), ``rsa`` (REM P V by FFT, the default path) and ``rsa-dense`` (P built as
H x T x T matrices, the paper's App. D.1 construction). Step = forward + backward + Adam step.

Time: the variants are stepped in turn within each repetition (so machine-load drift hits all
of them alike) and the median per variant is reported, with the ratio to ``plain``.
Memory: bytes autograd saves for backward in one forward (distinct storages), i.e. the step's
activation memory; the dense REM's H x T x T matrices show up there, the FFT path's O(T hd) buffers too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from models.transformer import Transformer  # noqa: E402

VARIANTS = {"plain": None, "rsa": "fft", "rsa-dense": "dense"}  # variant -> REM path
DENSE_MAX_T = 4096  # dense REMs at 8192 need > 4 GB per step; too much for a shared machine


def build(variant: str, args):
    torch.manual_seed(0)
    path = VARIANTS[variant]
    rsa = None if path is None else {"kinds": args.kinds, "mu_init": 1.0, "lag_cap": 200, "path": path}
    model = Transformer(
        args.vocab, True, d_model=args.d_model, n_heads=args.heads, n_layers=args.layers, d_ff=args.d_ff,
        dropout=0.0, pos_encoding="xpos", rsa=rsa,
    )
    head = torch.nn.Linear(args.d_model, args.vocab)
    opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-4)
    return model, head, opt


def step(model, head, opt, tokens):
    h = model(tokens).hidden
    loss = torch.nn.functional.cross_entropy(head(h[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def saved_bytes(model, head, tokens) -> int:
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
        h = model(tokens).hidden
        torch.nn.functional.cross_entropy(head(h[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
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
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--out", default=None, help="also write the table (Markdown) to this file")
    args = ap.parse_args()
    lengths = [int(t) for t in args.lengths.split(",")]
    args.kinds = [int(k) for k in args.kinds.split(",")]
    args.d_ff = args.d_ff or 2 * args.d_model
    torch.set_num_threads(args.threads)

    rows = []
    for T in lengths:
        variants = [v for v in VARIANTS if v != "rsa-dense" or T <= DENSE_MAX_T]
        built = {v: build(v, args) for v in variants}
        tokens = torch.randint(0, args.vocab, (args.batch, T))
        times = {v: [] for v in variants}
        for v in variants:
            step(*built[v], tokens)  # warm-up
        reps = args.reps if T <= 2048 else max(2, args.reps // 2)
        for _ in range(reps):
            for v in variants:
                t0 = time.perf_counter()
                step(*built[v], tokens)
                times[v].append(time.perf_counter() - t0)
        base = statistics.median(times["plain"])
        for v in VARIANTS:
            if v not in times:
                gb = 3 * 4 * args.layers * sum(args.kinds) * T * T / 2**30  # P, its grad and P@V's saved copy, fp32
                rows.append((T, v, None, None, f"skipped (dense REMs would need ~{gb:.0f} GB)"))
                continue
            med = statistics.median(times[v])
            mem = None if args.no_memory else saved_bytes(*built[v][:2], tokens) / 2**20
            rows.append((T, v, med, mem, f"{med / base:.2f}x"))
            print(f"T={T:5d} {v:10s} step {med * 1e3:9.1f} ms  ratio {med / base:5.2f}x  "
                  f"saved for backward {'-' if mem is None else f'{mem:8.1f} MB'}", flush=True)
        del built

    lines = [
        f"RSA step time / activation memory, causal Transformer {args.layers} layers, d={args.d_model}, "
        f"{args.heads} heads, d_ff={args.d_ff} (RSA kinds {','.join(map(str, args.kinds))}, K=200), batch {args.batch}, {args.threads} thread(s), torch {torch.__version__}, "
        f"{args.reps} reps (median)",
        "",
        "| T | variant | step (ms) | vs plain | activation memory saved for backward (MB) |",
        "|---|---|---|---|---|",
    ]
    for T, v, med, mem, note in rows:
        lines.append(f"| {T} | {v} | {'-' if med is None else f'{med * 1e3:.1f}'} | {note} | "
                     f"{'-' if mem is None else f'{mem:.1f}'} |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write("# " + " ".join(["python"] + sys.argv) + "\n\n" + table + "\n")


if __name__ == "__main__":
    main()
