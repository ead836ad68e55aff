"""bench reproduce: the paper's claims judged over a table's cells (holds / does not hold /
inconclusive by the spread rule; cells at chance), beside fake run records (no training)."""
import csv

import pytest

from bench.cli import main
from bench.errors import UserError
from bench.report.reproduce import build, load_table
from test_reproduce import cell, printed_row, write_record

CLAIMS_TABLE = """
title: "a ListOps table"
source: "test"
preset: paper
seeds: [0, 1, 2]
tasks: [listops]
splits: [test, len500_600]
rows:
  - {model: transformer, paper: [[73, 0.79], [10.4, 0.71]]}
  - {model: ut, paper: [[65.8, 7.3], [10.3, 0.99]]}
  - {model: tlb, paper: [[58.3, 0.73], [30.5, 1.1]]}
claims:
  - {text: "TLB beats the Transformer on 500-600", source: "[HALT §6.4]",
     better: {model: tlb, split: len500_600}, than: {model: transformer, split: len500_600}}
  - {text: "the Transformer beats TLB on 500-600", source: "reversed", split: len500_600, better: transformer, than: tlb}
  - {text: "UT beats TLB on 500-600", source: "within the spread", split: len500_600, better: ut, than: tlb}
  - {text: "TLB beats each of Transformer and UT on 500-600", source: "each", split: len500_600, better: tlb, than: [transformer, ut]}
  - {text: "TLB beats the Transformer on 500-600 and near-IID", source: "two splits", splits: [len500_600, test],
     better: tlb, than: transformer}
"""


@pytest.fixture
def claim_runs(tmp_path):
    """Per-seed accuracies (in %: mean ± sample std):
    len500_600: tlb 30 / 32 / 34 (32 ± 2), transformer 10 / 11 / 12 (11 ± 1), ut 29 / 33 / 37 (33 ± 4);
    test: tlb 50 / 50 / 50 (50 ± 0), transformer 70 / 70 / 70 (70 ± 0), ut 60 (one seed)."""
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "t.yaml").write_text(CLAIMS_TABLE)
    per_seed = {"tlb": ([0.50] * 3, [0.30, 0.32, 0.34]), "transformer": ([0.70] * 3, [0.10, 0.11, 0.12]),
                "ut": ([0.60], [0.29, 0.33, 0.37])}
    for model, (test, far) in per_seed.items():
        for seed in range(3):
            metrics = {"len500_600": far[seed], **({"test": test[seed]} if seed < len(test) else {})}
            write_record(tmp_path, model, "listops", seed, metrics)
    return tmp_path


def judged(folder):
    from bench.report.checks import run_claims

    table = load_table("t", folder=folder / "tables")
    result = build(table, folder, "paper")
    return {r[0]: r for r in run_claims(table, result["values"], at_chance=result["at_chance"])["rows"]}


def test_claims_hold_fail_or_stay_inconclusive_by_the_spread_rule(claim_runs):
    rows = judged(claim_runs)
    # d = 32 - 11 = +21 > max(2, 1) = 2: holds; the paper (30.5 ± 1.1 vs 10.4 ± 0.71) agrees
    assert rows["TLB beats the Transformer on 500-600"][2:] == [
        "holds", "tlb 32.0 ± 2.0 (3) vs transformer 11.0 ± 1.0 (3) on len500_600: Δ +21.0 > 2.0", "holds"]
    # the reverse: d = -21 < -2
    assert rows["the Transformer beats TLB on 500-600"][2] == "does not hold"
    assert rows["the Transformer beats TLB on 500-600"][4] == "does not hold"
    # d = 33 - 32 = +1 <= max(4, 2) = 4: inconclusive; the paper: 10.3 vs 30.5 does not hold
    assert rows["UT beats TLB on 500-600"][2:] == [
        "inconclusive", "ut 33.0 ± 4.0 (3) vs tlb 32.0 ± 2.0 (3) on len500_600: |Δ| 1.0 ≤ 4.0", "does not hold"]
    # each of two: one pair holds, one is inconclusive (32 vs 33 ± 4) -> inconclusive
    each = rows["TLB beats each of Transformer and UT on 500-600"]
    assert each[2] == "inconclusive" and each[3].startswith("of 2 pairs 1 hold, 0 do not, 1 inconclusive; e.g. tlb 32.0")
    # one split holds (+21), the other does not (50 - 70 = -20 < -0): a counterexample decides
    two = rows["TLB beats the Transformer on 500-600 and near-IID"]
    assert two[2] == "does not hold" and "tlb 50.0 ± 0.0 (3) vs transformer 70.0 ± 0.0 (3) on test: Δ -20.0 < -0.0" in two[3]
    assert two[4] == "does not hold"  # the paper: 58.3 vs 73 near-IID


