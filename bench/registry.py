"""The registry: the only place where names meet classes.

Entries may inherit (``base: other``): target, params, description and presets are taken
from the base and deep-merged with the entry's own. Names starting with "_" are abstract.
Unknown names fail with the valid ones and a "did you mean".

The registry is layered, later layers extending earlier ones:

1. the shipped one (package data, read with importlib.resources): ``bench/registry.yaml``'s models
   and the tasks' files beside their modules, ``bench/tasks/**/*.yaml`` (``tasks:`` only; path order);
2. plugin registries: every entry point of the group ``bench.registries`` (``BENCH_NO_PLUGINS=1``
   skips them). The entry point names a module (its package's ``registry.yaml`` is read) or an
   object: a mapping, a path to a YAML file, or a callable returning either;
3. the user's file: ``--registry FILE`` or ``$BENCH_REGISTRY``; several files, ``a.yaml,b.yaml``
   (e.g. the tuned overlays of several ``bench tune`` studies), are merged into one layer key by
   key (``merge_user_layers``: a key the files set to different values is refused).

A layer's entries are added to the sections (``models:``, ``tasks:``; either may be missing);
an entry with the name of an earlier one replaces it whole. ``base:`` may name an entry of any
layer, so a variant of a shipped model is ``{base: transformer, params: {...}}`` under a new name.
A plugin's or user's task entry without presets takes the entry of its name from the task file
beside its target's module, when there is one (``module_task_file``): a task outside bench is its
module and that file, as bench's own are.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.metadata
import importlib.resources
import inspect
import os
from pathlib import Path
from typing import Any

from . import signature
from .errors import UserError
from .parsing import check_name, env_flag
from .schema import Schema, load_yaml, suggest

#: the shipped registry (package data; bench is installed as files, never zipped)
DEFAULT_REGISTRY = Path(str(importlib.resources.files(__package__).joinpath("registry.yaml")))
#: the shipped tasks' entries and presets: a YAML file beside each task's module, ``tasks:`` only
TASKS_DIR = DEFAULT_REGISTRY.parent / "tasks"
ENTRY_POINT_GROUP = "bench.registries"
NO_PLUGINS_ENV = "BENCH_NO_PLUGINS"
PRESETS = ("smoke", "small", "paper")


@dataclasses.dataclass
class ModelEntry(Schema):
    """A ``models:`` entry as written (its target is checked when it is imported)."""

    target: Any = None
    params: dict | None = None
    base: str | None = None
    description: Any = None


@dataclasses.dataclass
class TaskEntry(ModelEntry):
    """A ``tasks:`` entry as written."""

    presets: dict | None = None


@dataclasses.dataclass
class PresetEntry(Schema):
    """``tasks.T.presets.P``: the sections a preset may set (bench/config.py layers them)."""

    data: dict | None = None
    train: dict | None = None
    model: dict | None = None
    family: dict | None = None  # {model entry: {model params}}, for it and every entry based on it
    family_train: dict | None = None  # {model entry: {train settings}}, likewise


PRESET_KEYS = tuple(f.name for f in dataclasses.fields(PresetEntry))


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


#: settings every backbone takes besides its constructor's parameters, applied after it is built
#: (bench/runner/build.py): ``init``, the parameter initialisation (bench/models/layers/init.py)
#: and ``dropout_at``, where the feed-forwards' dropout sits (the same file's ``place_dropout``);
#: ``faithful``: the one switch selecting REFERENCE_OPTIONS and the family's own (bench/config.py: resolve_model)
BACKBONE_SETTINGS = {"init": "default", "dropout_at": "bench", "faithful": "off"}
MODEL_INITS = ("default", "reference", "reference-full")
DROPOUT_PLACES = ("bench", "reference")
FAITHFUL = ("off", "reference")
#: ``model.faithful=reference``: the settings every backbone takes at the [HALT] authors' code's values
#: (docs/depth_recurrence.md, docs/chunk_recurrence.md cite the code's lines), with the family's own
#: options (its class's ``reference_options``, bench/models/base.py); --set still wins
REFERENCE_OPTIONS = {
    "init": "reference-full",  # every family (its own part: the class's ``family_reference_init``)
    "dropout_at": "reference",  # every family with feed-forwards
}
#: and the data settings it changes where the code's family reads the raw tokens (a backbone class's
#: ``reference_start_end`` False: TLB, GUTLB; bench/models/chunked.py) and the task wraps them
REFERENCE_DATA = {"start_end": False}


def constructor_params(cls, skip=("self", "vocab_size", "causal")) -> dict:
    """The parameters a registry entry may set on ``cls``, with their defaults
    (inspect.Parameter.empty if none): its constructor's, following ``**kwargs`` up the class
    hierarchy (bench/signature.py), less ``skip`` (a model's vocab_size and causal come from the
    task; a task passes ``skip=("self",)``)."""
    return signature.constructor_params(cls, skip)


def _read_layer(path, label: str) -> dict:
    """One registry file's mapping, or UserError with the line of a YAML error."""
    return load_yaml(Path(path), label, missing_text=f"registry file {str(path)!r} not found; pass an existing registry.yaml")


