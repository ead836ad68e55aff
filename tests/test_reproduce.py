"""bench reproduce: paper tables from tables/*.yaml beside fake run records (no training)."""
import csv
from pathlib import Path

import pytest

from bench.cli import main
from bench.errors import UserError
from bench.records import base_record, record_path, write_json_atomic
from bench.report.reproduce import MISSING, build, check_names, load_table, table_names


def write_record(out, model, task, seed, metrics, preset="paper", overrides=None, status="ok", n=10, majority=None, **extra):
    """A record as `bench run` writes it, with only the fields reports read filled in (``majority``:
    every test split's majority-class share, as classification records carry it)."""
    rec = base_record(model, task, preset, seed, overrides or [])
    splits = list(metrics)
    share = {} if majority is None else {"majority": majority}
    rec.update(status=status, primary_metric="acc", report_metrics=["acc"], test_splits=splits,
               metrics={"val": {"n": 10, "acc": 0.5}, **{s: {"n": n, "acc": v, **share} for s, v in metrics.items()}}, **extra)
    write_json_atomic(record_path(out, model, task, preset, seed, overrides), rec)


def cell(result, row, column):
    """The (ours, paper, Δ) texts of one cell of a built table (wide, or long: task, row, splits)."""
    if result["headers"][0] == "task":
        task, split = column.split(":")
        line = next(r for r in result["rows"] if r[:2] == [task, row])
        i = result["headers"].index(f"{split} ours")
    else:
        line = next(r for r in result["rows"] if r[0] == row)
        i = result["headers"].index(f"{column} ours")
    return tuple(line[i:i + 3])


def printed_row(text, *labels):
    """The stripped cells of a github-format table's row whose first cells are ``labels``."""
    rows = ([c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| "))
    return next(r for r in rows if r[:len(labels)] == list(labels))


@pytest.fixture
def runs(tmp_path):
    # transformer on parity, seeds 0-2: bin0 0.2 / 0.3 / 0.4 (mean 30, sample std 10);
    # bin1 0.0 / 0.05 / 0.1 (mean 5, std 5). [RSA Table 2] prints .29 / 0 for it.
    for seed, (b0, b1) in enumerate([(0.2, 0.0), (0.3, 0.05), (0.4, 0.1)]):
        write_record(tmp_path, "transformer", "parity", seed, {"bin0": b0, "bin1": b1})
    write_record(tmp_path, "transformer", "parity", 3, {"bin0": 1.0, "bin1": 1.0})  # not a seed of the table
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 1.0, "bin1": 1.0}, overrides=["train.lr=0.1"])  # other runs
    write_record(tmp_path, "rsa-transformer-I", "tomita5", 0, {"bin0": 0.9, "bin1": 0.5}, status="failed")
    return tmp_path


def test_ours_beside_the_paper_with_the_difference(runs):
    result = build(load_table("rsa-table2"), runs, "paper")
    assert cell(result, "transformer", "parity:bin0") == ("30.0 ± 10.0 (3)", "29", "+1.0")
    assert cell(result, "transformer", "parity:bin1") == ("5.0 ± 5.0 (3)", "0", "+5.0")
    assert cell(result, "rsa-transformer-I", "parity:bin1") == (MISSING, "67", MISSING)  # no record: never 0
    assert cell(result, "transformer-star", "d2:bin0") == (MISSING, "87", MISSING)
    assert cell(result, "rsa-transformer-I", "tomita5:bin0") == ("FAIL", "63", MISSING)
    assert result["present"] == 3 and result["expected"] == 6 * 6 * 3  # runs: rows x tasks x seeds; a failed run is not present
    parity0 = next(c for c in result["cells"] if c["row"] == "transformer" and c["column"] == "parity:bin0")
    assert parity0["ours"] == pytest.approx(30.0) and parity0["ours_std"] == pytest.approx(10.0)
    assert parity0["paper"] == pytest.approx(29.0) and parity0["delta"] == pytest.approx(1.0) and parity0["n"] == 3


