"""bench reproduce: the paper's claims judged over a table's cells (holds / does not hold /
inconclusive by bench/report/stats.py's tests; cells at chance), beside fake run records (no training)."""

import csv
import dataclasses

import numpy as np
import pytest
from test_reproduce import cell, printed_row, write_record

from bench.cli import main
from bench.errors import UserError
from bench.report.reproduce import build, load_table

CLAIMS_TABLE = """
title: "a ListOps table"
source: "test"
preset: paper
seeds: [0, 1, 2]
paper_seeds: 3
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
    per_seed = {
        "tlb": ([0.50] * 3, [0.30, 0.32, 0.34]),
        "transformer": ([0.70] * 3, [0.10, 0.11, 0.12]),
        "ut": ([0.60], [0.29, 0.33, 0.37]),
    }
    for model, (test, far) in per_seed.items():
        for seed in range(3):
            metrics = {"len500_600": far[seed], **({"test": test[seed]} if seed < len(test) else {})}
            write_record(tmp_path, model, "listops", seed, metrics)
    return tmp_path


def judged(folder):
    from bench.report.claims import run_claims

    table = load_table("t", folder=folder / "tables")
    result = build(table, folder, "paper")
    return {
        r[0]: r
        for r in run_claims(table, result["values"], at_chance=result["at_chance"], outcomes=result["outcomes"], learned=result["learned"])[
            "rows"
        ]
    }


def test_claims_hold_fail_or_stay_inconclusive_by_the_tests(claim_runs):
    rows = judged(claim_runs)
    # Welch: Δ = 32 - 11 = +21, se^2 = 4/3 + 1/3, df = 50/17, t = 16.3: p = 0.0003;
    # 90% CI (each end the one-sided 95% bound): 21 ± t_0.95(50/17) se = ± 2.373 x 1.291 = ± 3.06;
    # cells: mean ± t_0.975(2) sd / sqrt(3) = ± 4.303 x 2 / 1.732 = ± 5.0 and ± 2.5
    assert rows["TLB beats the Transformer on 500-600"][2:5] == [
        "holds",
        (
            "tlb 32.0 ± 5.0 (3) vs transformer 11.0 ± 2.5 (3) on len500_600: Δ +21.0 [90% CI +17.9, +24.1], p < 0.001, "
            "n 3 vs 3 seeds, Welch t"
        ),
        "holds",
    ]  # the paper (30.5 ± 1.1 vs 10.4 ± 0.71, 3 runs) agrees
    # the reverse: significant the other way
    assert rows["the Transformer beats TLB on 500-600"][2] == "does not hold"
    assert "reverse p (Holm) < 0.001" in rows["the Transformer beats TLB on 500-600"][3]
    assert rows["the Transformer beats TLB on 500-600"][4] == "does not hold"
    # Δ = 33 - 32 = +1, se^2 = 16/3 + 4/3: t = 0.39, p = 0.36: inconclusive; the paper: 10.3 vs 30.5 does not hold
    ut = rows["UT beats TLB on 500-600"]
    assert ut[2] == "inconclusive" and ut[4] == "does not hold"
    assert ut[3].startswith("ut 33.0 ± 9.9 (3) vs tlb 32.0 ± 5.0 (3) on len500_600: Δ +1.0 [90% CI") and "p = 0.36" in ut[3]
    # each of two: one pair holds, one is inconclusive (32 vs 33) -> inconclusive, the weak pair named
    each = rows["TLB beats each of Transformer and UT on 500-600"]
    assert each[2] == "inconclusive"
    assert each[3].startswith("of 2 pairs 1 hold, 0 do not, 1 inconclusive; weakest: tlb 32.0 ± 5.0 (3) vs ut 33.0 ± 9.9 (3)")
    # one split holds (+21), on the other 50 < 70 on every seed (no spread): a counterexample decides
    two = rows["TLB beats the Transformer on 500-600 and near-IID"]
    assert (
        two[2] == "does not hold"
        and (
            "tlb 50.0 ± 0.0 (3) vs transformer 70.0 ± 0.0 (3) on test: Δ -20.0 [90% CI -20.0, -20.0], "
            "reverse p (Holm) < 0.001, n 3 vs 3 seeds, Welch t"
        )
        in two[3]
    )
    assert two[4] == "does not hold"  # the paper: 58.3 vs 73 near-IID


def test_a_pair_with_fewer_than_two_seeds_has_no_test(claim_runs):
    from bench.report.claims import run_claims

    table = load_table("t", folder=claim_runs / "tables")
    values = {("tlb", "len500_600"): ([60.0], False), ("transformer", "len500_600"): ([50.0, 50.0], False)}
    first = run_claims(table, values)["rows"][0]
    assert first[2:4] == [
        "inconclusive (provisional)",  # the table plans 3 seeds a cell
        "provisional: 1-2 of 3 seeds; tlb 60.0 (1) vs transformer 50.0 ± 0.0 (2) on len500_600: n = 1 vs 2 (< 2 seeds a side): no test",
    ]


def test_a_verdict_on_fewer_seeds_than_the_table_plans_is_provisional(claim_runs):
    """The table plans seeds 0, 1, 2: a verdict judged on two of them says so in the table, in the
    rule and in the claims CSV's own column (whose ``ours`` stays the bare verdict)."""
    from bench.report.claims import run_claims

    table = load_table("t", folder=claim_runs / "tables")
    two = {("tlb", "len500_600"): ([30.0, 34.0], False), ("transformer", "len500_600"): ([10.0, 12.0], False)}
    judged = run_claims(table, two)
    row, line = judged["rows"][0], judged["csv"][0]
    # Welch: Δ = 32 - 11 = +21, se^2 = 8/2 + 2/2 = 5, t = 9.39 on df = 25/17: holds on the two seeds present
    # four claims judged on that one pair (the others' pairs name cells not given), three of them at the same p = 0.0137
    # and the reverse at 0.986: Holm over the table makes the smallest 4 x 0.0137 = 0.055 (and the next ones no smaller),
    # so the claim holds before that adjustment only, and says so
    assert row[2] == "holds (unadjusted only) (provisional)" and row[3].startswith("provisional: 2 of 3 seeds; tlb 32.0 ± ")
    assert line["ours"] == "holds" and line["provisional"] == "2 of 3 seeds"
    assert len(judged["csv"]) == 4 and line["p"] == pytest.approx(0.0137, abs=5e-5)
    assert line["p_table_holm"] == pytest.approx(4 * line["p"]) and line["holds_unadjusted_only"]
    assert row[5] == f"{4 * line['p']:.3f}" and "Holm's step-down method over the table's 4 claims" in judged["rule"]
    assert "provisional = some cell the claim compares has fewer seeds than the table plans (3)" in judged["rule"]
    three = {("tlb", "len500_600"): ([30.0, 32.0, 34.0], False), ("transformer", "len500_600"): ([10.0, 11.0, 12.0], False)}
    complete = run_claims(table, three)
    assert complete["rows"][0][2] == "holds" and complete["csv"][0]["provisional"] == ""
    assert "provisional" not in complete["rule"]


