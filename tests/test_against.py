"""bench:against: every row of a table against a baseline row, column by column (Welch over
seeds, two-sided, Holm over a row's columns), checked against scipy and Holm computed by hand."""

import shutil
from pathlib import Path

import pytest
from scipy import stats as sps

from bench.errors import UserError
from bench.report.against import ABOVE, BELOW, NO_TEST, UNSURE, _sentence, against_block, compare_rows
from bench.report.reproduce import fill_writeups

ROOT = Path(__file__).resolve().parent.parent


def cell(mean, std, n, chance=False):
    return {"ours": str(mean), "ours_std": str(std), "n": str(n), "at_chance": str(chance)}


def test_each_cell_is_welch_two_sided_with_holm_over_the_row():
    cells = {
        ("base", "a"): cell(50.0, 2.0, 5),
        ("fam", "a"): cell(60.0, 3.0, 5),  # clearly above
        ("base", "b"): cell(80.0, 1.0, 5),
        ("fam", "b"): cell(70.0, 4.0, 4),  # clearly below
        ("base", "c"): cell(50.0, 5.0, 3),
        ("fam", "c"): cell(52.0, 5.0, 3),
    }  # no difference to speak of
    (found,) = compare_rows(cells, ["base", "fam"], ["a", "b", "c"], "base").values()
    raw = [
        sps.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False).pvalue
        for (m1, s1, n1), (m2, s2, n2) in [((60, 3, 5), (50, 2, 5)), ((70, 4, 4), (80, 1, 5)), ((52, 5, 3), (50, 5, 3))]
    ]
    order = sorted(range(3), key=lambda i: raw[i])  # Holm by hand: k-th smallest times (3 - k), kept non-decreasing
    holm, running = [0.0] * 3, 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (3 - k) * raw[i]))
        holm[i] = running
    assert [r.p for r in found] == pytest.approx(holm)
    assert [r.verdict for r in found] == [ABOVE, BELOW, UNSURE]
    assert found[0].effect == pytest.approx(10.0) and found[1].effect == pytest.approx(-10.0)
    lo, hi = found[0].ci
    assert lo > 0 and hi > 10 and (lo + hi) / 2 == pytest.approx(10.0)


def test_every_tested_cell_says_its_effect_ci_and_p_inconclusive_ones_too():
    """The row's sentence: the inconclusive column with its Δ, 95% Welch CI and Holm p (computed here
    with scipy's Welch df), as the above / below columns carry theirs."""
    cells = {
        ("base", "a"): cell(50.0, 2.0, 5),
        ("fam", "a"): cell(60.0, 3.0, 5),
        ("base", "c"): cell(50.0, 5.0, 3),
        ("fam", "c"): cell(52.0, 5.0, 3),
    }
    (found,) = compare_rows(cells, ["base", "fam"], ["a", "c"], "base").values()
    sentence = _sentence("fam", "base", ["a", "c"], found, 1)
    se = (25 / 3 + 25 / 3) ** 0.5
    df = (25 / 3 + 25 / 3) ** 2 / (2 * (25 / 3) ** 2 / 2)  # Welch-Satterthwaite, equal sides: 4
    half = sps.t.ppf(0.975, df) * se
    p_c = min(1.0, 1 * sps.ttest_ind_from_stats(52, 5, 3, 50, 5, 3, equal_var=False).pvalue)  # Holm: larger p, x1
    assert f"inconclusive on c (Δ +2.0 [95% CI {2 - half:+.1f}, {2 + half:+.1f}], Holm p = {p_c:.3f})" in sentence
    assert sentence.startswith("- **fam**: above base on a (Δ +10.0 [95% CI ")


def test_cells_without_a_test():
    cells = {
        ("base", "a"): cell(50.0, 2.0, 5),
        ("fam", "a"): cell(60.0, "", 1),
        ("base", "b"): cell(33.0, 1.0, 5, chance=True),
        ("fam", "b"): cell(34.0, 1.0, 5, chance=True),
        ("base", "c"): cell(50.0, 2.0, 5),
        ("fam", "c"): cell(56.0, 2.0, 5),
    }
    (found,) = compare_rows(cells, ["base", "fam"], ["a", "b", "c", "d"], "base").values()
    assert [r.verdict for r in found] == [NO_TEST, NO_TEST, ABOVE, NO_TEST]
    assert [r.why for r in found[:2]] == ["< 2 seeds a side", "both at chance"]
    # only the tested column counts for Holm: its p is its own two-sided p
    assert found[2].p == pytest.approx(sps.ttest_ind_from_stats(56, 2, 5, 50, 2, 5, equal_var=False).pvalue)


