"""Every registry model on every task and preset, resolved as ``bench run`` resolves it, as JSON:
the before / after check of a change to the registry, the presets or the resolution.

    python scripts/resolved_configs.py --save OUT.json          # this tree (PYTHONPATH picks the tree)
    python scripts/resolved_configs.py --compare A.json B.json  # exit 1 on a changed or lost setting, naming each

A setting only the second tree has (a parameter added with its default) is listed, not a difference.

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


def _flat(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        out = {}
        for key, inner in value.items():
            out.update(_flat(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def compare(a: dict, b: dict) -> tuple[list[str], list[str]]:
    """(differences, notes): a pairing only on one side, a setting whose value changed or that the
    second lost are differences; a setting only the second has (a parameter added with its default,
    which records made before it skip: bench/records.py config_changes) is a note, counted per key."""
    lines = [f"only in the first: {k}" for k in sorted(set(a) - set(b))]
    lines += [f"only in the second: {k}" for k in sorted(set(b) - set(a))]
    added: dict[str, int] = {}
    for key in sorted(set(a) & set(b)):
        if isinstance(a[key], str) or isinstance(b[key], str):
            if a[key] != b[key]:
                lines.append(f"differs: {key}: {str(a[key])[:200]} -> {str(b[key])[:200]}")
            continue
        fa, fb = _flat(a[key]), _flat(b[key])
        changed = [f"{k} {fa[k]!r} -> {fb[k]!r}" for k in sorted(fa.keys() & fb.keys()) if fa[k] != fb[k]]
        changed += [f"{k} {fa[k]!r} -> (gone)" for k in sorted(fa.keys() - fb.keys())]
        if changed:
            lines.append(f"differs: {key}: " + "; ".join(changed))
        for k in fb.keys() - fa.keys():
            added[f"{k}={fb[k]!r}"] = added.get(f"{k}={fb[k]!r}", 0) + 1
    notes = [f"added: {k} in {n} pairing(s)" for k, n in sorted(added.items())]
    return lines, notes


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
    lines, notes = compare(first, second)
    print("\n".join([*lines, *notes]))
    if not lines:
        print(f"identical: {len(first)} pairings" + (f" (settings added: {len(notes)})" if notes else ""))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
