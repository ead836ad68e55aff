"""The documentation site's generator: an MkDocs hook (mkdocs.yml: ``hooks``), run by ``make docs``.

The site mirrors the repository's paths, so a relative link works the same on the site and in the
checkout: ``README.md`` is the home page (``index.html``), ``docs/cli.md`` is ``docs/cli.html``,
``results/halt_cpu.md`` is ``results/halt_cpu.html``: links name files, not folders, so the site
opens from disk (``site/index.html``) with no server. What it holds:

* every file under ``docs/`` (this hook excepted), ``README.md`` and ``scripts/README.md``;
* the write-ups ``results/*.md``, the generated tables ``results/reproduce/*.md``, the benchmark
  figures ``results/perf/*.md`` and the notes ``results/cost/*/README.md``, with an index page;
* one page per model family (a ``bench/models/`` module) and per task (a ``bench/tasks/`` module),
  generated from the registry (``bench/registry.yaml`` and ``bench/tasks/*.yaml``: every entry, its
  parameters and presets)
  and from the module's and classes' docstrings (their worked examples), so an entry added by
  anyone appears without an edit here;
* any other file of the repository a page links to (an image, a YAML file), copied as it is.

A link to a file that does not exist stays broken, and ``mkdocs build --strict`` fails on it.
The nav is mkdocs.yml's, with the generated sections filled in and every ``docs/*.md`` page that
mkdocs.yml does not name appended under "Notes".
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

import yaml
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)|<img[^>]*src=\"([^\"#]+)\"")
#: the end of a sentence: not "et al.", "App.", "Alg.", "Fig.", "eq." or "Sec." followed by more
SENTENCE_END = re.compile(r"(?<!\bal)(?<!\bApp)(?<!\bAlg)(?<!\bFig)(?<!\beq)(?<!\bSec)\.\s+(?=[A-Z])")
PLACEHOLDER = {"GENERATED: models": "models", "GENERATED: tasks": "tasks", "GENERATED: write-ups": "results"}


def _registry():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench.registry import Registry

    return Registry()


def _module_doc(module: str) -> tuple[str, str]:
    """(first line, whole docstring) of a module of the checkout (a package: its ``__init__.py``), read without importing it."""
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    doc = ast.get_docstring(ast.parse(path.read_text())) or "" if path.exists() else ""
    first = " ".join(doc.split("\n\n", 1)[0].split())  # the first paragraph, on one line
    first = SENTENCE_END.split(first, 1)[0].rstrip(".") if first else module  # its first sentence
    return first, doc


#: a parenthesis citing a paper: it holds a year and words ("(Dao & Gu, ICML 2024, ...)", not "(2020)")
CITATION = re.compile(r"\s*\((?=[^)]*[A-Za-z])(?:[^()]|\([^()]*\))*\b(?:19|20)\d\d\b(?:[^()]|\([^()]*\))*\)")
#: the longest a generated page's title (registry name and description) may be
TITLE_LIMIT = 80


def _balanced(text: str) -> bool:
    return text.count("(") == text.count(")") and text.count("[") == text.count("]")


def page_title(name: str, first_sentence: str) -> str:
    """A generated page's title: the registry name, then the docstring's first sentence with its
    citations left out, cut at the last clause (``:``, ``;``, ``,`` outside brackets, not after "and")
    that keeps the title within ``TITLE_LIMIT`` characters (where none does: at a word, with an
    ellipsis); no trailing colon."""
    text = re.sub(r"\s+,", ",", CITATION.sub("", first_sentence)).strip()
    room = TITLE_LIMIT - len(name) - 3  # " — "
    if len(text) > room:
        cuts = [
            m.start()
            for m in re.finditer(r"[:;,](?=\s)", text[: room + 1])
            if _balanced(text[: m.start()]) and not re.search(r"\b(and|or)$", text[: m.start()])
        ]
        if cuts and cuts[-1] >= room // 3:
            text = text[: cuts[-1]]
        else:
            words = text[:room].split(" ")[:-1]
            while words and not _balanced(" ".join(words)):
                words.pop()
            text = " ".join(words).rstrip(" :;,") + "…"
    text = text.rstrip(" :;,")
    return f"{name} — {text}" if text else name


def _text(doc: str) -> str:
    """A docstring shown as written: its worked examples are aligned text."""
    return f"```text\n{doc.strip()}\n```\n" if doc.strip() else "(no docstring)\n"


def _class_of(target: str):
    module, _, name = target.partition(":")
    import importlib

    return getattr(importlib.import_module(module), name)


def _yaml(value) -> str:
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=None, width=100).strip()


def _groups(section: str) -> dict[str, list[dict]]:
    """Registry entries of ``models`` or ``tasks`` by the module their class lives in, in registry order."""
    reg = _registry()
    names = reg.model_names() if section == "models" else reg.task_names()
    groups: dict[str, list[dict]] = {}
    for name in names:
        entry = reg.model_entry(name) if section == "models" else reg.task_entry(name)
        groups.setdefault(entry["target"].partition(":")[0], []).append(entry)
    return groups


def _names(entries: list[dict]) -> str:
    return ", ".join(f"`{e['name']}`" for e in entries)


def _plain(text) -> str:
    """A registry description shown as typed: Markdown's emphasis and HTML characters escaped."""
    text = str(text or "").replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;")
    return re.sub(r"([*_`\[\]])", r"\\\1", text)


