"""bench reproduce: paper tables from tables/*.yaml beside fake run records (no training)."""

import csv
from pathlib import Path

import pytest
import yaml

from bench.cli import main
from bench.errors import UserError
from bench.records import base_record, record_path, write_json_atomic
from bench.report.reproduce import MISSING, build, check_names, load_table, table_names

ROOT = Path(__file__).resolve().parent.parent


def write_record(out, model, task, seed, metrics, preset="paper", overrides=None, status="ok", n=10, majority=None, **extra):
    """A record as `bench run` writes it, with only the fields reports read filled in (``majority``:
    every test split's majority-class share, as classification records carry it)."""
    rec = base_record(model, task, preset, seed, overrides or [])
    splits = list(metrics)
    share = {} if majority is None else {"majority": majority}
    rec.update(
        status=status,
        primary_metric="acc",
        report_metrics=["acc"],
        test_splits=splits,
        metrics={"val": {"n": 10, "acc": 0.5}, **{s: {"n": n, "acc": v, **share} for s, v in metrics.items()}},
        **extra,
    )
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
    return tuple(line[i : i + 3])


def printed_row(text, *labels):
    """The stripped cells of a github-format table's row whose first cells are ``labels``."""
    rows = ([c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| "))
    return next(r for r in rows if r[: len(labels)] == list(labels))


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
    assert cell(result, "transformer", "parity:bin0") == ("30.0 ± 24.8 (3, se 14.5)", "29", "+1.0")
    assert cell(result, "transformer", "parity:bin1") == ("5.0 ± 12.4 (3, se 6.9)", "0", "+5.0")
    assert cell(result, "rsa-transformer-I", "parity:bin1") == (MISSING, "67", MISSING)  # no record: never 0
    assert cell(result, "transformer-star", "d2:bin0") == (MISSING, "87", MISSING)
    assert cell(result, "rsa-transformer-I", "tomita5:bin0") == ("FAIL", "63", MISSING)
    assert result["present"] == 3 and result["expected"] == 6 * 6 * 3  # runs: rows x tasks x seeds; a failed run is not present
    parity0 = next(c for c in result["cells"] if c["row"] == "transformer" and c["column"] == "parity:bin0")
    assert parity0["ours"] == pytest.approx(30.0) and parity0["ours_std"] == pytest.approx(10.0)
    assert parity0["paper"] == pytest.approx(29.0) and parity0["delta"] == pytest.approx(1.0) and parity0["n"] == 3


def test_records_made_with_settings_the_registry_no_longer_gives_are_marked(tmp_path, registry):
    from bench.report.reproduce import current_config, stale_records

    now = current_config(registry, "transformer", "parity", "paper", [])
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.5, "bin1": 0.0}, config=now)  # as the preset gives today
    old = {**now, "model": {**now["model"], "params": {**now["model"]["params"], "d_model": 999}}}
    write_record(tmp_path, "transformer", "tomita3", 0, {"bin0": 0.5, "bin1": 0.0}, config=old)
    table = load_table("rsa-table2")
    unchecked = build(table, tmp_path, "paper")  # what the records hold, no run resolved: the stale one counts as it is
    assert cell(unchecked, "transformer", "tomita3:bin0")[0] == "50.0 (1, se 15.8)" and unchecked["stale"] == ""
    assert stale_records(table, registry, "paper", tmp_path) == {
        ("transformer", "tomita3", ()): {0: f"model.d_model 999 -> {now['model']['params']['d_model']}"}
    }
    result = build(table, tmp_path, "paper", stale_records(table, registry, "paper", tmp_path))
    assert cell(result, "transformer", "parity:bin0")[0] == "50.0 (1, se 15.8)"
    assert cell(result, "transformer", "tomita3:bin0")[0] == "50.0 (1, se 15.8) †"
    assert f"(1 of 36 (model, task) cells; model.d_model 999 -> {now['model']['params']['d_model']})" in result["stale"]
    assert result["present"] == 1  # a stale record is shown, not counted as present


