"""The front door: the README stays short and every page it links to exists; the documentation
site (mkdocs.yml, docs/site_hooks.py) builds with broken links, broken anchors and missing pages
as errors, with a generated page for every model family and every task of the registry."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text()) if "://" not in t and not t.startswith("mailto:")]


def test_readme_is_short_and_every_link_resolves():
    readme = ROOT / "README.md"
    lines = readme.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the rest belongs under docs/"
    links = relative_links(readme)
    assert len(links) >= 20  # the pages, the results, the scripts' index
    missing = [t for t in links if not (ROOT / t).exists()]
    assert missing == [], f"README.md links to missing files: {missing}"


def test_readme_names_the_two_commands_ci_runs():
    """CI (.ci/run) calls `make test`; the README's two commands are `make demo` and `make test`."""
    text = (ROOT / "README.md").read_text()
    assert "make demo" in text and "make test" in text
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_docs_page_link_resolves_in_the_checkout():
    """A relative link in docs/ points where it points in the checkout (the site mirrors its paths),
    but for the pages the site generates (docs/reference/: families and tasks; the strict build checks those)."""
    generated = ROOT / "docs" / "reference"
    missing = [
        (page.relative_to(ROOT).as_posix(), t)
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for t in relative_links(page)
        if not (page.parent / t).exists() and not (page.parent / t).resolve().is_relative_to(generated)
    ]
    assert missing == []


def test_the_site_builds_strictly_with_a_page_per_family_and_task(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    from bench.registry import Registry

    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (site / "index.html").is_file() and (site / "docs" / "getting-started" / "index.html").is_file()
    reg = Registry()
    for section, names, entry in (("models", reg.model_names(), reg.model_entry), ("tasks", reg.task_names(), reg.task_entry)):
        for name in names:
            module = entry(name)["target"].partition(":")[0].rsplit(".", 1)[-1].replace("_", "-")
            page = site / "docs" / "reference" / section / module / "index.html"
            assert page.is_file(), f"no generated page for {section} entry {name!r} ({page})"
            assert f"<code>{name}</code>" in page.read_text(), f"{name!r} is not on {page}"
    api = (site / "docs" / "api" / "index.html").read_text()
    assert "load_outcomes" in api and "DepthHalting" in api and "BackboneOutput" in api  # mkdocstrings rendered them
    for writeup in sorted((ROOT / "results").glob("*.md")):
        assert (site / "results" / writeup.stem / "index.html").is_file(), writeup.name