def _slug(module: str) -> str:
    return module.rsplit(".", 1)[-1].replace("_", "-")


def _entry_table(entries: list[dict]) -> str:
    rows = ["| entry | class | base | description |", "|---|---|---|---|"]
    for e in entries:
        base = e["lineage"][1] if len(e.get("lineage", [])) > 1 else ""
        desc = _plain(e.get("description")).replace("|", "\\|")
        rows.append(f"| `{e['name']}` | `{e['target']}` | {f'`{base}`' if base else ''} | {desc} |")
    return "\n".join(rows) + "\n"


def _classes_section(entries: list[dict]) -> list[str]:
    out, seen = [], set()
    for e in entries:
        if e["target"] in seen:
            continue
        seen.add(e["target"])
        own = _class_of(e["target"]).__dict__.get("__doc__")  # its own, not a base class's
        if own:
            out += [f"### `{e['target']}`\n", _text(inspect.cleandoc(own))]
    return out or ["The classes carry no docstrings of their own: the module's above describes them.\n"]


def model_page(module: str, entries: list[dict]) -> str:
    first, doc = _module_doc(module)
    out = [
        f"# {page_title(entries[0]['name'], first)}\n",
        f"`{module}` ({_names(entries)}). Generated from the registry and the module's docstrings.\n",
        "## Registry entries\n",
        _entry_table(entries),
    ]
    for e in entries:
        if e.get("params"):
            out += [f"`{e['name']}` sets:\n", f"```yaml\n{_yaml(e['params'])}\n```\n"]
    out += ["## How it works\n", _text(doc), "## Classes\n", *_classes_section(entries)]
    return "\n".join(out)


def task_page(module: str, entries: list[dict]) -> str:
    first, doc = _module_doc(module)
    out = [
        f"# {page_title(entries[0]['name'], first)}\n",
        f"`{module}` ({_names(entries)}). "
        "Generated from the registry and the module's docstrings; notes on the presets' choices: "
        "[docs/tasks.md](../../tasks.md).\n",
        "## Registry entries\n",
        _entry_table(entries),
        "## The task, with its worked example\n",
        _text(doc),
    ]
    for e in entries:
        cls = _class_of(e["target"])
        facts = {k: getattr(cls, k, None) for k in ("kind", "metric", "report_metrics", "requires_causal", "version")}
        facts = ", ".join(f"{k} `{v}`" for k, v in facts.items() if v is not None)
        out += [f"## `{e['name']}`\n", f"{_plain(e.get('description'))}\n", f"Class `{e['target']}`: {facts}.\n"]
        if e.get("params"):
            out += ["Parameters set by the entry:\n", f"```yaml\n{_yaml(e['params'])}\n```\n"]
        for preset, body in (e.get("presets") or {}).items():
            out += [f"Preset `{preset}`:\n", f"```yaml\n{_yaml(body)}\n```\n"]
    out += ["## Classes\n", *_classes_section(entries)]
    return "\n".join(out)


def index_page(section: str, groups: dict[str, list[dict]]) -> str:
    what = "Model families" if section == "models" else "Tasks"
    out = [
        f"# {what}\n",
        f"One page per `bench/{section}/` module, generated from the registry "
        f"({'`bench/registry.yaml`' if section == 'models' else 'the file beside each task module, `bench/tasks/<module>.yaml`'}) "
        "and the module's docstrings. `bench list` prints the same entries.\n",
        "| page | registry entries |",
        "|---|---|",
    ]
    for module, entries in groups.items():
        out.append(f"| [{page_title(entries[0]['name'], _module_doc(module)[0])}]({_slug(module)}.md) | {_names(entries)} |")
    return "\n".join(out) + "\n"


def results_files() -> list[str]:
    paths = [
        *sorted(ROOT.glob("results/*.md")),
        *sorted(ROOT.glob("results/reproduce/*.md")),
        *sorted(ROOT.glob("results/perf/*.md")),
        *sorted(ROOT.glob("results/cost/*/README.md")),
    ]
    return [p.relative_to(ROOT).as_posix() for p in paths]