def test_a_cell_counts_the_records_made_with_its_newest_settings_and_check_stale_marks_the_rest(tmp_path, registry, capsys):
    """Without the stale check a cell reads its records alone: a seed made before the run's settings
    changed (its config differs from the newest record's) is left out, whatever the registry says
    today. ``--check-stale`` resolves the cells and marks a cell whose records the registry no
    longer gives, and says so on the table's command line."""
    from bench.report.reproduce import current_config

    now = current_config(registry, "transformer", "parity", "paper", [])
    old = {**now, "model": {**now["model"], "params": {**now["model"]["params"], "pos_encoding": "xpos"}}}
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 1.0, "bin1": 1.0}, config=old, date="2026-01-01T00:00:00+00:00")
    write_record(tmp_path, "transformer", "parity", 1, {"bin0": 0.5, "bin1": 0.1}, config=now, date="2026-02-01T00:00:00+00:00")
    write_record(tmp_path, "transformer", "parity", 2, {"bin0": 0.7, "bin1": 0.1}, config=now, date="2026-02-02T00:00:00+00:00")
    write_record(tmp_path, "transformer", "tomita3", 0, {"bin0": 0.5, "bin1": 0.0}, config=old, date="2026-01-01T00:00:00+00:00")
    result = build(load_table("rsa-table2"), tmp_path, "paper")
    assert cell(result, "transformer", "parity:bin0") == ("60.0 ± 127.1 (2, se 15.5)", "29", "+31.0")  # seeds 1, 2: the newest settings
    assert cell(result, "transformer", "tomita3:bin0")[0] == "50.0 (1, se 15.8)"  # one setting, the newest: counted, unmarked
    assert main(["reproduce", "rsa-table2", "--out", str(tmp_path)]) == 0
    assert "†" not in capsys.readouterr().out
    assert main(["reproduce", "rsa-table2", "--out", str(tmp_path), "--check-stale"]) == 0
    assert printed_row(capsys.readouterr().out, "tomita3", "transformer")[2] == "50.0 (1, se 15.8) †"
    md = (tmp_path / "reproduce" / "rsa-table2.md").read_text().splitlines()
    assert md[2] == f"`bench reproduce rsa-table2 --out {tmp_path} --check-stale`" and "pos_encoding 'xpos' -> " in md[4]


def test_a_cell_with_current_records_leaves_its_stale_ones_out(tmp_path, registry):
    from bench.report.reproduce import current_config, stale_records

    now = current_config(registry, "transformer", "parity", "paper", [])
    old = {**now, "model": {**now["model"], "params": {**now["model"]["params"], "pos_encoding": "xpos"}}}
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.5, "bin1": 0.0}, config=now)
    write_record(tmp_path, "transformer", "parity", 1, {"bin0": 0.7, "bin1": 0.1}, config=now)
    write_record(tmp_path, "transformer", "parity", 2, {"bin0": 1.0, "bin1": 1.0}, config=old)  # partly rerun
    table = load_table("rsa-table2")
    result = build(table, tmp_path, "paper", stale_records(table, registry, "paper", tmp_path))
    assert cell(result, "transformer", "parity:bin0") == ("60.0 ± 127.1 (2, se 15.5)", "29", "+31.0")  # seeds 0, 1 only
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
    assert "| transformer " in printed and "30.0 ± 24.8 (3, se 14.5)" in printed and "3/108 runs present" in printed
    folder = runs / "reproduce"
    md = (folder / "rsa-table2.md").read_text()
    assert f"`bench reproduce rsa-table2 --out {runs}`" in md
    assert printed_row(md, "parity", "transformer")[2:5] == ["30.0 ± 24.8 (3, se 14.5)", "29", "+1.0"]  # bin 0
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
    assert printed_row(printed, "gut")[:4] == ["gut", "50.0 ± 0.0 (3, se 15.8)", "96.36 ± 0.23", "-46.4"]  # 50 - 96.36
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
    assert printed_row(printed, "tlb")[:4] == ["tlb", "60.0 (1, se 15.5)", "76.66 ± 0.77", "-16.7"]  # 60 - 76.66
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
    assert cell(result, "upper", "ub10") == ("2.50 ± 6.35 (2)", "4", "×0.62")  # 2.5 / 4 = 0.625
    assert cell(result, "plain", "ub10") == (MISSING, "2 ± 0.5", MISSING)
    child = load_table("toy-child", folder=tmp_path / "tables")
    assert child.title == "child" and child.seeds == [0] and child.delta == "ratio" and len(child.rows) == 2
    assert cell(build(child, tmp_path, "paper"), "upper", "ub10") == ("2.00 (1)", "4", "×0.50")


