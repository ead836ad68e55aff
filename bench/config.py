"""Resolving a run: (model entry, task entry, preset, overrides, seed) -> one full config.

Precedence, lowest first:
  model:  constructor defaults < model entry params < preset.model (keys the class accepts)
          < preset.family[entry or any of its bases] < --set model.key=value
  data:   task constructor defaults < task entry params < preset.data < --set data.key=value
  train:  TRAIN_DEFAULTS < preset.train < --set train.key=value
"""
from __future__ import annotations

import copy
import inspect

import yaml

from .errors import UserError
from .registry import Registry, constructor_params, deep_merge, import_model_class, import_task_class, suggest, type_ok

TRAIN_DEFAULTS = {
    "optimizer": "adamw",  # adamw | adam
    "lr": 1e-3,
    "weight_decay": 0.01,
    "betas": [0.9, 0.999],
    "warmup_steps": 0,
    "schedule": "constant",  # constant | linear | cosine | inverse_sqrt | step
    "step_every_epochs": 5,  # schedule=step: multiply lr by step_gamma every N epochs
    "step_gamma": 0.5,
    "batch_size": 32,
    "eval_batch_size": 128,
    "max_epochs": 10,
    "max_steps": -1,  # -1: no step limit
    "val_every_steps": 0,  # 0: validate once per epoch
    "patience": 0,  # early stopping on the validation metric, in validations; 0: off
    "grad_clip": 1.0,
    "accumulate_grad_batches": 1,
    "num_threads": 0,  # 0: min(cpu count, 8)
    "precision": "32-true",
    "deterministic": True,
    "select": "best_val",  # best_val: test the best-on-validation weights | last: the final weights
    "checkpoint_every_min": 10.0,  # the resume checkpoint is also written this often (and at every validation)
    "compile": False,  # torch.compile the backbone (not part of a run's identity)
}
CHOICES = {
    "optimizer": ("adamw", "adam"),
    "schedule": ("constant", "linear", "cosine", "inverse_sqrt", "step"),
    "select": ("best_val", "last"),
    "precision": ("32-true", "16-mixed", "bf16-mixed", "32", "16", "bf16"),
}
SECTIONS = ("model", "train", "data")


def parse_overrides(items: list[str] | dict | None) -> dict:
    """['model.d_model=64', 'train.lr=3e-4'] -> {'model': {'d_model': 64}, 'train': {'lr': 0.0003}}"""
    out: dict = {s: {} for s in SECTIONS}
    if not items:
        return out
    if isinstance(items, dict):
        pairs = list(items.items())
    else:
        pairs = []
        for item in items:
            if "=" not in item:
                raise UserError(f"--set expects section.key=value (e.g. model.d_model=64), got {item!r}")
            key, _, raw = item.partition("=")
            try:
                value = yaml.safe_load(raw) if raw.strip() else ""
            except yaml.YAMLError:
                value = raw
            pairs.append((key.strip(), value))
    for key, value in pairs:
        section, _, rest = key.partition(".")
        if section not in SECTIONS or not rest:
            raise UserError(f"--set key {key!r} must start with one of {', '.join(s + '.' for s in SECTIONS)} (e.g. model.d_model)")
        node = out[section]
        *path, leaf = rest.split(".")
        for p in path:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def check_overrides(section: str, given: dict, defaults: dict, what: str) -> None:
    for key, value in given.items():
        if key not in defaults:
            raise UserError(f"--set {section}.{key}: {what} has no parameter {key!r}; {suggest(key, list(defaults))}")
        default = defaults[key]
        if isinstance(value, dict) and isinstance(default, dict):
            continue  # nested dict params (e.g. rsa) are checked by the model itself
        if not type_ok(default, value):
            raise UserError(
                f"--set {section}.{key}={value!r}: expected {type(default).__name__} (like {default!r}), got {type(value).__name__}"
            )
        if key in CHOICES and section == "train" and value not in CHOICES[key]:
            raise UserError(f"--set train.{key}={value!r}: choose one of {', '.join(CHOICES[key])}")


