"""CPU training-step time of the model families, this tree against an earlier revision, in one run.

Each tree runs in its own worker process (the earlier one from ``git archive REV``, extracted
once into a temporary folder; git state is left alone) and builds the registry's models with
its own code at matched sizes (d = 128, 4 heads, d_ff = 256, the registry's layer counts). The
parent interleaves the measurements: for every repeat, every model and length, both trees
time the same number of training steps (forward + backward + AdamW step, 1 thread, the same
seeds and batches) one right after the other, the order alternating between repeats, so machine
noise (other jobs on the cores) hits both alike. Reported: median seconds per step and the
after / before ratio.

    .venv/bin/python scripts/benchmarks/bench_models_cpu.py --before 9bf00f6
    .venv/bin/python scripts/benchmarks/bench_models_cpu.py --before 9bf00f6 --models gut --lengths 256 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("transformer", "rsa-transformer", "xl", "brt", "gut")
BIDIRECTIONAL = ("gut",)  # GUT's paper setting is classification; the rest run as causal LMs
SIZES = dict(d_model=128, n_heads=4, d_ff=256)
VOCAB = 16


# ---- worker: one tree, answers "time these steps" requests on stdin ------------------------
def worker(tree: str, threads: int, batch: int) -> None:
    sys.path.insert(0, tree)  # ahead of the editable install's finder
    import torch
    import torch.nn.functional as F

    import bench

    if not Path(bench.__file__).resolve().is_relative_to(Path(tree).resolve()):
        sys.exit(f"bench was imported from {bench.__file__}, not from {tree}")

    torch.set_num_threads(threads)
    cache: dict = {}

    def setup(name: str, T: int):
        torch.manual_seed(0)
        model = bench.build_model(name, vocab_size=VOCAB, causal=name not in BIDIRECTIONAL, **SIZES)
        head = torch.nn.Linear(SIZES["d_model"], VOCAB)
        params = list(model.parameters()) + list(head.parameters())
        opt = torch.optim.AdamW(params, lr=1e-3)
        g = torch.Generator().manual_seed(1)
        tokens = torch.randint(1, VOCAB, (batch, T), generator=g)
        targets = torch.randint(0, VOCAB, (batch, T), generator=g)
        mask = torch.ones(batch, T, dtype=torch.bool)  # the common case: no padding
        return model.train(), head, opt, tokens, targets, mask

    def step(state) -> None:
        model, head, opt, tokens, targets, mask = state
        out = model(tokens, mask)
        loss = F.cross_entropy(head(out.hidden).flatten(0, 1), targets.flatten()) + out.aux_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for line in sys.stdin:
        req = json.loads(line)
        key = (req["model"], req["T"])
        if key not in cache:
            cache[key] = setup(*key)
            step(cache[key])  # warm-up: allocator, caches
        torch.manual_seed(req["seed"])  # same dropout masks in both trees
        t0 = time.perf_counter()
        for _ in range(req["steps"]):
            step(cache[key])
        print(json.dumps({"seconds": (time.perf_counter() - t0) / req["steps"]}), flush=True)


# ---- parent ---------------------------------------------------------------------------------
def extract(rev: str) -> tuple[str, str]:
    """(folder holding the tree at ``rev``, full commit hash), via git archive into a temp folder."""
    commit = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    folder = Path(tempfile.gettempdir()) / f"bench-models-cpu-{commit[:12]}"
    if not (folder / "bench").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return str(folder), commit


class Worker:
    def __init__(self, tree: str, threads: int, batch: int):
        cmd = [sys.executable, __file__, "--worker", tree, "--threads", str(threads), "--batch", str(batch)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())

    def time(self, **req) -> float:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker died on {req}")
        return json.loads(line)["seconds"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="9bf00f6", help="git revision to compare against")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--lengths", default="256,512")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3, help="training steps per measurement")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.threads, args.batch)

    before_tree, commit = extract(args.before)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "bench/models"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    workers = {"before": Worker(before_tree, args.threads, args.batch), "after": Worker(str(ROOT), args.threads, args.batch)}
    models, lengths = args.models.split(","), [int(t) for t in args.lengths.split(",")]
    times = {(m, T, w): [] for m in models for T in lengths for w in workers}
    try:
        for r in range(args.repeats):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for m in models:
                for T in lengths:
                    for w in order:
                        times[m, T, w].append(workers[w].time(model=m, T=T, steps=args.steps, seed=r))
            print(f"# repeat {r + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    finally:
        for w in workers.values():
            w.close()

    print(f"# before: {commit[:7]} (git archive); after: {ROOT} at HEAD {head[:7]}{' + uncommitted bench/models/' if dirty else ''}")
    print(
        f"# CPU, {args.threads} thread(s), batch {args.batch}, d_model 128, 4 heads, d_ff 256, "
        f"{args.steps} steps x {args.repeats} repeats interleaved (median s/step); no padding"
    )
    print("| model | T | before s/step | after s/step | after / before |")
    print("|---|---|---|---|---|")
    for m in models:
        for T in lengths:
            b, a = statistics.median(times[m, T, "before"]), statistics.median(times[m, T, "after"])
            print(f"| {m} | {T} | {b:.3f} | {a:.3f} | {a / b:.2f} |", flush=True)


if __name__ == "__main__":
    main()
