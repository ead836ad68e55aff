"""What reads finished studies: tables whose rows say "tuned" (each row at its own study's best
value, seed 0 its best trial), tables naming a study's overlay, and the overlays of several
studies together."""

import pytest

pytest.importorskip("optuna")

from tune_helpers import TASK, without_chance

from bench.cli import main
from bench.config import resolve_run
from bench.errors import UserError
from bench.records import read_record, record_path
from bench.registry import Registry

# ---- tables that say "tuned" ------------------------------------------------------------------


def test_a_table_naming_a_study_reads_tuned_rows_and_marks_the_others(tmp_path):
    from bench.records import base_record, write_json_atomic
    from bench.report.reproduce import plan, reproduce
    from bench.report.tables import load_table

    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(
        "title: toy\nsource: none\npreset: smoke\nseeds: [0]\nmetric: last_acc\nset: [train.max_epochs=1]\n"
        "tuned: [flipflop-smoke, gone]\ntasks: [flipflop]\nsplits: [T32_p1]\n"
        "rows:\n  - {model: lstm, paper: [90]}\n  - {model: transformer, paper: [80]}\n"
    )
    out = tmp_path / "out"
    best = {
        "study": "flipflop-smoke",
        "task": "flipflop",
        "preset": "smoke",
        "set": ["train.max_epochs=1"],
        "space": [],
        "models": {"lstm": {"values": {"train.lr": 0.003}, "val": 0.855, "finished": 2, "trials": 2}},
    }
    write_json_atomic(out / "studies" / "flipflop-smoke" / "best.json", best)
    tuned = ["train.max_epochs=1", "train.lr=0.003"]
    cases = (("lstm", tuned, 0.9), ("lstm", ["train.max_epochs=1"], 0.1), ("transformer", ["train.max_epochs=1"], 0.7))
    for model, overrides, value in cases:
        rec = base_record(model, "flipflop", "smoke", 0, overrides)
        rec.update(
            status="ok",
            primary_metric="token_acc",
            report_metrics=["last_acc"],
            test_splits=["T32_p1"],
            metrics={"val": {"n": 8, "last_acc": 0.5}, "T32_p1": {"n": 8, "last_acc": value}},
        )
        write_json_atomic(record_path(out, model, "flipflop", "smoke", 0, overrides), rec)
    table = load_table("toy", folder=tmp_path / "tables")
    result = reproduce(table, Registry(), "smoke", out, "bench reproduce toy")
    assert result["headers"][-1] == "tuned"
    lstm, transformer = (next(r for r in result["rows"] if r[0] == m) for m in ("lstm", "transformer"))
    assert lstm[1].startswith("90.0") and lstm[-1] == "train.lr=0.003 (2 trials, val 85.5)"  # the tuned record, not the 0.1 one
    assert transformer[1].startswith("70.0") and transformer[-1] == "not tuned (no study gone under " + f"{out}/studies)"
    assert "tuned: rows at the best setting of study flipflop-smoke, gone" in result["note"]
    # --run trains the tuned rows at the tuned values: the missing seed 1 of the lstm row, with train.lr;
    # not the transformer row while study "gone" has not finished (it may tune it)
    table.seeds = [0, 1]
    todo, _ = plan(table, Registry(), "smoke", out)
    assert sorted((c.model, c.seed, c.overrides) for c in todo) == [("lstm", 1, tuple(tuned))]
    # a study in progress says what it tunes (its study.json): one of another task leaves the
    # transformer's flipflop cell free to train; one of this task and model holds it back
    untuned = [("lstm", 1, tuple(tuned)), ("transformer", 1, ("train.max_epochs=1",))]
    write_json_atomic(out / "studies" / "gone" / "study.json", {"task": "parity", "models": ["transformer"]})
    todo, _ = plan(table, Registry(), "smoke", out)
    assert sorted((c.model, c.seed, c.overrides) for c in todo) == untuned
    write_json_atomic(out / "studies" / "gone" / "study.json", {"task": "flipflop", "models": ["gru", "transformer"]})
    todo, _ = plan(table, Registry(), "smoke", out)
    assert sorted((c.model, c.seed, c.overrides) for c in todo) == [("lstm", 1, tuple(tuned))]
    table.tuned = ("flipflop-smoke",)  # every study finished: an untuned row trains at the table's values
    todo, _ = plan(table, Registry(), "smoke", out)
    assert sorted((c.model, c.seed, c.overrides) for c in todo) == untuned