@pytest.mark.parametrize(
    "bad, message",
    [
        ("rows:\n  - {model: gut, paper: [1, 2]}", "2 paper values for 1 columns"),
        ("rows:\n  - {model: gut, paper: [1], colour: red}", "a row is"),
        ("rows:\n  - {model: gut, paper: {listops: [1, 2]}}", "paper.listops must list one value per split"),
        ("stat: mode", "stat must be one of mean, median"),
        ("paper_units: percent", "paper_units minutes goes with metric minutes_per_epoch"),
        ("base: toy-bad", "base cycle"),
        ("prest: paper", "unknown key(s) prest"),
        ("kind: nonsense", "kind must be one of results, cost, checks, got 'nonsense'"),
    ],
)
def test_malformed_tables_are_one_line_errors(tmp_path, bad, message):
    table = {**yaml.safe_load(TOY), **yaml.safe_load(bad)}  # the bad key replaces the toy's (YAML refuses a key given twice)
    (tmp_path / "toy-bad.yaml").write_text(yaml.safe_dump(table))
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_table("toy-bad", folder=tmp_path)


def test_every_table_loads_and_names_registry_models_and_tasks(registry):
    from bench.report.tuned import overlay_registry

    names = table_names()
    assert {
        "rsa-table2",
        "rsa-fig5-copy",
        "halt-table1",
        "halt-table2",
        "halt-table3",
        "halt-table4",
        "halt-table5",
        "nope-properties",
    } <= set(names)
    for name in names:
        table = load_table(name)
        own = overlay_registry(table, registry, ROOT / "results")  # a table's overlays: the committed studies'
        check_names(table, own)  # raises on an unknown model or task
        for col in table.columns:
            own.preset(col.task, table.preset)
        assert all(len(row.paper) == len(table.columns) for row in table.rows)


