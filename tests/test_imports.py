"""The package's import graph, read from the source with ``ast`` (nothing is imported), over every
module under bench/:

- the CLI is the top, imported by nothing below it;
- the imports form no cycle: module-level imports and imports inside functions alike (an import
  hidden in a function to dodge a cycle is a cycle all the same; the lazy imports kept in functions
  are the ones that keep `bench --help` / `bench list` from loading torch or Lightning, and they
  point down); importing ``bench.a.b`` runs ``bench/a/__init__.py`` first, so it counts as an import
  of the package ``bench.a`` too. Imports under ``if TYPE_CHECKING:`` never run and cannot close a
  cycle: they are left out of the cycle check;
- no arrow back up: the rooms stand in the layers of ``LAYERS``, and no module imports one of a
  higher layer (type-only imports included: knowing an upper layer's type is an arrow up too).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

PACKAGE = Path(__file__).resolve().parent.parent / "bench"
TOP = {"bench.cli", "bench.__main__"}  # the command line: the only modules that may import bench.cli (and bench.cli.*, its own)

#: the rooms, top layer first (docs/architecture.md); a module may import its own layer and those
#: below it. A room is a module or a package with its submodules; ``bench`` is the package's API
#: (``bench/__init__.py``) alone.
LAYERS = [
    ("the command line and the Python API", ["bench.cli", "bench.__main__", "bench"]),
    ("reading and tuning many runs", ["bench.report", "bench.tune", "bench.budget"]),
    ("many runs", ["bench.grid"]),
    ("using and measuring one run", ["bench.cost", "bench.generate"]),
    ("one run", ["bench.runner"]),
    ("a run's data and record", ["bench.data", "bench.metrics", "bench.records"]),
    ("resolving a run", ["bench.config", "bench.validation"]),
    ("names -> classes", ["bench.registry", "bench.targets"]),
    ("the model and task families", ["bench.models", "bench.tasks"]),
    (
        "plain parts",
        [
            "bench.errors",
            "bench.parsing",
            "bench.schema",
            "bench.spec",
            "bench.signature",
            "bench.sampling",
            "bench.sizes",
            "bench.cpus",
            "bench.logs",
            "bench.grid_cell",
        ],
    ),
]
#: the same rule inside the LRA package (bench/tasks/lra/): its names over ``check``, over the tasks,
#: over what they share, over the readers of files; every module of it stands in one of these
LRA_LAYERS = [
    ("the package's names", ["bench.tasks.lra"]),
    ("bench data check", ["bench.tasks.lra.check"]),
    ("the tasks", ["bench.tasks.lra.listops", "bench.tasks.lra.text", "bench.tasks.lra.retrieval", "bench.tasks.lra.image"]),
    ("what the tasks share", ["bench.tasks.lra.files"]),
    ("the readers", ["bench.tasks.lra.layouts", "bench.tasks.lra.tfds"]),
]
#: the same rule inside bench/report/: the page over the command over the readers of generated
#: tables (write-ups, verdicts, comparisons: side by side, none importing another) over the kinds
#: of table over what the tables share over the cells and their numbers
REPORT_LAYERS = [
    ("the report page", ["bench.report.page"]),
    ("bench reproduce, composing the rest", ["bench.report.reproduce"]),
    ("the readers of generated tables", ["bench.report.writeup", "bench.report.verdicts", "bench.report.against"]),
    (
        "the kinds of table",
        ["bench.report.tables", "bench.report.results_table", "bench.report.cost_table", "bench.report.checks", "bench.report.table_kind"],
    ),
    (
        "what the tables share",
        [
            "bench.report.claims",
            "bench.report.tuned",
            "bench.report.leaderboard",
            "bench.report.stale",
            "bench.report.outputs",
            "bench.report.cost_weights",
            "bench.report.curves",
            "bench.report.table_file",
        ],
    ),
    ("a cell's records and their numbers", ["bench.report.cells", "bench.report.stats", "bench.report.table_parts"]),
]
#: the layer of REPORT_LAYERS whose modules stand beside each other: none imports another
SIDE_BY_SIDE = "the readers of generated tables"
#: known arrows back up, each to go: (importer, imported). None left.
EXPECTED_BACK_ARROWS: set[tuple[str, str]] = set()


class Import(NamedTuple):
    target: str  # the bench module imported
    line: int
    top: bool  # at module level (runs on import), not inside a function
    type_only: bool  # under ``if TYPE_CHECKING:`` (never runs)
    named: str = ""  # the module the statement names, where ``target`` is a package it implies

    def of(self, importer: str) -> tuple[str, str]:
        """(importer, the module the statement names): what EXPECTED_BACK_ARROWS lists."""
        return importer, self.named or self.target


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


def imports(name: str, path: Path, package: bool, known: dict) -> list[Import]:
    """Every import of bench.* in one file: ``import bench.x``, ``from bench.x import y`` and
    relative imports; ``from . import y`` names the submodule y when there is one."""
    found = []

    def visit(node: ast.AST, top: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner_type_only = type_only or _type_checking(child)
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))  # a class body runs at import
            if isinstance(child, ast.Import):
                found.extend(Import(a.name, child.lineno, top, type_only) for a in child.names if a.name.split(".")[0] == "bench")
            elif isinstance(child, ast.ImportFrom):
                target = _absolute(child.module, child.level, name, package)
                if target.split(".")[0] == "bench":
                    for alias in child.names:
                        sub = f"{target}.{alias.name}"
                        found.append(Import(sub if sub in known else target, child.lineno, top, type_only))
            visit(child, inner, inner_type_only)

    visit(ast.parse(path.read_text(), filename=str(path)), True, False)
    return found


def graph() -> dict[str, list[Import]]:
    """{module: its imports of bench modules}, each import of ``bench.a.b`` also an import of the
    package ``bench.a`` (its ``__init__`` runs first) unless the importer lies inside that package."""
    known = modules()
    every = {}
    for name, (path, package) in known.items():
        found = []
        for imp in imports(name, path, package, known):
            parts = imp.target.split(".")
            parents = [".".join(parts[:i]) for i in range(2, len(parts))]
            found += [imp._replace(target=p, named=imp.target) for p in parents if p in known and not (name + ".").startswith(p + ".")]
            found.append(imp)
        every[name] = [imp for imp in found if imp.target in known and imp.target != name]
    return every


def find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, ..., a], or None."""
    state, stack = {}, []

    def dfs(node: str):
        state[node] = "open"
        stack.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
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