def resolve_task(registry: Registry, task: str, preset: str, overrides: dict) -> dict:
    entry = registry.task_entry(task)
    pre = registry.preset(task, preset)
    cls = import_task_class(entry["target"], f"tasks.{task}")
    accepted = constructor_params(cls, skip=("self",))
    check_overrides("data", overrides.get("data", {}), {**accepted, **entry["params"]}, f"task {task!r}")
    params = deep_merge(deep_merge(entry["params"], pre["data"]), overrides.get("data", {}))
    for key, default in accepted.items():
        if key not in params and default is inspect.Parameter.empty:
            raise UserError(f"task {task!r}: parameter {key!r} has no default; set it in registry.yaml or with --set data.{key}=...")
    return {"name": task, "target": entry["target"], "params": params, "preset": preset, "_cls": cls, "_preset": pre}


def resolve_train(pre: dict, overrides: dict) -> dict:
    train = copy.deepcopy(TRAIN_DEFAULTS)
    check_overrides("train", pre.get("train", {}), TRAIN_DEFAULTS, "training")
    check_overrides("train", overrides.get("train", {}), TRAIN_DEFAULTS, "training")
    train.update(pre.get("train", {}))
    train.update(overrides.get("train", {}))
    return train


def resolve_model(registry: Registry, model: str, task_cls, pre: dict | None, overrides: dict) -> dict:
    entry = registry.model_entry(model)
    cls = import_model_class(entry["target"], f"models.{model}")
    accepted = constructor_params(cls)
    bad = set(entry["params"]) - set(accepted) - {"causal"}
    if bad:
        raise UserError(f"registry model {model!r}: params {', '.join(sorted(bad))} not accepted by {entry['target']}")
    params = {k: v for k, v in accepted.items() if v is not inspect.Parameter.empty}
    params = deep_merge(params, entry["params"])
    pre = pre or {"model": {}, "family": {}}
    params = deep_merge(params, {k: v for k, v in pre["model"].items() if k in accepted})
    for fam in reversed(entry["lineage"]):  # most general first, the entry itself last
        fam_params = (pre.get("family") or {}).get(fam) or {}
        unknown = set(fam_params) - set(accepted)
        if unknown:
            raise UserError(f"preset family override for {fam!r}: {', '.join(sorted(unknown))} not accepted by {entry['target']}")
        params = deep_merge(params, fam_params)
    model_over = dict(overrides.get("model", {}))
    explicit_causal = model_over.pop("causal", params.pop("causal", None))
    check_overrides("model", model_over, accepted, f"model {model!r}")
    params = deep_merge(params, model_over)
    causal = _resolve_causal(model, cls, task_cls, explicit_causal)
    return {"name": model, "target": entry["target"], "params": params, "causal": causal, "_cls": cls}


def _resolve_causal(model: str, cls, task_cls, explicit) -> bool:
    if explicit is not None and not isinstance(explicit, bool):
        raise UserError(f"--set model.causal={explicit!r}: expected true or false")
    requires = getattr(task_cls, "requires_causal", None) if task_cls is not None else None
    if requires and explicit is False:
        raise UserError(
            "task needs a causal model (its targets depend only on the prefix), but model.causal=false was set; drop it"
        )
    if requires and not cls.supports_causal:
        raise UserError(f"model {model!r} cannot run causally, and the task needs a causal model")
    if explicit is True and not cls.supports_causal:
        raise UserError(f"model {model!r} has no causal mode; drop model.causal=true")
    if explicit is False and not cls.supports_bidirectional:
        raise UserError(f"model {model!r} is causal-only; drop model.causal=false")
    if requires:
        return True
    if explicit is not None:
        return explicit
    return not cls.supports_bidirectional


def resolve_run(registry: Registry, model: str, task: str, preset: str, overrides=None) -> dict:
    ov = parse_overrides(overrides)
    t = resolve_task(registry, task, preset, ov)
    m = resolve_model(registry, model, t["_cls"], t["_preset"], ov)
    train = resolve_train(t["_preset"], ov)
    return {"model": m, "task": t, "train": train, "preset": preset}


def public(config: dict) -> dict:
    """The JSON-able part of a resolved config (drops the imported classes)."""
    def strip(d):
        return {k: v for k, v in d.items() if not k.startswith("_")}

    return {"model": strip(config["model"]), "task": strip(config["task"]), "train": config["train"], "preset": config["preset"]}
