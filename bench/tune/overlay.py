"""The registry overlay a study writes, ``OUT/studies/<study>/tuned.yaml``: each model at its best
trial's values, under a name of its own, for ``bench run --registry`` / ``bench compare --registry``.

For every tuned model M the overlay adds a model entry ``M-tuned`` (``base: M``) and sets, for
it in the study's task and preset, the values it was tuned at: the study's fixed ``--set``
``model.*`` / ``train.*`` items and the best trial's values, ``family: {M-tuned: {...}}`` for
``model.*`` and ``family_train: {M-tuned: {lr: ...}}`` for ``train.*`` (``data.*`` items belong
to the task, not to a model: they are given with ``--set`` again). So a study of TLB at chunk 25
gives a ``tlb-tuned`` at chunk 25, which can run beside models of other studies. A registry layer
replaces an entry of the same name whole, so the overlay holds the task's entry as the registry
gives it (the layer that wrote it, with its ``base``) plus these settings; the shipped models
resolve exactly as before (their records stay current), while ``M-tuned`` records go to
``runs/<task>/<preset>/M-tuned/``: a tuned record never collides with a preset one. When the
study ran with registry files of the user's, the overlay carries their entries too. The overlays
of several studies are used together as ``--registry a.yaml,b.yaml``: the registry merges them
key by key (bench/registry.py: ``merge_user_layers``).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from ..config import override_pairs
from ..records import write_atomic

SUFFIX = "-tuned"


def tuned_name(model: str) -> str:
    return f"{model}{SUFFIX}"


def overlay(registry, meta: dict, best: dict[str, dict], study: str) -> dict:
    """The overlay mapping for ``best`` ({model: {dotted key: value}}, models without a finished
    trial left out)."""
    layer = {"models": {}, "tasks": {}}
    if registry.user_layer is not None:  # the user's own layer, which this one replaces
        own = copy.deepcopy(registry.user_layer)
        layer = {"models": dict(own.get("models") or {}), "tasks": dict(own.get("tasks") or {})}
    task = copy.deepcopy(registry.raw_tasks[meta["task"]])
    preset = task.setdefault("presets", {}).setdefault(meta["preset"], {}) or {}
    task["presets"][meta["preset"]] = preset
    fixed = dict(override_pairs(meta["set"]))
    for model, values in best.items():
        name = tuned_name(model)
        layer["models"][name] = {
            "base": model,
            "description": f"{model} at its tuned setting on {meta['task']} "
            f"({meta['preset']} preset), bench tune study {study}: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())),
        }
        for section, where in (("train", "family_train"), ("model", "family")):
            chosen = {k.partition(".")[2]: v for k, v in sorted({**fixed, **values}.items()) if k.startswith(section + ".")}
            if chosen:
                preset.setdefault(where, {})[name] = chosen
    layer["tasks"][meta["task"]] = task
    return layer


def write_overlay(path: Path, layer: dict, meta: dict, command: str) -> None:
    header = (
        f"# Written by bench tune (study {path.parent.name}: {meta['task']}, {meta['preset']} preset).\n"
        + (
            f"# Selected on validation {meta['objective']}, trials on seeds {tuning_seeds(meta)} (final seeds must be other ones).\n"
            if meta.get("objective")
            else ""
        )
        + f"# Train the final seeds at the tuned settings with:\n#   {command}\n"
    )
    write_atomic(path, header + yaml.safe_dump(layer, sort_keys=False, default_flow_style=False))


def tuning_seeds(meta: dict) -> list[int]:
    """The seeds the study's trials trained (a sync study: its seed and the next; else its seed):
    a table's final seeds must be apart from them."""
    return list((meta.get("protocol") or {}).get("seeds") or [meta["seed"]])


def write_best(folder: Path, meta: dict, rows: list[dict]) -> Path:
    """best.json beside the overlay: per model its best values, validation score, trials, the best
    trial's record (under OUT; its seed is the study's), what the pick rests on (``evidence``: its
    seeds and scores, the other contenders', ``flags``) and, where the CLI measured it, the
    validation's chance level and whether the best score is at it (``val_chance``), for readers
    that need no Optuna (a table's ``tuned:`` rows, bench/report/tuned.py). A model that learned
    nothing (every score at the validation's chance level) has no entry in ``models`` (a table reads
    its row as not tuned) and one in ``nothing_learned``, saying why; ``validation`` is the
    validation split's size and the reason recorded for going on under 1,000 examples."""
    from ..records import write_json_atomic

    path = folder / "best.json"
    write_json_atomic(
        path,
        {
            "study": folder.name,
            "task": meta["task"],
            "preset": meta["preset"],
            "set": meta["set"],
            "space": meta["space"],
            "seed": meta["seed"],
            "objective": meta.get("objective"),
            "tuning_seeds": tuning_seeds(meta),
            "pruner": meta.get("pruner"),
            "models": {
                r["model"]: {
                    "values": r["best"],
                    "val": r["val"],
                    "finished": r["complete"],
                    "trials": r["complete"] + r["pruned"] + r["failed"],
                    "record": r["record"],
                    "val_chance": r.get("val_chance"),
                    "evidence": r.get("evidence"),
                    "flags": r.get("flags") or [],
                }
                for r in rows
                if r["best"] is not None
            },
            "nothing_learned": {
                r["model"]: {
                    **r["nothing_learned"],
                    "best_val": r["val"],
                    "record": r["record"],
                    "trials": r["complete"] + r["pruned"] + r["failed"],
                }
                for r in rows
                if r.get("nothing_learned")
            },
            "validation": meta.get("validation"),
        },
    )
    return path