def test_a_claim_with_fewer_than_two_seeds_is_inconclusive(claim_runs):
    from bench.report.checks import judge

    assert judge([60.0], [50.0, 50.0]) == ("inconclusive", "n = 1 vs 2 (< 2 seeds)")
    assert judge([], [50.0, 50.0])[0] == "inconclusive"
    # lower is better (minutes): 2.1 ± 0.14 beats 3.1 ± 0.14
    assert judge([2.0, 2.2], [3.0, 3.2], lower_is_better=True, digits=2) == ("holds", "Δ +1.00 > 0.14")


def test_the_cli_prints_the_claims_and_writes_them(claim_runs, capsys, monkeypatch):
    import bench.report.reproduce as reproduce

    monkeypatch.setattr(reproduce, "load_table", lambda name, preset=None: load_table(name, preset, folder=claim_runs / "tables"))
    assert main(["reproduce", "t", "--out", str(claim_runs)]) == 0
    printed = capsys.readouterr().out
    assert printed_row(printed, "TLB beats the Transformer on 500-600")[2] == "holds"
    md = (claim_runs / "reproduce" / "t.md").read_text()
    assert "## The paper's claims" in md and printed_row(md, "UT beats TLB on 500-600")[2] == "inconclusive"
    rows = list(csv.DictReader((claim_runs / "reproduce" / "t--claims.csv").open()))
    assert [r["ours"] for r in rows] == ["holds", "does not hold", "inconclusive", "inconclusive", "does not hold"]


CHANCE_TABLE = """
title: "a logic-like table"
source: "test"
preset: paper
seeds: [0, 1, 2]
tasks: [listops]
splits: [test]
rows:
  - {model: transformer, paper: [[70, 1]]}
  - {model: ut, paper: [[60, 1]]}
  - {model: gut, paper: [[50, 1]]}
claims:
  - {text: "UT beats GUT", source: "both at chance", split: test, better: ut, than: gut}
  - {text: "the Transformer beats UT", source: "one above chance", split: test, better: transformer, than: ut}
"""


def chance_runs(folder, majority):
    """1,000 test examples, majority-class share 0.493 (``majority``; None: older records without
    it): SE = sqrt(0.493 x 0.507 / 1000) = 0.0158, 2 SE = 0.0316. Per-seed accuracies:
    gut .48 / .49 / .51 (49.3 ± 1.5, |Δ to 0.493| 0.0003: at chance), ut .50 / .52 / .53 (51.7 ± 1.5,
    0.0237: at chance), transformer .60 / .62 / .64 (62.0 ± 2.0, 0.127: well above)."""
    (folder / "tables").mkdir()
    (folder / "tables" / "t.yaml").write_text(CHANCE_TABLE)
    per_seed = {"gut": [0.48, 0.49, 0.51], "ut": [0.50, 0.52, 0.53], "transformer": [0.60, 0.62, 0.64]}
    for model, accs in per_seed.items():
        for seed, acc in enumerate(accs):
            write_record(folder, model, "listops", seed, {"test": acc}, n=1000, majority=majority)
    return folder


def test_at_chance_is_within_two_standard_errors_of_the_majority_share():
    from bench.report.cells import at_chance, majority_share

    assert at_chance(0.524, (0.493, 1000)) and not at_chance(0.525, (0.493, 1000))  # 2 SE = 0.0316
    assert at_chance(0.462, (0.493, 1000)) and not at_chance(0.461, (0.493, 1000))  # on either side
    recs = [{"metrics": {"test": {"n": 1000, "acc": 0.5, "majority": 0.49}}}, {"metrics": {"test": {"n": 998, "acc": 0.5, "majority": 0.51}}}]
    assert majority_share(recs, "test") == (pytest.approx(0.5), 998)  # the mean share, the smallest split
    assert majority_share([*recs, {"metrics": {"test": {"n": 1000, "acc": 0.5}}}], "test") is None  # one older record