def test_the_paper_without_its_number_of_runs_or_spread_gets_no_test(claim_runs):
    from bench.report.claims import run_claims

    table = load_table("t", folder=claim_runs / "tables")
    values = {("tlb", "len500_600"): ([30.0, 32.0, 34.0], False), ("transformer", "len500_600"): ([10.0, 11.0, 12.0], False)}
    table.paper_seeds = None
    assert run_claims(table, values)["rows"][0][4] == "the paper's number of runs is not given (paper_seeds)"
    table.paper_seeds = 3
    table.rows = [dataclasses.replace(r, paper=tuple(None if p is None else (p[0], None) for p in r.paper)) for r in table.rows]
    assert run_claims(table, values)["rows"][0][4] == "no spread printed"


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
    assert rows[0]["p"] and float(rows[0]["effect"]) == pytest.approx(21.0) and rows[0]["n"] == "3 vs 3" and rows[0]["test"] == "Welch t"


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


def test_at_chance_is_below_the_level_plus_the_practical_margin():
    """margin = max(2 SE, 0.1 x (1 - p)): at p 0.493, n 1000, 2 SE = 0.0316 < 0.1 x 0.507 = 0.0507."""
    from bench.report.cells import at_chance, chance_level, margin

    assert margin((0.493, 1000)) == pytest.approx(0.0507)
    assert at_chance(0.5436, (0.493, 1000)) and not at_chance(0.5438, (0.493, 1000))
    assert at_chance(0.30, (0.493, 1000))  # below the level is at chance: no trivial strategy beaten
    # near the ceiling the standard errors set it: p 0.99, n 100: 2 SE = 2 x 0.00995 = 0.0199 > 0.001
    assert margin((0.99, 100)) == pytest.approx(0.0199, abs=1e-4)
    recs = [
        {"metrics": {"test": {"n": 1000, "acc": 0.5, "majority": 0.49}}},
        {"metrics": {"test": {"n": 998, "acc": 0.5, "majority": 0.51}}},
    ]
    # records made before the best strategy was kept: the majority guess's level, the smallest split
    assert chance_level(recs, "test") == (pytest.approx(0.5), 998, "most frequent target")
    assert chance_level([*recs, {"metrics": {"test": {"n": 1000, "acc": 0.5}}}], "test") is None  # one older record