def test_each_row_is_tuned_by_the_study_with_its_settings(tmp_path):
    """Two rows of one model at two settings, each tuned by its own study: a study applies to the
    row whose table + row set is its --set (any spelling and order), its best trial's record is the
    row's seed 0; a row no study had says which study was near and how they differ."""
    from bench.records import base_record, write_json_atomic
    from bench.report.reproduce import reproduce
    from bench.report.tables import load_table

    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(
        "title: toy\nsource: none\npreset: smoke\nseeds: [0]\nmetric: last_acc\nset: [train.max_epochs=1, data.n_test=16]\n"
        "tuned: [s3, s25, s-tr]\ntasks: [flipflop]\nsplits: [T32_p1]\nrows:\n"
        "  - {model: tlb, label: tlb3, set: [model.chunk_size=3], paper: [90]}\n"
        "  - {model: tlb, label: tlb25, set: [model.chunk_size=25], paper: [90]}\n"
        "  - {model: tlb, label: tlb7, set: [model.chunk_size=7], paper: [90]}\n"
        "  - {model: transformer, paper: [80]}\n"
    )
    out = tmp_path / "out"
    fixed = ["data.n_test=16", "train.max_epochs=1"]

    def study(name, model, sets, lr, val):
        record = record_path(out, model, "flipflop", "smoke", 0, [*sets, f"train.lr={lr}"]).relative_to(out)
        write_json_atomic(
            out / "studies" / name / "best.json",
            {
                "study": name,
                "task": "flipflop",
                "preset": "smoke",
                "set": sets,
                "space": ["train.lr=[0.001,0.003]"],
                "seed": 0,
                "models": {model: {"values": {"train.lr": lr}, "val": val, "finished": 2, "trials": 2, "record": str(record)}},
            },
        )

    study("s3", "tlb", [*fixed, "model.chunk_size=3"], 0.003, 0.8)
    study("s25", "tlb", ["train.max_epochs=1", "model.chunk_size=0x19", "data.n_test= 16"], 0.001, 0.7)  # the same set, spelt otherwise
    study("s-tr", "transformer", [*fixed, "model.d_model=32"], 0.003, 0.6)
    cases = (
        ("tlb", ["model.chunk_size=3", "train.lr=0.003"], 0.93),
        ("tlb", ["model.chunk_size=25", "train.lr=0.001"], 0.925),
        ("tlb", ["model.chunk_size=3", "train.lr=0.001"], 0.1),
        ("tlb", ["model.chunk_size=7"], 0.5),
        ("transformer", [], 0.7),
    )
    for model, overrides, value in cases:
        rec = base_record(model, "flipflop", "smoke", 0, [*fixed, *overrides])
        rec.update(
            status="ok",
            primary_metric="token_acc",
            report_metrics=["last_acc"],
            test_splits=["T32_p1"],
            metrics={"val": {"n": 8, "last_acc": 0.5}, "T32_p1": {"n": 16, "last_acc": value}},
        )
        write_json_atomic(record_path(out, model, "flipflop", "smoke", 0, [*fixed, *overrides]), rec)
    table = load_table("toy", folder=tmp_path / "tables")
    result = reproduce(table, Registry(), "smoke", out, "bench reproduce toy")
    rows = {r[0]: r for r in result["rows"]}
    assert rows["tlb3"][1].startswith("93.0") and rows["tlb3"][-1] == "train.lr=0.003 (2 trials, val 80.0; seed 0: the best trial)"
    assert rows["tlb25"][1].startswith("92.5") and rows["tlb25"][-1] == "train.lr=0.001 (2 trials, val 70.0; seed 0: the best trial)"
    assert rows["tlb7"][1].startswith("50.0")  # the untuned row's own record
    assert rows["tlb7"][-1] == (
        "not tuned (study s3 tuned with model.chunk_size=3, the row has model.chunk_size=7; "
        "study s25 tuned with model.chunk_size=25, the row has model.chunk_size=7)"
    )
    assert rows["transformer"][1].startswith("70.0") and rows["transformer"][-1] == "not tuned (study s-tr tuned with model.d_model=32)"
    # two studies with the same settings for one row: the one named later re-tunes it (its values, both named)
    study("s3b", "tlb", [*fixed, "model.chunk_size=3"], 0.001, 0.9)
    (tmp_path / "tables" / "toy.yaml").write_text((tmp_path / "tables" / "toy.yaml").read_text().replace("[s3, s25, s-tr]", "[s3, s3b]"))
    result = reproduce(load_table("toy", folder=tmp_path / "tables"), Registry(), "smoke", out, "bench reproduce toy")
    again = {r[0]: r for r in result["rows"]}
    assert again["tlb3"][1].startswith("10.0")  # the record at s3b's lr 0.001
    assert again["tlb3"][-1].startswith("train.lr=0.001 (") and again["tlb3"][-1].endswith("re-tuned by s3b, first tuned by s3)")


