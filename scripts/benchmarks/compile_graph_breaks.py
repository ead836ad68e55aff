"""Graph breaks per registry model under torch.compile, measured with torch._dynamo.explain on the CPU.

Every registry model is built with a task's smoke preset (causal: ``copy``; bidirectional:
``listops``), in training mode, and traced once on a padded batch (B = 2, T = 80, the second
row padded after 60 tokens) so that XL / BRT / TLB run several segments. A graph break is
where dynamo hands control back to Python: a host synchronisation (``.item()``, ``bool(t)``,
``int(t)``) or an unsupported construct; each one costs a device -> host round trip and splits
the compiled graph. UT / GUT also run without early exit (``mode=upperbound``, ``no-halt``).

    .venv/bin/python scripts/benchmarks/compile_graph_breaks.py                   # this tree
    .venv/bin/python scripts/benchmarks/compile_graph_breaks.py --tree /tmp/before  # e.g. git archive REV | tar -x -C /tmp/before
    .venv/bin/python scripts/benchmarks/compile_graph_breaks.py --compile          # also run inductor, forward + backward

``--compile`` checks that the compiled model runs forward and backward and matches eager
(eval mode, so dropout is off); it compiles every model, which takes minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASKS = {True: "copy", False: "listops"}  # causal -> a task with that causality (smoke preset)
NO_EARLY_EXIT = {name: ("upperbound", "no-halt") for name in ("ut", "gut", "gutlb")}
B, T, PAD_FROM = 2, 80, 60


def cases(bench, names):
    """(label, causal, build overrides) for every model, causal mode and halting mode measured."""
    out = []
    for name in names:
        for causal in (True, False):
            for mode in (None, *NO_EARLY_EXIT.get(name, ())):
                label = name if mode is None else f"{name}[mode={mode}]"
                out.append((name, label, causal, {} if mode is None else {"mode": mode}))
    return out


def batch(vocab_size: int):
    import torch

    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, vocab_size, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, PAD_FROM:] = False
    return tokens, mask


def explain(model, tokens, mask):
    """(graphs, graph breaks, break sites, distinct reasons). A break in the last statement leaves
    no second graph, and dynamo's graph_break_count misses it; break_reasons lists every site."""
    import torch._dynamo as dynamo

    dynamo.reset()
    ex = dynamo.explain(model)(tokens, mask)
    reasons = sorted({str(b.reason).splitlines()[0][:120] for b in ex.break_reasons})
    return ex.graph_count, ex.graph_break_count, len(ex.break_reasons), reasons


def check_compiled(model, tokens, mask) -> str:
    """Inductor forward + backward once; max |compiled - eager| of the hidden states (eval mode)."""
    import torch
    import torch._dynamo as dynamo

    dynamo.reset()
    model.eval()
    want = model(tokens, mask).hidden
    compiled = torch.compile(model)
    t0 = time.perf_counter()
    out = compiled(tokens, mask)
    (out.hidden.square().mean() + out.aux_loss).backward()
    err = (out.hidden - want).abs().max().item()
    return f"ok, {time.perf_counter() - t0:.0f} s, max err {err:.1e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", default=str(ROOT), help="source tree whose bench/ and bench/models/ are measured")
    ap.add_argument("--models", help="comma-separated registry names (default: all)")
    ap.add_argument("--compile", action="store_true", help="also compile with inductor and run forward + backward")
    args = ap.parse_args()
    tree = Path(args.tree).resolve()
    if not (tree / "bench").is_dir() or not (
        (tree / "models").is_dir() or (tree / "bench" / "models").is_dir()
    ):  # models/ before the move to bench/
        sys.exit(f"{tree} holds no bench/ and bench/models/ (e.g. git archive REV | tar -x -C {tree})")
    sys.path.insert(0, str(tree))  # ahead of the editable install's finder
    import torch

    import bench

    if not Path(bench.__file__).resolve().is_relative_to(tree):
        sys.exit(f"bench was imported from {bench.__file__}, not from {tree}")

    torch.set_num_threads(1)
    names = args.models.split(",") if args.models else bench.Registry().model_names()
    tasks = {c: bench.build_task(t, preset="smoke") for c, t in TASKS.items()}
    print(f"# tree {args.tree}, torch {torch.__version__}, B={B} T={T} (row 1 padded from {PAD_FROM})")
    print("| model | causal | graphs | graph breaks | break sites | reasons |" + (" inductor fwd+bwd |" if args.compile else ""))
    print("|---|---|---|---|---|---|" + ("---|" if args.compile else ""))
    for name, label, causal, over in cases(bench, names):
        try:
            model = bench.build_model(name, task=tasks[causal], preset="smoke", **over)
        except Exception as exc:  # e.g. NoPE is causal only
            if "causal" in str(exc):
                continue
            raise
        if model.causal != causal:  # a causal-only model given a bidirectional task
            continue
        tokens, mask = batch(tasks[causal].vocab_size)
        torch.manual_seed(0)
        graphs, breaks, sites, reasons = explain(model.train(), tokens, mask)
        row = f"| {label} | {causal} | {graphs} | {breaks} | {sites} | {'; '.join(reasons) or '—'} |"
        if args.compile:
            row += f" {check_compiled(model, tokens, mask)} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