def layer_of(module: str, layers: list = LAYERS) -> int | None:
    """The index in ``layers`` (0: the top) of the room holding ``module``: the longest room name
    that is the module or one of its packages (``bench`` holds only itself); None if none does."""
    rooms = [
        (room, i)
        for i, (_, names) in enumerate(layers)
        for room in names
        if module == room or (room != "bench" and module.startswith(room + "."))
    ]
    return max(rooms, key=lambda r: len(r[0]))[1] if rooms else None


def back_arrows(every: dict[str, list[Import]], layers: list = LAYERS) -> list[str]:
    """'importer:line -> imported (layer -> higher layer)' for every import of a higher layer."""
    found = []
    for name, found_imports in every.items():
        for imp in found_imports:
            low, high = layer_of(name, layers), layer_of(imp.target, layers)
            if high < low and imp.of(name) not in EXPECTED_BACK_ARROWS:
                found.append(f"{name}:{imp.line} -> {imp.target} ({layers[low][0]} -> {layers[high][0]})")
    return found


def test_nothing_below_the_cli_imports_it():
    offenders = [
        f"{name}:{imp.line}"
        for name, found in graph().items()
        if name not in TOP and not name.startswith("bench.cli.")
        for imp in found
        if imp.target == "bench.cli" or imp.target.startswith("bench.cli.")
    ]
    assert not offenders, f"bench.cli imported from below the command line: {', '.join(offenders)}"


