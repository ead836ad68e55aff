"""Speed of the matrix-state recurrences, as ratios measured in one run:

    OMP_NUM_THREADS=1 nice python scripts/benchmarks/linear_recurrence_speed.py --out results/linear_recurrence_speed.md

1. the mechanism (bench/models/layers/linear_recurrence.py): the chunkwise-parallel form against its
   step form run token by token (what streaming one token at a time costs), forward, T = 1024,
   4 heads, float32, at batch 1 (dk = dv = 16) and batch 4 (dk = dv = 32): the ratio step loop /
   chunked (target >= 10);
2. a training step (forward, loss, backward, AdamW step; the mqar small preset's sizes: d 64, 4 heads,
   2 layers, d_ff 128, dropout 0) of every family against the Transformer (SDPA, xPos) at the same
   T and batch: T = 4096 (target: cheaper, ratio < 1) and T = 512 (target: within 1.5x);
3. decoding: per-token latency of single-token ``step`` calls after a context of 16k tokens against
   after 1k (target: within 1.2x; the Transformer's KV cache grows, shown for contrast);
4. memory: bytes autograd saves for backward over one forward (bench.cost's SavedBytes) at T =
   1024..8192, per token, as a ratio to T = 1024 (linear in T: 1.00).

Timings are CPU seconds of this process (``time.process_time``; one thread, so other processes
sharing the cores do not count), medians over repeats after a warm-up, the compared calls
interleaved within each repeat; every verdict is computed from the measured ratio.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from tabulate import tabulate

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import bench  # noqa: E402
from bench.cost.counters import SavedBytes  # noqa: E402
from bench.models.layers import linear_recurrence as lr  # noqa: E402
from scripts._bench_util import emit  # noqa: E402

FAMILIES = ("linear-transformer", "deltanet", "gated-deltanet", "retnet", "gla", "mamba2", "mlstm", "rwkv7")
SIZES = {"d_model": 64, "n_heads": 4, "n_layers": 2, "d_ff": 128, "dropout": 0.0}
VOCAB = 32


def timed(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def interleaved(fns: dict, repeats: int) -> dict:
    """{name: median seconds} of each callable, one warm-up call each, then ``repeats`` rounds."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn))
    return {name: statistics.median(t) for name, t in times.items()}


# ---- 1. chunked vs step loop --------------------------------------------------------------------


def mechanism_inputs(kind: str, T: int, B=4, H=4, d=32):
    g = torch.Generator().manual_seed(0)
    q = F.normalize(torch.randn(B, H, T, d, generator=g), dim=-1)
    k = F.normalize(torch.randn(B, H, T, d, generator=g), dim=-1)
    v = torch.randn(B, H, T, d, generator=g)
    beta = torch.rand(B, H, T, generator=g) if kind.startswith("delta") else None
    if kind.startswith("dplr"):  # RWKV-7's inputs: read along -kappa^, write along kappa^ * rate
        kappa = F.normalize(torch.randn(B, H, T, d, generator=g), dim=-1)
        beta = (-kappa, kappa * torch.rand(B, H, T, d, generator=g))
    log_decay = None
    if kind.endswith("head"):
        log_decay = -0.1 * torch.rand(B, H, T, generator=g)
    elif kind.endswith("channel"):
        log_decay = -0.1 * torch.rand(B, H, T, d, generator=g)
    return q, k, v, beta, log_decay


def step_loop(q, k, v, beta, log_decay):
    S = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outs = []
    for t in range(q.shape[2]):
        ld = None if log_decay is None else log_decay[:, :, t]
        if beta is None:
            o, S = lr.gated_linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], ld, S)
        elif isinstance(beta, tuple):
            o, S = lr.dplr_delta_rule_step(q[:, :, t], k[:, :, t], v[:, :, t], beta[0][:, :, t], beta[1][:, :, t], ld, S)
        else:
            o, S = lr.delta_rule_step(q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t], ld, S)
        outs.append(o)
    return torch.stack(outs, 2), S


def chunked(q, k, v, beta, log_decay):
    if beta is None:
        return lr.gated_linear_attention(q, k, v, log_decay)
    if isinstance(beta, tuple):  # (a, b) of the DPLR rule
        return lr.dplr_delta_rule(q, k, v, *beta, log_decay)
    return lr.delta_rule(q, k, v, beta, log_decay)


MECHANISMS = {"gla": "gated_linear_attention", "delta": "delta_rule", "dplr": "dplr_delta_rule"}


def mechanism_rows(T: int, repeats: int) -> list:
    rows = []
    for (batch, d), kind in itertools.product(
        ((1, 16), (4, 32)), ("gla-none", "gla-head", "gla-channel", "delta-none", "delta-head", "dplr-channel")
    ):
        args = mechanism_inputs(kind, T, B=batch, d=d)
        with torch.no_grad():
            t = interleaved({"step": lambda: step_loop(*args), "chunked": lambda: chunked(*args)}, repeats)
            err = (step_loop(*args)[0] - chunked(*args)[0]).abs().max().item()
        ratio = t["step"] / t["chunked"]
        fn = MECHANISMS[kind.split("-")[0]]
        rows.append(
            [
                fn,
                kind.split("-")[1],
                batch,
                d,
                T,
                f"{1e3 * t['step']:.1f}",
                f"{1e3 * t['chunked']:.1f}",
                f"{ratio:.1f}",
                "yes" if ratio >= 10 else "no",
                f"{err:.1e}",
            ]
        )
    return rows


# ---- 2. training step vs the Transformer ---------------------------------------------------------