def test_a_write_up_block_is_filled_from_the_generated_table_and_refills_identically(tmp_path):
    (tmp_path / "reproduce").mkdir()
    for suffix in (".md", ".csv"):
        shutil.copy(ROOT / "results" / "reproduce" / f"halt-table3-cpu{suffix}", tmp_path / "reproduce")
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- bench:against halt-table3-cpu transformer -->old<!-- /bench -->\nafter\n")
    assert fill_writeups(tmp_path) == [doc]
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old" not in text
    assert "| ut " in text and "- **gut**: " in text and "| transformer " not in text
    assert fill_writeups(tmp_path) == []  # nothing changes the second time


def test_a_block_may_name_the_rows_it_compares(tmp_path):
    """ROWS: only those rows, in that order, each tested exactly as in the block of every row."""
    (tmp_path / "reproduce").mkdir()
    for suffix in (".md", ".csv"):
        shutil.copy(ROOT / "results" / "reproduce" / f"halt-table3-cpu{suffix}", tmp_path / "reproduce")
    every = against_block(tmp_path, "halt-table3-cpu transformer", "doc.md:1")
    some = against_block(tmp_path, "halt-table3-cpu transformer gut,ut", "doc.md:1")
    lines = {line.split("**")[1]: line for line in every.splitlines() if line.startswith("- **")}
    assert [line for line in some.splitlines() if line.startswith("- **")] == [lines["gut"], lines["ut"]]
    assert [line.split("|")[1].strip() for line in some.splitlines() if line.startswith("| ")][1:] == ["gut", "ut"]


@pytest.mark.parametrize(
    "spec,message",
    [
        ("halt-table3-cpu", "takes a generated table, the row"),
        ("halt-table3-cpu transformer gut ut", "takes a generated table, the row"),
        ("halt-table3-cpu lstm", "has no row 'lstm'"),
        ("halt-table3-cpu transformer gut,lstm", "has no row 'lstm'"),
        ("halt-table3-cpu transformer transformer", "other than it"),
        ("no-such-table transformer", "is not a table"),
    ],
)
def test_bad_blocks_are_one_line(tmp_path, spec, message):
    with pytest.raises(UserError, match=message):
        against_block(tmp_path, spec, "doc.md:1")


def test_a_table_against_the_same_rows_of_another(tmp_path):
    """``TABLE @OTHER``: each row against the same-labelled row of the other table (the reference-code
    copy of a table against the table): the test of the one-table block, cell by cell."""
    (tmp_path / "reproduce").mkdir()
    for name in ("halt-table3-cpu", "halt-table3-cpu-tuned"):
        for suffix in (".md", ".csv"):
            shutil.copy(ROOT / "results" / "reproduce" / f"{name}{suffix}", tmp_path / "reproduce")
    body = against_block(tmp_path, "halt-table3-cpu-tuned @halt-table3-cpu gut,ut", "doc.md:1")
    assert "against the same row of halt-table3-cpu" in body and "- **gut**: " in body and "- **ut**: " in body
    import csv

    rows = {}
    for name in ("halt-table3-cpu", "halt-table3-cpu-tuned"):
        with open(tmp_path / "reproduce" / f"{name}.csv", newline="") as f:
            rows[name] = {(c["row"], c["column"]): c for c in csv.DictReader(f)}
    col = next(c for (r, c) in rows["halt-table3-cpu"] if r == "gut")
    a, b = rows["halt-table3-cpu-tuned"]["gut", col], rows["halt-table3-cpu"]["gut", col]
    cells = {("gut", col): a, ("@gut", col): b}
    (found,) = compare_rows(cells, ["@gut", "gut"], [col], "@gut").values()
    if found[0].effect is not None:
        assert f"{found[0].effect:+.1f}" in body or f"{found[0].effect:+.2f}" in body
    with pytest.raises(UserError, match="'tlb' is not a row of both tables"):
        against_block(tmp_path, "halt-table3-cpu-tuned @halt-table3-cpu tlb", "doc.md:1")