def test_the_import_graph_has_no_cycle():
    every = graph()
    edges = {
        name: sorted({imp.target for imp in found if not imp.type_only and imp.of(name) not in EXPECTED_BACK_ARROWS})
        for name, found in every.items()
    }
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_stands_in_a_layer_and_imports_nothing_above_it():
    every = graph()
    unplaced = [name for name in every if layer_of(name) is None]
    assert not unplaced, f"modules in no layer of LAYERS (tests/test_imports.py): {', '.join(unplaced)}; place each room in one"
    arrows = back_arrows(every)
    assert not arrows, "imports of a higher layer:\n" + "\n".join(arrows)
    for importer, imported in EXPECTED_BACK_ARROWS:  # each known exception names real modules
        assert importer in every and imported in every


def test_the_lra_package_reads_down_from_its_tasks_to_its_readers():
    lra = {
        name: [imp for imp in found if layer_of(imp.target, LRA_LAYERS) is not None]
        for name, found in graph().items()
        if layer_of(name, LRA_LAYERS) is not None
    }
    placed = {room for _, rooms in LRA_LAYERS for room in rooms}
    assert set(lra) == placed, f"modules of bench/tasks/lra/ in no layer of LRA_LAYERS: {', '.join(sorted(set(lra) - placed))}"
    arrows = back_arrows(lra, LRA_LAYERS)
    assert not arrows, "imports of a higher layer in bench/tasks/lra/:\n" + "\n".join(arrows)


def test_the_report_reads_down_from_its_page_to_its_cells_with_its_readers_side_by_side():
    every = graph()
    report = {
        name: [imp for imp in found if layer_of(imp.target, REPORT_LAYERS) is not None]
        for name, found in every.items()
        if layer_of(name, REPORT_LAYERS) is not None
    }
    inside = {name for name in every if name.startswith("bench.report.")}
    assert inside <= set(report), f"modules of bench/report/ in no layer of REPORT_LAYERS: {', '.join(sorted(inside - set(report)))}"
    arrows = back_arrows(report, REPORT_LAYERS)
    assert not arrows, "imports of a higher layer in bench/report/:\n" + "\n".join(arrows)
    beside = next(rooms for what, rooms in REPORT_LAYERS if what == SIDE_BY_SIDE)
    across = [f"{name}:{imp.line} -> {imp.target}" for name in beside for imp in report[name] if imp.target in beside]
    assert not across, f"{SIDE_BY_SIDE} import each other:\n" + "\n".join(across)


def test_the_checker_finds_what_it_looks_for(tmp_path):
    """The checker itself: relative imports resolve, function-level and type-only imports are
    marked, a package's import is implied by its submodule's, a cycle is reported with its path,
    and an import of a higher layer is found."""
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b"], "b": []}) is None
    src = tmp_path / "m.py"
    src.write_text(
        "from . import grid\nfrom ..cli import main\nimport bench.records\n"
        "def f():\n    from .local import x\nif TYPE_CHECKING:\n    from bench.config import RunConfig\n"
    )
    known = {"bench.grid": None, "bench.grid.local": None, "bench.records": None, "bench.cli": None, "bench.config": None}
    got = [tuple(imp)[:4] for imp in imports("bench.grid.m", src, False, known)]
    assert got == [
        ("bench.grid", 1, True, False),
        ("bench.cli", 2, True, False),
        ("bench.records", 3, True, False),
        ("bench.grid.local", 5, False, False),
        ("bench.config", 7, True, True),
    ]
    every = graph()
    assert Import("bench.cli", 3, True, False) in every["bench.__main__"]  # the real package is read too
    implied = [imp for imp in every["bench.cost.step"] if imp.target == "bench.runner"]  # the package's __init__ runs first
    assert implied and implied[0].of("bench.cost.step")[1] in {"bench.runner.build", "bench.runner.module"}
    layers = [("top", ["bench.cli"]), ("middle", ["bench.runner"]), ("bottom", ["bench.config", "bench"])]
    placed = [layer_of(m, layers) for m in ("bench.cli", "bench.runner.build", "bench.config", "bench", "bench.records")]
    assert placed == [0, 1, 2, 2, None]
    imp = Import("bench.runner.build", 9, False, True)
    assert back_arrows({"bench.config": [imp], "bench.cli": [imp]}, layers) == ["bench.config:9 -> bench.runner.build (bottom -> middle)"]