def test_list_names_every_table_with_its_record_count(tmp_path, capsys, registry):
    from bench.report.reproduce import current_config

    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.2, "bin1": 0.0})
    now = current_config(registry, "transformer", "d2", "paper", [])
    old = {**now, "model": {**now["model"], "params": {**now["model"]["params"], "pos_encoding": "xpos"}}}
    write_record(tmp_path, "transformer", "d2", 0, {"bin0": 0.2, "bin1": 0.0}, config=old)
    assert main(["reproduce", "--list", "--records", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert all(name in printed for name in table_names())
    rsa = next(line for line in printed.splitlines() if line.startswith("rsa-table2 "))
    assert "2/72 cells (+2 † stale only)" in rsa  # a record fills bin 0 and bin 1; the d2 one is stale
    assert "8 computed, 0/2 recorded, 0 n/i" in printed
    assert max(len(line) for line in printed.splitlines()) <= 100  # piped: fits 100 columns
    assert main(["reproduce", "--list", "--full", "--out", str(tmp_path)]) == 0
    assert any(t.title in capsys.readouterr().out for t in [load_table("halt-table1-cpu")])  # --full: whole titles


def test_list_reads_the_table_files_only_and_lists_a_broken_one_with_its_problem(tmp_path, capsys, monkeypatch):
    """--list (no --records) reads no record and builds no table: every file's name, preset, kind and
    title, and whether its table is written under OUT/reproduce; a broken file is a BROKEN line
    (its problem as reproduce NAME gives it), the others listed as usual, exit 0."""
    import shutil

    from bench.report import table_file
    from bench.report.tables import KINDS, TABLES_DIR

    assert tuple(KINDS) == table_file.KIND_NAMES
    folder = tmp_path / "tables"
    shutil.copytree(TABLES_DIR, folder)
    (folder / "zz-broken.yaml").write_text("title: [unclosed\n")
    (folder / "zz-list.yaml").write_text("- a\n")
    monkeypatch.setattr(table_file, "TABLES_DIR", folder)
    monkeypatch.setattr(table_file.list_files, "__defaults__", (folder,))
    (tmp_path / "reproduce").mkdir()
    (tmp_path / "reproduce" / "rsa-table2.md").write_text("x")
    assert main(["reproduce", "--list", "--full", "--out", str(tmp_path)]) == 0
    cap = capsys.readouterr()
    lines = {line.split()[0]: line.split(None, 4) for line in cap.out.splitlines()[2:]}
    assert set(lines) == set(table_names()) | {"zz-broken", "zz-list"}
    assert lines["rsa-table2"][1:4] == ["paper", "results", "yes"] and lines["halt-table5-cpu"][1:4] == ["small", "cost", "no"]
    assert lines["rsa-table2"][4] == load_table("rsa-table2").title
    assert lines["zz-broken"][2] == "BROKEN" and "tables/zz-broken.yaml is not valid YAML at line 2" in lines["zz-broken"][4]
    assert lines["zz-list"][2] == "BROKEN" and "must be a mapping" in lines["zz-list"][4]
    assert "2 table file(s) cannot be read: zz-broken, zz-list" in cap.err


@pytest.mark.parametrize(
    "text,message",
    [
        ("title: [unclosed\n", "tables/zz.yaml is not valid YAML at line 2"),
        ("- a\n- b\n", "tables/zz.yaml must be a mapping"),
        ("base: [x]\ntitle: t\n", "base must be the name of another table"),
        ("base: nowhere\ntitle: t\n", "unknown table 'nowhere'"),
        ("title: t\nsource: s\npreset: smoke\nseeds: [a]\n", "seeds must be a list of int"),
        ("title: t\nsource: s\npreset: smoke\nseeds: [0]\nrows: 5\n", "rows must be list or null, got 5"),
        ("title: t\nsource: s\npreset: smoke\nseeds: [0]\nkind: pie\n", "kind must be one of results, cost, checks"),
        ("title: t\nsource: s\npreset: smoke\nseeds: [0]\nrow: []\n", "did you mean 'rows'"),
    ],
)
def test_a_broken_table_file_is_one_line_naming_it(text, message, tmp_path):
    from bench.errors import UserError

    (tmp_path / "zz.yaml").write_text(text)
    with pytest.raises(UserError) as exc:
        load_table("zz", folder=tmp_path)
    assert message in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


LISTING = """
title: a listing
source: made up
preset: paper
seeds: [0]
kind: listing
checks: [ab, abc]
"""


def test_a_new_table_kind_is_one_class_registered_in_kinds(tmp_path, monkeypatch, capsys):
    """A kind of table is a TableKind subclass named in tables.KINDS: a file of that kind loads
    through it, and bench reproduce prints and writes what it builds, nothing else changed."""
    from bench.report import reproduce, tables
    from bench.report.table_kind import TableKind

    class Listing(TableKind):  # each item of the file with its length
        name = "listing"

        def load(self, table, spec, raw, preset, where):
            table.checks = list(raw["checks"])

        def names(self, table):
            return [], []

        def build(self, table, registry, preset, out, stem, stale=None):
            rows = [[item, str(len(item))] for item in table.checks]
            return {
                "headers": ["item", "length"],
                "rows": rows,
                "note": f"{len(rows)} items",
                "csv": [{"item": item, "length": len(item)} for item in table.checks],
            }

    monkeypatch.setitem(tables.KINDS, "listing", Listing())
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "t.yaml").write_text(LISTING)
    monkeypatch.setattr(reproduce, "load_table", lambda name, preset=None: load_table(name, preset, folder=tmp_path / "tables"))
    assert main(["reproduce", "t", "--out", str(tmp_path)]) == 0
    assert printed_row(capsys.readouterr().out, "abc") == ["abc", "3"]
    assert (tmp_path / "reproduce" / "t.csv").read_text().splitlines() == ["item,length", "ab,2", "abc,3"]
    md = (tmp_path / "reproduce" / "t.md").read_text()
    assert md.startswith(f"# a listing\n\n`bench reproduce t --out {tmp_path}`\n\n2 items.\n") and "## The paper's claims" not in md


def test_unknown_table_is_one_line_with_a_suggestion(capsys):
    assert main(["reproduce", "rsa-tabel2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown table 'rsa-tabel2'" in err and "did you mean 'rsa-table2'" in err


def test_nope_checks_pass_and_say_what_is_not_there(tmp_path, registry):
    from bench.report.checks import run_checks

    result = run_checks(load_table("nope-properties"), tmp_path, "paper", registry)
    status = [row[-1] for row in result["rows"]]
    assert status[:8] == ["pass"] * 8  # the computed properties of [NOPE §3], and of §4's linear Transformer
    assert status[8:] == ["missing records", "missing records"]


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


def test_a_cost_table_is_measured_and_its_ratios_come_from_the_measurements(tmp_path, registry, capsys):
    """halt-table5-cpu (kind: cost): --run times every cell (tiny shapes here) and writes the
    measurements; the table's ratio to no-halt is each cell's median step time over the no-halt
    cell's in the same column, and the claims are judged on those times."""
    import dataclasses
    import json
    import math
    import statistics

    from bench.report import reproduce as rep

    table, preset, _ = rep.select_table("halt-table5-cpu", registry, overrides=["model.d_model=16", "model.d_ff=32"])
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
    ours, paper = ratio_of(result, "GUT", "upper bound 40")
    times = {(r["row"], r["column"]): r["step_times_s"] for r in measured["rows"]}
    geometric = math.exp(
        statistics.mean(map(math.log, times["GUT", "upper bound 40"]))
        - statistics.mean(map(math.log, times["GUT No Halt Upperbound", "upper bound 40"]))
    )
    assert ours.startswith(f"{geometric:.2f} [")  # the ratio of the repeats' geometric means, with its 95% CI
    assert paper == f"{5.04 / 9.067:.2f}" and ratio_of(result, "GUT No Halt Upperbound", "upper bound 10") == ("1.00", "1.00")
    assert path in result["paths"] and Path(str(path).replace("--measured.json", ".md")).is_file()
    # the claims follow the measurements: GUT made 10x faster than no-halt at bound 40, with an early halt;
    # the no-halt repeats set 10% apart (a loaded machine's tiny steps can differ 3x, and two such repeats
    # leave Welch on df ~2 without power): log ratio -2.30 vs log 0.6 = -0.51, se 0.067, t = -27
    for r in measured["rows"]:
        if r["row"] == "GUT No Halt Upperbound" and r["column"] == "upper bound 40":
            r["step_times_s"], r["step_s"] = [0.010, 0.011], 0.0105
    for r in measured["rows"]:
        if r["row"] == "GUT" and r["column"] == "upper bound 40":
            r["step_times_s"] = [t / 10 for t in step_times(measured, "GUT No Halt Upperbound")]
            r["step_s"], r["halt_depth"] = sum(r["step_times_s"]) / 2, 3.0
    path.write_text(json.dumps(measured))
    result = rep.reproduce(table, registry, preset, tmp_path, "bench reproduce halt-table5-cpu", ["model.d_model=16", "model.d_ff=32"])
    assert ratio_of(result, "GUT", "upper bound 40")[0].startswith("0.10 [")
    claim = next(r for r in result["claims"]["rows"] if "0.6x" in r[0])
    assert claim[2] == "holds" and claim[4] == "no spread printed" and "halting depth 3.00" in claim[3]
    assert "ratio 0.10 [90% CI" in claim[3] and "Welch t on log times" in claim[3]
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
    from bench.report import stats

    assert stats.ratio_test([1.0, 1.1], [4.0, 4.2], 0.6).p < 0.05  # ~0.26x: below 0.6
    assert stats.ratio_test([3.0, 3.2], [4.0, 4.2], 0.6).p_reverse < 0.05  # ~0.76x: above
    straddles = stats.ratio_test([1.0, 3.0], [4.0, 4.2], 0.6)  # ~0.42x, but A's repeats spread over 0.6
    assert straddles.p >= 0.05 and straddles.p_reverse >= 0.05
    assert stats.ratio_test([1.0], [4.0, 4.2], 0.6) is None


def test_the_flipflop_cpu_proxy_has_every_family_and_both_chunk_sizes(tmp_path, registry):
    """halt-table3-cpu: every family of [HALT Table 3] x 3 seeds, TLB and GUTLB at the paper text's
    chunk (10 at T 512 -> 3 at T 128) and the reference code's (100 -> 25), the small splits."""
    from bench.report import reproduce as rep

    table, preset, _ = rep.select_table("halt-table3-cpu", registry)
    assert preset == "small" and table.seeds == [0, 1, 2]
    assert [c.split for c in table.columns] == ["T128_p1", "T128_p8", "T128_p98", "T256_p1", "T256_p8", "T256_p98"]
    todo, incompatible = rep.plan(table, registry, preset, tmp_path)
    assert len(todo) == 8 * 3 and not incompatible
    chunks = {(c.model, o.split("=")[1]) for c in todo for o in c.overrides if o.startswith("model.chunk_size=")}
    assert chunks == {("tlb", "3"), ("tlb", "25"), ("gutlb", "3"), ("gutlb", "25")}
    assert {c.model for c in todo} == {"transformer", "ut", "gut", "tlb", "gutlb", "tlb-fr"}
    assert any("TLB beats the Transformer (chunk 25)" in c.text for c in table.claims)