def test_the_chance_level_is_the_best_trivial_strategy_a_record_keeps():
    """A split's ``chance`` (bench/tasks/trivial.py) wins over its majority shares; a
    length-averaged metric reads the split's own length_avg entry (one strategy over the bins),
    else averages the bins' levels."""
    from bench.report.cells import chance_level

    split = {
        "n": 96,
        "token_acc": 0.3,
        "token_majority": 0.01,
        "chance": {
            "token_acc": {"level": 0.125, "strategy": "guess a value of the context"},
            "length_avg_token_acc": {"level": 0.2, "strategy": "repeat the previous token"},
        },
        "by_length": {"L1": {"n": 32, "chance": {"token_acc": 0.1}}, "L2": {"n": 64, "chance": {"token_acc": 0.4}}},
    }
    recs = [{"metrics": {"ood": split}}]
    assert chance_level(recs, "ood", "token_acc") == (0.125, 96, "guess a value of the context")
    assert chance_level(recs, "ood", "length_avg_token_acc") == (0.2, 96, "repeat the previous token")
    without = {**split, "chance": {"token_acc": split["chance"]["token_acc"]}}
    assert chance_level([{"metrics": {"ood": without}}], "ood", "length_avg_token_acc") == (pytest.approx(0.25), 96, "best per length bin")
    assert chance_level(recs, "ood", "acc") is None  # no level kept for acc, no majority share


def test_token_accuracies_are_at_chance_near_the_majority_token_share():
    """Records made before ``chance``: token_acc reads ``token_majority``; the length-averaged
    token accuracy averages its bins' values over all the bins' examples."""
    from bench.report.cells import at_chance, chance_level

    split = {
        "n": 96,
        "token_acc": 0.3,
        "token_majority": 0.25,
        "by_length": {"L1": {"n": 32, "token_majority": 0.2}, "L2": {"n": 64, "token_majority": 0.3}},
    }
    recs = [{"metrics": {"ood": split}}]
    assert chance_level(recs, "ood", "token_acc") == (0.25, 96, "most frequent target")
    assert chance_level(recs, "ood", "length_avg_token_acc")[:2] == (pytest.approx(0.25), 96)  # (0.2 + 0.3) / 2, 32 + 64
    assert chance_level(recs, "ood", "acc") is None  # no class labels: no majority-class share
    assert chance_level(recs, "ood", "last_acc") is None  # no chance level recorded
    # last-read accuracy (flip-flop): the last target's majority share; length-averaged: its bins' shares averaged
    flip = {
        "n": 96,
        "last_acc": 0.5,
        "last_majority": 0.52,
        "by_length": {"T128": {"n": 48, "last_majority": 0.5}, "T256": {"n": 48, "last_majority": 0.6}},
    }
    assert chance_level([{"metrics": {"val": flip}}], "val", "last_acc") == (0.52, 96, "most frequent last target")
    assert chance_level([{"metrics": {"val": flip}}], "val", "length_avg_last_acc")[:2] == (pytest.approx(0.55), 96)
    # a classification record's last_acc is its acc: its chance level is the majority-class share
    assert chance_level([{"metrics": {"test": {"n": 10, "acc": 0.5, "majority": 0.6}}}], "test", "last_acc")[:2] == (0.6, 10)
    older = {"metrics": {"ood": {"n": 96, "token_acc": 0.3, "by_length": {"L1": {"n": 96}}}}}
    assert chance_level([*recs, older], "ood", "token_acc") is None
    assert chance_level([*recs, older], "ood", "length_avg_token_acc") is None
    # 2 SE at p 0.25, n 96 = 0.0884 > 0.1 x 0.75
    assert at_chance(0.338, (0.25, 96)) and not at_chance(0.339, (0.25, 96))


