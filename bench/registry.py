"""registry.yaml: the only place where names meet classes.

Entries may inherit (``base: other``): target, params, description and presets are taken
from the base and deep-merged with the entry's own. Names starting with "_" are abstract.
Unknown names fail with the valid ones and a "did you mean".
"""
from __future__ import annotations

import copy
import difflib
import importlib
import inspect
import os
import re
from pathlib import Path

import yaml

from .errors import UserError

DEFAULT_REGISTRY = Path(__file__).resolve().parent.parent / "registry.yaml"
MODEL_KEYS = {"target", "params", "base", "description"}
TASK_KEYS = {"target", "params", "base", "description", "presets"}
PRESETS = ("smoke", "small", "paper")
PRESET_KEYS = {"data", "train", "model", "family"}


class YAMLLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats: ``3e-4``, ``1E-3`` and ``5e+2`` are numbers
    (YAML 1.1, PyYAML's default, wants a dot, ``3.0e-4``, and reads the others as strings)."""


YAMLLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                 |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                 |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                 |[-+]?\.(?:inf|Inf|INF)
                 |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def load_yaml(text: str):
    """YAML text -> Python values, numbers in any YAML 1.1 or 1.2 spelling read as numbers."""
    return yaml.load(text, Loader=YAMLLoader)  # noqa: S506 - a SafeLoader subclass


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def suggest(name: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"valid: {', '.join(sorted(valid))}{hint}"


def import_target(target: str, where: str):
    if not isinstance(target, str) or ":" not in target:
        raise UserError(f"{where}: target must look like 'package.module:ClassName', got {target!r}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's registry problem
        raise UserError(f"{where}: cannot import {module_name!r} for target {target!r} ({type(exc).__name__}: {exc})") from None
    if not hasattr(module, attr):
        raise UserError(f"{where}: module {module_name!r} has no {attr!r} (target {target!r})")
    return getattr(module, attr)


def import_model_class(target: str, where: str):
    """A registry model target: a subclass of bench.models.base.Backbone, or UserError saying so."""
    from bench.models.base import Backbone

    cls = import_target(target, where)
    if not (inspect.isclass(cls) and issubclass(cls, Backbone)):
        raise UserError(f"{where}: target {target!r} is {_what(cls)}; a model target must be a subclass of bench.models.base.Backbone")
    return cls


def import_task_class(target: str, where: str):
    """A registry task target: a concrete subclass of bench.tasks.base.Task with a known kind."""
    from bench.tasks.base import KINDS, Task

    cls = import_target(target, where)
    if not (inspect.isclass(cls) and issubclass(cls, Task)):
        raise UserError(f"{where}: target {target!r} is {_what(cls)}; a task target must be a subclass of bench.tasks.base.Task")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise UserError(f"{where}: task class {target!r} is abstract: it must implement {missing}")
    if getattr(cls, "kind", None) not in KINDS:
        raise UserError(f"{where}: task class {target!r} has kind {getattr(cls, 'kind', None)!r}; set kind to one of {', '.join(KINDS)}")
    return cls


def _what(obj) -> str:
    if inspect.isclass(obj):
        return f"the class {obj.__module__}.{obj.__qualname__}"
    return f"a {type(obj).__name__}, not a class"


def type_ok(default, value) -> bool:
    """Whether ``value`` has the type of a parameter's ``default`` (anything goes for a default
    of None or a parameter without one; an int is a fine float, a bool is never an int)."""
    if default is None or default is inspect.Parameter.empty:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


def type_problems(where: str, given: dict, defaults: dict) -> list[str]:
    """'where.key=value: expected int (like 2), got str' for every given value of the wrong type."""
    return [
        f"{where}.{key}={value!r}: expected {type(defaults[key]).__name__} (like {defaults[key]!r}), got {type(value).__name__}"
        for key, value in given.items()
        if key in defaults and not type_ok(defaults[key], value)
    ]


def constructor_params(cls, skip=("self", "vocab_size", "causal")) -> dict:
    """Keyword parameters of a class constructor with their defaults (inspect.Parameter.empty if none)."""
    sig = inspect.signature(cls.__init__)
    out = {}
    for name, p in sig.parameters.items():
        if name in skip or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        out[name] = p.default
    # NoPE-style subclasses forward **kwargs to their parent: include the parent's parameters too
    if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        for base in cls.__mro__[1:]:
            if base is object or "__init__" not in base.__dict__:
                continue
            for k, v in constructor_params(base, skip).items():
                out.setdefault(k, v)
            break
    return out


class Registry:
    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path or os.environ.get("BENCH_REGISTRY") or DEFAULT_REGISTRY)
        if not self.path.is_file():
            raise UserError(f"registry file {str(self.path)!r} not found; pass an existing registry.yaml")
        try:
            raw = load_yaml(self.path.read_text())
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise UserError(f"{self.path.name} is not valid YAML{where}: {problem}") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("models"), dict) or not isinstance(raw.get("tasks"), dict):
            raise UserError(f"{self.path.name} must be a mapping with 'models:' and 'tasks:' sections")
        self.raw_models: dict = raw["models"]
        self.raw_tasks: dict = raw["tasks"]
        for section, entries, keys in (("models", self.raw_models, MODEL_KEYS), ("tasks", self.raw_tasks, TASK_KEYS)):
            for name, entry in entries.items():
                if not isinstance(entry, dict):
                    raise UserError(f"{self.path.name}: {section}.{name} must be a mapping, got {type(entry).__name__}")
                unknown = set(entry) - keys
                if unknown:
                    raise UserError(
                        f"{self.path.name}: {section}.{name} has unknown key(s) {', '.join(sorted(unknown))}; "
                        f"allowed: {', '.join(sorted(keys))}"
                    )

    # ---- names ------------------------------------------------------------------------
    def model_names(self) -> list[str]:
        return [n for n in self.raw_models if not n.startswith("_")]

    def task_names(self) -> list[str]:
        return [n for n in self.raw_tasks if not n.startswith("_")]

    # ---- resolution ---------------------------------------------------------------------
    def _resolve(self, section: str, entries: dict, name: str, seen: tuple = ()) -> dict:
        if name not in entries or (name.startswith("_") and not seen):
            valid = [n for n in entries if not n.startswith("_")]
            kind = "model" if section == "models" else "task"
            raise UserError(f"unknown {kind} {name!r}; {suggest(name, valid)}")
        if name in seen:
            raise UserError(f"{self.path.name}: {section}.{name} inherits from itself ({' -> '.join((*seen, name))})")
        entry = entries[name]
        lineage = [name]
        resolved: dict = {}
        if "base" in entry:
            base = entry["base"]
            if base not in entries:
                raise UserError(f"{self.path.name}: {section}.{name} has base {base!r}, which is not an entry; {suggest(base, list(entries))}")
            resolved = self._resolve(section, entries, base, (*seen, name))
            lineage = [name, *resolved["lineage"]]
        merged = deep_merge(resolved, {k: v for k, v in entry.items() if k != "base"})
        merged["lineage"] = lineage
        merged["name"] = name
        if "target" not in merged and not seen:
            raise UserError(f"{self.path.name}: {section}.{name} has no target (and no base providing one)")
        merged.setdefault("params", {})
        if not isinstance(merged["params"], dict):
            raise UserError(f"{self.path.name}: {section}.{name}.params must be a mapping")
        return merged

    def model_entry(self, name: str) -> dict:
        return self._resolve("models", self.raw_models, name)

    def task_entry(self, name: str) -> dict:
        entry = self._resolve("tasks", self.raw_tasks, name)
        presets = entry.setdefault("presets", {})
        for pname, preset in presets.items():
            if pname not in PRESETS:
                raise UserError(f"{self.path.name}: tasks.{name} has unknown preset {pname!r}; presets are {', '.join(PRESETS)}")
            if not isinstance(preset, dict) or set(preset) - PRESET_KEYS:
                raise UserError(f"{self.path.name}: tasks.{name}.presets.{pname} may only hold {', '.join(sorted(PRESET_KEYS))}")
        return entry

    def preset(self, task_name: str, preset: str) -> dict:
        entry = self.task_entry(task_name)
        if preset not in PRESETS:
            raise UserError(f"unknown preset {preset!r}; {suggest(preset, list(PRESETS))}")
        if preset not in entry["presets"]:
            have = ", ".join(entry["presets"]) or "none"
            raise UserError(f"task {task_name!r} has no {preset!r} preset (it has: {have})")
        return {k: copy.deepcopy(entry["presets"][preset].get(k) or {}) for k in PRESET_KEYS}

    # ---- validation -----------------------------------------------------------------------
    def validate(self) -> list[str]:
        """Resolve every entry, import every target, check parameter names and types against
        the constructors. Returns human-readable problems (empty list = valid)."""
        problems: list[str] = []
        model_params: dict[str, dict] = {}  # entry name -> its class's constructor parameters
        for name in self.model_names():
            try:
                entry = self.model_entry(name)
                cls = import_model_class(entry["target"], f"models.{name}")
            except UserError as exc:
                problems.append(str(exc))
                continue
            accepted = model_params[name] = constructor_params(cls)
            bad = set(entry["params"]) - set(accepted)
            if bad:
                problems.append(f"models.{name}: params {', '.join(sorted(bad))} are not accepted by {entry['target']}")
            problems += type_problems(f"models.{name}.params", entry["params"], accepted)
        for name in self.task_names():
            try:
                entry = self.task_entry(name)
                cls = import_task_class(entry["target"], f"tasks.{name}")
            except UserError as exc:
                problems.append(str(exc))
                continue
            accepted = constructor_params(cls, skip=("self",))
            problems += type_problems(f"tasks.{name}.params", entry["params"], accepted)
            for pname, preset in entry["presets"].items():
                where = f"tasks.{name}.presets.{pname}"
                data = {**entry["params"], **(preset.get("data") or {})}
                bad = set(data) - set(accepted)
                if bad:
                    problems.append(f"{where}.data: {', '.join(sorted(bad))} not accepted by {entry['target']}")
                problems += type_problems(f"{where}.data", preset.get("data") or {}, accepted)
                for key, value in (preset.get("model") or {}).items():  # sizes for every model taking the key
                    takers = [m for m, params in model_params.items() if key in params]
                    wrong = [m for m in takers if not type_ok(model_params[m][key], value)]
                    if wrong:
                        problems += type_problems(f"{where}.model", {key: value}, {key: model_params[wrong[0]][key]})
                for fam, fam_params in (preset.get("family") or {}).items():
                    if fam not in self.raw_models:
                        problems.append(f"{where}.family: {fam!r} is not a model entry")
                    elif fam in model_params:
                        unknown = set(fam_params or {}) - set(model_params[fam])
                        if unknown:
                            problems.append(f"{where}.family.{fam}: {', '.join(sorted(unknown))} not accepted by models.{fam}")
                        problems += type_problems(f"{where}.family.{fam}", fam_params or {}, model_params[fam])
        return problems
