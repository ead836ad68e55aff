"""The front door: the README stays short and every page it links to exists; the documentation
site (mkdocs.yml, docs/site_hooks.py) builds with broken links, broken anchors and missing pages
as errors, with a generated page for every model family and every task of the registry, each
titled in a line; and opens from disk in headless Chromium, every nav link naming a page's file
(skipped when Playwright or a system Chromium is absent: CI installs both, .ci/run)."""

import os
import re
import shutil
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


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once for this file's tests as `make docs` builds it (strictly)."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    site = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return site


def test_the_site_builds_strictly_with_a_page_per_family_and_task(site):
    from bench.registry import Registry

    assert (site / "index.html").is_file() and (site / "docs" / "getting-started.html").is_file()
    reg = Registry()
    for section, names, entry in (("models", reg.model_names(), reg.model_entry), ("tasks", reg.task_names(), reg.task_entry)):
        for name in names:
            module = entry(name)["target"].partition(":")[0].rsplit(".", 1)[-1].replace("_", "-")
            page = site / "docs" / "reference" / section / f"{module}.html"
            assert page.is_file(), f"no generated page for {section} entry {name!r} ({page})"
            assert f"<code>{name}</code>" in page.read_text(), f"{name!r} is not on {page}"
    api = (site / "docs" / "api.html").read_text()
    assert "load_outcomes" in api and "DepthHalting" in api and "BackboneOutput" in api  # mkdocstrings rendered them
    for writeup in sorted((ROOT / "results").glob("*.md")):
        assert (site / "results" / f"{writeup.stem}.html").is_file(), writeup.name


def test_generated_titles_are_a_name_and_a_short_description(site):
    """A family's or task's page is titled by its first registry name and the first clause of its
    module docstring: at most 80 characters, no trailing colon, no citation in parentheses."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import site_hooks
    finally:
        sys.path.remove(str(ROOT / "docs"))
    assert site_hooks.page_title("x", 'Mamba-2: the SSD layer (Dao & Gu, ICML 2024, "Transformers are SSMs: A, B"), per head:') == (
        "x — Mamba-2: the SSD layer, per head"
    )
    assert site_hooks.page_title("parity", "Formal languages as in Bhattamishra et al. (2020)") == (
        "parity — Formal languages as in Bhattamishra et al. (2020)"
    )
    long = "Stack manipulation: a binary stack, given bottom to top, then actions POP / PUSH0 / PUSH1 applied left to right"
    assert (
        site_hooks.page_title("stack-manipulation", long) == "stack-manipulation — Stack manipulation: a binary stack, given bottom to top"
    )
    h1 = re.compile(r"<h1[^>]*>(.*?)(?:<a class=\"headerlink\"|</h1>)", re.S)
    for page in sorted((site / "docs" / "reference").rglob("*.html")):
        if page.name == "index.html":
            continue
        title = re.sub(r"<[^>]+>", "", h1.search(page.read_text()).group(1)).strip()
        assert len(title) <= 80 and not title.endswith(":") and " — " in title, (page.name, title)


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def test_the_site_opens_from_disk_in_chromium(site):
    """From site/index.html over file:// with the network off, as the README says to read it: every
    nav link names an .html file of the site (not a folder, which Chromium shows as "Index of ...")
    whose <title> is the link's label; following one link of every nav section in Chromium (a click
    from the page before) opens that page (its title and an <h1>), and no page logs a console error
    (ERR_FILE_NOT_FOUND included) or fails a request. Every link is checked, a sample is visited: a
    visit costs about 0.2 s of CPU and the nav has 90 pages."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright not installed (pip install -e '.[report]')")
    browser_path = _chromium()
    if browser_path is None:
        pytest.skip("no system Chromium (apt-get install chromium); Playwright's own browsers are never downloaded")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        page = browser.new_page()
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
        page.on("console", lambda m: m.type == "error" and errors.append(f"{page.url}: {m.text}"))
        page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
        # a request cut short by the next click (net::ERR_ABORTED) is no missing file
        page.on("requestfailed", lambda r: r.failure != "net::ERR_ABORTED" and errors.append(f"{r.url}: {r.failure}"))
        page.goto((site / "index.html").as_uri())
        links = page.eval_on_selector_all(
            "nav.md-nav--primary > ul > li",
            """sections => sections.map(li => [...li.querySelectorAll('a.md-nav__link[href]')]
                 .filter(a => !a.closest('.md-nav--secondary'))  // not the page's own contents
                 .map(a => [a.href.split('#')[0], a.textContent.trim()]))""",
        )
        every = {href: label for section in links for href, label in section}
        assert len(links) >= 8 and len(every) >= 60, (len(links), len(every))
        for href, label in every.items():
            assert href.startswith(site.as_uri() + "/") and href.endswith(".html"), f"nav link {label!r} is {href}, not a page's file"
            target = site / href[len(site.as_uri()) + 1 :]
            assert target.is_file(), f"nav link {label!r} names no file: {target}"
            text = target.read_text()
            if target == site / "index.html":
                assert "<title>bench</title>" in text
            elif target.name == "index.html":  # a section's own page: the link is the section's label, the title its page's
                assert re.search(r"<title>[^<]+ - bench</title>", text) and "<h1" in text, target
            else:
                assert f"<title>{label} - bench</title>" in text, f"nav link {label!r} opens {target}, titled otherwise"
        visit = [section[0] for section in links] + [section[-1] for section in links if len(section) > 1]
        for href, label in visit:
            page.evaluate(
                "t => [...document.querySelectorAll('nav.md-nav--primary a.md-nav__link')].find(a => a.href.split('#')[0] === t).click()",
                href,
            )
            page.wait_for_url(href)
            if not href.endswith("/index.html"):
                assert page.title() == f"{label} - bench", (href, page.title())
            heading = page.locator("article h1").first.inner_text()
            assert heading and not heading.startswith("Index of"), (href, heading)
        browser.close()
    assert errors == []