def test_cells_at_chance_are_marked_and_their_claims_inconclusive(tmp_path):
    folder = chance_runs(tmp_path, majority=0.493)
    result = build(load_table("t", folder=folder / "tables"), folder, "paper")
    # sd 1.53 -> ± 4.303 x 1.53 / sqrt(3) = ± 3.8; se = sqrt(p(1-p)/1000) = 1.6 at 49%, 1.5 at 62%
    # margin: 0.1 x (1 - 0.493) = 5.07 points (> 2 SE): a seed learned at >= 54.37%
    assert cell(result, "gut", "test")[0] == "49.3 ± 3.8 (3, 0 learned, se 1.6) ~"
    assert cell(result, "ut", "test")[0] == "51.7 ± 3.8 (3, 0 learned, se 1.6) ~"  # .53 is 3.7 points above: within the margin
    assert cell(result, "transformer", "test")[0] == "62.0 ± 5.0 (3, 3 learned, se 1.5)"  # well above chance: no mark
    assert {k: v[0] for k, v in result["at_chance"].items()} == {("gut", "test"): pytest.approx(49.3), ("ut", "test"): pytest.approx(49.3)}
    assert result["chance"].startswith(
        "~ = at chance: the mean over seeds does not clear the chance level p by the margin, max(2 SE, 0.1 x (1 - p))"
    )
    rows = judged(folder)
    # both cells at chance: no test, inconclusive
    assert rows["UT beats GUT"][2:4] == [
        "inconclusive",
        "ut 51.7 ± 3.8 (3) vs gut 49.3 ± 3.8 (3) on test: both at chance (chance 49.3%: most frequent target): no test",
    ]
    # one cell above chance: tested, 62.0 - 51.7 = +10.3, t = 10.33 / sqrt(4/3 + 2.33/3) = 7.1 at 3.7 df
    held = rows["the Transformer beats UT"]
    assert held[2] == "holds" and held[3].startswith("transformer 62.0 ± 5.0 (3) vs ut 51.7 ± 3.8 (3) on test: Δ +10.3 [90% CI")
    # 0 of 3 seeds failed: the failure rate it leaves open is 1 - 0.05^(1/3) = 63%
    assert held[3].endswith(
        "; learned seeds differ: transformer 3 of 3 vs ut 0 of 3 on test; what its seeds leave open: "
        "transformer on test: 0 of 3 seeds failed: a failure rate up to 63% is not excluded (95%)"
    )
    assert result["learned"] == {("gut", "test"): (0, 3), ("ut", "test"): (0, 3), ("transformer", "test"): (3, 3)}
    # the chance row names the level and the strategy that sets it
    chance_row = [r for r in result["rows"] if r[0] == "chance (trivial strategy)"]
    assert chance_row == [["chance (trivial strategy)", "49.3 (most frequent target)", "", ""]]