def training_step(name: str, T: int, batch: int):
    torch.manual_seed(0)
    model = bench.build_model(name, vocab_size=VOCAB, causal=True, **SIZES).train()
    head = torch.nn.Linear(SIZES["d_model"], VOCAB)
    params = list(model.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(1, VOCAB, (batch, T), generator=g)
    targets = torch.randint(0, VOCAB, (batch, T), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(head(model(tokens).hidden).flatten(0, 1), targets.flatten())
        loss.backward()
        opt.step()

    return step


def training_rows(lengths: dict, repeats: int) -> list:
    rows = []
    for T, batch in lengths.items():
        t = interleaved({name: training_step(name, T, batch) for name in ("transformer", *FAMILIES)}, repeats)
        for name in FAMILIES:
            ratio = t[name] / t["transformer"]
            target = "< 1 (cheaper)" if T >= 4096 else "<= 1.5"
            ok = ratio < 1 if T >= 4096 else ratio <= 1.5
            rows.append(
                [name, T, batch, f"{1e3 * t[name]:.0f}", f"{1e3 * t['transformer']:.0f}", f"{ratio:.2f}", target, "yes" if ok else "no"]
            )
    return rows


# ---- 3. decoding per token after 1k and 16k ------------------------------------------------------


def decoder(name: str, context: int):
    torch.manual_seed(0)
    model = bench.build_model(name, vocab_size=VOCAB, causal=True, **SIZES).eval()
    g = torch.Generator().manual_seed(2)
    prefix = torch.randint(1, VOCAB, (1, context), generator=g)
    with torch.inference_mode():
        state = model.init_state(1)
        for start in range(0, context, 4096):  # the context in pieces (one call each)
            _, state = model.step(prefix[:, start : start + 4096], state)
    token = torch.randint(1, VOCAB, (1, 1), generator=g)

    def one():  # from the same state every time: the context stays the given length
        with torch.inference_mode():
            model.step(token, state)

    return one


def decoding_rows(short: int, long: int, repeats: int, names) -> list:
    rows = []
    for name in names:
        t = interleaved({"short": decoder(name, short), "long": decoder(name, long)}, repeats)
        ratio = t["long"] / t["short"]
        verdict = ("yes" if ratio <= 1.2 else "no") if name != "transformer" else "(KV cache grows)"
        rows.append([name, f"{1e3 * t['short']:.2f}", f"{1e3 * t['long']:.2f}", f"{ratio:.2f}", verdict])
    return rows


# ---- 4. memory of the chunked form ---------------------------------------------------------------


def saved_bytes(name: str, T: int) -> int:
    torch.manual_seed(0)
    model = bench.build_model(name, vocab_size=VOCAB, causal=True, **SIZES).train()
    tokens = torch.randint(1, VOCAB, (1, T), generator=torch.Generator().manual_seed(3))
    with SavedBytes(exclude=list(model.parameters())) as saved:
        model(tokens).hidden.sum()
    return saved.nbytes


def memory_rows(lengths: list) -> list:
    rows = []
    for name in FAMILIES:
        per_token = [saved_bytes(name, T) / T for T in lengths]
        ratios = [p / per_token[0] for p in per_token]
        rows.append(
            [name, f"{per_token[0] / 1024:.1f}", *(f"{r:.2f}" for r in ratios), "yes" if max(abs(r - 1) for r in ratios) <= 0.1 else "no"]
        )
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None, help="also write the tables to this Markdown file")
    p.add_argument("--quick", action="store_true", help="small lengths (a check that the script runs, not a measurement)")
    a = p.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    T_mech = 128 if a.quick else 1024
    train_lengths = {128: 2, 512: 1} if a.quick else {512: 8, 4096: 1}
    short, long = (64, 256) if a.quick else (1024, 16384)
    mem_lengths = [128, 256] if a.quick else [1024, 2048, 4096, 8192]

    threads = torch.get_num_threads()
    parts = [
        f"torch {torch.__version__}, {threads} thread(s), float32, CPU; CPU ms of this process, medians of {a.repeats} "
        "repeats after a warm-up."
    ]
    parts.append(
        "## 1. Chunked form vs step loop (forward, 4 heads, dk = dv = d)\n\n"
        + tabulate(
            mechanism_rows(T_mech, a.repeats),
            ["function", "decay", "batch", "d", "T", "step loop ms", "chunked ms", "step / chunked", ">= 10x", "max |diff|"],
            tablefmt="github",
        )
    )
    parts.append(
        "## 2. Training step vs the Transformer (d 64, 4 heads, 2 layers, d_ff 128)\n\n"
        + tabulate(
            training_rows(train_lengths, a.repeats),
            ["family", "T", "batch", "family ms", "transformer ms", "family / transformer", "target", "meets"],
            tablefmt="github",
        )
    )
    parts.append(
        f"## 3. Decoding per token after {long} vs {short} tokens of context (batch 1)\n\n"
        + tabulate(
            decoding_rows(short, long, max(a.repeats, 5) * 4, ("transformer", *FAMILIES)),
            ["model", f"ms/token at {short}", f"ms/token at {long}", f"{long} / {short}", "<= 1.2x"],
            tablefmt="github",
        )
    )
    parts.append(
        "## 4. Activation memory of the chunked form (bytes saved for backward per token, batch 1)\n\n"
        + tabulate(
            memory_rows(mem_lengths),
            ["family", f"KiB/token at {mem_lengths[0]}", *(f"per token {T} / {mem_lengths[0]}" for T in mem_lengths), "linear (+-10%)"],
            tablefmt="github",
        )
    )
    emit("\n\n".join(parts), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
