"""Training time of GUT with early exit vs. GUT upperbound vs. no-halt [HALT §7, Table 5].

Design of Table 5 on a ListOps-like workload: the same GUT weights are trained for a fixed
number of steps in each mode, at upper bounds 10, 20, 30, 40, and the per-N-steps times are
printed as ratios against no-halt at the same bound, all measured side by side in this one
process (modes interleaved round-robin, median over repeats, so machine load hits all alike).

    halt        early exit: a sequence leaves the batch once its halting mass reaches 0.999
    upperbound  same outputs, no break: every sequence runs to the bound (worst case of GUT)
    no-halt     fixed depth, no halting unit / mixture at all

Halting is learned first: GUT is trained in ``halt`` mode at the largest bound for
``--warmup`` steps with the ponder cost (beta), which is what makes it halt early; the timed
runs then start from those weights (each mode from the same copy).

    python scripts/benchmarks/bench_halting.py                       # CPU, ~2-4 minutes
    python scripts/benchmarks/bench_halting.py --device cuda --batch 64 --d-model 256
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.models.universal import GUT  # noqa: E402
from bench.tasks.listops import END, SPLITS, START, VOCAB, sample_split  # noqa: E402

MODES = ("halt", "upperbound", "no-halt")


def listops_batches(n: int, batch: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """ListOps train-split samples (lengths <= 100) with START/END, padded per batch."""
    min_len, max_len, max_args, leaf_p, max_depth = SPLITS["train"]
    toks, labels, _ = sample_split(np.random.default_rng(seed), n, min_len, max_len, max_args, leaf_p, max_depth)
    out = []
    for i in range(0, n - batch + 1, batch):
        seqs = [np.concatenate([[START], t, [END]]) for t in toks[i : i + batch]]
        T = max(len(s) for s in seqs)
        x = torch.zeros(batch, T, dtype=torch.long)
        for j, s in enumerate(seqs):
            x[j, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        out.append((x, x != 0, torch.as_tensor(labels[i : i + batch])))
    return out


class Classifier(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.backbone = GUT(len(VOCAB), False, **kw)
        self.head = torch.nn.Linear(kw["d_model"], 10)

    def forward(self, x, mask):
        out = self.backbone(x, mask)
        return self.head(out.pooled), out


def train_steps(model, batches, device, lr=1e-3) -> tuple[float, float, float]:
    """Train on ``batches``; returns (seconds, mean halting depth, last-quarter accuracy)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    model.train()
    depths, correct, seen = [], 0, 0
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i, (x, m, y) in enumerate(batches):
        x, m, y = x.to(device), m.to(device), y.to(device)
        logits, out = model(x, m)
        loss = F.cross_entropy(logits, y) + out.aux_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        depths.append(out.stats["halt_depth"].float().mean())
        if i >= 3 * len(batches) // 4:
            correct += int((logits.argmax(-1) == y).sum())
            seen += len(y)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, float(torch.stack(depths).mean()), correct / max(seen, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bounds", default="10,20,30,40")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=300, help="steps that learn halting before timing")
    ap.add_argument("--steps", type=int, default=10, help="timed training steps per measurement")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    bounds = [int(b) for b in args.bounds.split(",")]
    kw = dict(d_model=args.d_model, n_heads=4, d_ff=2 * args.d_model, beta=args.beta, dropout=0.1)

    data = listops_batches(args.batch * (args.warmup + args.steps), args.batch, args.seed)
    warm, timed = data[: args.warmup], data[args.warmup :]
    model = Classifier(max_layers=max(bounds), mode="halt", **kw).to(device)
    secs, depth, acc = train_steps(model, warm, device)
    print(
        f"# warm-up: {args.warmup} steps of GUT (halt, bound {max(bounds)}, beta {args.beta}) in {secs:.1f}s; "
        f"mean halting depth {depth:.2f}; train accuracy (last quarter) {acc:.3f}"
    )
    state = copy.deepcopy(model.state_dict())

    print(
        f"# device {device}, threads {args.threads}, d_model {args.d_model}, batch {args.batch}, "
        f"{args.steps} timed steps x {args.repeats} repeats (median), ListOps lengths <= 100"
    )
    print("| upper bound | GUT (halt) s | GUT upperbound s | no-halt s | halt / no-halt | upperbound / no-halt | halt depth |")
    print("|---|---|---|---|---|---|---|")
    for bound in bounds:
        models = {}
        for mode in MODES:
            models[mode] = Classifier(max_layers=bound, mode=mode, **kw).to(device)
        times = {mode: [] for mode in MODES}
        depth = 0.0
        for _ in range(args.repeats):
            for mode in MODES:  # round-robin: load drifts hit every mode alike
                models[mode].load_state_dict(state, strict=(mode != "no-halt"))
                secs, d, _ = train_steps(models[mode], timed, device)
                times[mode].append(secs)
                depth = d if mode == "halt" else depth
        med = {mode: statistics.median(t) for mode, t in times.items()}
        print(
            f"| {bound} | {med['halt']:.2f} | {med['upperbound']:.2f} | {med['no-halt']:.2f} | "
            f"{med['halt'] / med['no-halt']:.2f} | {med['upperbound'] / med['no-halt']:.2f} | {depth:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