def results_index() -> str:
    def title(rel: str) -> str:
        for line in (ROOT / rel).read_text().splitlines():
            if line.startswith("# ") and not line.startswith(("# python ", "# bash ")):  # not a command line
                return line[2:].strip().replace("|", "\\|")
        return rel.rsplit("/", 1)[-1].removesuffix(".md")

    out = [
        "# Results\n",
        "The committed reference results, each page as it is in the checkout's `results/` "
        "(every number generated from the records in `results/runs/`; `bench reproduce NAME` rebuilds a "
        "table without training).\n",
    ]
    for heading, prefix in (
        ("Write-ups", "results/"),
        ("Tables (`bench reproduce`)", "results/reproduce/"),
        ("Speed (`scripts/benchmarks/`)", "results/perf/"),
        ("Cost (`bench cost`)", "results/cost/"),
    ):
        out.append(f"## {heading}\n")
        for rel in results_files():
            if rel.startswith(prefix) and "/" not in rel[len(prefix) :].replace("/README.md", ""):
                out.append(f"- [{title(rel)}]({rel[len('results/') :]})")
        out.append("")
    return "\n".join(out)


def generated() -> dict[str, str]:
    """{site path: Markdown} of every generated page."""
    pages = {"results/index.md": results_index()}
    for section, render in (("models", model_page), ("tasks", task_page)):
        groups = _groups(section)
        pages[f"docs/reference/{section}/index.md"] = index_page(section, groups)
        for module, entries in groups.items():
            path = f"docs/reference/{section}/{_slug(module)}.md"
            pages[path] = render(module, entries)
            _LABELS[path] = ", ".join(e["name"] for e in entries[:3]) + (", ..." if len(entries) > 3 else "")
    return pages


_PAGES: dict[str, str] = {}
#: a generated page's label in the nav: its first registry entries (the page's title is its docstring's first sentence)
_LABELS: dict[str, str] = {}


def on_config(config):
    # the offline plugin (mkdocs.yml) adds a script from unpkg.com for search from file://: the site
    # is read with no network, so nothing remote is loaded (search then needs a server, `mkdocs serve`)
    config.extra["polyfills"] = [url for url in config.extra.get("polyfills", []) if "://" not in url]
    _PAGES.clear()
    _PAGES.update(generated())

    def fill(nav):
        out = []
        for item in nav:
            if isinstance(item, dict):
                ((key, value),) = item.items()
                if isinstance(value, str) and value in PLACEHOLDER:
                    value = _section_nav(PLACEHOLDER[value])
                elif isinstance(value, list):
                    value = fill(value)
                out.append({key: value})
            else:
                out.append(item)
        return out

    nav = fill(config["nav"])
    named = set(_nav_paths(nav))
    extra = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").glob("*.md"))]
    extra = [p for p in extra if p not in named]
    if extra:
        nav.append({"Notes (more)": extra})
    config["nav"] = nav
    return config


def _section_nav(kind: str) -> list:
    if kind == "results":
        return ["results/index.md", *[p for p in results_files() if p.count("/") == 1]]
    index = f"docs/reference/{kind}/index.md"
    return [index, *[{_LABELS[p]: p} for p in _PAGES if p.startswith(f"docs/reference/{kind}/") and p != index]]


def _nav_paths(nav) -> list[str]:
    out = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _nav_paths(value) if isinstance(value, list) else [value]
    return out


def on_files(files: Files, config) -> Files:
    here = Path(__file__).resolve()
    docs = ROOT / "docs"
    # the theme's and plugins' own files (stylesheets, scripts, fonts) stay; docs/ is laid out anew below
    out = Files([f for f in files if not (f.abs_src_path and Path(f.abs_src_path).resolve().is_relative_to(docs))])

    def add(rel: str, content: str | None = None) -> None:
        if out.get_file_from_path(rel) is None:
            if content is None:
                out.append(File.generated(config, rel, abs_src_path=str(ROOT / rel)))
            else:
                out.append(File.generated(config, rel, content=content))

    for path in sorted((ROOT / "docs").rglob("*")):
        if path.is_file() and path.resolve() != here and "__pycache__" not in path.parts:
            add(path.relative_to(ROOT).as_posix())
    for rel in ["README.md", "scripts/README.md", *results_files()]:
        add(rel)
    for rel, text in _PAGES.items():
        add(rel, text)
    # whatever a page links to in the repository comes along (a link to nothing stays broken)
    todo = [f for f in out if f.src_uri.endswith(".md")]
    while todo:
        page = todo.pop()
        text = _PAGES.get(page.src_uri) or (ROOT / page.src_uri).read_text()
        for m in LINK.finditer(text):
            target = m.group(1) or m.group(2)
            if "://" in target or target.startswith(("mailto:", "/")):
                continue
            rel = (Path(page.src_uri).parent / target).as_posix()
            rel = Path(*_normalise(rel)).as_posix() if rel else rel
            if rel and (ROOT / rel).is_file() and out.get_file_from_path(rel) is None:
                add(rel)
                if rel.endswith(".md"):
                    todo.append(out.get_file_from_path(rel))
    return out


def _normalise(rel: str) -> list[str]:
    parts: list[str] = []
    for part in rel.split("/"):
        if part == "..":
            if not parts:
                return []  # outside the repository
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return parts