def _read_user_layer(path: Path) -> dict:
    """A user's registry file: as ``_read_layer``, and one that holds nothing (empty, or comments
    only) refused: it adds nothing, so it is most likely the wrong file or an unsaved one."""
    layer = _read_layer(path, path.name)
    if layer is None:
        raise UserError(
            f"registry file {str(path)!r} is empty; a registry file holds a 'models:' and/or a 'tasks:' section "
            f"(e.g. models: {{my-lstm: {{base: lstm}}}}), or leave --registry out for the shipped registry"
        )
    return layer


def task_files() -> list[Path]:
    """The shipped task files: every ``.yaml`` under bench/tasks/, in path order (bench/tasks/copy.yaml
    beside copy.py, bench/tasks/lra/lra.yaml in the lra package)."""
    return sorted(TASKS_DIR.rglob("*.yaml"), key=lambda p: p.relative_to(TASKS_DIR).parts)


def shipped_layer() -> tuple[dict, dict[str, str]]:
    """The shipped registry as one mapping, ``models:`` from registry.yaml and ``tasks:`` from it and
    the task files, and {task name: the file (relative to bench/) that gives it}. A task file holds a
    ``tasks:`` section only; a name given by two files is refused, naming both."""
    raw = _read_layer(DEFAULT_REGISTRY, DEFAULT_REGISTRY.name)
    if not isinstance(raw, dict) or not isinstance(raw.get("tasks", {}), dict):
        return raw, {}
    tasks = dict(raw.get("tasks") or {})
    where = dict.fromkeys(tasks, DEFAULT_REGISTRY.name)
    for path in task_files():
        label = f"{TASKS_DIR.name}/{path.relative_to(TASKS_DIR).as_posix()}"  # tasks/copy.yaml
        layer = _read_layer(path, label)
        if not isinstance(layer, dict) or set(layer) != {"tasks"} or not isinstance(layer["tasks"], dict):
            raise UserError(f"{label} must be a mapping with a 'tasks:' section only (task entries; models belong in registry.yaml)")
        for name, entry in layer["tasks"].items():
            if name in where:
                raise UserError(f"{label}: tasks.{name} is also given by {where[name]}; give each task in one file")
            tasks[name], where[name] = entry, label
    return {**raw, "tasks": tasks}, where


def module_task_file(target) -> Path | None:
    """The task file beside the module of a task ``target`` (``pkg.counting:Counting`` ->
    pkg/counting.yaml; a package's: inside it, named after it), found without importing the
    module; None when there is none."""
    module = str(target).partition(":")[0]
    origin = _module_file(module)
    if origin is None:
        return None
    path = origin.parent / f"{module.rpartition('.')[2]}.yaml" if origin.name == "__init__.py" else origin.with_suffix(".yaml")
    return path if path.is_file() else None