# ---- several studies' overlays together -----------------------------------------------------------


def test_overlays_of_several_studies_combine_and_carry_the_studies_settings(tmp_path):
    """--registry a.yaml,b.yaml: the overlays of two studies are merged key by key, each M-tuned at
    the settings its study tuned it at (its fixed model/train --set and its best values), the
    shipped models as before; two overlays that tune one model differently are refused."""
    from bench.tune.overlay import overlay, write_overlay

    def study(name, model, sets, lr):
        meta = {
            "task": "flipflop",
            "preset": "smoke",
            "models": [model],
            "space": ["train.lr=[0.001,0.003]"],
            "set": sets,
            "seed": 0,
            "pruner": "asha",
            "trials": 2,
        }
        path = tmp_path / name / "tuned.yaml"
        path.parent.mkdir()
        write_overlay(path, overlay(Registry(), meta, {model: {"train.lr": lr}}, name), meta, "bench compare ...")
        return str(path)

    a = study("a", "lstm", ["data.n_test=16", "train.max_epochs=1"], 0.003)
    b = study("b", "tlb", ["data.n_test=16", "model.chunk_size=25", "model.init=reference", "train.max_epochs=1"], 0.001)
    c = study("c", "tlb", ["model.chunk_size=3"], 0.003)
    both, shipped = Registry(f"{a},{b}"), Registry()
    lstm = resolve_run(both, "lstm-tuned", "flipflop", "smoke", [])
    assert (lstm.train.lr, lstm.train.max_epochs) == (0.003, 1)
    tlb = resolve_run(both, "tlb-tuned", "flipflop", "smoke", [])
    assert (tlb.train.lr, tlb.train.max_epochs) == (0.001, 1)
    assert (tlb.model.params["chunk_size"], tlb.model.params["init"]) == (25, "reference")
    assert tlb.task.params == resolve_run(shipped, "tlb", "flipflop", "smoke", []).task.params  # data.n_test: the task's, not a model's
    for model in ("lstm", "tlb"):  # the shipped models resolve as without the overlays
        assert resolve_run(both, model, "flipflop", "smoke", []).public() == resolve_run(shipped, model, "flipflop", "smoke", []).public()
    assert both.user_spec == f"{a},{b}" and Registry(both.user_spec).raw_tasks == both.raw_tasks  # what a worker process rebuilds
    with pytest.raises(UserError, match=r"registry files .*b/tuned.yaml and .*c/tuned.yaml disagree on models.tlb-tuned"):
        Registry(f"{a},{b},{c}")


