"""The package's import graph, read from the source with ``ast`` (nothing is imported): the CLI is
the top, imported by nothing below it, and the modules' top-level imports form no cycle (an
import hidden in a function to dodge a cycle is a cycle all the same; the lazy imports kept in
functions are the ones that keep `bench --help` / `bench list` from loading torch or Lightning)."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "bench"
TOP = {"bench.cli", "bench.__main__"}  # the command line: the only modules that may import bench.cli (and bench.cli.*, its own)


def modules() -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package's __init__)} for every module under bench/."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _absolute(module: str | None, level: int, importer: str, package: bool) -> str:
    if not level:
        return module or ""
    base = importer.split(".") if package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING")


def imports(name: str, path: Path, package: bool, known: dict) -> list[tuple[str, int, bool]]:
    """(imported bench module, line, at module level) for every import of bench.* in one file:
    ``import bench.x``, ``from bench.x import y`` and relative imports; ``from . import y`` names
    the submodule y when there is one. Imports under ``if TYPE_CHECKING:`` never run: left out."""
    found = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
            if isinstance(child, ast.ClassDef):
                inner = top  # a class body runs at import
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, top) for a in child.names if a.name.split(".")[0] == "bench")
            elif isinstance(child, ast.ImportFrom):
                target = _absolute(child.module, child.level, name, package)
                if target.split(".")[0] == "bench":
                    for alias in child.names:
                        sub = f"{target}.{alias.name}"
                        found.append((sub if sub in known else target, child.lineno, top))
            visit(child, inner)

    visit(ast.parse(path.read_text(), filename=str(path)), True)
    return found


def graph() -> tuple[dict, dict]:
    known = modules()
    every = {name: imports(name, path, package, known) for name, (path, package) in known.items()}
    top = {name: sorted({t for t, _, at_top in found if at_top and t in known and t != name}) for name, found in every.items()}
    return every, top


def find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, ..., a], or None."""
    state, stack = {}, []

    def dfs(node: str):
        state[node] = "open"
        stack.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = dfs(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = dfs(node)
            if cycle:
                return cycle
    return None


def test_nothing_below_the_cli_imports_it():
    every, _ = graph()
    offenders = [f"{name}:{line}" for name, found in every.items() if name not in TOP and not name.startswith("bench.cli.")
                 for target, line, _ in found if target == "bench.cli" or target.startswith("bench.cli.")]
    assert not offenders, f"bench.cli imported from below the command line (module-level or in a function): {', '.join(offenders)}"


def test_the_module_level_import_graph_has_no_cycle():
    _, top = graph()
    cycle = find_cycle(top)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_checker_finds_what_it_looks_for(tmp_path):
    """The checker itself: relative imports resolve, function-level ones count for the CLI rule
    only, and a cycle is reported with its path."""
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b"], "b": []}) is None
    src = tmp_path / "m.py"
    src.write_text("from . import grid\nfrom ..cli import main\nimport bench.records\n"
                   "def f():\n    from .local import x\nif TYPE_CHECKING:\n    from bench.config import RunConfig\n")
    known = {"bench.grid": None, "bench.grid.local": None, "bench.records": None, "bench.cli": None}
    got = imports("bench.grid.m", src, False, known)
    assert got == [("bench.grid", 1, True), ("bench.cli", 2, True), ("bench.records", 3, True), ("bench.grid.local", 5, False)]
    every, _ = graph()
    assert ("bench.cli", 3, True) in every["bench.__main__"]  # the real package is read too
