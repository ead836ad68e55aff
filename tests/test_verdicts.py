"""The bench:verdicts block of a write-up (bench/report/verdicts.py): two tables' verdicts on the
same claims side by side, from what `bench reproduce` wrote for each, over fake records (no training)."""

import pytest
from test_reproduce import printed_row, write_record
from test_reproduce_claims import CLAIMS_TABLE

from bench.cli import main
from bench.report.reproduce import load_table

TUNED = """
base: t
title: "the same table at another learning rate"
set: [train.lr=0.003]
"""
OTHER = """
base: t
title: "a table with one claim of its own"
claims:
  - {text: "UT beats the Transformer on 500-600", source: "other", split: len500_600, better: ut, than: transformer}
"""
BEATS = "TLB beats the Transformer on 500-600"
REVERSED = "the Transformer beats TLB on 500-600"
WITHIN = "UT beats TLB on 500-600"
TWO_SPLITS = "TLB beats the Transformer on 500-600 and near-IID"


@pytest.fixture
def two_tables(tmp_path, monkeypatch):
    """Table t (the claims of test_reproduce_claims) and t-tuned (the same at train.lr=0.003), read
    from tmp_path/tables. Per-seed accuracies on len500_600 (in %):
    t:       tlb 30 / 32 / 34, transformer 10 / 11 / 12, ut 29 / 33 / 37; near-IID: tlb 50 x3, transformer 70 x3;
    t-tuned: tlb 30 / 32 / 34, transformer 28 / 33 / 38, ut 29 / 33 / 37; no near-IID records."""
    import bench.report.reproduce as reproduce
    import bench.report.tables as table_files

    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "t.yaml").write_text(CLAIMS_TABLE)
    (tables / "t-tuned.yaml").write_text(TUNED)
    (tables / "other.yaml").write_text(OTHER)
    for module in (reproduce, table_files):  # table_files.table_of: the table a generated file's name names
        monkeypatch.setattr(module, "load_table", lambda name, preset=None: load_table(name, preset, folder=tables))
    monkeypatch.setattr(table_files, "table_names", lambda: ["other", "t", "t-tuned"])
    fixed = {"tlb": [0.30, 0.32, 0.34], "transformer": [0.10, 0.11, 0.12], "ut": [0.29, 0.33, 0.37]}
    tuned = {**fixed, "transformer": [0.28, 0.33, 0.38]}
    for model in fixed:
        for seed in range(3):
            near = {"test": {"tlb": 0.5, "transformer": 0.7, "ut": 0.6}[model]}
            write_record(tmp_path, model, "listops", seed, {"len500_600": fixed[model][seed], **near})
            write_record(tmp_path, model, "listops", seed, {"len500_600": tuned[model][seed]}, overrides=["train.lr=0.003"])
    return tmp_path


def reproduced(folder, name, capsys):
    """The claims `bench reproduce NAME` prints: {claim: (verdict, why)}."""
    assert main(["reproduce", name, "--out", str(folder)]) == 0
    printed = capsys.readouterr().out.split("The paper's claims")[1]
    return {text: tuple(printed_row(printed, text)[2:4]) for text in (BEATS, REVERSED, WITHIN, TWO_SPLITS)}


def test_the_block_shows_each_tables_verdict_as_reproduce_prints_it_and_whether_it_changed(two_tables, capsys):
    fixed, tuned = reproduced(two_tables, "t", capsys), reproduced(two_tables, "t-tuned", capsys)
    page = two_tables / "page.md"
    page.write_text("# Tuned\n\nProse stays.\n\n<!-- bench:verdicts t t-tuned -->\nold\n<!-- /bench -->\n\nAfter.\n")
    assert main(["reproduce", "--writeups", "--out", str(two_tables)]) == 0
    text = page.read_text()
    assert text.startswith("# Tuned\n\nProse stays.\n\n<!-- bench:verdicts t t-tuned -->\n\n")
    assert text.endswith("<!-- /bench -->\n\nAfter.\n")
    assert "\nold\n" not in text and "`bench reproduce t --out" in text and "`bench reproduce t-tuned --out" in text
    rows = {text_: printed_row(text, text_) for text_ in (BEATS, REVERSED, WITHIN, TWO_SPLITS)}

    # 32 vs 11: Welch Δ +21.0, CI ± 3.219 x 1.291 (test_reproduce_claims); at the tuned lr 32 vs 33: Δ -1.0, p > 0.5
    assert rows[BEATS] == [BEATS, "holds: Δ +21.0 [90% CI +17.9, +24.1], p < 0.001", rows[BEATS][2], "changed"]
    assert rows[BEATS][2].startswith("inconclusive: Δ -1.0 [90% CI")
    assert rows[REVERSED][1].startswith("does not hold: Δ -21.0 [90% CI") and "reverse p (Holm) < 0.001" in rows[REVERSED][1]
    assert rows[REVERSED][2].startswith("inconclusive: Δ +1.0") and rows[REVERSED][3] == "changed"
    assert rows[WITHIN][1].split(":")[0] == rows[WITHIN][2].split(":")[0] == "inconclusive" and rows[WITHIN][3] == "same"
    for claim in (BEATS, REVERSED, WITHIN):  # each side: the verdict, and the effect, CI and p the claims printer printed
        for side, printed in ((rows[claim][1], fixed[claim]), (rows[claim][2], tuned[claim])):
            verdict, numbers = side.split(": ", 1)
            assert verdict == printed[0] and numbers + ", n 3 vs 3 seeds" in printed[1]
    # the tuned table has no near-IID records: the claim over both splits is judged on one side only
    assert rows[TWO_SPLITS][1].split(": ")[0] == fixed[TWO_SPLITS][0] == "does not hold"
    assert rows[TWO_SPLITS][2:] == ["not judged (no records for 2 of 4 cells)", "not judged"]
    # what reproduce says of the missing cells, which the block does not call a verdict
    assert tuned[TWO_SPLITS][0] == "inconclusive (provisional)"
    assert main(["reproduce", "--writeups", "--out", str(two_tables)]) == 0
    assert page.read_text() == text  # filled: the same again