def test_records_made_with_settings_the_registry_no_longer_gives_are_marked(tmp_path, registry):
    from bench.report.reproduce import current_config

    now = current_config(registry, "transformer", "parity", "paper", [])
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.5, "bin1": 0.0}, config=now)  # as the preset gives today
    old = {**now, "model": {**now["model"], "params": {**now["model"]["params"], "d_model": 999}}}
    write_record(tmp_path, "transformer", "tomita3", 0, {"bin0": 0.5, "bin1": 0.0}, config=old)
    result = build(load_table("rsa-table2"), tmp_path, "paper", registry)
    assert cell(result, "transformer", "parity:bin0")[0] == "50.0 (1)"
    assert cell(result, "transformer", "tomita3:bin0")[0] == "50.0 (1) †"
    assert f"(1 of 36 (model, task) cells; model.d_model 999 -> {now['model']['params']['d_model']})" in result["stale"]
    assert result["present"] == 1  # a stale record is shown, not counted as present


def test_a_cell_with_current_records_leaves_its_stale_ones_out(tmp_path, registry):
    from bench.report.reproduce import current_config

    now = current_config(registry, "transformer", "parity", "paper", [])
    old = {**now, "model": {**now["model"], "params": {**now["model"]["params"], "pos_encoding": "xpos"}}}
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.5, "bin1": 0.0}, config=now)
    write_record(tmp_path, "transformer", "parity", 1, {"bin0": 0.7, "bin1": 0.1}, config=now)
    write_record(tmp_path, "transformer", "parity", 2, {"bin0": 1.0, "bin1": 1.0}, config=old)  # partly rerun
    result = build(load_table("rsa-table2"), tmp_path, "paper", registry)
    assert cell(result, "transformer", "parity:bin0") == ("60.0 ± 14.1 (2)", "29", "+31.0")  # seeds 0, 1 only
    assert result["present"] == 2 and result["stale"] == ""


def test_several_tasks_with_several_splits_print_long():
    """RSA Table 2 (6 languages x 2 bins): one row per (language, model), (ours, paper, Δ) per bin."""
    result = build(load_table("rsa-table2"), Path("/nonexistent"), "paper")
    assert result["headers"] == ["task", "row"] + [f"{b} {w}" for b in ("bin0", "bin1") for w in ("ours", "paper", "Δ")]
    assert len(result["rows"]) == 6 * 6 and result["rows"][0][:2] == ["d2", "transformer"]
    assert cell(result, "rsa-transformer-III", "parity:bin1") == (MISSING, "62", MISSING)


def test_cli_prints_the_table_and_writes_markdown_csv_and_plot(runs, capsys):
    assert main(["reproduce", "rsa-table2", "--out", str(runs)]) == 0
    printed = capsys.readouterr().out
    assert "| transformer " in printed and "30.0 ± 10.0 (3)" in printed and "3/108 runs present" in printed
    folder = runs / "reproduce"
    md = (folder / "rsa-table2.md").read_text()
    assert f"`bench reproduce rsa-table2 --out {runs}`" in md
    assert printed_row(md, "parity", "transformer")[2:5] == ["30.0 ± 10.0 (3)", "29", "+1.0"]  # bin 0
    rows = list(csv.DictReader((folder / "rsa-table2.csv").open()))
    parity0 = next(r for r in rows if r["row"] == "transformer" and r["column"] == "parity:bin0")
    assert float(parity0["delta"]) == pytest.approx(1.0)
    assert next(r for r in rows if r["row"] == "transformer-star" and r["column"] == "d2:bin0")["ours"] == ""  # missing, not 0
    assert (folder / "rsa-table2.png").stat().st_size > 0