def test_a_reliability_claim_is_fishers_exact_test_on_the_learned_seeds(tmp_path):
    """fails_less: the transformer's 3 of 3 learned against ut's 0 of 3: one-sided Fisher p =
    P(the transformer holds all 3 of the 3 learned | margins) = C(3,3) C(3,0) / C(6,3) = 1/20 = 0.05
    (not below 0.05: inconclusive); reverse p (ut learns more often) = 1."""
    from bench.report.claims import run_claims

    folder = chance_runs(tmp_path, majority=0.493)
    table = load_table("t", folder=folder / "tables")
    claim = dataclasses.replace(next(c for c in table.claims if c.text == "the Transformer beats UT"), text="fails less", fails_less=True)
    table.claims = [claim]
    result = build(table, folder, "paper")
    judged = run_claims(table, result["values"], at_chance=result["at_chance"], learned=result["learned"])
    line = judged["csv"][0]
    assert line["ours"] == "inconclusive" and line["p"] == pytest.approx(0.05) and line["test"] == "Fisher exact on learned seeds"
    assert "learned 3 of 3 vs 0 of 3 seeds, Δ +100.0 points, p = 0.050" in line["why"] and "Fisher's exact test" in judged["rule"]
    assert "learned seeds differ" not in line["why"]  # said once, by the test itself