@pytest.mark.parametrize(
    "block, message",
    [
        ("t other", "claims differ: 'TLB beats the Transformer on 500-600' is only in 't'"),
        ("t t-tund", "'t-tund' is not a table; valid: other, t, t-tuned; did you mean 't-tuned'"),
        ("t", "takes two generated tables"),
    ],
)
def test_a_bad_verdicts_block_is_one_line_naming_its_file_and_line(two_tables, capsys, block, message):
    assert main(["reproduce", "other", "--out", str(two_tables)]) == 0
    good = two_tables / "a.md"
    good.write_text("<!-- bench:value runs/listops/paper/tlb/seed0.json metrics.test.acc pct -->?<!-- /bench -->\n")
    bad = two_tables / "b.md"
    bad.write_text(f"# B\n\n<!-- bench:verdicts {block} -->\n<!-- /bench -->\n")
    capsys.readouterr()
    for command in (["reproduce", "t"], ["reproduce", "--writeups"]):  # filling after a table, or every write-up
        assert main([*command, "--out", str(two_tables)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"{bad}:3: " in err and message in err
        assert good.read_text().count("?") == 1  # nothing half-written


def test_a_side_with_one_seed_in_a_compared_cell_is_not_judged(two_tables, capsys):
    """One record leaves a pair without a test (two values a side are needed): its "inconclusive"
    is missing data, so the block calls that side not judged rather than a changed verdict."""
    from bench.records import record_path

    for seed in (1, 2):  # the tuned Transformer keeps seed 0 only
        record_path(two_tables, "transformer", "listops", "paper", seed, ["train.lr=0.003"]).unlink()
    fixed, tuned = reproduced(two_tables, "t", capsys), reproduced(two_tables, "t-tuned", capsys)
    assert fixed[BEATS][0] == "holds" and tuned[BEATS][0] == "inconclusive (provisional)"
    assert "(< 2 seeds a side): no test" in tuned[BEATS][1]
    page = two_tables / "page.md"
    page.write_text("<!-- bench:verdicts t t-tuned -->\n<!-- /bench -->\n")
    assert main(["reproduce", "--writeups", "--out", str(two_tables)]) == 0
    text = page.read_text()
    assert printed_row(text, BEATS)[2:] == ["not judged (one record in 1 of 2 cells)", "not judged"]
    assert printed_row(text, WITHIN)[2:][1] == "same"  # UT vs TLB: three seeds a side in both tables, judged
    assert "has fewer than two records" in text


def test_a_side_short_of_its_planned_seeds_is_judged_and_called_provisional(two_tables, capsys):
    """Two of the three seeds the tables plan: each pair still has a test, so the side is judged,
    and says that its verdict is that of the seeds present."""
    from bench.records import record_path

    record_path(two_tables, "tlb", "listops", "paper", 2, ["train.lr=0.003"]).unlink()  # tuned TLB: seeds 0 and 1
    reproduced(two_tables, "t", capsys), reproduced(two_tables, "t-tuned", capsys)
    page = two_tables / "page.md"
    page.write_text("<!-- bench:verdicts t t-tuned -->\n<!-- /bench -->\n")
    assert main(["reproduce", "--writeups", "--out", str(two_tables)]) == 0
    text = page.read_text()
    # UT 29 / 33 / 37 vs tuned TLB 30 / 32: Δ +2.0, inconclusive on the seeds present; the fixed table has all three
    fixed, tuned, change = printed_row(text, WITHIN)[1:]
    assert fixed.startswith("inconclusive: Δ +1.0") and "provisional" not in fixed
    assert tuned.startswith("inconclusive (provisional: 2-3 of 3 seeds): Δ +2.0 [90% CI") and change == "same"
