"""``bench report``: the page built from the committed results (two tables: a results table with
claims and a cost table), its numbers checked against the records they link to, computed here
independently (numpy/scipy, not bench's stats); bad inputs (no records, a corrupt record, a
table not written, --to a folder) as one line, exit 2, nothing written; and the page opened in
headless Chromium with the network off (skipped when Playwright or a system Chromium is absent:
CI installs both, .ci/run)."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from bench.cli import main
from bench.registry import Registry
from bench.report.page import build_report

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
TABLES = ["halt-table1-cpu", "halt-table5-cpu"]


class _Page(HTMLParser):
    """The page's matrix cells (data-cell, data-value, link, text), anchors, links and records' files."""

    def __init__(self):
        super().__init__()
        self.cells, self.ids, self.links, self.record_files = [], set(), [], {}
        self._cell = self._rec = None
        self._in_code = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self.links.append(a["href"][1:])
        if tag == "td" and "data-cell" in a:
            self._cell = {"id": a["data-cell"], "value": a["data-value"], "text": ""}
        if tag == "a" and self._cell is not None:
            self._cell["href"] = a["href"][1:]
        if tag == "details" and a.get("class") == "record" and re.fullmatch(r"r\d+", a.get("id", "")):
            self._rec = a["id"]
        if tag == "code" and self._rec and self._rec not in self.record_files:
            self._in_code = True

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data
        if self._in_code:
            self.record_files[self._rec] = data
            self._in_code = False

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append(self._cell)
            self._cell = None


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    dest = tmp_path_factory.mktemp("report") / "report.html"
    info = build_report(RESULTS, dest, Registry(None), TABLES)
    text = dest.read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    return info, dest, text, page


def _cell_records(text: str, cell_id: str) -> list[str]:
    """The record ids the cell's line (every cell, at the foot of its table) links to."""
    row = re.search(rf'<tr id="{cell_id}">(.*?)</tr>', text).group(1)
    return re.findall(r'href="#(r\d+)"', row)


def test_cells_equal_their_records_mean_and_t_interval(built):
    """Each number of the results table is the mean over the records it links to (acc on the
    column's split, in %), with the 95% t half-width, computed here with scipy; and the records are
    the table's three seeds of the row's model on listops."""
    info, _, text, page = built
    cells = [c for c in page.cells if c["id"].startswith("t0-")]  # halt-table1-cpu: the first table
    assert len(cells) == 56 and info["tables"] == 2
    header = next(csv.DictReader((RESULTS / "reproduce/halt-table1-cpu.csv").open()))  # the CSV's own first cell: its split
    checked = 0
    for cell in cells:
        assert cell["href"] == cell["id"]
        rids = _cell_records(text, cell["id"])
        assert len(rids) == 3
        recs = [
            json.loads((ROOT / page.record_files[r]).read_text())
            if not Path(page.record_files[r]).is_absolute()
            else json.loads(Path(page.record_files[r]).read_text())
            for r in rids
        ]
        assert sorted(r["seed"] for r in recs) == [0, 1, 2] and {r["task"] for r in recs} == {"listops"}
        split = re.search(rf'<tr id="{cell["id"]}">(?:<td[^>]*>[^<]*</td>){{3}}<td>([^<]*)</td>', text).group(1)
        values = np.array([r["metrics"][split]["acc"] for r in recs]) * 100
        mean = values.mean()
        half = sps.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
        assert float(cell["value"]) == pytest.approx(mean, abs=1e-9)
        assert cell["text"].startswith(f"{mean:.1f} ± {half:.1f} (3)")
        checked += 1
    assert checked == 56 and header["split"] == "test"


def test_claims_as_the_committed_claims_csv(built):
    """Every claim of the table is on the page with the verdict, effect, CI and p of the claims CSV
    that bench reproduce committed (the tables' own tests, not the page's)."""
    _, _, text, _ = built
    rows = list(csv.DictReader((RESULTS / "reproduce/halt-table1-cpu--claims.csv").open()))
    assert rows
    for i, row in enumerate(rows):
        tr = re.search(rf'<tr id="halt-table1-cpu-k{i}">(.*?)</tr>', text, re.S).group(1)
        assert row["claim"].replace("'", "&#x27;").replace('"', "&quot;") in tr or row["claim"] in tr
        assert f">{row['ours']}" in tr
        if row["effect"]:
            assert f'data-effect="{float(row["effect"])}"' in tr
            assert (
                f"[{float(row['ci_low']):.1f}, {float(row['ci_high']):.1f}]" in tr.replace("-0.0]", "0.0]")
                or f"[{float(row['ci_low']):.1f}, {float(row['ci_high']):.1f}]" in tr
            )
            p = float(row["p"])
            assert (f"{p:.3f}" if p >= 0.001 else "&lt; 0.001") in tr


