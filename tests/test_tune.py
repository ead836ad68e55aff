"""bench tune: a study whose trials are runs, selected on validation, pruned, shared by workers
(local processes, SLURM jobs through submitit's local executor), resumed after a SIGKILL, and
summarised as a registry overlay that bench compare uses; Dodge et al.'s expected maximum."""
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from bench.cli import main
from bench.config import canonical_text, resolve_run
from bench.errors import UserError
from bench.records import read_record, record_path
from bench.registry import Registry
from bench.tune.report import expected_max

ROOT = Path(__file__).resolve().parent.parent
# flip-flop at its smoke preset learns something in an epoch or two (validation token_acc ~ 0.5-0.9)
TASK = ["--task", "flipflop", "--preset", "smoke"]


def trial_record(out: Path, model: str, lr: float, sets=("train.max_epochs=1",)) -> Path:
    return record_path(out, model, "flipflop", "smoke", 0, [*sets, f"train.lr={canonical_text(lr)}"])


def val(rec: dict) -> float:
    """A trial's score: the study's objective on the validation split, with its tested weights (by
    default the task's reported metric: flip-flop's last-read accuracy, not the token accuracy the
    run selects its checkpoint on)."""
    return rec["metrics"]["val"]["last_acc"]


def studies(out: Path, name: str = "flipflop-smoke") -> dict:
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / "studies" / name / "journal.log")))
    return {s.study_name: optuna.load_study(study_name=s.study_name, storage=storage) for s in optuna.get_all_study_summaries(storage)}


# ---- Dodge et al.'s expected maximum -----------------------------------------------------------

def test_expected_max_hand_computed_and_by_enumeration():
    scores = [0.2, 0.5, 0.9]
    # by hand: n=1 the mean; n=2: 0.2*(1/9) + 0.5*(4/9 - 1/9) + 0.9*(1 - 4/9) = 0.6888...
    assert expected_max(scores, 1) == pytest.approx((0.2 + 0.5 + 0.9) / 3)
    assert expected_max(scores, 2) == pytest.approx(0.2 / 9 + 0.5 * 3 / 9 + 0.9 * 5 / 9)
    # an independent reference: the mean of max over every ordered draw of n (with replacement)
    ties = [0.3, 0.3, 0.7, 0.1]
    for values in (scores, ties):
        for n in (1, 2, 3, 4):
            draws = list(itertools.product(values, repeat=n))
            assert expected_max(values, n) == pytest.approx(sum(map(max, draws)) / len(draws))
    with pytest.raises(ValueError):
        expected_max([], 1)


