"""Classes named by a registry target, ``package.module:ClassName``: imported (``import_target``;
a model's must be a Backbone, a task's a Task, each refused in one line otherwise) or, without
importing anything, their class attributes read from the source (``static_class_attrs``: what
`bench list` and `bench explain` show before torch loads)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from .errors import UserError

#: bench's own packages that were once top-level packages (an old target: ``models.xl:TransformerXL``)
MOVED_PACKAGES = ("models", "tasks")


def import_target(target: str, where: str):
    if not isinstance(target, str) or ":" not in target:
        raise UserError(f"{where}: target must look like 'package.module:ClassName', got {target!r}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's registry problem
        moved = _moved_target(module_name, attr, exc)
        if moved:
            raise UserError(
                f"{where}: target {target!r} names bench's old top-level package {module_name.split('.')[0]!r}; "
                f"models/ and tasks/ moved into bench: write {moved!r}"
            ) from None
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name and module_name.startswith(exc.name):
            hint = (
                "; the module must be importable from where bench runs: put its folder on PYTHONPATH "
                "(e.g. PYTHONPATH=. bench ...) or install it as a package or plugin (see docs/plugins.md)"
            )
        raise UserError(f"{where}: cannot import {module_name!r} for target {target!r} ({type(exc).__name__}: {exc}){hint}") from None
    if not hasattr(module, attr):
        raise UserError(f"{where}: module {module_name!r} has no {attr!r} (target {target!r})")
    return getattr(module, attr)


def _moved_target(module_name: str, attr: str, exc: Exception) -> str | None:
    """``bench.models.xl:TransformerXL`` for a target ``models.xl:TransformerXL`` that fails to import
    because bench's ``models`` / ``tasks`` are now subpackages (and bench has that module)."""
    top = module_name.split(".")[0]
    if top not in MOVED_PACKAGES or not (isinstance(exc, ModuleNotFoundError) and exc.name == top):
        return None
    try:
        importlib.import_module(f"bench.{module_name}")
    except Exception:  # noqa: BLE001 - not one of bench's modules either: the plain error
        return None
    return f"bench.{module_name}:{attr}"


def import_model_class(target: str, where: str):
    """A registry model target: a subclass of bench.models.base.Backbone, or UserError saying so."""
    from bench.models.base import Backbone

    cls = import_target(target, where)
    if not (inspect.isclass(cls) and issubclass(cls, Backbone)):
        raise UserError(f"{where}: target {target!r} is {_what(cls)}; a model target must be a subclass of bench.models.base.Backbone")
    return cls


def import_task_class(target: str, where: str):
    """A registry task target: a concrete subclass of bench.tasks.base.Task with a known kind."""
    from bench.tasks.base import Task
    from bench.tasks.kinds import KINDS

    cls = import_target(target, where)
    if not (inspect.isclass(cls) and issubclass(cls, Task)):
        raise UserError(f"{where}: target {target!r} is {_what(cls)}; a task target must be a subclass of bench.tasks.base.Task")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise UserError(f"{where}: task class {target!r} is abstract: it must implement {missing}")
    if getattr(cls, "kind", None) not in KINDS:
        raise UserError(f"{where}: task class {target!r} has kind {getattr(cls, 'kind', None)!r}; set kind to one of {', '.join(KINDS)}")
    return cls


def static_class_attrs(target: str, names: tuple[str, ...]) -> dict | None:
    """The values of class attributes ``names`` (literal assignments: ``supports_streaming = True``)
    of a target ``module:Class``, read from the source files without importing them, following
    single inheritance through the modules' imports; None when that cannot be settled (multiple
    bases, a computed value, a base that cannot be found), and the caller imports the class.
    This keeps ``bench list`` free of torch."""
    import ast
    import importlib.util
    import sys

    def parse(module: str):
        if module in sys.modules:  # already imported: no need to read anything
            return sys.modules[module]
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise LookupError(module)
        return ast.parse(Path(spec.origin).read_text()), spec.parent if spec.submodule_search_locations is None else spec.name

    def lookup(module: str, cls: str, wanted: set, depth: int = 0) -> dict:
        if depth > 20:
            raise LookupError(cls)
        parsed = parse(module)
        if not isinstance(parsed, tuple):  # an imported module: the class's attributes (a mixin may have none)
            return {n: getattr(getattr(parsed, cls), n) for n in wanted if hasattr(getattr(parsed, cls), n)}
        tree, package = parsed
        node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if node is None:  # imported into this module from another one
            return lookup(*_imported(tree, package, cls), wanted, depth + 1)
        found = {}
        for stmt in node.body:
            target, value = (
                (stmt.targets[0], stmt.value)
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                else (stmt.target, stmt.value)
                if isinstance(stmt, ast.AnnAssign)
                else (None, None)
            )
            if isinstance(target, ast.Name) and target.id in wanted:
                if not isinstance(value, ast.Constant):
                    raise LookupError(target.id)
                found[target.id] = value.value
        for base in node.bases:  # the bases left to right, depth first (the MRO where no base is shared)
            missing = wanted - set(found)
            if not missing:
                break
            if not isinstance(base, ast.Name):
                raise LookupError(cls)
            if any(isinstance(n, ast.ClassDef) and n.name == base.id for n in tree.body):
                found.update(lookup(module, base.id, missing, depth + 1))
            elif base.id != "object":
                found.update(lookup(*_imported(tree, package, base.id), missing, depth + 1))
        return found

    module_name, _, attr = str(target).partition(":")
    try:
        found = lookup(module_name, attr, set(names))
    except Exception:  # noqa: BLE001 - anything unsettled: the caller imports
        return None
    return found if set(names) <= set(found) else None


def _imported(tree, package: str, name: str) -> tuple[str, str]:
    """(module, name there) that ``from module import name`` at the top of ``tree`` binds."""
    import ast
    import importlib.util

    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    module = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level else node.module
                    return module, alias.name
    raise LookupError(name)


def _what(obj) -> str:
    if inspect.isclass(obj):
        return f"the class {obj.__module__}.{obj.__qualname__}"
    return f"a {type(obj).__name__}, not a class"