@pytest.mark.slow
def test_a_tuned_rows_seed_0_is_its_studys_best_trial_read_not_trained(tmp_path, monkeypatch):
    """Two studies of one model at two settings, run by bench tune; a table with a row for each:
    each row's seed 0 is its study's best trial record (the tuned column says so), its seed 1 the
    pick's second tuning seed (a lone pick gets it too: the tuned column says the two seeds tuned),
    both read, and --run plans only the other seeds, at the study's best value and the row's settings."""
    from bench.report.reproduce import plan, reproduce
    from bench.report.tables import load_table

    without_chance(monkeypatch)
    out = tmp_path / "out"
    for name, chunk in (("c4", 4), ("c8", 8)):
        assert (
            main(
                [
                    "tune",
                    *TASK,
                    "--models",
                    "tlb",
                    "--grid",
                    "train.lr=[3e-3]",
                    "--set",
                    "train.max_epochs=1",
                    "--set",
                    f"model.chunk_size={chunk}",
                    "--study",
                    name,
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(
        "title: toy\nsource: none\npreset: smoke\nseeds: [0, 1, 2]\nmetric: last_acc\nset: [train.max_epochs=1]\n"
        "tuned: [c8, c4]\ntasks: [flipflop]\nsplits: [T32_p1]\nrows:\n"
        "  - {model: tlb, label: tlb4, set: [model.chunk_size=4], paper: [90]}\n"
        "  - {model: tlb, label: tlb8, set: [model.chunk_size=8], paper: [90]}\n"
    )
    table = load_table("toy", folder=tmp_path / "tables")
    result = reproduce(table, Registry(), "smoke", out, "bench reproduce toy")
    for label, chunk in (("tlb4", 4), ("tlb8", 8)):
        row = next(r for r in result["rows"] if r[0] == label)
        recs = [
            read_record(
                record_path(out, "tlb", "flipflop", "smoke", seed, [f"model.chunk_size={chunk}", "train.lr=0.003", "train.max_epochs=1"])
            )
            for seed in (0, 1)
        ]
        assert [rec["config"]["model"]["params"]["chunk_size"] for rec in recs] == [chunk, chunk]
        mean = 100 * sum(rec["metrics"]["T32_p1"]["last_acc"] for rec in recs) / 2
        assert float(row[1].split()[0]) == pytest.approx(mean, abs=0.051) and " (2, " in row[1]  # the trial and its second seed
        assert "; seed 0: the best trial" in row[-1]  # the study trained seeds 0 and 1 (sync): the table is told
        assert row[-1].endswith("tuning seeds 0,1; seed(s) 0,1 also tuned: not apart from the selection)")
    todo, _ = plan(table, Registry(), "smoke", out)
    assert sorted((c.seed, tuple(sorted(c.overrides))) for c in todo) == [
        (2, ("model.chunk_size=4", "train.lr=0.003", "train.max_epochs=1")),
        (2, ("model.chunk_size=8", "train.lr=0.003", "train.max_epochs=1")),
    ]


def test_a_table_naming_overlays_reads_their_models_at_other_widths(tmp_path):
    """``overlays:``: a table's rows name a study's M-tuned model, which keeps the study's lr at the
    widths the rows add (the budget sweep); the table is read with the overlay loaded, the tuned
    column names the study and what the row adds, --run plans the tuned model at the row's
    settings, and a missing overlay is one line naming the study."""
    from bench.records import base_record, write_json_atomic
    from bench.report.reproduce import plan, reproduce
    from bench.report.tables import check_names, load_table
    from bench.report.tuned import overlay_registry
    from bench.tune.overlay import overlay, write_overlay

    out = tmp_path / "out"
    sets = ["data.n_test=16", "train.max_epochs=1"]
    meta = {
        "task": "flipflop",
        "preset": "smoke",
        "models": ["lstm"],
        "space": ["train.lr=[0.001,0.003]"],
        "set": sets,
        "seed": 0,
        "pruner": "asha",
        "trials": 2,
    }
    (out / "studies" / "s").mkdir(parents=True)
    write_overlay(out / "studies" / "s" / "tuned.yaml", overlay(Registry(), meta, {"lstm": {"train.lr": 0.003}}, "s"), meta, "bench ...")
    write_json_atomic(
        out / "studies" / "s" / "best.json",
        {
            "study": "s",
            "task": "flipflop",
            "preset": "smoke",
            "set": sets,
            "space": meta["space"],
            "seed": 0,
            "models": {"lstm": {"values": {"train.lr": 0.003}, "val": 0.855, "finished": 2, "trials": 2}},
        },
    )
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(
        "title: toy\nsource: none\npreset: smoke\nseeds: [0]\nmetric: last_acc\nset: [train.max_epochs=1, data.n_test=16]\n"
        "overlays: s\ntasks: [flipflop]\nsplits: [T32_p1]\nrows:\n"
        "  - {model: lstm-tuned, label: lstm@1x}\n"
        "  - {model: lstm-tuned, label: lstm@2x, set: [model.d_model=64]}\n"
        "  - {model: lstm}\n"
    )
    table = load_table("toy", folder=tmp_path / "tables")
    with pytest.raises(UserError, match="lstm-tuned"):  # without the overlay the model is unknown
        check_names(table, Registry())
    registry = overlay_registry(table, Registry(), out)
    check_names(table, registry)
    assert registry.user_spec == str(out / "studies" / "s" / "tuned.yaml")  # what a grid worker rebuilds
    assert resolve_run(registry, "lstm-tuned", "flipflop", "smoke", ["model.d_model=64"]).train.lr == 0.003
    for model, overrides, value in (("lstm-tuned", [], 0.9), ("lstm-tuned", ["model.d_model=64"], 0.95), ("lstm", [], 0.6)):
        rec = base_record(model, "flipflop", "smoke", 0, [*sets, *overrides])
        rec.update(
            status="ok",
            primary_metric="token_acc",
            report_metrics=["last_acc"],
            test_splits=["T32_p1"],
            metrics={"val": {"n": 8, "last_acc": 0.5}, "T32_p1": {"n": 16, "last_acc": value}},
        )
        write_json_atomic(record_path(out, model, "flipflop", "smoke", 0, [*sets, *overrides]), rec)
    result = reproduce(table, registry, "smoke", out, "bench reproduce toy")
    rows = {r[0]: r for r in result["rows"]}
    assert rows["lstm@1x"][1].startswith("90.0") and rows["lstm@1x"][-1] == "train.lr=0.003 (lstm-tuned: study s, 2 trials, val 85.5)"
    assert rows["lstm@2x"][1].startswith("95.0")
    assert rows["lstm@2x"][-1] == "train.lr=0.003 (lstm-tuned: study s, 2 trials, val 85.5; the row adds model.d_model=64)"
    assert rows["lstm"][1].startswith("60.0") and rows["lstm"][-1] == "not tuned"
    assert "rows' models from the overlays of study s" in result["note"]
    table.seeds = [0, 1]
    todo, _ = plan(table, registry, "smoke", out)
    assert sorted((c.model, c.seed, tuple(sorted(c.overrides))) for c in todo) == [
        ("lstm", 1, tuple(sets)),
        ("lstm-tuned", 1, tuple(sorted([*sets, "model.d_model=64"]))),
        ("lstm-tuned", 1, tuple(sets)),
    ]
    (out / "studies" / "s" / "tuned.yaml").unlink()
    with pytest.raises(UserError, match=r"^table toy takes its rows' models from bench tune study s's overlay, and .* does not exist"):
        overlay_registry(table, Registry(), out)
