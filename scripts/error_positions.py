"""Where a run's wrong strings go wrong, for per-position tasks (the formal languages): from the
run's tested checkpoint on one split, how many strings are wrong, at which positions, and which
(target, predicted, symbol read) triples account for the errors.

    python scripts/error_positions.py results/runs/d2/paper/transformer-star/seed0.json --split bin0

Worked example (RSA Table 2, Transformer* on D2): 262 of 512 bin-0 strings wrong, every one at
position 1 only, target {b} predicted {a, b} after reading `a`: the second symbol of strings
that begin `aa`, where depth 2 allows only `b`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def wrong_positions(logits, labels, mask, tokens) -> list[tuple[int, int, tuple, tuple, int]]:
    """(string, position, target labels, predicted labels, symbol read) for every wrong position,
    wrong as the run's metric scores it (``bench.tasks.kinds.tag_positions_ok``): logits (B, T, K),
    labels (B, T, K) in {0, 1}, mask (B, T) bool, tokens (B, T)."""
    from bench.tasks.kinds import tag_positions_ok

    wrong = ~tag_positions_ok(logits, labels, mask) & mask  # (B, T)
    return [
        (b, t, tuple(labels[b, t].int().tolist()), tuple((logits[b, t] > 0).int().tolist()), int(tokens[b, t]))
        for b, t in wrong.nonzero().tolist()
    ]


def main(argv=None) -> int:
    from bench.registry import Registry
    from bench.runner.evaluate import rebuild_run
    from bench.runner.module import forward_batch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("record", help="a run's record, results/runs/TASK/PRESET/MODEL/seedN.json")
    ap.add_argument("--split", default="bin0")
    ap.add_argument("--max-strings", type=int, default=512)
    args = ap.parse_args(argv)
    rec, ckpt, task, data, module = rebuild_run(Path(args.record), [], Registry())
    if task.kind != "tag":
        print(f"{rec['task']} is a {task.kind!r} task; this script reads per-position ('tag') tasks", file=sys.stderr)
        return 2
    module.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"])
    module.eval()
    vocab = task.vocab
    strings, by_position, by_kind, wrong_strings = 0, Counter(), Counter(), set()
    for batch in data.eval_loader(args.split):
        with torch.no_grad():
            logits, _, _ = forward_batch(module.backbone, module.head, batch)
        for b, t, target, predicted, symbol in wrong_positions(logits, batch["labels"], batch["mask"], batch["tokens"]):
            wrong_strings.add(strings + b)
            by_position[t] += 1
            by_kind[(target, predicted, vocab[symbol])] += 1
        strings += batch["tokens"].shape[0]
        if strings >= args.max_strings:
            break
    print(
        f"{rec['model']} on {rec['task']} ({rec['preset']}), seed {rec['seed']}, {args.split}: "
        f"{len(wrong_strings)} of {strings} strings wrong"
    )
    print("wrong positions (position: count):", ", ".join(f"{t}: {n}" for t, n in sorted(by_position.items())[:40]))
    print("target / predicted / after reading (labels: next symbol allowed, per symbol):")
    for (target, predicted, symbol), n in by_kind.most_common(8):
        print(f"  {n:6d}  target {target}  predicted {predicted}  after {symbol!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