def test_cost_cells_and_length_curve(built):
    """The cost table's step times are its measurement's; the per-length curve's first point of the
    Transformer row is the examples-weighted accuracy of its records' first length bin pooled over
    the table's splits (computed here), the chance level drawn."""
    _, _, text, page = built
    measured = json.loads((RESULTS / "reproduce/halt-table5-cpu--measured.json").read_text())
    steps = re.findall(r'<tr id="t1-c\d+">(?:<td[^>]*>[^<]*</td>){4}<td class="num">([0-9.]+)</td>', text)
    assert len(steps) == 12
    assert all(any(abs(float(s) - m) < 6e-4 for m in _numbers(measured)) for s in steps)
    svg = re.search(r'<svg id="halt-table1-cpu-curve-listops".*?</svg>', text, re.S).group(0)
    assert 'class="chance"' in svg
    first = re.search(r"<title>transformer: length (\d+), ([0-9.]+)%</title>", svg)
    x = int(first.group(1))
    splits = ["test", "len200_300", "len500_600", "len900_1000", "args10", "args15", "lra"]
    total = n = 0
    for path in sorted((RESULTS / "runs/listops/small/transformer").glob("seed[012]-*.json")):
        rec = json.loads(path.read_text())
        if (
            rec.get("overrides")
            and "data.n_train=35000" in rec["overrides"]
            and "model.d_model=128" not in rec["overrides"]
            and rec["seed"] in (0, 1, 2)
            and len(rec["overrides"]) == 5
        ):
            for split in splits:
                for key, b in rec["metrics"].get(split, {}).get("by_length", {}).items():
                    if int(re.match(r"\d+", key).group(0)) == x:
                        total, n = total + b["acc"] * b["n"], n + b["n"]
    assert n and float(first.group(2)) == pytest.approx(100 * total / n, abs=0.051)


def _numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield float(obj)


def test_every_anchor_resolves_and_nothing_is_fetched(built):
    _, _, text, page = built
    assert page.links and not [link for link in page.links if link not in page.ids]
    assert not re.search(r'(src|href)="(https?:)?//', text)  # no script, style or image from elsewhere
    assert "<script src" not in text and "<link " not in text


# ---- bad input ------------------------------------------------------------------------------


def _run(capsys, *argv):
    code = main(["report", *argv])
    err = capsys.readouterr().err.strip()
    return code, err


def test_no_records_one_line_nothing_written(tmp_path, capsys):
    dest = tmp_path / "page.html"
    code, err = _run(capsys, "--out", str(tmp_path), "--to", str(dest))
    assert code == 2 and len(err.splitlines()) == 1 and "no run records" in err and not dest.exists()
    code, err = _run(capsys, "--out", str(tmp_path / "missing"), "--to", str(dest))
    assert code == 2 and len(err.splitlines()) == 1 and "does not exist" in err and not dest.exists()


def test_corrupt_record_one_line_previous_page_kept(tmp_path, capsys):
    folder = tmp_path / "runs/parity/small/lstm"
    folder.mkdir(parents=True)
    (folder / "seed0.json").write_text('{"model": "lstm", "task"')
    dest = tmp_path / "page.html"
    dest.write_text("the page before")
    code, err = _run(capsys, "--out", str(tmp_path), "--to", str(dest))
    assert code == 2 and len(err.splitlines()) == 1 and "seed0.json" in err and "Traceback" not in err
    assert dest.read_text() == "the page before" and sorted(p.name for p in tmp_path.iterdir()) == ["page.html", "runs"]


def test_unknown_table_and_folder_destination(tmp_path, capsys):
    code, err = _run(capsys, "--out", str(RESULTS), "--to", str(tmp_path / "p.html"), "--tables", "no-such-table")
    assert code == 2 and len(err.splitlines()) == 1 and "no-such-table" in err and not (tmp_path / "p.html").exists()
    code, err = _run(capsys, "--out", str(RESULTS), "--to", str(tmp_path))
    assert code == 2 and len(err.splitlines()) == 1 and "is a folder" in err