def _module_file(module: str) -> Path | None:
    """The source file of ``module`` (``pkg/mod.py`` or ``pkg/mod/__init__.py``), found on the path
    without importing it or its packages (whose imports may be heavy), or None."""
    import importlib.util
    import sys

    if module in sys.modules:
        file = getattr(sys.modules[module], "__file__", None)
        return Path(file) if file else None
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: located, not imported
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin.endswith(".py") else None
    folders = [Path(p) for p in spec.submodule_search_locations or []]
    for part in rest[:-1]:
        folders = [f / part for f in folders if (f / part).is_dir()]
    for folder in folders:
        for candidate in (folder / f"{rest[-1]}.py", folder / rest[-1] / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def merge_user_layers(layers: list[tuple[str, dict]]) -> dict:
    """The user's files as one layer: mappings merged key by key, in order; a key that two files set
    to different values (other than mappings) is a UserError naming both, so that overlays that
    each copy a shipped entry and add their own keys combine, and two that disagree are not
    silently resolved by their order."""
    merged: dict = {}
    where: dict = {}  # key path -> the file that set it (and what lies below it)

    def setter(key: tuple) -> str:
        return next(where[key[:n]] for n in range(len(key), 0, -1) if key[:n] in where)

    def merge(into: dict, over: dict, path: tuple, label: str) -> None:
        for k, v in over.items():
            key = (*path, k)
            if isinstance(v, dict) and isinstance(into.get(k), dict):
                merge(into[k], v, key, label)
            elif k in into and into[k] != v:
                raise UserError(
                    f"registry files {setter(key)} and {label} disagree on {'.'.join(map(str, key))} "
                    f"({into[k]!r} vs {v!r}); pass one of them, or make them agree"
                )
            else:
                into[k] = copy.deepcopy(v)
                where[key] = label

    for label, raw in layers:
        if not isinstance(raw, dict):
            raise UserError(f"{label} must be a mapping with a 'models:' and/or a 'tasks:' section")
        merge(merged, raw, (), label)
    return merged


def plugin_layers() -> list[tuple[str, dict]]:
    """(label, registry mapping) of every ``bench.registries`` entry point, in name order."""
    if env_flag(NO_PLUGINS_ENV):
        return []
    layers = []
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        label = f"plugin {ep.name!r} ({ep.value}{f', from {dist}' if dist else ''})"
        try:
            obj = ep.load()
            if inspect.ismodule(obj):  # a module: the registry.yaml of its package
                obj = importlib.resources.files(obj.__name__ if hasattr(obj, "__path__") else obj.__package__).joinpath("registry.yaml")
            elif callable(obj):
                obj = obj()
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken plugin: one line naming it
            raise UserError(
                f"{label} cannot be loaded ({type(exc).__name__}: {exc}); uninstall it, or set {NO_PLUGINS_ENV}=1 to skip plugin registries"
            ) from None
        if isinstance(obj, (str, os.PathLike)) or hasattr(obj, "read_text"):
            label = f"{label}: {obj}"
            try:
                text = obj.read_text() if hasattr(obj, "read_text") else Path(obj).read_text()
            except OSError as exc:
                raise UserError(f"{label} cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
            obj = load_yaml(text, label)
        layers.append((label, obj))
    return layers


class Registry:
    """The merged registry: shipped, then plugins, then the user's file or files (``path`` or
    $BENCH_REGISTRY: one path, or several separated by commas). ``path`` is the user's (first)
    file when there is one, else the shipped one; ``user_spec`` names the user's files as given
    here (what another process passes to ``Registry`` for the same registry)."""

    def __init__(self, path: str | os.PathLike | None = None, *, plugins: bool = True):
        user = path or os.environ.get("BENCH_REGISTRY")
        given = [Path(p.strip()) for p in str(user).split(",") if p.strip()] if user else []
        shipped = DEFAULT_REGISTRY.resolve()
        self.user_paths = [p for p in given if not (p.is_file() and p.resolve() == shipped)]  # the shipped file: nothing to add
        for p in self.user_paths:
            if p.is_dir():
                raise UserError(f"registry file {str(p)!r} is a folder; pass a YAML file (e.g. {str(p / 'registry.yaml')!r})")
            if not p.is_file():
                raise UserError(f"registry file {str(p)!r} not found; pass an existing registry.yaml")
        self.user_path = self.user_paths[0] if self.user_paths else None
        self.user_spec = ",".join(map(str, self.user_paths)) or None
        self.path = self.user_path or DEFAULT_REGISTRY
        self.raw_models: dict = {}
        self.raw_tasks: dict = {}
        self.origin: dict[tuple[str, str], str] = {}  # (section, name) -> the layer that gave the entry
        self.replaced: dict[tuple[str, str], str] = {}  # (section, name) -> the layer whose entry a later layer's replaced
        self.layers: list[str] = []  # the layers' short names, for messages
        self._resolved: dict[tuple[str, str], dict] = {}  # (section, name) -> the entry resolved (model_entry, task_entry)
        plugins_ = plugin_layers() if plugins else []
        #: where the layers come from: the shipped files, the plugins, the user's file
        shipped_files = [str(DEFAULT_REGISTRY), str(TASKS_DIR / "*.yaml")]
        self.sources = [*shipped_files, *(label for label, _ in plugins_), *map(str, self.user_paths)]
        shipped, self._task_file = shipped_layer()
        layers = [(DEFAULT_REGISTRY.name, shipped, True)]
        layers += [(label, raw, False) for label, raw in plugins_]
        #: the user's layer as read (several files merged), or None
        self.user_layer = None
        if len(self.user_paths) == 1:
            self.user_layer = _read_user_layer(self.user_path)
        elif self.user_paths:
            self.user_layer = merge_user_layers([(str(p), _read_user_layer(p)) for p in self.user_paths])
        if self.user_layer is not None:
            layers.append((" + ".join(p.name for p in self.user_paths), self.user_layer, False))
        for label, raw, complete in layers:
            self._add_layer(label, raw, complete)

    def _add_layer(self, label: str, raw, complete: bool) -> None:
        sections = isinstance(raw, dict) and all(isinstance(raw.get(s, {}), dict) for s in ("models", "tasks"))
        if not sections or (complete and not all(s in raw for s in ("models", "tasks"))):
            need = "'models:' and 'tasks:' sections" if complete else "a 'models:' and/or a 'tasks:' section"
            raise UserError(f"{label} must be a mapping with {need}")
        unknown_sections = {k for k in raw if k not in ("models", "tasks") and not str(k).startswith("_")}  # _x: YAML anchors
        if unknown_sections:
            keys = ", ".join(sorted(map(str, unknown_sections)))
            raise UserError(f"{label}: unknown top-level key(s) {keys}; a registry has models: and tasks:")
        for section, entries, schema in (("models", raw.get("models") or {}, ModelEntry), ("tasks", raw.get("tasks") or {}, TaskEntry)):
            where = {name: self._task_file.get(name, label) if complete and section == "tasks" else label for name in entries}
            for name, entry in entries.items():
                check_name(name, section.rstrip("s"), where[name])
                schema.from_mapping(entry, f"{where[name]}: {section}.{name}")
            target = self.raw_models if section == "models" else self.raw_tasks
            for name, entry in entries.items():
                if section == "tasks" and not complete:
                    entry, where[name] = self._beside_module(name, entry, where[name])
                if name in target:
                    self.replaced[(section, name)] = self.origin[(section, name)]
                target[name] = entry  # a replaced entry keeps its place in listings
                self.origin[(section, name)] = where[name]
        self.layers.append(label)

    def _beside_module(self, name: str, entry: dict, label: str) -> tuple[dict, str]:
        """A plugin's or user's task entry with no presets, under the entry of the same name in the task
        file beside its target's module (``module_task_file``, outside bench), when it has one: a new
        task is its module and that file, and the registry file names it (``{target: mypkg.counting:Counting}``).
        Returns the entry and the file messages name for it (``label``, or ``label + counting.yaml``)."""
        if "presets" in entry or "target" not in entry:
            return entry, label
        path = module_task_file(entry["target"])
        if path is None or path.is_relative_to(TASKS_DIR):  # bench's own task files: read as the shipped layer
            return entry, label
        layer = _read_layer(path, path.name)
        beside = (layer.get("tasks") or {}).get(name) if isinstance(layer, dict) and isinstance(layer.get("tasks"), dict) else None
        if beside is None:
            return entry, label
        TaskEntry.from_mapping(beside, f"{path.name}: tasks.{name}")
        return deep_merge(beside, entry), f"{label} + {path.name}"

    def _file(self, section: str, name: str) -> str:
        """The registry layer an entry comes from, for messages (e.g. 'registry.yaml')."""
        return self.origin.get((section, name), self.path.name)

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
            hint = ""
            if seen == (name,) and (section, name) in self.replaced:
                hint = (
                    f"; an entry of the same name replaces {self.replaced[(section, name)]}'s {name} rather than extending it: "
                    f"give it that entry's target and the fields you keep (bench explain --model {name} --task TASK lists them), or another "
                    f"name (e.g. {name}-mine: {{base: {name}}})"
                )
            raise UserError(f"{self._file(section, name)}: {section}.{name} inherits from itself ({' -> '.join((*seen, name))}){hint}")
        entry = entries[name]
        lineage = [name]
        resolved: dict = {}
        if "base" in entry:
            base = entry["base"]
            if base not in entries:
                raise UserError(
                    f"{self._file(section, name)}: {section}.{name} has base {base!r}, which is not an entry; "
                    f"{suggest(base, list(entries))}"
                )
            resolved = self._resolve(section, entries, base, (*seen, name))
            lineage = [name, *resolved["lineage"]]
        merged = deep_merge(resolved, {k: v for k, v in entry.items() if k != "base"})
        merged["lineage"] = lineage
        merged["name"] = name
        if "target" not in merged and not seen:
            raise UserError(f"{self._file(section, name)}: {section}.{name} has no target (and no base providing one)")
        merged.setdefault("params", {})
        if not isinstance(merged["params"], dict):
            raise UserError(f"{self._file(section, name)}: {section}.{name}.params must be a mapping")
        return merged

    def model_entry(self, name: str) -> dict:
        return self._once(("models", name), lambda: self._resolve("models", self.raw_models, name))

    def task_entry(self, name: str) -> dict:
        return self._once(("tasks", name), lambda: self._task_entry(name))

    def _once(self, key: tuple[str, str], resolve) -> dict:
        """An entry resolved the first time it is asked for (the layers do not change once read);
        a copy each time, the caller's to change. A refusal is raised each time."""
        if key not in self._resolved:
            self._resolved[key] = resolve()
        return copy.deepcopy(self._resolved[key])

    def _task_entry(self, name: str) -> dict:
        entry = self._resolve("tasks", self.raw_tasks, name)
        presets = entry.setdefault("presets", {})
        for pname, preset in presets.items():
            if pname not in PRESETS:
                raise UserError(f"{self._file('tasks', name)}: tasks.{name} has unknown preset {pname!r}; presets are {', '.join(PRESETS)}")
            PresetEntry.from_mapping(
                preset, f"{self._file('tasks', name)}: tasks.{name}.presets.{pname}", f"a preset may only hold {', '.join(PRESET_KEYS)}"
            )
        return entry

    def preset(self, task_name: str, preset: str) -> dict:
        """Preset ``preset`` of task ``task_name``, merged over the task's bases: every section of
        PRESET_KEYS ({} where it sets none); refused as ``check_preset`` refuses it."""
        entry = self.task_entry(task_name)
        check_preset(entry, preset)
        return {k: copy.deepcopy(entry["presets"][preset].get(k) or {}) for k in PRESET_KEYS}


def check_preset(entry: dict, preset: str) -> None:
    """A task entry (``Registry.task_entry``) has preset ``preset``; else one line naming the presets
    there are, or those the task has."""
    if preset not in PRESETS:
        raise UserError(f"unknown preset {preset!r}; {suggest(preset, list(PRESETS))}")
    if preset not in entry["presets"]:
        have = ", ".join(entry["presets"]) or "none"
        raise UserError(f"task {entry['name']!r} has no {preset!r} preset (it has: {have})")
