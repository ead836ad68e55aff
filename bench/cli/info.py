"""The commands that read the registry or records: ``bench list``, ``validate``, ``explain`` and
``curves``."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UserError
from .common import _check_names, _fit, _names


def cmd_curves(args, registry) -> int:
    from ..report.curves import draw_curves

    models = _names(args.models, "models")
    tasks = _names(args.tasks, "tasks")
    _check_names(registry, models, tasks)
    for path in draw_curves(Path(args.out), models, tasks, args.preset, args.set or None, metric=args.metric):
        print(f"wrote {path}")
    return 0


def cmd_list(args, registry) -> int:
    from tabulate import tabulate

    what = args.what or "all"
    if what in ("models", "all"):
        from ..targets import import_model_class, static_class_attrs

        rows = []
        flags = ("supports_causal", "supports_streaming")
        for name in registry.model_names():
            e = registry.model_entry(name)
            try:  # read from the source when it can be (no torch for a listing), else from the class
                cls = static_class_attrs(e["target"], flags) or {
                    f: getattr(import_model_class(e["target"], f"models.{name}"), f) for f in flags
                }
                streams = "yes" if all(cls[f] for f in flags) else "no"  # init_state / step (causal)
            except UserError:  # a broken target: `bench validate` says why; the listing still shows the entry
                streams = "?"
            rows.append([name, e["lineage"][1] if len(e["lineage"]) > 1 else "", streams, e.get("description", "")])
        headers = ["model", "based on", "streams", "description"]
        print(tabulate(_fit(rows, headers, args.full), headers=headers, tablefmt="simple"))
    if what == "all":
        print()
    if what in ("tasks", "all"):
        rows = []
        for name in registry.task_names():
            e = registry.task_entry(name)
            rows.append([name, ",".join(e["presets"]), e.get("description", "")])
        headers = ["task", "presets", "description"]
        print(tabulate(_fit(rows, headers, args.full), headers=headers, tablefmt="simple"))
    return 0


def cmd_validate(args, registry) -> int:
    from ..validation import registry_problems

    problems = registry_problems(registry)
    if problems:
        for p in problems:
            print(f"bench: invalid registry: {p}", file=sys.stderr)
        return 2
    print(f"{' + '.join(registry.sources)}: {len(registry.model_names())} models and {len(registry.task_names())} tasks, all valid")
    return 0


def cmd_explain(args, registry) -> int:
    import json

    from tabulate import tabulate

    from ..config import resolve_run

    _check_names(registry, [args.model], [args.task])
    config = resolve_run(registry, args.model, args.task, args.preset, args.set or None)
    m, t = config.model, config.task
    print(f"{m.name} ({m.target}) on {t.name} ({t.target}), preset {config.preset}")
    rows = [
        [section, key, value if isinstance(value, str) else json.dumps(value), source] for section, key, value, source in config.explain()
    ]
    print(tabulate(rows, headers=["section", "key", "value", "source"], tablefmt="simple", disable_numparse=True))
    return 0
