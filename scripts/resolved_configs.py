"""Every registry model on every task and preset, resolved as ``bench run`` resolves it, as JSON:
the before / after check of a change to the registry, the presets or the resolution.

    python scripts/resolved_configs.py --save OUT.json          # this tree (PYTHONPATH picks the tree)
    python scripts/resolved_configs.py --compare A.json B.json  # exit 1 on a difference, naming each

Each (model, task, preset) maps to the config a run record holds (``RunConfig.public()``), or to
``refused: <the one line>`` where bench refuses the pairing (causality, a size the family cannot take).
"""

from __future__ import annotations

import argparse
import json
import sys

import bench
from bench.config import resolve_run
from bench.errors import UserError


def snapshot() -> dict:
    registry = bench.Registry()
    out = {}
    for task in registry.task_names():
        for preset in registry.task_entry(task)["presets"]:
            for model in registry.model_names():
                key = f"{model} | {task} | {preset}"
                try:
                    out[key] = resolve_run(registry, model, task, preset).public()
                except UserError as exc:  # Incompatible is a UserError
                    out[key] = f"refused: {exc}"
    return out


def compare(a: dict, b: dict) -> list[str]:
    lines = [f"only in the first: {k}" for k in sorted(set(a) - set(b))]
    lines += [f"only in the second: {k}" for k in sorted(set(b) - set(a))]
    for key in sorted(set(a) & set(b)):
        if a[key] != b[key]:
            lines.append(f"differs: {key}\n  first:  {json.dumps(a[key], sort_keys=True)}\n  second: {json.dumps(b[key], sort_keys=True)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="OUT")
    group.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = parser.parse_args(argv)
    if args.save:
        data = snapshot()
        with open(args.save, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        refused = sum(isinstance(v, str) for v in data.values())
        print(f"{len(data)} pairings ({refused} refused) -> {args.save}")
        return 0
    first, second = (json.load(open(p)) for p in args.compare)
    lines = compare(first, second)
    print("\n".join(lines) if lines else f"identical: {len(first)} pairings")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