# ---- in a browser -----------------------------------------------------------------------------


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.fixture(scope="module")
def chromium():
    """(Playwright's sync API, the system Chromium's path); the test skips, saying why, without either."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright not installed (pip install -e '.[report]')")
    path = _chromium()
    if path is None:
        pytest.skip("no system Chromium (apt-get install chromium); Playwright's own browsers are never downloaded")
    return sync_api, path


def test_page_in_headless_chromium_offline(chromium, built, tmp_path):
    """Opened from the file in Chromium with every non-file request aborted: no console error, no
    request attempted, every table and plot present, every in-page link resolves, a cell's link
    opens its row, its record and that record's outcomes; screenshots of the main views."""
    sync_api, browser_path = chromium
    _, dest, _, page_data = built
    errors, requests = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            def route(r):
                if r.request.url.startswith("file:"):
                    return r.continue_()
                requests.append(r.request.url)
                return r.abort()

            page.route("**/*", route)
            page.goto(dest.as_uri())
            assert page.locator("#view-overview").is_visible()
            page.screenshot(path=str(tmp_path / "overview.png"))
            assert page.locator("section.table").count() == 2
            assert page.locator("section.table table.matrix").count() == 1
            assert page.locator("section.table table.claims").count() == 2
            plots = {page.locator("svg.plot").nth(i).get_attribute("id") for i in range(page.locator("svg.plot").count())}
            assert plots == {"halt-table1-cpu-curve-listops", "halt-table1-cpu-cost-listops"}  # its records keep no stream state
            assert page.locator("#halt-table1-cpu-curve-listops polyline.chance").count() == 1
            missing = page.evaluate("""() => Array.from(document.querySelectorAll('a[href^="#"]'))
                .map(a => decodeURIComponent(a.getAttribute('href').slice(1))).filter(id => !document.getElementById(id))""")
            assert missing == []
            page.click('a[href="#view-tables"]')
            page.locator("#tbl-halt-table1-cpu").wait_for(state="visible", timeout=10_000)  # the view switches on hashchange
            assert page.locator("#tbl-halt-table1-cpu").is_visible() and not page.locator("#view-overview").is_visible()
            box = page.locator("#halt-table1-cpu-curve-listops").bounding_box()
            assert box and box["width"] > 300 and box["height"] > 150
            page.screenshot(path=str(tmp_path / "tables.png"))
            cell = page_data.cells[0]
            page.click(f'td[data-cell="{cell["id"]}"] a')
            page.locator(f'tr[id="{cell["id"]}"]').wait_for(state="visible", timeout=10_000)
            assert page.locator(f'tr[id="{cell["id"]}"]').is_visible()
            rid = _cell_records(dest.read_text(), cell["id"])[0]
            page.click(f'tr[id="{cell["id"]}"] a[href="#{rid}"]')
            record = page.locator(f"details#{rid}")
            page.wait_for_selector(f"details#{rid}[open]", state="visible", timeout=10_000)
            assert record.is_visible() and record.get_attribute("open") is not None
            button = record.locator("button.oc").first
            if button.count():
                button.click()
                record.locator("canvas.ocgrid").wait_for(timeout=10_000)
                assert record.locator("canvas.ocgrid").count() == 1
                assert re.search(r"\d+ of \d+ examples right", record.locator(".ocview p").inner_text())
            page.screenshot(path=str(tmp_path / "record.png"))
            page.click('header a[href="#fam-gut"]')
            page.locator("#fam-gut").wait_for(state="visible", timeout=10_000)
            assert page.locator("#fam-gut").is_visible()
            page.screenshot(path=str(tmp_path / "family.png"))
        finally:
            browser.close()
    assert errors == [] and requests == []
    assert all((tmp_path / f"{v}.png").stat().st_size > 10_000 for v in ("overview", "tables", "record", "family"))


def test_family_pages_follow_each_pairs_own_test(tmp_path):
    """A family's wins, losses and ties are its pairs' tests, consistent with the claims' verdicts:
    a claim that holds has every pair holding, one that does not hold has a reversed pair, a
    one-pair claim's pair has the claim's verdict; a win of one family is a loss of the other."""
    from bench.report.page.collect import collect
    from bench.report.page.html import family_outcomes

    report = collect(RESULTS, Registry(None), ["halt-table1-cpu-tuned"])
    claims = report.tables[0].claims
    assert claims
    for cl in claims:
        verdicts = [q.verdict for q in cl.pairs]
        if cl.line["ours"] == "holds":
            assert set(verdicts) == {"holds"}
        if cl.line["ours"] == "does not hold":
            assert "does not hold" in verdicts
        if len(cl.pairs) == 1 and cl.line["ours"] != "measured":
            assert verdicts[0] in (cl.line["ours"], "no test")
    wins = {(t.stem, i, q.better, q.than) for f in report.families for o, t, i, q, _ in family_outcomes(report, f) if o == "win"}
    losses = {(t.stem, i, q.better, q.than) for f in report.families for o, t, i, q, _ in family_outcomes(report, f) if o == "loss"}
    assert wins and wins == losses


