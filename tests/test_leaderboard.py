"""Leaderboard cells against hand-computed means, sample standard deviations and medians."""

import math

import pytest

from bench.report.cells import CHANCE
from bench.report.leaderboard import MISSING, cell_percent, chance_note, mean_std_percent, median_percent, table, write_tables


def test_mean_and_sample_std_in_percent():
    # mean 0.7; deviations 0.2, 0.1, -0.3; sample variance (0.04 + 0.01 + 0.09) / 2 = 0.07; std 0.26458
    assert mean_std_percent([0.9, 0.8, 0.4]) == "70.0 ± 26.5"
    # mean 0.55; deviations -0.35, 0.45, -0.15, 0.05; variance 0.35 / 3; std 0.34157
    assert mean_std_percent([0.2, 1.0, 0.4, 0.6]) == "55.0 ± 34.2"
    assert mean_std_percent([0.5, 0.5]) == "50.0 ± 0.0"
    assert mean_std_percent([0.123]) == "12.3"  # one seed: no spread to report
    assert mean_std_percent([None, 0.9, math.nan, 0.8]) == "85.0 ± 7.1"  # missing values are skipped
    assert mean_std_percent([]) == mean_std_percent([None, math.nan]) == MISSING


def test_median_in_percent():
    assert median_percent([0.9, 0.8, 0.4]) == "80.0"  # odd count: the middle value
    assert median_percent([0.2, 1.0, 0.4, 0.6]) == "50.0"  # even count: (0.4 + 0.6) / 2
    assert median_percent([0.3]) == "30.0"
    assert median_percent([math.nan, 0.1, None, 0.7, 0.2]) == "20.0"
    assert median_percent([None]) == MISSING


def test_cell_stat_choice():
    vals = [0.9, 0.8, 0.4]
    assert cell_percent(vals) == cell_percent(vals, "mean") == "70.0 ± 26.5"
    assert cell_percent(vals, "median") == "80.0"
    assert cell_percent(vals, "both") == "70.0 ± 26.5 (med 80.0)"
    assert cell_percent([], "both") == MISSING
    with pytest.raises(ValueError, match="mean, median, both"):
        cell_percent(vals, "mode")


def record(token_acc=None, last_acc=None, status="ok"):
    metrics = {"val": {"token_acc": 1.0}, "T512": {}}
    if token_acc is not None:
        metrics["T512"]["token_acc"] = token_acc
    if last_acc is not None:
        metrics["T512"]["last_acc"] = last_acc
    return {"status": status, "metrics": metrics, "test_splits": ["T512"], "report_metrics": ["token_acc", "last_acc"]}


RECORDS = {
    ("a", "flipflop"): [record(0.9, 1.0), record(0.8, 1.0), record(0.4, 0.0)],
    ("b", "flipflop"): [record(0.5), record(status="failed")],
    ("c", "flipflop"): [record(status="failed")],
}


def test_table_rows_are_models_and_columns_split_metrics():
    headers, rows = table(RECORDS, ["a", "b", "c", "d"], ["flipflop"])
    assert headers == ["model", "flipflop:T512 token_acc ↑", "flipflop:T512 last_acc ↑"]
    # last_acc of a: mean 2/3; deviations 1/3, 1/3, -2/3; variance (2/3) / 2; std 0.57735
    assert rows == [
        ["a", "70.0 ± 26.5", "66.7 ± 57.7"],
        ["b", "50.0 (FAIL 1/2)", f"{MISSING} (FAIL 1/2)"],
        ["c", "FAIL", "FAIL"],
        ["d", MISSING, MISSING],
    ]


def test_table_with_medians():
    _, rows = table(RECORDS, ["a", "b"], ["flipflop"], stat="median")
    assert rows == [["a", "80.0", "100.0"], ["b", "50.0 (FAIL 1/2)", f"{MISSING} (FAIL 1/2)"]]
    _, rows = table(RECORDS, ["a"], ["flipflop"], stat="both")
    assert rows == [["a", "70.0 ± 26.5 (med 80.0)", "66.7 ± 57.7 (med 100.0)"]]
    with pytest.raises(ValueError):
        table(RECORDS, ["a"], ["flipflop"], stat="max")


def test_written_tables_say_which_statistic(tmp_path):
    headers, rows = table(RECORDS, ["a"], ["flipflop"], stat="median")
    md, csv_path = write_tables(tmp_path, "smoke", ["a"], ["flipflop"], headers, rows, "seeds per cell: 3", stat="median")
    assert md.name.endswith("--median.md") and csv_path.name.endswith("--median.csv")
    assert "Cells: median over seeds, in %" in md.read_text()
    assert csv_path.read_text().splitlines()[1] == "a,80.0,100.0"
    mean_md, _ = write_tables(tmp_path, "smoke", ["a"], ["flipflop"], *table(RECORDS, ["a"], ["flipflop"]), "n")
    assert mean_md != md and "Cells: mean ± std over seeds" in mean_md.read_text()


def _scored(acc: float) -> dict:
    """A finished record of a classification task whose test split's chance level is 50% of 100 examples."""
    test = {"acc": acc, "n": 100, "chance": {"acc": {"level": 0.5, "strategy": "most frequent target"}}}
    return {"status": "ok", "metrics": {"val": {"acc": acc}, "test": test}, "test_splits": ["test"], "report_metrics": ["acc"]}


def test_cells_at_their_chance_level_are_marked_and_nothing_learned_is_said():
    # margin at p = 0.5, n = 100: max(2 sqrt(0.25 / 100), 0.1 x 0.5) = 0.1, so a mean below 60% is at chance
    records = {("a", "t"): [_scored(0.55), _scored(0.57)], ("b", "t"): [_scored(0.95), _scored(0.97)]}
    _, rows = table(records, ["a", "b"], ["t"])
    assert rows[0][1].endswith(f" {CHANCE}") and not rows[1][1].endswith(CHANCE)
    note = chance_note(records, ["a", "b"], ["t"])
    assert note.startswith(f"{CHANCE} = at chance") and "nothing learned" not in note
    records[("b", "t")] = [_scored(0.59), _scored(0.59)]  # 59% < 60%: at chance too
    _, rows = table(records, ["a", "b"], ["t"])
    assert all(row[1].endswith(f" {CHANCE}") for row in rows)
    assert chance_note(records, ["a", "b"], ["t"]).startswith("nothing learned: every cell is at its chance level")
    assert chance_note({("b", "t"): [_scored(0.95)]}, ["b"], ["t"]) == ""
