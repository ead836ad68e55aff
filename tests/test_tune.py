"""bench tune: a study whose trials are runs, selected on validation, pruned, and summarised as a
registry overlay that bench compare uses; bad input; Dodge et al.'s expected maximum. Workers sharing
a study: tests/test_tune_workers.py; tables and overlays reading studies: tests/test_tune_tables.py."""

import itertools
import json
import signal

import pytest

optuna = pytest.importorskip("optuna")

from tune_helpers import TASK, studies, trial_record, without_chance

from bench.cli import main
from bench.config import canonical_text, resolve_run
from bench.records import read_record, record_path
from bench.registry import Registry
from bench.tune.report import expected_max


def val(rec: dict) -> float:
    """A trial's score: the study's objective on the validation split, with its tested weights (by
    default the task's reported metric: flip-flop's last-read accuracy, not the token accuracy the
    run selects its checkpoint on)."""
    return rec["metrics"]["val"]["last_acc"]


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


@pytest.mark.parametrize(
    "extra, words",
    [
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
    ],
)
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
    meta = {
        "task": "parity",
        "preset": "smoke",
        "models": ["lstm"],
        "space": ["train.lr=loguniform(0.0001,0.01)"],
        "set": [],
        "seed": 0,
        "pruner": "asha",
        "trials": 2,
    }
    (folder / "study.json").write_text(json.dumps(meta))
    before = sorted(p.name for p in folder.iterdir())
    code = main(["tune", "--models", "lstm", *TASK, "--space", "train.lr=loguniform(1e-4,1e-2)", "--study", "mine", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "tunes task 'parity', not 'flipflop'" in err, err
    assert sorted(p.name for p in folder.iterdir()) == before and not (tmp_path / "runs").exists()


# ---- pruning ----------------------------------------------------------------------------------


class AlwaysPrune(optuna.pruners.BasePruner):
    def prune(self, study, trial):
        return True


def test_a_pruned_trial_is_a_pruned_record_with_its_curve(tmp_path):
    from bench.report.cells import load_records
    from bench.report.leaderboard import table
    from bench.tune.study import Worker, create

    meta = {
        "task": "flipflop",
        "preset": "smoke",
        "models": ["lstm"],
        "space": ["train.lr=[0.003]"],
        "set": ["train.max_epochs=3"],
        "seed": 0,
        "pruner": "asha",
        "trials": 1,
    }
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


def test_continuing_a_study_adds_to_its_journal_only_the_models_it_lacks(tmp_path):
    from bench.tune.study import create

    folder = tmp_path / "studies" / "c"
    meta = {
        "task": "flipflop",
        "preset": "smoke",
        "models": ["lstm", "gru"],
        "space": ["train.lr=[0.003]"],
        "set": [],
        "seed": 0,
        "pruner": "none",
        "trials": 1,
    }
    create(folder, meta)
    journal = (folder / "journal.log").read_text()
    assert sorted(studies(tmp_path, "c")) == ["gru", "lstm"]
    create(folder, meta)  # the same command again: nothing to add
    assert (folder / "journal.log").read_text() == journal
    create(folder, {**meta, "models": ["lstm", "gru", "transformer"]})  # one model more: one entry more
    added = (folder / "journal.log").read_text()[len(journal) :].splitlines()
    assert len(added) == 1 and json.loads(added[0])["study_name"] == "transformer"


def test_a_stopped_trial_is_requeued_with_its_values(tmp_path, monkeypatch):
    import bench.runner
    from bench.errors import RunInterrupted
    from bench.tune.study import Worker, create

    def stopped(*args, **kwargs):  # SIGINT mid-run: the run checkpoints and raises
        raise RunInterrupted(signal.SIGINT, 5, "last.ckpt")

    monkeypatch.setattr(bench.runner, "run", stopped)
    meta = {
        "task": "flipflop",
        "preset": "smoke",
        "models": ["lstm"],
        "space": ["train.lr=loguniform(0.0001,0.01)"],
        "set": [],
        "seed": 0,
        "pruner": "none",
        "trials": 2,
    }
    create(tmp_path / "studies" / "s", meta)
    with pytest.raises(RunInterrupted):
        Worker(tmp_path, "s", Registry()).run()
    first, again = studies(tmp_path, "s")["lstm"].trials
    assert first.state == optuna.trial.TrialState.FAIL and again.state == optuna.trial.TrialState.WAITING
    assert again.params == first.params  # the same values: the same run, which resumes from its checkpoint


# ---- a study end to end -----------------------------------------------------------------------

GRID = ["--models", "lstm,transformer", *TASK, "--set", "train.max_epochs=1", "--grid", "train.lr=[1e-3,3e-3]", "--pruner", "none"]


@pytest.mark.slow
def test_smoke_study_prints_best_writes_overlay_that_compare_uses(tmp_path, capsys, monkeypatch):
    without_chance(monkeypatch)
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
    assert (
        main(
            [
                "--registry",
                str(overlay),
                "compare",
                "--models",
                "lstm-tuned,lstm",
                "--tasks",
                "flipflop",
                "--preset",
                "smoke",
                "--set",
                "train.max_epochs=1",
                "--out",
                str(out),
                "--run",
            ]
        )
        == 0
    )
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