def test_rerun_command_keeps_the_registry_of_a_tuned_overlay():
    from bench.report.page.collect import RecordView

    rec = {
        "model": "transformer-tuned",
        "task": "flipflop",
        "preset": "small",
        "seed": 2,
        "overrides": ["train.lr=0.003"],
        "command": "bench --registry results/studies/t3cpu/tuned.yaml run --model transformer-tuned --task flipflop",
    }
    assert RecordView("r0", "x.json", rec).rerun("results") == (
        "bench --registry results/studies/t3cpu/tuned.yaml run --model transformer-tuned --task flipflop --preset small "
        "--seed 2 --set train.lr=0.003 --out results --rerun"
    )


def test_matrix_shows_what_a_cell_carries_beyond_its_mean():
    """A key the cells gain (the learned counts) shows in the matrix and in the cell's line, unformatted."""
    from bench.report.page.collect import CellView, TableView
    from bench.report.page.html import _cell_lines, _matrix

    line = {
        "row": "lstm",
        "model": "lstm",
        "task": "parity",
        "split": "bin1",
        "column": "bin1",
        "n": 3,
        "ours": 66.6667,
        "ours_ci95": 71.7,
        "paper": None,
        "delta": None,
        "stale": False,
        "at_chance": False,
        "learned": "2/3",
    }
    table = TableView(
        stem="t",
        name="t",
        title="t",
        kind="results",
        preset="small",
        unit="%",
        command="",
        note="",
        headers=[],
        rows=[],
        columns=[("bin1", "parity", "bin1")],
        metrics={"bin1": "acc"},
        row_labels=[("lstm", "lstm")],
        cells=[CellView("t0-c0", line, "lstm", "bin1", "lstm", "parity", "bin1", ["r0"])],
        claims=[],
        rule="",
        curves={},
        source_files=[],
    )
    matrix = _matrix(table)
    assert "66.7 ± 71.7 (3)" in matrix and "learned 2/3" in matrix
    assert "<th>learned</th>" in _cell_lines(table) and "<td>2/3</td>" in _cell_lines(table)


def test_a_table_that_cannot_be_rebuilt_is_left_out_and_said(tmp_path, capsys):
    """One table Markdown naming a table that no longer exists: the page is built from the others,
    the overview and a warning say which was left out; when none can be rebuilt: one line, exit 2."""
    (tmp_path / "reproduce").mkdir()
    for name in ("halt-table5-cpu.md", "halt-table5-cpu.csv", "halt-table5-cpu--measured.json", "halt-table5-cpu--claims.csv"):
        shutil.copy(RESULTS / "reproduce" / name, tmp_path / "reproduce" / name)
    record = next((RESULTS / "runs/listops/small/gut").glob("seed0-*.json"))
    (tmp_path / "runs/listops/small/gut").mkdir(parents=True)
    shutil.copy(record, tmp_path / "runs/listops/small/gut" / record.name)
    (tmp_path / "reproduce/gone.md").write_text("# a table since removed\n\n`bench reproduce no-such-table --out results`\n")
    dest = tmp_path / "page.html"
    code, err = _run(capsys, "--out", str(tmp_path), "--to", str(dest))
    assert code == 0 and "gone.md left out of the report" in err
    text = dest.read_text()
    assert 'id="tbl-halt-table5-cpu"' in text and "Left out: <code>" in text and "no-such-table" in text
    (tmp_path / "reproduce/halt-table5-cpu.md").unlink()
    dest.unlink()
    code, err = _run(capsys, "--out", str(tmp_path), "--to", str(dest))
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("bench: error: no table under") and not dest.exists()
    (tmp_path / "reproduce/gone.md").unlink()
    code, err = _run(capsys, "--out", str(tmp_path), "--to", str(dest))
    assert code == 2 and len(err.splitlines()) == 1 and "no tables under" in err and not dest.exists()