def test_another_preset_is_called_a_proxy_and_written_apart(tmp_path, capsys):
    for seed in (0, 1, 2):
        write_record(tmp_path, "gut", "logic", seed, {f"ops{k}": 0.5 for k in range(7, 13)}, preset="small")
    assert main(["reproduce", "halt-table2", "--preset", "small", "--models", "gut", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "small preset (the table's is paper): a CPU-sized proxy, not the paper's sizes" in printed
    assert printed_row(printed, "gut")[:4] == ["gut", "50.0 ± 0.0 (3)", "96.36 ± 0.23", "-46.4"]  # 50 - 96.36
    assert (tmp_path / "reproduce" / "halt-table2--small.md").exists()


def test_seeds_and_set_pick_the_records_of_a_proxy_and_write_apart(tmp_path, capsys):
    """--set adds overrides to every cell (records under their tag), --seeds replaces the table's
    seeds; the outputs carry the overrides' tag and never overwrite the table's own."""
    more = ["data.n_train=60000", "train.lr=0.0007"]
    write_record(tmp_path, "tlb", "logic", 0, {f"ops{k}": 0.6 for k in range(7, 13)}, preset="small", overrides=more)
    write_record(tmp_path, "tlb", "logic", 0, {f"ops{k}": 0.5 for k in range(7, 13)}, preset="small")  # the preset's own
    argv = ["reproduce", "halt-table2", "--preset", "small", "--models", "tlb", "--out", str(tmp_path), "--seeds", "0"]
    assert main(argv + [arg for item in more for arg in ("--set", item)]) == 0
    printed = capsys.readouterr().out
    assert printed_row(printed, "tlb")[:4] == ["tlb", "60.0 (1)", "76.66 ± 0.77", "-16.7"]  # 60 - 76.66
    assert "1/1 runs present (seeds 0 per cell); overrides: data.n_train=60000 train.lr=0.0007" in printed
    made = sorted(p.name for p in (tmp_path / "reproduce").glob("*.md"))
    assert len(made) == 1 and made[0].startswith("halt-table2--small--set-")
    assert "--seeds 0 --set data.n_train=60000 --set train.lr=0.0007`" in (tmp_path / "reproduce" / made[0]).read_text()
    assert main(argv[:-2]) == 0  # without them: the preset's records, 3 seeds, its own file
    assert "1/3 runs present" in capsys.readouterr().out and (tmp_path / "reproduce" / "halt-table2--small.md").exists()
    for bad, message in (("train.lr", "train.lr"), ("train.nope=1", "nope")):
        assert main(argv + ["--set", bad]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


TOY = """
title: toy
source: "made up"
preset: paper
seeds: [0, 1]
metric: minutes_per_epoch
paper_units: minutes
delta: ratio
set: [train.max_epochs=5]
columns:
  - {task: listops, split: test, label: ub10, set: [model.max_layers=10]}
rows:
  - {model: gut, label: upper, set: [model.mode=upperbound], paper: [4]}
  - {model: gut, label: plain, paper: [[2, 0.5]]}
"""


def test_row_and_column_overrides_find_their_records_and_ratios(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(TOY)
    (tmp_path / "tables" / "toy-child.yaml").write_text("base: toy\ntitle: child\nseeds: [0]\n")
    upper = ["train.max_epochs=5", "model.max_layers=10", "model.mode=upperbound"]
    for seed, seconds in ((0, 600.0), (1, 900.0)):  # 5 epochs: 2 and 3 minutes per epoch, mean 2.5, std 0.71
        write_record(tmp_path, "gut", "listops", seed, {"test": 0.5}, overrides=upper, epochs_run=5, train_time_s=seconds)
    write_record(tmp_path, "gut", "listops", 0, {"test": 0.5}, epochs_run=5, train_time_s=60.0)  # without the table's set
    table = load_table("toy", folder=tmp_path / "tables")
    result = build(table, tmp_path, "paper")
    assert cell(result, "upper", "ub10") == ("2.50 ± 0.71 (2)", "4", "×0.62")  # 2.5 / 4 = 0.625
    assert cell(result, "plain", "ub10") == (MISSING, "2 ± 0.5", MISSING)
    child = load_table("toy-child", folder=tmp_path / "tables")
    assert child.title == "child" and child.seeds == [0] and child.delta == "ratio" and len(child.rows) == 2
    assert cell(build(child, tmp_path, "paper"), "upper", "ub10") == ("2.00 (1)", "4", "×0.50")


@pytest.mark.parametrize("bad, message", [
    ("rows:\n  - {model: gut, paper: [1, 2]}", "2 paper values for 1 columns"),
    ("rows:\n  - {model: gut, paper: [1], colour: red}", "a row is"),
    ("rows:\n  - {model: gut, paper: {listops: [1, 2]}}", "paper.listops must list one value per split"),
    ("stat: mode", "stat must be one of mean, median"),
    ("paper_units: percent", "paper_units minutes goes with metric minutes_per_epoch"),
    ("base: toy-bad", "base cycle"),
    ("prest: paper", "unknown key(s) prest"),
])
def test_malformed_tables_are_one_line_errors(tmp_path, bad, message):
    (tmp_path / "toy-bad.yaml").write_text(TOY + bad + "\n")
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_table("toy-bad", folder=tmp_path)


def test_every_table_loads_and_names_registry_models_and_tasks(registry):
    names = table_names()
    assert {"rsa-table2", "rsa-fig5-copy", "halt-table1", "halt-table2", "halt-table3", "halt-table4", "halt-table5",
            "nope-properties"} <= set(names)
    for name in names:
        table = load_table(name)
        check_names(table, registry)  # raises on an unknown model or task
        for col in table.columns:
            registry.preset(col.task, table.preset)
        assert all(len(row.paper) == len(table.columns) for row in table.rows)


def test_list_names_every_table_with_its_record_count(tmp_path, capsys, registry):
    from bench.report.reproduce import current_config

    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.2, "bin1": 0.0})
    now = current_config(registry, "transformer", "d2", "paper", [])
    old = {**now, "model": {**now["model"], "params": {**now["model"]["params"], "pos_encoding": "xpos"}}}
    write_record(tmp_path, "transformer", "d2", 0, {"bin0": 0.2, "bin1": 0.0}, config=old)
    assert main(["reproduce", "--list", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert all(name in printed for name in table_names())
    rsa = next(line for line in printed.splitlines() if line.startswith("rsa-table2 "))
    assert "2/72 cells (+2 † stale only)" in rsa  # a record fills bin 0 and bin 1; the d2 one is stale
    assert "5 computed, 0/2 recorded, 1 n/i" in printed
    assert max(len(line) for line in printed.splitlines()) <= 100  # piped: fits 100 columns
    assert main(["reproduce", "--list", "--full", "--out", str(tmp_path)]) == 0
    assert any(t.title in capsys.readouterr().out for t in [load_table("halt-table1-cpu")])  # --full: whole titles


def test_unknown_table_is_one_line_with_a_suggestion(capsys):
    assert main(["reproduce", "rsa-tabel2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown table 'rsa-tabel2'" in err and "did you mean 'rsa-table2'" in err


def test_nope_checks_pass_and_say_what_is_not_there(tmp_path, registry):
    from bench.report.checks import run_checks

    result = run_checks(load_table("nope-properties"), tmp_path, "paper", registry)
    status = [row[-1] for row in result["rows"]]
    assert status[:5] == ["pass"] * 5  # the computed properties of [NOPE §3]
    assert status[5].startswith("not implemented")
    assert status[6:] == ["missing records", "missing records"]


def test_a_record_of_an_older_data_version_is_stale(tmp_path, registry):
    """Logic's generator is version 2: a record made on version 1 data (or naming no version,
    i.e. made before versions were recorded) is retrained, whatever its parameters."""
    from bench.records import config_changes
    from bench.report.reproduce import current_config

    now = current_config(registry, "transformer", "logic", "small", [])
    assert now["task"]["version"] == "2"
    assert config_changes(now, now) is None
    v1 = {**now, "task": {**now["task"], "version": "1"}}
    unrecorded = {**now, "task": {k: v for k, v in now["task"].items() if k != "version"}}
    assert config_changes(v1, now) == "data version '1' -> '2'" == config_changes(unrecorded, now)
    flipflop = current_config(registry, "transformer", "flipflop", "small", [])  # never bumped: "1" either way
    assert config_changes({**flipflop, "task": {k: v for k, v in flipflop["task"].items() if k != "version"}}, flipflop) is None


# ---- claims: the paper's findings judged over cells ----------------------------------------

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


def test_a_cost_table_is_measured_and_its_ratios_come_from_the_measurements(tmp_path, registry, capsys):
    """halt-table5-cpu (kind: cost): --run times every cell (tiny shapes here) and writes the
    measurements; the table's ratio to no-halt is each cell's median step time over the no-halt
    cell's in the same column, and the claims are judged on those times."""
    import dataclasses
    import json

    from bench.report import reproduce as rep

    table, preset = rep.select_table("halt-table5-cpu", registry, overrides=["model.d_model=16", "model.d_ff=32"])
    assert table.kind == "cost" and preset == "small" and table.cost["reference"] == "GUT No Halt Upperbound"
    table.cost.update(length=6, batch=2, repeats=2, warmup=0)
    table.columns = table.columns[:1] + table.columns[-1:]  # bounds 10 and 40
    table.rows = [dataclasses.replace(r, paper=(r.paper[0], r.paper[-1])) for r in table.rows]
    empty = rep.reproduce(table, registry, preset, tmp_path, "bench reproduce halt-table5-cpu")
    assert "not measured yet" in empty["note"] and all(line[2] == MISSING for line in empty["rows"])
    path = rep.measure_cost(table, registry, preset, tmp_path, ["model.d_model=16", "model.d_ff=32"])
    measured = json.loads(path.read_text())
    assert len(measured["rows"]) == 6 and all(len(r["step_times_s"]) == 2 for r in measured["rows"])
    assert "thread" in measured["header"]["device"]

    def ratio_of(result, row, column):
        line = next(r for r in result["rows"] if r[:2] == [row, column])
        return line[result["headers"].index("ours × ref")], line[result["headers"].index("paper × ref")]

    result = rep.reproduce(table, registry, preset, tmp_path, "bench reproduce halt-table5-cpu", ["model.d_model=16", "model.d_ff=32"])
    step = {(r["row"], r["column"]): r["step_s"] for r in measured["rows"]}
    ours, paper = ratio_of(result, "GUT", "upper bound 40")
    assert ours == f"{step['GUT', 'upper bound 40'] / step['GUT No Halt Upperbound', 'upper bound 40']:.2f}"
    assert paper == f"{5.04 / 9.067:.2f}" and ratio_of(result, "GUT No Halt Upperbound", "upper bound 10") == ("1.00", "1.00")
    assert path in result["paths"] and Path(str(path).replace("--measured.json", ".md")).is_file()
    # the claims follow the measurements: GUT made 10x faster than no-halt at bound 40, with an early halt
    for r in measured["rows"]:
        if r["row"] == "GUT" and r["column"] == "upper bound 40":
            r["step_times_s"] = [t / 10 for t in step_times(measured, "GUT No Halt Upperbound")]
            r["step_s"], r["halt_depth"] = sum(r["step_times_s"]) / 2, 3.0
    path.write_text(json.dumps(measured))
    result = rep.reproduce(table, registry, preset, tmp_path, "bench reproduce halt-table5-cpu", ["model.d_model=16", "model.d_ff=32"])
    assert ratio_of(result, "GUT", "upper bound 40")[0] == "0.10"
    claim = next(r for r in result["claims"]["rows"] if "0.6x" in r[0])
    assert claim[2] == "holds" and claim[4] == "holds" and "halting depth 3.00" in claim[3]
    for r in measured["rows"]:  # no early halt: the claim's premise is absent
        if r["row"] == "GUT" and r["column"] == "upper bound 40":
            r["halt_depth"] = 39.0
    path.write_text(json.dumps(measured))
    result = rep.reproduce(table, registry, preset, tmp_path, "bench reproduce halt-table5-cpu", ["model.d_model=16", "model.d_ff=32"])
    claim = next(r for r in result["claims"]["rows"] if "0.6x" in r[0])
    assert claim[2] == "inconclusive" and "premise absent" in claim[3]


def step_times(measured, row, column="upper bound 40"):
    return next(r["step_times_s"] for r in measured["rows"] if r["row"] == row and r["column"] == column)


def test_ratio_claims_rule():
    from bench.report.checks import FAILS, HOLDS, UNSURE, judge_ratio

    assert judge_ratio([1.0, 1.1], [4.0, 4.2], 0.6)[0] == HOLDS
    assert judge_ratio([3.0, 3.2], [4.0, 4.2], 0.6)[0] == FAILS
    assert judge_ratio([1.0, 3.0], [4.0, 4.2], 0.6)[0] == UNSURE  # the range straddles 0.6
    assert judge_ratio([1.0], [4.0], 0.6, depth=25.0, depth_below=20)[0] == UNSURE


def test_the_flipflop_cpu_proxy_has_every_family_and_both_chunk_sizes(tmp_path, registry):
    """halt-table3-cpu: every family of [HALT Table 3] x 3 seeds, TLB and GUTLB at the paper text's
    chunk (10 at T 512 -> 3 at T 128) and the reference code's (100 -> 25), the small splits."""
    from bench.report import reproduce as rep

    table, preset = rep.select_table("halt-table3-cpu", registry)
    assert preset == "small" and table.seeds == [0, 1, 2]
    assert [c.split for c in table.columns] == ["T128_p1", "T128_p8", "T128_p98", "T256_p1", "T256_p8", "T256_p98"]
    todo, incompatible = rep.plan(table, registry, preset, tmp_path)
    assert len(todo) == 8 * 3 and not incompatible
    chunks = {(c.model, o.split("=")[1]) for c in todo for o in c.overrides if o.startswith("model.chunk_size=")}
    assert chunks == {("tlb", "3"), ("tlb", "25"), ("gutlb", "3"), ("gutlb", "25")}
    assert {c.model for c in todo} == {"transformer", "ut", "gut", "tlb", "gutlb", "tlb-fr"}
    assert any("TLB beats the Transformer (chunk 25)" in c.text for c in table.claims)