# ---- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, words", [
    (["--space", "train.lrr=loguniform(1e-4,1e-2)"], "no parameter 'lrr'"),
    (["--space", "train.lr=gaussian(1e-3,1e-4)"], "unknown distribution 'gaussian'"),
    (["--space", "train.lr=uniform(-0.01,0.01)"], "train.lr=-0.01"),
    (["--space", "model.dropout=uniform(0.1,1.5)"], "model.dropout=1.5"),
    (["--space", "model.d_model=uniform(16,32)"], "expected int"),
    (["--space", "data.n_train=int(10,20)"], "only model.* and train.*"),
    (["--space", "train.lr=loguniform(1e-4,1e-2)", "--trials", "0"], "--trials"),
    (["--grid", "train.lr=3e-4"], "KEY=[V1,V2,...]"),
    (["--space", "train.lr=loguniform(1e-4,1e-2)", "--set", "train.lr=1e-3"], "also fixed by --set"),
    ([], "name what to tune"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, extra, words):
    out = tmp_path / "out"
    assert main(["tune", "--models", "lstm,transformer", *TASK, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("bench: error:") and words in err, err
    assert not out.exists()


def test_study_names_lists_the_folders_holding_a_study(tmp_path):
    from bench.tune.study import study_names

    for name in ("b", "a", "half"):
        (tmp_path / "studies" / name).mkdir(parents=True)
    for name in ("b", "a"):
        (tmp_path / "studies" / name / "study.json").write_text("{}")
    assert study_names(tmp_path) == ["a", "b"]  # "half" has no study.json
    assert study_names(tmp_path / "nowhere") == []


def test_a_study_of_another_task_is_refused(tmp_path, capsys):
    folder = tmp_path / "studies" / "mine"
    folder.mkdir(parents=True)
    meta = {"task": "parity", "preset": "smoke", "models": ["lstm"], "space": ["train.lr=loguniform(0.0001,0.01)"], "set": [],
            "seed": 0, "pruner": "asha", "trials": 2}
    (folder / "study.json").write_text(json.dumps(meta))
    before = sorted(p.name for p in folder.iterdir())
    code = main(["tune", "--models", "lstm", *TASK, "--space", "train.lr=loguniform(1e-4,1e-2)", "--study", "mine",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "tunes task 'parity', not 'flipflop'" in err, err
    assert sorted(p.name for p in folder.iterdir()) == before and not (tmp_path / "runs").exists()


# ---- pruning ----------------------------------------------------------------------------------

class AlwaysPrune(optuna.pruners.BasePruner):
    def prune(self, study, trial):
        return True


def test_a_pruned_trial_is_a_pruned_record_with_its_curve(tmp_path):
    from bench.report.leaderboard import load_records, table
    from bench.tune.study import Worker, create

    meta = {"task": "flipflop", "preset": "smoke", "models": ["lstm"], "space": ["train.lr=[0.003]"],
            "set": ["train.max_epochs=3"], "seed": 0, "pruner": "asha", "trials": 1}
    create(tmp_path / "studies" / "p", meta)
    Worker(tmp_path, "p", Registry(), pruner=AlwaysPrune()).run()
    (trial,) = studies(tmp_path, "p")["lstm"].trials
    assert trial.state == optuna.trial.TrialState.PRUNED
    path = trial_record(tmp_path, "lstm", 0.003, sets=("train.max_epochs=3",))
    rec = read_record(path)  # a valid record for every reader
    assert rec["status"] == "pruned" and len(rec["val_history"]) == 1  # stopped at its first validation
    assert rec["pruned_step"] == rec["val_history"][0]["step"] == rec["steps_run"] == next(iter(trial.intermediate_values))
    assert "metrics" not in rec and not (path.with_suffix("") / "ckpt").exists()  # never tested; checkpoints removed
    records = load_records(tmp_path, ["lstm"], ["flipflop"], "smoke", path.stem.partition("-")[2])
    assert "FAIL" not in str(table(records, ["lstm"], ["flipflop"])[1])  # pruned is not a failure
    # a second worker finds the pruned record: the trial is pruned again, nothing trained
    meta["trials"] = 2
    (tmp_path / "studies" / "p" / "study.json").write_text(json.dumps(meta))
    assert Worker(tmp_path, "p", Registry(), pruner=AlwaysPrune()).run() == 0


def test_a_stopped_trial_is_requeued_with_its_values(tmp_path, monkeypatch):
    import bench.runner
    from bench.errors import RunInterrupted
    from bench.tune.study import Worker, create

    def stopped(*args, **kwargs):  # SIGINT mid-run: the run checkpoints and raises
        raise RunInterrupted(signal.SIGINT, 5, "last.ckpt")
    monkeypatch.setattr(bench.runner, "run", stopped)
    meta = {"task": "flipflop", "preset": "smoke", "models": ["lstm"], "space": ["train.lr=loguniform(0.0001,0.01)"],
            "set": [], "seed": 0, "pruner": "none", "trials": 2}
    create(tmp_path / "studies" / "s", meta)
    with pytest.raises(RunInterrupted):
        Worker(tmp_path, "s", Registry()).run()
    first, again = studies(tmp_path, "s")["lstm"].trials
    assert first.state == optuna.trial.TrialState.FAIL and again.state == optuna.trial.TrialState.WAITING
    assert again.params == first.params  # the same values: the same run, which resumes from its checkpoint


# ---- a study end to end -----------------------------------------------------------------------

GRID = ["--models", "lstm,transformer", *TASK, "--set", "train.max_epochs=1", "--grid", "train.lr=[1e-3,3e-3]", "--pruner", "none"]


@pytest.mark.slow
def test_smoke_study_prints_best_writes_overlay_that_compare_uses(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["tune", *GRID, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for model in ("lstm", "transformer"):  # the best trial is the best validation score among the trials' records
        recs = {lr: read_record(trial_record(out, model, lr)) for lr in (1e-3, 3e-3)}
        assert all(r["status"] == "ok" for r in recs.values())
        top = max(val(r) for r in recs.values())  # the grid's order breaks a tie (50 validation sequences: ties happen)
        line = next(ln for ln in printed.splitlines() if ln.startswith(f"| {model} "))
        assert any(f"train.lr={canonical_text(lr)}" in line for lr, r in recs.items() if val(r) == top) and f"{100 * top:.1f}" in line
        assert "2 (2 finished, 0 pruned, 0 failed)" in line
    overlay = out / "studies" / "flipflop-smoke" / "tuned.yaml"
    assert main(["--registry", str(overlay), "compare", "--models", "lstm-tuned,lstm", "--tasks", "flipflop", "--preset", "smoke",
                 "--set", "train.max_epochs=1", "--out", str(out), "--run"]) == 0
    tuned = read_record(record_path(out, "lstm-tuned", "flipflop", "smoke", 0, ["train.max_epochs=1"]))
    lstm = {lr: read_record(trial_record(out, "lstm", lr)) for lr in (1e-3, 3e-3)}
    assert tuned["status"] == "ok" and val(lstm[tuned["config"]["train"]["lr"]]) == max(map(val, lstm.values()))
    assert tuned["config"]["train"]["max_epochs"] == 1
    untuned = read_record(record_path(out, "lstm", "flipflop", "smoke", 0, ["train.max_epochs=1"]))
    preset_lr = resolve_run(Registry(), "lstm", "flipflop", "smoke").train.lr
    assert untuned["config"]["train"]["lr"] == preset_lr  # the overlay changes the tuned entry only
    # rerunning the command continues the finished study: nothing trained, the same best
    before = {p: p.read_bytes() for p in (out / "runs").rglob("seed0-*.json")}
    assert main(["tune", *GRID, "--out", str(out)]) == 0
    assert {p: p.read_bytes() for p in (out / "runs").rglob("seed0-*.json")} == before
    # --report: the expected-max table and the plot
    assert main(["tune", *TASK, "--out", str(out), "--report"]) == 0
    assert "n=2" in capsys.readouterr().out
    assert (out / "studies" / "flipflop-smoke" / "report.png").stat().st_size > 0


@pytest.mark.slow
def test_a_killed_worker_is_resumed_and_a_rerun_trains_nothing_finished(tmp_path):
    out = tmp_path / "out"
    lrs = [1e-3, 2e-3, 3e-3, 4e-3]
    sets = ("train.max_epochs=4",)
    argv = [sys.executable, "-m", "bench", "tune", "--models", "lstm", *TASK, "--set", sets[0],
            "--grid", f"train.lr=[{','.join(map(str, lrs))}]", "--pruner", "none", "--jobs", "2", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed, deadline = None, time.time() + 240
    while killed is None and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if not (out / "studies" / "flipflop-smoke" / "study.json").exists():  # written after the journal's studies
            continue
        running = studies(out)["lstm"].get_trials(states=(optuna.trial.TrialState.RUNNING,))
        for t in running:
            record = out / t.user_attrs.get("record", "none")
            if "worker" in t.user_attrs and (record.with_suffix("") / "ckpt" / "last.ckpt").exists() and not record.exists():
                pid = int(t.user_attrs["worker"].split("-")[-2])
                os.kill(pid, signal.SIGKILL)  # mid-run, after a checkpoint
                killed = record
                break
    output = proc.communicate(timeout=400)[0]
    assert killed is not None, output
    # the killed run was resumed from its checkpoint (by the other worker, or by the rerun below)
    first = {p: p.read_bytes() for p in (out / "runs").rglob("seed0-*.json")}
    assert main(["tune", "--models", "lstm", *TASK, "--set", sets[0], "--grid", f"train.lr=[{','.join(map(str, lrs))}]",
                 "--pruner", "none", "--out", str(out)]) == 0
    after = {p: p.read_bytes() for p in (out / "runs").rglob("seed0-*.json")}
    assert all(after[p] == data for p, data in first.items())  # no finished trial trained again
    recs = {lr: read_record(trial_record(out, "lstm", lr, sets)) for lr in lrs}
    assert all(r["status"] == "ok" for r in recs.values())
    resumed = {lr for lr, r in recs.items() if r["resumed_from"]}
    # a worker's records name the bench tune command that started it, not the worker's own argv
    assert all(r["command"] == " ".join(["bench", *argv[3:-1], "out"]) for lr, r in recs.items() if lr not in resumed)
    assert {trial_record(out, "lstm", lr, sets) for lr in resumed} == {killed}  # only the killed run resumed, once
    trials = studies(out)["lstm"].trials
    states = [t.state for t in trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 4 and states.count(optuna.trial.TrialState.FAIL) == 1


@pytest.mark.slow
def test_the_same_study_through_slurm_with_submitits_local_executor(tmp_path, capsys):
    pytest.importorskip("submitit")
    out = tmp_path / "out"
    assert main(["tune", "--models", "lstm", *TASK, "--set", "train.max_epochs=1", "--grid", "train.lr=[1e-3,3e-3]",
                 "--jobs", "2", "--launcher", "slurm", "--slurm", "executor=local", "--slurm", "cpus_per_cell=1",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out  # the default for a grid, --pruner sync: its brackets shared by the two jobs
    assert "| lstm " in printed and "finished" in printed and "Budget per row" in printed
    assert json.loads((out / "studies" / "flipflop-smoke" / "bracket.json").read_text())["lstm"]["done"]
    logs = sorted((out / "studies" / "flipflop-smoke" / "logs").glob("slurm-worker-*.log"))
    assert len(logs) == 2  # two jobs, each a worker on the one study
    assert all(read_record(trial_record(out, "lstm", lr))["status"] == "ok" for lr in (1e-3, 3e-3))
    assert (out / "studies" / "flipflop-smoke" / "tuned.yaml").exists()


# ---- tables that say "tuned" ------------------------------------------------------------------

def test_a_table_naming_a_study_reads_tuned_rows_and_marks_the_others(tmp_path):
    from bench.records import base_record, write_json_atomic
    from bench.report.reproduce import plan, reproduce
    from bench.report.tables import load_table

    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(
        "title: toy\nsource: none\npreset: smoke\nseeds: [0]\nmetric: last_acc\nset: [train.max_epochs=1]\n"
        "tuned: [flipflop-smoke, gone]\ntasks: [flipflop]\nsplits: [T32_p1]\n"
        "rows:\n  - {model: lstm, paper: [90]}\n  - {model: transformer, paper: [80]}\n")
    out = tmp_path / "out"
    best = {"study": "flipflop-smoke", "task": "flipflop", "preset": "smoke", "set": ["train.max_epochs=1"], "space": [],
            "models": {"lstm": {"values": {"train.lr": 0.003}, "val": 0.855, "finished": 2, "trials": 2}}}
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
    table.tuned = ("flipflop-smoke",)  # every study finished: an untuned row trains at the table's values
    todo, _ = plan(table, Registry(), "smoke", out)
    assert sorted((c.model, c.seed, c.overrides) for c in todo) == [("lstm", 1, tuple(tuned)), ("transformer", 1, ("train.max_epochs=1",))]


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
        "  - {model: transformer, paper: [80]}\n")
    out = tmp_path / "out"
    fixed = ["data.n_test=16", "train.max_epochs=1"]

    def study(name, model, sets, lr, val):
        record = record_path(out, model, "flipflop", "smoke", 0, [*sets, f"train.lr={lr}"]).relative_to(out)
        write_json_atomic(out / "studies" / name / "best.json", {
            "study": name, "task": "flipflop", "preset": "smoke", "set": sets, "space": ["train.lr=[0.001,0.003]"], "seed": 0,
            "models": {model: {"values": {"train.lr": lr}, "val": val, "finished": 2, "trials": 2, "record": str(record)}}})

    study("s3", "tlb", [*fixed, "model.chunk_size=3"], 0.003, 0.8)
    study("s25", "tlb", ["train.max_epochs=1", "model.chunk_size=0x19", "data.n_test= 16"], 0.001, 0.7)  # the same set, spelt otherwise
    study("s-tr", "transformer", [*fixed, "model.d_model=32"], 0.003, 0.6)
    cases = (("tlb", ["model.chunk_size=3", "train.lr=0.003"], 0.93), ("tlb", ["model.chunk_size=25", "train.lr=0.001"], 0.925),
             ("tlb", ["model.chunk_size=3", "train.lr=0.001"], 0.1), ("tlb", ["model.chunk_size=7"], 0.5), ("transformer", [], 0.7))
    for model, overrides, value in cases:
        rec = base_record(model, "flipflop", "smoke", 0, [*fixed, *overrides])
        rec.update(status="ok", primary_metric="token_acc", report_metrics=["last_acc"], test_splits=["T32_p1"],
                   metrics={"val": {"n": 8, "last_acc": 0.5}, "T32_p1": {"n": 16, "last_acc": value}})
        write_json_atomic(record_path(out, model, "flipflop", "smoke", 0, [*fixed, *overrides]), rec)
    table = load_table("toy", folder=tmp_path / "tables")
    result = reproduce(table, Registry(), "smoke", out, "bench reproduce toy")
    rows = {r[0]: r for r in result["rows"]}
    assert rows["tlb3"][1].startswith("93.0") and rows["tlb3"][-1] == "train.lr=0.003 (2 trials, val 80.0; seed 0: the best trial)"
    assert rows["tlb25"][1].startswith("92.5") and rows["tlb25"][-1] == "train.lr=0.001 (2 trials, val 70.0; seed 0: the best trial)"
    assert rows["tlb7"][1].startswith("50.0")  # the untuned row's own record
    assert rows["tlb7"][-1] == ("not tuned (study s3 tuned with model.chunk_size=3, the row has model.chunk_size=7; "
                                "study s25 tuned with model.chunk_size=25, the row has model.chunk_size=7)")
    assert rows["transformer"][1].startswith("70.0") and rows["transformer"][-1] == "not tuned (study s-tr tuned with model.d_model=32)"
    # two studies with the same settings for one row: which one is meant is not guessed
    study("s3b", "tlb", [*fixed, "model.chunk_size=3"], 0.001, 0.9)
    (tmp_path / "tables" / "toy.yaml").write_text((tmp_path / "tables" / "toy.yaml").read_text().replace("[s3, s25, s-tr]", "[s3, s3b]"))
    with pytest.raises(UserError, match="row 'tlb3' .* tuned by two of the table's studies, s3 and s3b"):
        reproduce(load_table("toy", folder=tmp_path / "tables"), Registry(), "smoke", out, "bench reproduce toy")


# ---- several studies' overlays together -----------------------------------------------------------

def test_overlays_of_several_studies_combine_and_carry_the_studies_settings(tmp_path):
    """--registry a.yaml,b.yaml: the overlays of two studies are merged key by key, each M-tuned at
    the settings its study tuned it at (its fixed model/train --set and its best values), the
    shipped models as before; two overlays that tune one model differently are refused."""
    from bench.tune.overlay import overlay, write_overlay

    def study(name, model, sets, lr):
        meta = {"task": "flipflop", "preset": "smoke", "models": [model], "space": ["train.lr=[0.001,0.003]"], "set": sets,
                "seed": 0, "pruner": "asha", "trials": 2}
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
def test_a_tuned_rows_seed_0_is_its_studys_best_trial_read_not_trained(tmp_path):
    """Two studies of one model at two settings, run by bench tune; a table with a row for each:
    each row's seed 0 is its study's best trial record (the tuned column says so), and --run
    plans only the other seeds, at the study's best value and the row's settings."""
    from bench.report.reproduce import plan, reproduce
    from bench.report.tables import load_table

    out = tmp_path / "out"
    for name, chunk in (("c4", 4), ("c8", 8)):
        assert main(["tune", *TASK, "--models", "tlb", "--grid", "train.lr=[3e-3]", "--set", "train.max_epochs=1",
                     "--set", f"model.chunk_size={chunk}", "--study", name, "--out", str(out)]) == 0
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(
        "title: toy\nsource: none\npreset: smoke\nseeds: [0, 1]\nmetric: last_acc\nset: [train.max_epochs=1]\n"
        "tuned: [c8, c4]\ntasks: [flipflop]\nsplits: [T32_p1]\nrows:\n"
        "  - {model: tlb, label: tlb4, set: [model.chunk_size=4], paper: [90]}\n"
        "  - {model: tlb, label: tlb8, set: [model.chunk_size=8], paper: [90]}\n")
    table = load_table("toy", folder=tmp_path / "tables")
    result = reproduce(table, Registry(), "smoke", out, "bench reproduce toy")
    for label, chunk in (("tlb4", 4), ("tlb8", 8)):
        row = next(r for r in result["rows"] if r[0] == label)
        rec = read_record(record_path(out, "tlb", "flipflop", "smoke", 0, [f"model.chunk_size={chunk}", "train.lr=0.003",
                                                                          "train.max_epochs=1"]))
        assert rec["config"]["model"]["params"]["chunk_size"] == chunk
        assert row[1].startswith(f"{100 * rec['metrics']['T32_p1']['last_acc']:.1f} (1")  # seed 0 alone: the trial
        assert "; seed 0: the best trial" in row[-1]  # the study trained seeds 0 and 1 (sync): the table is told
        assert row[-1].endswith("tuning seeds 0,1; seed(s) 0,1 also tuned: not apart from the selection)")
    todo, _ = plan(table, Registry(), "smoke", out)
    assert sorted((c.seed, tuple(sorted(c.overrides))) for c in todo) == [
        (1, ("model.chunk_size=4", "train.lr=0.003", "train.max_epochs=1")),
        (1, ("model.chunk_size=8", "train.lr=0.003", "train.max_epochs=1"))]


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
    meta = {"task": "flipflop", "preset": "smoke", "models": ["lstm"], "space": ["train.lr=[0.001,0.003]"], "set": sets,
            "seed": 0, "pruner": "asha", "trials": 2}
    (out / "studies" / "s").mkdir(parents=True)
    write_overlay(out / "studies" / "s" / "tuned.yaml", overlay(Registry(), meta, {"lstm": {"train.lr": 0.003}}, "s"), meta, "bench ...")
    write_json_atomic(out / "studies" / "s" / "best.json", {
        "study": "s", "task": "flipflop", "preset": "smoke", "set": sets, "space": meta["space"], "seed": 0,
        "models": {"lstm": {"values": {"train.lr": 0.003}, "val": 0.855, "finished": 2, "trials": 2}}})
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(
        "title: toy\nsource: none\npreset: smoke\nseeds: [0]\nmetric: last_acc\nset: [train.max_epochs=1, data.n_test=16]\n"
        "overlays: s\ntasks: [flipflop]\nsplits: [T32_p1]\nrows:\n"
        "  - {model: lstm-tuned, label: lstm@1x}\n"
        "  - {model: lstm-tuned, label: lstm@2x, set: [model.d_model=64]}\n"
        "  - {model: lstm}\n")
    table = load_table("toy", folder=tmp_path / "tables")
    with pytest.raises(UserError, match="lstm-tuned"):  # without the overlay the model is unknown
        check_names(table, Registry())
    registry = overlay_registry(table, Registry(), out)
    check_names(table, registry)
    assert registry.user_spec == str(out / "studies" / "s" / "tuned.yaml")  # what a grid worker rebuilds
    assert resolve_run(registry, "lstm-tuned", "flipflop", "smoke", ["model.d_model=64"]).train.lr == 0.003
    for model, overrides, value in (("lstm-tuned", [], 0.9), ("lstm-tuned", ["model.d_model=64"], 0.95), ("lstm", [], 0.6)):
        rec = base_record(model, "flipflop", "smoke", 0, [*sets, *overrides])
        rec.update(status="ok", primary_metric="token_acc", report_metrics=["last_acc"], test_splits=["T32_p1"],
                   metrics={"val": {"n": 8, "last_acc": 0.5}, "T32_p1": {"n": 16, "last_acc": value}})
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
        ("lstm", 1, tuple(sets)), ("lstm-tuned", 1, tuple(sorted([*sets, "model.d_model=64"]))), ("lstm-tuned", 1, tuple(sets))]
    (out / "studies" / "s" / "tuned.yaml").unlink()
    with pytest.raises(UserError, match=r"^table toy takes its rows' models from bench tune study s's overlay, and .* does not exist"):
        overlay_registry(table, Registry(), out)