def test_records_without_a_majority_share_are_never_at_chance(tmp_path, capsys, monkeypatch):
    import bench.report.reproduce as reproduce

    folder = chance_runs(tmp_path, majority=None)
    result = build(load_table("t", folder=folder / "tables"), folder, "paper")
    assert cell(result, "gut", "test")[0] == "49.3 ± 3.8 (3, se 1.6)" and result["at_chance"] == {} and result["chance"] == ""
    # tested: Δ +2.3, t = 2.33 / sqrt(2 x 2.33 / 3) = 1.87 at 4 df, p = 0.067 (the old spread rule said "holds")
    ut = judged(folder)["UT beats GUT"]
    assert ut[2] == "inconclusive" and "Δ +2.3 [90% CI" in ut[3] and "p = 0.067" in ut[3]
    # the printed table and note: the mark explained once, only where a cell has it
    monkeypatch.setattr(reproduce, "load_table", lambda name, preset=None: load_table(name, preset, folder=folder / "tables"))
    assert main(["reproduce", "t", "--out", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert "~ = at chance" not in printed and "~ |" not in printed and "49.3 ± 3.8 (3, se 1.6)" in printed


def test_the_cli_explains_the_chance_mark_and_rule(tmp_path, capsys, monkeypatch):
    import bench.report.reproduce as reproduce

    folder = chance_runs(tmp_path, majority=0.493)
    monkeypatch.setattr(reproduce, "load_table", lambda name, preset=None: load_table(name, preset, folder=folder / "tables"))
    assert main(["reproduce", "t", "--out", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("~ = at chance: the mean over seeds does not clear the chance level p by the margin") == 1
    assert "or whose cells are both at chance (~), has no test" in printed
    assert printed_row(printed, "UT beats GUT")[2] == "inconclusive"
    md = (folder / "reproduce" / "t.md").read_text()
    assert "~ = at chance" in md and "49.3 ± 3.8 (3, 0 learned, se 1.6) ~" in md


def test_claims_name_splits_of_another_preset_by_position():
    """halt-table3's claims name the paper's splits; at the small preset T1024_p98 is T256_p98."""
    small = load_table("halt-table3", "small")
    tlb_fr = next(c for c in small.claims if "fixed recurrence" in c.text)
    assert [(p.better, p.than) for p in tlb_fr.comparisons] == [
        (("tlb", "T256_p8"), ("tlb-fr", "T256_p8")),
        (("tlb", "T256_p98"), ("tlb-fr", "T256_p98")),
    ]
    assert load_table("halt-table3-median").claims == []  # judged once, in halt-table3


@pytest.mark.parametrize(
    "claim, message",
    [
        ("{text: x, source: y, better: lstm, than: tlb, split: test}", "'lstm' is not a row of the table"),
        ("{text: x, source: y, better: tlb, than: ut, split: len7}", "'len7' is not a column of the table"),
        ("{text: x, source: y, better: tlb, than: ut}", "needs at least one model and one split"),
        ("{text: x, source: y, better: tlb, than: ut, split: test, typo: 1}", "a claim is {text, source, better, than}"),
        (
            "{text: x, source: y, better: {model: tlb, splits: [test, len500_600]}, than: {model: ut, splits: [test, test, test]}}",
            "better has 2 splits and than 3",
        ),
        ("{text: x, source: y, better: tlb, than: tlb, split: test}", "compares nothing"),
    ],
)
def test_malformed_claims_are_one_line_errors(tmp_path, claim, message):
    (tmp_path / "t.yaml").write_text(CLAIMS_TABLE.split("claims:")[0] + f"claims:\n  - {claim}\n")
    with pytest.raises(UserError, match=message.replace("{", r"\{").replace("}", r"\}").replace("[", r"\[")):
        load_table("t", folder=tmp_path)


def test_a_record_check_is_a_welch_test_not_a_comparison_of_means(tmp_path, registry):
    """nope-properties' "NoPE >= Transformer on D2 bin 1": holds only when the difference is
    significant over seeds; a higher mean inside the noise is inconclusive."""
    from bench.report.checks import run_checks

    def judged_with(nope, transformer):
        for model, accs in (("nope", nope), ("transformer", transformer)):
            for seed, acc in enumerate(accs):
                write_record(tmp_path, model, "d2", seed, {"bin1": acc})
        row = run_checks(load_table("nope-properties"), tmp_path, "paper", registry)["rows"][8]
        return row[3], row[4]

    # Δ = 50.3 - 12 = +38.3 points, sds 0.25 and 7: t = 9.5 at ~2 df, p = 0.005
    measured, status = judged_with([0.500, 0.503, 0.505], [0.05, 0.12, 0.19])
    assert status == "holds" and "Δ +38.3 [90% CI" in measured and "n 3 vs 3 seeds, Welch t" in measured
    # a mean 3 points higher with a spread of 20: no evidence either way
    measured, status = judged_with([0.10, 0.30, 0.50], [0.20, 0.27, 0.34])
    assert status == "inconclusive" and "Δ +3.0" in measured


def test_cells_with_per_example_outcomes_are_compared_paired(tmp_path, monkeypatch):
    """Where every record of both cells has per-example outcomes (bench.metrics.load_outcomes), the pair
    is tested by the paired t test on the examples both were scored on."""
    import json

    import numpy as np

    from bench.records import outcomes_file, record_path

    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "t.yaml").write_text(CLAIMS_TABLE)
    rng = np.random.default_rng(0)
    examples = {"tlb": 0.32, "transformer": 0.11}  # the share of the 200 examples each gets right
    outcomes = {}
    for model, share in examples.items():
        for seed in range(3):
            correct = (rng.random(200) < share).astype(float)
            write_record(tmp_path, model, "listops", seed, {"len500_600": float(correct.mean())}, n=200, outcomes="x")
            kept = outcomes_file(record_path(tmp_path, model, "listops", "paper", seed, []))
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(b"")  # served by the stand-in loader below
            outcomes[model, seed] = {
                "len500_600": {"index": np.arange(200), "correct": correct, "token_correct": correct, "tokens": np.ones(200, dtype=int)}
            }

    def load_outcomes(path):
        rec = json.loads(open(path).read())
        return outcomes[rec["model"], rec["seed"]]

    with monkeypatch.context() as patch:
        patch.setattr("bench.metrics.load_outcomes", load_outcomes)
        line = judged(tmp_path)["TLB beats the Transformer on 500-600"]
    assert line[2].startswith("holds") and line[3].endswith("n 3 vs 3 seeds, paired t (seeds + examples)")
    # outcomes that cannot be read (the files are empty): Welch's test on the seed means
    assert judged(tmp_path)["TLB beats the Transformer on 500-600"][3].endswith("Welch t")
    # the records name outcome files that are not there: the cells are marked and the pair has no test
    for seed in range(3):
        outcomes_file(record_path(tmp_path, "tlb", "listops", "paper", seed, [])).unlink()
    line = judged(tmp_path)["TLB beats the Transformer on 500-600"]
    assert line[2] == "inconclusive" and line[3].endswith("outcomes files missing: tlb on len500_600 (seeds 0,1,2): no test")


def test_learned_seeds_differ_by_share_not_by_count():
    """The verdict line names a pair whose cells learned on different shares of their seeds: 4 of 4 against 3 of 3
    (a seed not trained yet) and 0 of 3 against 0 of 4 are the same share and not named; 5 of 5 against 4 of 5 and
    4 of 5 against 3 of 4 are named."""
    from collections import namedtuple

    from bench.report.claims import _learned_differ

    Pair = namedtuple("Pair", "better than")
    a, b = ("A", "c"), ("B", "c")
    said = {}
    for counts in [((4, 4), (3, 3)), ((0, 3), (0, 4)), ((5, 5), (4, 5)), ((4, 5), (3, 4))]:
        said[counts] = _learned_differ([Pair(a, b)], {a: counts[0], b: counts[1]})
    assert said[((4, 4), (3, 3))] == said[((0, 3), (0, 4))] == ""
    assert said[((5, 5), (4, 5))] == "learned seeds differ: A 5 of 5 vs B 4 of 5 on c"
    assert said[((4, 5), (3, 4))] == "learned seeds differ: A 4 of 5 vs B 3 of 4 on c"


def test_every_metric_has_per_example_scores_whose_mean_is_the_metric():
    """bench/report/cells.py: example_scores, by hand: 4 examples (two of length 2, two of length 5),
    scored positions 1, 3, 2, 2 of which 1, 2, 0, 2 right; last scored position right 1, 0, 0, 1."""
    from bench.report.cells import example_scores

    arrays = {
        "index": np.arange(4),
        "correct": np.array([1, 0, 0, 1]),
        "token_correct": np.array([1, 2, 0, 2]),
        "tokens": np.array([1, 3, 2, 2]),
        "length": np.array([2, 2, 5, 5]),
        "last_correct": np.array([1, 0, 0, 1]),
    }
    scores, unit = example_scores(arrays, "acc")
    assert scores.tolist() == [1, 0, 0, 1] and unit == 1.0
    scores, unit = example_scores(arrays, "token_acc")  # 5 of 8 positions; unit 4 / 8
    assert scores.tolist() == [1, 2, 0, 2] and unit == 0.5 and unit * scores.mean() == 5 / 8
    assert example_scores(arrays, "last_acc")[0].tolist() == [1, 0, 0, 1]
    bins = ["1-2", "1-2", "3-5", "3-5"]
    # per bin: token_acc 3/4 and 2/4, averaged 0.625; acc 1/2 and 1/2
    scores, unit = example_scores(arrays, "length_avg_token_acc", bins)
    assert scores.mean() * unit == pytest.approx((3 / 4 + 2 / 4) / 2)
    assert example_scores(arrays, "length_avg_acc", bins)[0].mean() == pytest.approx(0.5)
    # without last_correct (outcomes kept before it was): only where every example has one scored target
    older = {k: v for k, v in arrays.items() if k != "last_correct"}
    assert example_scores(older, "last_acc") is None
    assert example_scores({**older, "tokens": np.ones(4, dtype=int)}, "last_acc")[0].tolist() == [1, 0, 0, 1]
    assert example_scores(older, "length_avg_acc") is None  # no bins given


def test_cells_pair_only_on_the_same_data_and_unit():
    """Two cells of different splits share example indices but not examples: never paired."""
    from bench.report.claims import paired_scores

    seeds = [{"index": np.arange(3), "score": np.array([1, 0, 1])}] * 2
    a = {"seeds": seeds, "unit": 1.0, "data": "mqar 8 pairs"}
    assert paired_scores(a, dict(a))[0] == 1.0
    assert paired_scores(a, {**a, "data": "mqar 16 pairs"}) is None
    assert paired_scores(a, {**a, "unit": 0.5}) is None
    assert paired_scores(a, None) is None