def test_cells_at_chance_are_marked_and_their_claims_inconclusive(tmp_path):
    folder = chance_runs(tmp_path, majority=0.493)
    result = build(load_table("t", folder=folder / "tables"), folder, "paper")
    assert cell(result, "gut", "test")[0] == "49.3 ± 1.5 (3) ~"
    assert cell(result, "ut", "test")[0] == "51.7 ± 1.5 (3) ~"
    assert cell(result, "transformer", "test")[0] == "62.0 ± 2.0 (3)"  # well above chance: no mark
    assert result["at_chance"] == {("gut", "test"): pytest.approx(49.3), ("ut", "test"): pytest.approx(49.3)}
    assert result["chance"] == ("~ = at chance: the mean accuracy over seeds is within 2 standard errors of the split's "
                                "majority-class share p (SE = sqrt(p(1-p)/n), n = the split's examples)")
    rows = judged(folder)
    # Δ = 51.7 - 49.3 = +2.3 > max(1.5, 1.5) would hold; both cells are at chance: inconclusive
    assert rows["UT beats GUT"][2:4] == ["inconclusive", "ut 51.7 ± 1.5 (3) vs gut 49.3 ± 1.5 (3) on test: both at chance (majority 49.3%)"]
    # one cell above chance: the spread rule as before, 62.0 - 51.7 = +10.3 > 2.0
    assert rows["the Transformer beats UT"][2:4] == ["holds", "transformer 62.0 ± 2.0 (3) vs ut 51.7 ± 1.5 (3) on test: Δ +10.3 > 2.0"]


def test_records_without_a_majority_share_are_never_at_chance(tmp_path, capsys, monkeypatch):
    import bench.report.reproduce as reproduce

    folder = chance_runs(tmp_path, majority=None)
    result = build(load_table("t", folder=folder / "tables"), folder, "paper")
    assert cell(result, "gut", "test")[0] == "49.3 ± 1.5 (3)" and result["at_chance"] == {} and result["chance"] == ""
    assert judged(folder)["UT beats GUT"][2:4] == ["holds", "ut 51.7 ± 1.5 (3) vs gut 49.3 ± 1.5 (3) on test: Δ +2.3 > 1.5"]
    # the printed table and note: the mark explained once, only where a cell has it
    monkeypatch.setattr(reproduce, "load_table", lambda name, preset=None: load_table(name, preset, folder=folder / "tables"))
    assert main(["reproduce", "t", "--out", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert "~ = at chance" not in printed and "(3) ~" not in printed and "49.3 ± 1.5 (3)" in printed


def test_the_cli_explains_the_chance_mark_and_rule(tmp_path, capsys, monkeypatch):
    import bench.report.reproduce as reproduce

    folder = chance_runs(tmp_path, majority=0.493)
    monkeypatch.setattr(reproduce, "load_table", lambda name, preset=None: load_table(name, preset, folder=folder / "tables"))
    assert main(["reproduce", "t", "--out", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("~ = at chance: the mean accuracy over seeds is within 2 standard errors") == 1
    assert "a pair whose cells are both at chance (~) is inconclusive" in printed
    assert printed_row(printed, "UT beats GUT")[2] == "inconclusive"
    md = (folder / "reproduce" / "t.md").read_text()
    assert "~ = at chance" in md and "49.3 ± 1.5 (3) ~" in md


def test_claims_name_splits_of_another_preset_by_position():
    """halt-table3's claims name the paper's splits; at the small preset T1024_p98 is T256_p98."""
    small = load_table("halt-table3", "small")
    tlb_fr = next(c for c in small.claims if "fixed recurrence" in c.text)
    assert [(p.better, p.than) for p in tlb_fr.comparisons] == [
        (("tlb", "T256_p8"), ("tlb-fr", "T256_p8")), (("tlb", "T256_p98"), ("tlb-fr", "T256_p98"))]
    assert load_table("halt-table3-median").claims == []  # judged once, in halt-table3


@pytest.mark.parametrize("claim, message", [
    ('{text: x, source: y, better: lstm, than: tlb, split: test}', "'lstm' is not a row of the table"),
    ('{text: x, source: y, better: tlb, than: ut, split: len7}', "'len7' is not a column of the table"),
    ('{text: x, source: y, better: tlb, than: ut}', "needs at least one model and one split"),
    ('{text: x, source: y, better: tlb, than: ut, split: test, typo: 1}', "a claim is {text, source, better, than}"),
    ('{text: x, source: y, better: {model: tlb, splits: [test, len500_600]}, than: {model: ut, splits: [test, test, test]}}',
     "better has 2 splits and than 3"),
    ('{text: x, source: y, better: tlb, than: tlb, split: test}', "compares nothing"),
])
def test_malformed_claims_are_one_line_errors(tmp_path, claim, message):
    (tmp_path / "t.yaml").write_text(CLAIMS_TABLE.split("claims:")[0] + f"claims:\n  - {claim}\n")
    with pytest.raises(UserError, match=message.replace("{", r"\{").replace("}", r"\}").replace("[", r"\[")):
        load_table("t", folder=tmp_path)
