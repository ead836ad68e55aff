"""The tuning protocol (bench/tune/protocol.py, --pruner sync in bench/tune/sync.py): its rules
against hand-computed values, and the synchronous bracket driven over simulated runs (a stand-in
for bench.runner.run that reports given curves through the real TrialPruning callback and pauses
with RunPaused): every configuration reaches a rung before any is stopped, ties and values within
the noise are kept, the objective is the one declared, contenders get the second seed, a pick at
the grid's edge extends it, every row has the same rungs; bad study files are one line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from bench.cli import main
from bench.errors import RunPaused, UserError
from bench.tune.protocol import (
    collapsed,
    diverged,
    edge_step,
    grid_neighbours,
    loss_rose,
    nothing_above_chance,
    objective_value,
    parse_objective,
    rung_fractions,
    rung_steps,
    rung_survivors,
    se,
    stable_pick,
    survivors,
    within_noise,
)

TASK = ["--task", "flipflop", "--preset", "smoke"]


# ---- the rules, by hand ----------------------------------------------------------------------------


def test_rungs_are_fractions_of_a_run_at_its_validations():
    assert rung_fractions(4) == [0.25, 0.5, 1.0]
    assert rung_fractions(3) == [0.25, 0.5, 1.0]  # ceil(log2 3) = 2
    assert rung_fractions(2) == [0.5, 1.0] and rung_fractions(1) == [1.0] and rung_fractions(8) == [0.125, 0.25, 0.5, 1.0]
    assert rung_steps([0.25, 0.5, 1.0], [235, 470, 705, 940]) == [235, 470, 940]
    assert rung_steps([0.25, 0.5, 1.0], [1094, 2188, 3282, 4376, 5470]) == [2188, 3282, 5470]  # 1367.5 -> 2188, 2735 -> 3282
    assert rung_steps([0.125, 0.25, 0.5, 1.0], [235, 470, 705, 940]) == [235, 470, 940]  # two rungs on one validation: one


def test_noise_and_survivors_hand_computed():
    # se(0.9, 0.8, 100) = sqrt(0.09/100 + 0.16/100) = 0.05
    assert se(0.9, 0.8, 100) == pytest.approx(0.05)
    # best 0.9: 0.81 trails by 0.09 < 2 * se(0.9, 0.81, 100) = 2 * sqrt(0.0009 + 0.001539) = 0.0988 -> within
    assert within_noise({"a": 0.9, "b": 0.81, "c": 0.7}, 100) == ["a", "b"]
    # top half of 4 = 2 (b, c); d within noise of a -> kept too; e far below and outside the top half -> stopped
    scores = {"a": 0.95, "b": 0.90, "c": 0.60, "d": 0.55, "e": 0.20}
    assert survivors(scores, 1000) == ["a", "b", "c"]  # ceil(5/2) = 3: a, b, c; d: 0.4 below the best at n = 1000 -> out
    # at n = 4: 2 se(0.95, 0.55) = 2 sqrt(0.011875 + 0.061875) = 0.543 > 0.4 -> d within the noise, kept;
    # 2 se(0.95, 0.20) = 2 sqrt(0.011875 + 0.04) = 0.455 < 0.75 -> e stopped
    assert survivors(scores, 4) == ["a", "b", "c", "d"]
    assert survivors({"a": 0.9, "b": 0.9, "c": 0.9, "d": 0.1}, 10**6) == ["a", "b", "c"]  # ties with the cut are kept
    assert survivors({"a": 0.9, "b": 0.5}, 10**6) == ["a"]


def test_objective_is_a_metric_or_its_mean_over_lengths():
    scores = {"n": 300, "last_acc": 0.7, "token_acc": 0.9, "by_length": {"T128": {"last_acc": 0.8}, "T256": {"last_acc": 0.5}}}
    assert objective_value(scores, "last_acc") == 0.7
    assert objective_value(scores, "last_acc@lengths") == pytest.approx(0.65)
    assert parse_objective("acc") == ("acc", None)
    for bad in ("last acc", "last_acc@mean", "", "a@"):
        with pytest.raises(UserError, match="--objective"):
            parse_objective(bad)
    with pytest.raises(UserError, match="no metric 'acc'"):
        objective_value(scores, "acc")


def test_a_best_value_at_the_edge_extends_the_grid_one_step():
    assert edge_step([3e-4, 1e-3, 3e-3, 1e-2], 1e-2) == pytest.approx(1e-2 * 1e-2 / 3e-3)
    assert edge_step([3e-4, 1e-3, 3e-3, 1e-2], 3e-4) == pytest.approx(3e-4 * 3e-4 / 1e-3)
    assert edge_step([3e-4, 1e-3, 3e-3, 1e-2], 1e-3) is None  # inside
    assert edge_step([0.0, 0.1], 0.1) == pytest.approx(0.2) and edge_step([0.0, 0.1], 0.0) == pytest.approx(-0.1)
    assert edge_step([2, 4], 4) == 8 and edge_step(["adamw", "sgd"], "sgd") is None and edge_step([1e-3], 1e-3) is None


# ---- the bracket over simulated runs -----------------------------------------------------------------

VALIDATIONS = [10, 20, 30, 40]


def fake_runs(monkeypatch, curves, calls, n=300, chance=None, losses=None):
    """bench.runner.run replaced by a stand-in: a run of (model, lr, seed) reports curves[model][lr][seed
    or 0] (its objective's value at each validation; the last is the selected weights') through
    the TrialPruning callback it is given, resumes where it paused, and pauses when told. The
    validation's chance level is ``chance`` ((level, n, strategy); None: none known, the rules
    that need one are off), not the smoke split's. ``losses[model][lr]``: the run's training loss
    at each validation, written to the metrics.csv beside its record as the CSV logger does."""
    import bench.runner
    import bench.tune.sync
    from bench.records import record_path, run_folder

    monkeypatch.setattr(bench.tune.sync, "validation_chance", lambda registry, meta, model: chance)
    progress = {}

    def run(model, task, preset, seed, out, overrides, callbacks=(), **kw):
        lr = float(next(o for o in overrides if o.startswith("train.lr=")).split("=")[1])
        cb = callbacks[0]
        cb.total_steps = VALIDATIONS[-1]
        curve = curves[model].get(lr, [0.1] * 4)  # a value not given (an extension of the grid): far behind
        values = curve[seed] if isinstance(curve, dict) else curve
        at = progress.get((model, lr, seed), 0)
        loss = (losses or {}).get(model, {}).get(lr)
        for step, value in zip(VALIDATIONS, values):
            if step <= at:
                continue
            calls.append((model, lr, seed, step))
            progress[model, lr, seed] = step
            if loss is not None:
                folder = run_folder(record_path(out, model, task, preset, seed, overrides))
                folder.mkdir(parents=True, exist_ok=True)
                rows = [f"{s},{x}" for s, x in zip(VALIDATIONS, loss) if s <= step]
                (folder / "metrics.csv").write_text("global_step,train_loss\n" + "\n".join(rows) + "\n")
            got = cb.objective({"n": n, "last_acc": value, "token_acc": 1 - value})  # the objective, not the primary metric
            verdict = cb.report(step, got)
            if verdict == "pause" and step < VALIDATIONS[-1]:
                raise RunPaused(step, "ckpt")
        return {
            "status": "ok",
            "steps_run": VALIDATIONS[-1],
            "primary_metric": "token_acc",
            "metrics": {"val": {"n": n, "last_acc": values[-1], "token_acc": 1 - values[-1]}},
            "val_history": [{"step": s, "token_acc": 1 - v, "objective": v} for s, v in zip(VALIDATIONS, values)],
        }

    monkeypatch.setattr(bench.runner, "run", run)


def tune(out, models, grid, extra=()):
    return main(["tune", *TASK, "--models", models, "--grid", grid, "--set", "train.max_epochs=4", "--out", str(out), *extra])


def test_every_configuration_reaches_a_rung_before_any_is_stopped(tmp_path, monkeypatch, capsys):
    """Four values; the first in the grid's order is the worst: with the old asynchronous pruner it
    would have run to the end alone. Here every value reports at rung 1 (step 10) before any
    decision; 3e-4 (far below, outside the top half) stops there; at rung 2 (step 20) 1e-3 trails
    by more than the noise and stops; 3e-3 and 1e-2 end within the noise of each other: both are
    trained on seed 1, and the mean of the two seeds picks 3e-3 although 1e-2 was ahead on seed 0."""
    curves = {
        "lstm": {
            3e-4: [0.30, 0.31, 0.32, 0.33],
            1e-3: [0.66, 0.62, 0.70, 0.75],
            3e-3: [0.70, 0.85, 0.90, 0.90],
            1e-2: {0: [0.72, 0.86, 0.91, 0.91], 1: [0.60, 0.70, 0.80, 0.80]},
        }
    }
    curves["lstm"][3e-3] = {0: curves["lstm"][3e-3], 1: [0.70, 0.85, 0.90, 0.92]}
    calls = []
    fake_runs(monkeypatch, curves, calls)
    assert tune(tmp_path, "lstm", "train.lr=[3e-4,1e-3,3e-3,1e-2]") == 0
    first = [c for c in calls if c[3] == 10 and c[2] == 0]
    assert len(first) == 4 and calls[:4] == first  # rung 1: all four reported before anything else trained
    assert [c for c in calls if c[3] == 20 and c[2] == 0] == [("lstm", lr, 0, 20) for lr in (1e-3, 3e-3, 1e-2)]  # 3e-4 stopped at rung 1
    assert {c[1] for c in calls if c[3] == 40 and c[2] == 0} == {3e-3, 1e-2}  # 1e-3 stopped at rung 2
    assert sorted({c[1] for c in calls if c[2] == 1}) == [3e-3, 1e-2]  # the contenders' second seed
    folder = tmp_path / "studies" / "flipflop-smoke"
    meta = json.loads((folder / "study.json").read_text())
    assert meta["objective"] == "last_acc" and meta["pruner"] == "sync" and meta["protocol"]["seeds"] == [0, 1]
    best = json.loads((folder / "best.json").read_text())
    assert best["models"]["lstm"]["values"] == {"train.lr": 0.003}
    assert best["models"]["lstm"]["val"] == pytest.approx((0.90 + 0.92) / 2)  # the two seeds' mean selected
    assert best["objective"] == "last_acc" and best["tuning_seeds"] == [0, 1]
    out = capsys.readouterr()
    assert "objective: validation last_acc" in out.err
    budget = next(line for line in out.out.splitlines() if line.startswith("| lstm") and "10: 4" in line)
    assert "10: 4, 20: 3, 40: 2" in budget  # the budget: configurations that reached each rung
    # the steps: 4 x 10 + 3 x 10 + 2 x 20 on seed 0, plus 2 full runs on seed 1 = 190 = 4.75 full runs
    assert [c.strip() for c in budget.split("|")][-3:-1] == ["190", "4.75"]
    assert "Selected on validation last_acc, trials on seeds [0, 1]" in (folder / "tuned.yaml").read_text()
    assert "--seeds 2,3,4" in out.out  # the final seeds suggested are apart from the tuning seeds
    # Optuna keeps the bracket: four trials, the pick marked, two pruned with their rung scores
    study = optuna.load_study(
        study_name="lstm", storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(folder / "journal.log")))
    )
    trials = {t.params["train.lr"]: t for t in study.get_trials()}
    assert trials[3e-4].state.name == "PRUNED" and trials[3e-4].intermediate_values == {10: 0.30}
    assert trials[3e-3].user_attrs["picked"] and trials[1e-2].value == 0.91


def test_every_row_gets_the_same_rungs_and_a_pick_at_the_edge_extends_the_grid(tmp_path, monkeypatch, capsys):
    """Two rows: both brackets have the same rungs (10, 20, 40); lstm's best, 1e-2, is the grid's
    largest value, so 1e-2 * (1e-2 / 3e-3) joins through the same rungs, and wins."""
    ext = 1e-2 * 1e-2 / 3e-3
    ext = float(f"{ext:.6g}")
    curves = {
        "lstm": {1e-3: [0.5, 0.5, 0.5, 0.5], 3e-3: [0.6, 0.6, 0.6, 0.6], 1e-2: [0.9, 0.9, 0.9, 0.9], ext: [0.95, 0.96, 0.97, 0.98]},
        "gru": {
            1e-3: [0.5, 0.6, 0.7, 0.9],
            3e-3: [0.6, 0.6, 0.6, 0.6],
            1e-2: [0.5, 0.5, 0.5, 0.5],
            float(f"{1e-3 * 1e-3 / 3e-3:.6g}"): [0.1, 0.1, 0.1, 0.1],
        },
    }
    calls = []
    fake_runs(monkeypatch, curves, calls, n=10**6)
    assert tune(tmp_path, "lstm,gru", "train.lr=[1e-3,3e-3,1e-2]") == 0
    out = capsys.readouterr()
    assert "extending the grid one step, to 0.0333333" in out.err
    best = json.loads((tmp_path / "studies" / "flipflop-smoke" / "best.json").read_text())["models"]
    assert best["lstm"]["values"] == {"train.lr": ext}
    assert ("lstm", ext, 0, 10) in calls and ("lstm", ext, 0, 40) in calls
    assert best["gru"]["values"] == {"train.lr": 0.001}  # at the small edge: 3.33e-4 joins and loses at its first rung
    assert ("gru", float(f"{1e-3 * 1e-3 / 3e-3:.6g}"), 0, 10) in calls
    state = json.loads((tmp_path / "studies" / "flipflop-smoke" / "bracket.json").read_text())
    assert state["lstm"]["steps"] == state["gru"]["steps"] == {"0": 10, "1": 20, "2": 40}
    assert "0.0333333" in out.out  # the budget table names the extension


def test_a_study_held_by_another_worker_is_not_reported_final(tmp_path, monkeypatch, capsys):
    """Another bench tune's worker holds the study (its lock taken, by another process): this command
    prints the table as not final, writes no tuned.yaml or best.json, and exits 1."""
    fake_runs(monkeypatch, {"lstm": {1e-3: [0.5] * 4, 3e-3: [0.6] * 4}}, [])
    folder = tmp_path / "studies" / "flipflop-smoke" / "workers"
    folder.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from filelock import FileLock; "
            f"l = FileLock({str(folder / 'other.lock')!r}); l.acquire(); print('held', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]") == 1
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert "still held by 1 other worker(s)" in err and "not final" in err
    assert not (folder.parent / "tuned.yaml").exists() and not (folder.parent / "best.json").exists()


def test_a_worker_at_one_rows_barrier_trains_the_next_rows_configurations(tmp_path, monkeypatch):
    """lstm's rung 1 waits for 3e-3, which another (live) worker trains: this worker is handed gru's
    first configuration instead of waiting; once that worker is dead, its configuration is handed
    out again, lstm (the earlier row) first; with every bracket done there is nothing to hand out."""
    import copy

    import bench.tune.sync as sync

    fake_runs(monkeypatch, {"lstm": {1e-3: [0.5] * 4, 3e-3: [0.6] * 4}, "gru": {1e-3: [0.5] * 4, 3e-3: [0.6] * 4}}, [])
    assert tune(tmp_path, "lstm,gru", "train.lr=[1e-3,3e-3]") == 0  # the study (its meta) exists
    worker = sync.SyncWorker(tmp_path, "flipflop-smoke")
    lstm = sync.new_bracket(worker.meta)
    lstm["configs"]["train.lr=0.001"]["scores"]["0"] = 0.5
    lstm["configs"]["train.lr=0.003"]["holder"] = "other"
    waiting = {"lstm": lstm}
    alive = {"other"}
    monkeypatch.setattr(sync, "worker_alive", lambda folder, w: w in alive)

    state = copy.deepcopy(waiting)
    model, (kind, entry, rung), done = worker._task(state)
    assert (model, kind, entry["values"], rung, done) == ("gru", "rung", {"train.lr": 0.001}, 0, [])
    assert state["gru"]["configs"]["train.lr=0.001"]["holder"] == worker.id  # held for this worker
    assert state["lstm"]["configs"]["train.lr=0.003"]["holder"] == "other"

    alive.clear()  # the other worker was killed: its configuration goes to the next worker that asks
    state = copy.deepcopy(waiting)
    model, (kind, entry, rung), done = worker._task(state)
    assert (model, entry["values"], rung) == ("lstm", {"train.lr": 0.003}, 0) and entry["holder"] == worker.id

    finished = json.loads((tmp_path / "studies" / "flipflop-smoke" / "bracket.json").read_text())
    assert worker._task(finished) == (None, None, ["lstm", "gru"])


# ---- bad input -----------------------------------------------------------------------------------------


def damage(kind: str, path: Path) -> None:
    text = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(text[: len(text) // 2])
    elif kind == "mid-line":
        lines = text.split(b"\n")
        path.write_bytes(b"\n".join([lines[0][:10], *lines[1:]]))
    elif kind == "not utf-8":
        path.write_bytes(b"\xff\xfe" + text)
    elif kind == "emptied":
        path.write_bytes(b"")
    elif kind == "folder":
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize(
    "kind, words",
    [
        ("truncated", "cut-short line"),
        ("mid-line", "line 1 is not a journal entry"),
        ("not utf-8", "is not UTF-8"),
        ("emptied", "is empty but"),
        ("folder", "is a folder"),
    ],
)
def test_a_damaged_journal_is_one_line_exit_2_nothing_trained(tmp_path, monkeypatch, capsys, kind, words):
    calls = []
    fake_runs(monkeypatch, {"lstm": {1e-3: [0.5] * 4, 3e-3: [0.6] * 4}}, calls)
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]", ["--study", "s"]) == 0
    journal = tmp_path / "studies" / "s" / "journal.log"
    damage(kind, journal)
    before = sorted(p.name for p in journal.parent.iterdir())
    capsys.readouterr()
    calls.clear()
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]", ["--study", "s"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and "journal" in err, err
    assert calls == [] and sorted(p.name for p in journal.parent.iterdir()) == before


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--study", ""], "--study is empty"),
        (["--study", "  "], "--study is empty"),
        (["--trials", "1000000000000"], "at most 10000 trials"),
        (["--objective", "bleu"], "--objective 'bleu': flipflop's validation reports last_acc, token_acc"),
        (["--objective", "last_acc@mean"], "METRIC@lengths"),
        (["--trials", "3"], "--pruner sync runs every configuration of the grid (2)"),
    ],
)
def test_bad_tune_arguments_are_one_line_exit_2_nothing_written(tmp_path, capsys, extra, words):
    assert tune(tmp_path / "out", "lstm", "train.lr=[1e-3,3e-3]", extra) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert not (tmp_path / "out").exists()


def test_an_objective_may_be_any_rate_validation_records(registry):
    """Parity's tables show acc (every prefix right), but probes-linear-cpu reports its per-prefix
    token_acc, which every split records: a study may select on it; a metric no split records is refused."""
    from bench.cli.tune import _objective

    assert _objective(registry, "lstm", "parity", "small", [], None) == "acc"
    assert _objective(registry, "lstm", "parity", "small", [], "token_acc") == "token_acc"
    assert _objective(registry, "lstm", "modular-arithmetic", "small", [], "token_acc@lengths") == "token_acc@lengths"
    with pytest.raises(UserError, match="parity's validation reports acc, token_acc, last_acc; name one"):
        _objective(registry, "lstm", "parity", "small", [], "length_avg_token_acc")


def test_sync_needs_a_grid(tmp_path, capsys):
    assert (
        main(
            [
                "tune",
                *TASK,
                "--models",
                "lstm",
                "--space",
                "train.lr=loguniform(1e-4,1e-2)",
                "--pruner",
                "sync",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "--pruner sync tunes a grid" in capsys.readouterr().err


def test_a_damaged_bracket_file_is_one_line(tmp_path, monkeypatch, capsys):
    fake_runs(monkeypatch, {"lstm": {1e-3: [0.5] * 4, 3e-3: [0.6] * 4}}, [])
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]") == 0
    (tmp_path / "studies" / "flipflop-smoke" / "bracket.json").write_text("{not json")
    capsys.readouterr()
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bracket.json cannot be read" in err


def test_the_committed_replay_rebuilds_from_the_committed_curves():
    """results/protocol-replay-t3cpu.md is what scripts/benchmarks/protocol_replay.py writes from
    results/grid4 and the tuned tables' studies (no number typed)."""
    root = Path(__file__).resolve().parent.parent
    committed = (root / "results" / "protocol-replay-t3cpu.md").read_text()
    got = subprocess.run(
        [sys.executable, "scripts/benchmarks/protocol_replay.py"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert committed.split("\n", 2)[2].strip() == got.strip()


def test_the_replays_rung_trace_marks_where_each_value_stopped():
    """A finished bracket's rungs as the replay prints them (hand-written bracket): each rung's step,
    the values that reached it with their scores in %, x where a value was stopped."""
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("protocol_replay", root / "scripts" / "benchmarks" / "protocol_replay.py")
    replay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay)
    b = {
        "steps": {"0": 100, "1": 200, "2": 400},
        "configs": {
            "train.lr=0.001": {"values": {"train.lr": 0.001}, "alive": True, "scores": {"0": 0.5, "1": 0.6, "2": 0.7}},
            "train.lr=0.01": {"values": {"train.lr": 0.01}, "alive": False, "scores": {"0": 0.25}, "stopped_at": 100},
            "train.lr=0.003": {"values": {"train.lr": 0.003}, "alive": False, "scores": {"0": 0.5, "1": 0.525}, "stopped_at": 200},
        },
    }
    assert replay.rung_trace(b) == (
        "step 100: 0.001 50.0, 0.01 25.0 x, 0.003 50.0; step 200: 0.001 60.0, 0.003 52.5 x; step 400: 0.001 70.0"
    )


# ---- the re-tuned tables ---------------------------------------------------------------------------------


def test_the_retuned_tables_seeds_are_apart_from_their_studies_seeds():
    """halt-table{1,3}-cpu-tuned2: their studies (the commands of scripts/retune_halt_cpu.sh) train
    seeds S and S + 1 with --pruner sync on the table's metric; the tables' seeds are others."""
    import re

    from bench.report.tables import load_table
    from bench.report.tuned import _seeds_text

    root = Path(__file__).resolve().parent.parent
    script = (root / "scripts" / "retune_halt_cpu.sh").read_text()
    seed = int(re.findall(r"--seed (\d+)", script)[0])
    assert len(set(re.findall(r"--seed (\d+)", script))) == 1 and script.count("--pruner sync --objective") == 2
    for number, metric in (("3", "last_acc"), ("1", "acc")):
        table = load_table(f"halt-table{number}-cpu-tuned2")
        assert table.metric == metric and f"--objective {metric} " in script
        assert not {seed, seed + 1} & set(table.seeds) and len(table.seeds) == 5
        for study in table.tuned:
            assert f"--study {study} " in script
    assert _seeds_text({"tuning_seeds": [100, 101], "objective": "last_acc"}, [5, 6]) == "; selected on val last_acc, tuning seeds 100,101"
    assert "seed(s) 0 also tuned" in _seeds_text({"tuning_seeds": [0, 1], "objective": "acc"}, [0, 2])
    assert _seeds_text({"seed": 0}, [0]) == ""  # a study made before tuning_seeds: its tables read as before


def test_a_run_resumed_at_its_rung_pauses_again_without_training():
    """A worker killed after its run paused at a rung but before the bracket took the score in: the
    next worker resumes the run from the rung's checkpoint, and TrialPruning, re-reporting the
    checkpoint's validations, pauses it there again (the rung's score is the checkpoint's)."""
    from types import SimpleNamespace

    from bench.runner.callbacks import GracefulStop, TrialPruning, ValidationHistory

    history = ValidationHistory("token_acc")
    history.entries = [
        {"epoch": 0, "step": 10, "token_acc": 0.9, "objective": 0.6},
        {"epoch": 1, "step": 20, "token_acc": 0.95, "objective": 0.7},
    ]
    seen = {}

    def report(step, value):
        seen[step] = value
        return "pause" if step >= 0.5 * 40 else False

    pruning = TrialPruning(report, objective=lambda scores: scores["last_acc"])
    trainer = SimpleNamespace(callbacks=[history, pruning, GracefulStop("ckpt/last.ckpt")], estimated_stepping_batches=40)
    with pytest.raises(RunPaused) as paused:
        pruning.on_train_start(trainer, None)
    assert (paused.value.step, paused.value.checkpoint) == (20, "ckpt/last.ckpt") and seen == {10: 0.6, 20: 0.7}
    pruning = TrialPruning(lambda step, value: "pause" if step >= 30 else False)  # a rung still ahead: training goes on
    pruning.on_train_start(SimpleNamespace(callbacks=[history, pruning], estimated_stepping_batches=40), None)
    assert pruning.total_steps == 40


def test_the_summary_marks_a_best_setting_at_chance_on_validation():
    """The tables' ~ rule on the best record's validation (ListOps-LRA's tuning run, lr 3e-3 seed
    100: 500 trees, chance level 0.148, the most frequent target): the margin is max(2 SE, 0.1 x
    (1 - p)) = max(2 sqrt(0.148 x 0.852 / 500), 0.0852) = max(0.0318, 0.0852) = 0.0852, so a score
    below 0.2332 is at chance; 0.34 (its own score) is not."""
    from bench.cli.tune import _val_chance, _val_text

    out = Path(__file__).resolve().parent.parent / "results"
    record = "runs/lra-listops/small/transformer/seed100-a35ce629.json"
    found = _val_chance(out, {"record": record, "val": 0.34}, "acc")
    assert found["p"] == pytest.approx(0.148) and found["n"] == 500 and not found["at_chance"]
    assert _val_text({"val": 0.34, "val_chance": found}) == "34.0 (14.8)"
    assert _val_chance(out, {"record": record, "val": 0.148 + 0.0845}, "acc")["at_chance"]
    assert not _val_chance(out, {"record": record, "val": 0.148 + 0.0860}, "acc")["at_chance"]
    assert _val_chance(out, {"record": record, "val": 0.148 - 0.0315}, "acc")["at_chance"]
    low = {"val": 0.16, "val_chance": _val_chance(out, {"record": record, "val": 0.16}, "acc")}
    assert _val_text(low) == "16.0 ~ (14.8)"
    assert _val_chance(out, {"record": "runs/none.json", "val": 0.5}, "acc") is None  # no record: no mark


def test_a_pick_that_only_ties_at_the_edge_is_not_extended(tmp_path, monkeypatch, capsys):
    """Every value at the same score on both seeds (a task every value leaves at chance: each run
    predicts the majority class): all are kept and all get the second seed; the pick is the
    grid's first value, an edge only by the tie-break, so no value beyond the grid is trained."""
    flat = [0.522] * 4
    curves = {"lstm": {1e-3: flat, 3e-3: flat, 1e-2: flat}}
    calls = []
    fake_runs(monkeypatch, curves, calls)
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3,1e-2]") == 0
    assert {c[1] for c in calls} == {1e-3, 3e-3, 1e-2}  # nothing outside the grid
    assert sorted({c[1] for c in calls if c[2] == 1}) == [1e-3, 3e-3, 1e-2]  # all in contention: all on seed 1
    best = json.loads((tmp_path / "studies" / "flipflop-smoke" / "best.json").read_text())["models"]["lstm"]
    assert best["values"] == {"train.lr": 0.001} and best["val"] == pytest.approx(0.522)
    assert "ties with train.lr=0.003, train.lr=0.01" in capsys.readouterr().err
    state = json.loads((tmp_path / "studies" / "flipflop-smoke" / "bracket.json").read_text())["lstm"]
    assert state["extension"] == {"none": "the pick ties with train.lr=0.003, train.lr=0.01"}


# ---- the rules against the trivial level, by hand ------------------------------------------------------

MQAR = (0.107, 300, "guess a value of the context")  # MQAR's token_acc chance level on 300 validation examples
LISTOPS = (0.148, 500, "most frequent target")  # ListOps-LRA's acc on 500 validation trees


def test_a_rung_where_nothing_clears_the_trivial_level_stops_nobody():
    """MQAR's Transformer at step 250 of 1,000 (pl-mqar): every lr still on the plateau. The margin is
    max(2 sqrt(0.107 x 0.893 / 300), 0.1 x 0.893) = max(0.0357, 0.0893) = 0.0893: a score must reach
    0.1963 to count. All four are below: all four go on, and the reason is said. With 3e-3 at 0.20 the
    rung is not passed: the top half (0.20, 0.1029) goes on and 0.20 - 0.1029 = 0.097 > 2 se(0.20, 0.1029,
    300) = 0.058 keeps nobody else."""
    scores = {"3e-4": 0.0093, "1e-3": 0.01, "3e-3": 0.0943, "1e-2": 0.1029}
    assert survivors(scores, 300) == ["3e-3", "1e-2"]  # the old rule: the two lowest stopped on the plateau
    kept, why = rung_survivors(scores, 300, MQAR)
    assert kept == ["3e-4", "1e-3", "3e-3", "1e-2"] and "no configuration above the trivial level (10.7%" in why
    assert "clear it by 8.9 points" in why
    kept, why = rung_survivors({**scores, "3e-3": 0.20}, 300, MQAR)
    assert kept == ["3e-3", "1e-2"] and why is None
    assert rung_survivors(scores, 300, None) == (["3e-3", "1e-2"], None)  # no level known: the rule is off
    assert nothing_above_chance([0.1963 - 1e-4, 0.0], MQAR) and not nothing_above_chance([0.1963 + 1e-4], MQAR)
    assert not nothing_above_chance([], MQAR) and not nothing_above_chance([0.0], None)


def test_a_run_diverges_when_it_fails_its_loss_rises_or_its_validation_falls_back():
    """ListOps: the level 0.148 is cleared at 0.148 + 0.0852 = 0.2332; a last validation at most
    0.148 + 2 sqrt(0.148 x 0.852 / 500) = 0.1798 is back at it, when the fall is beyond the noise
    (0.30 -> 0.17: 0.13 > 2 se(0.30, 0.17, 500) = 0.053). Parity's token_acc (level 0.532 on 300: cleared
    at 0.5896, back at it below 0.5896): 0.603 -> 0.578 falls 0.025 < 2 se = 0.080, noise. A loss rose
    when its last value is above its first: 2.40 -> 2.41 rose, 2.40 -> 2.40 did not."""
    assert collapsed([0.17, 0.26, 0.30, 0.17], LISTOPS) == (0.30, 0.17)
    assert collapsed([0.17, 0.26, 0.30, 0.17, 0.30], LISTOPS) is None  # fell and recovered: it ended learned
    assert collapsed([0.17, 0.26, 0.20], LISTOPS) is None  # 0.20 > 0.1798: lower, not back at the level
    assert collapsed([0.15, 0.23, 0.15], LISTOPS) is None  # 0.23 never cleared the level
    assert collapsed([0.603, 0.578], (0.532, 300, "most frequent target")) is None
    assert collapsed([0.30, 0.17], None) is None
    assert loss_rose([2.40, 2.10, 2.41]) and not loss_rose([2.40, 2.10, 2.40]) and not loss_rose([2.4])
    assert loss_rose([2.4, float("nan")])
    assert (
        diverged([0.3], [], LISTOPS, "non-finite training loss before step 40")
        == "the run failed (non-finite training loss before step 40)"
    )
    assert diverged([0.3, 0.3], [2.4, float("inf")], LISTOPS) == "a non-finite training loss"
    assert diverged([0.3, 0.3], [2.40, 2.43], LISTOPS) == "its training loss ended above its first value (2.43 > 2.4)"
    assert (
        diverged([0.25, 0.30, 0.15], [2.4, 2.2, 2.3], LISTOPS)
        == "its validation fell back to the trivial level (15.0% after 30.0%, chance 14.8%)"
    )
    assert diverged([0.148], [2.407], LISTOPS) is None  # one validation at chance, one loss: nothing to tell a divergence by


def test_a_pick_beside_a_diverged_neighbour_is_flagged_and_gives_way_to_a_stable_one_within_the_noise():
    """Grid neighbours along lr (the extension included); at n = 500, 2 se(0.34, 0.32) = 2 sqrt((0.2244 +
    0.2176) / 500) = 0.0595: 0.32 is within the noise of 0.34, 0.27 is not."""
    configs = {
        "a": {"train.lr": 3e-4},
        "b": {"train.lr": 1e-3},
        "c": {"train.lr": 3e-3},
        "d": {"train.lr": 1e-2},
        "e": {"train.lr": 3.33e-2},
    }
    assert grid_neighbours(configs, "c") == ["b", "d"] and grid_neighbours(configs, "e") == ["d"] and grid_neighbours(configs, "a") == ["b"]
    two = {f"{lr}-{k}": {"train.lr": lr, "model.k": k} for lr in (1e-3, 3e-3, 1e-2) for k in (2, 4)}
    assert grid_neighbours(two, "0.003-2") == ["0.001-2", "0.01-2", "0.003-4"]
    assert stable_pick("c", {"b": 0.32, "c": 0.34}, 500, configs, {}) == ("c", [])
    pick, flags = stable_pick("c", {"b": 0.32, "c": 0.34}, 500, configs, {"d": "its loss rose"})
    assert pick == "b"
    assert flags == ["its grid neighbour d diverged: its loss rose", "b, stable and within the noise of c, is taken instead"]
    pick, flags = stable_pick("c", {"b": 0.27, "c": 0.34}, 500, configs, {"d": "its loss rose"})
    assert pick == "c" and flags[-1] == "no stable neighbour within the noise of c: it stays the pick, flagged"
    pick, flags = stable_pick("c", {"b": 0.32, "c": 0.34}, 500, configs, {"d": "x", "b": "y"})  # both neighbours diverged
    assert pick == "c" and len(flags) == 3
    pick, flags = stable_pick("c", {"a": 0.33, "b": 0.20, "c": 0.34}, 500, configs, {"c": "it fell back"})  # the pick itself
    assert pick == "a" and flags[0] == "the pick c diverged: it fell back"


# ---- the rules in the bracket, over simulated runs --------------------------------------------------------


def test_mqar_like_plateau_every_lr_goes_on_and_the_finalists_get_two_seeds(tmp_path, monkeypatch, capsys):
    """MQAR's Transformer (pl-mqar) in small: at rung 1 every lr is on the plateau under the trivial level.
    The old rule stopped 3e-4 and 1e-3 there and picked 3e-3 (now confirmed on a second seed, where it fails); here all four go on (the
    rung is passed, said in the budget table), 1e-3 and 3e-3 both learn, end within the noise of each
    other, and get the second seed, where 3e-3 stays on the plateau (a failed seed): 1e-3 is picked on
    the mean of its two seeds, 99.95 against (1.0 + 0.15) / 2."""
    curves = {
        "transformer": {
            3e-4: [0.01, 0.05, 0.09, 0.10],
            1e-3: {0: [0.01, 0.95, 0.99, 0.999], 1: [0.01, 0.90, 0.99, 1.0]},
            3e-3: {0: [0.09, 0.99, 1.0, 1.0], 1: [0.09, 0.10, 0.12, 0.15]},
            1e-2: [0.10, 0.10, 0.10, 0.10],
        }
    }
    old_calls, calls = [], []
    fake_runs(monkeypatch, curves, old_calls)  # no chance level known: the old rule
    assert tune(tmp_path / "old", "transformer", "train.lr=[3e-4,1e-3,3e-3,1e-2]") == 0
    old = json.loads((tmp_path / "old" / "studies" / "flipflop-smoke" / "best.json").read_text())["models"]["transformer"]
    assert old["values"] == {"train.lr": 0.003} and {c[1] for c in old_calls if c[3] == 20} == {3e-3, 1e-2}
    # alone at the end, it still gets the second seed (no pick rests on one seed), which shows the failed seed
    assert old["evidence"]["pick"]["seeds"] == {"0": 1.0, "1": 0.15}
    fake_runs(monkeypatch, curves, calls, chance=MQAR)
    capsys.readouterr()
    assert tune(tmp_path / "new", "transformer", "train.lr=[3e-4,1e-3,3e-3,1e-2]") == 0
    assert {c[1] for c in calls if c[3] == 20 and c[2] == 0} == {3e-4, 1e-3, 3e-3, 1e-2}  # nobody stopped at rung 1
    assert {c[1] for c in calls if c[3] == 40 and c[2] == 0} == {1e-3, 3e-3}  # the top half of rung 2
    assert sorted({c[1] for c in calls if c[2] == 1}) == [1e-3, 3e-3]
    folder = tmp_path / "new" / "studies" / "flipflop-smoke"
    best = json.loads((folder / "best.json").read_text())["models"]["transformer"]
    assert best["values"] == {"train.lr": 0.001} and best["val"] == pytest.approx((0.999 + 1.0) / 2)
    assert best["evidence"]["pick"]["seeds"] == {"0": 0.999, "1": 1.0}
    assert [(e["config"], e["seeds"]) for e in best["evidence"]["contenders"]] == [("train.lr=0.003", {"0": 1.0, "1": 0.15})]
    state = json.loads((folder / "bracket.json").read_text())["transformer"]
    assert [bool(d.get("passed")) for d in state["decisions"]] == [True, False] and state["decisions"][0]["kept"] == list(state["configs"])
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if line.startswith("| transformer") and "10: 4" in line).split("|")[3].strip() == "10"
    assert "train.lr=0.001 (seed 0 99.9, seed 1 100.0; mean 100.0); beside train.lr=0.003 (seed 0 100.0, seed 1 15.0; mean 57.5)" in out


def test_a_single_seed_configuration_within_the_noise_of_the_best_mean_gets_its_second_seed(tmp_path, monkeypatch):
    """At the end (n = 300): A 0.90 and B 0.88 within the noise (2 se = 0.051), C 0.80 not (2 se(0.90, 0.80)
    = 0.0577 < 0.10): A and B get seed 1, where A drops to 0.66 and B to 0.74 (means 0.78 and 0.81). C's
    0.80 is now within the noise of the best, 0.81 (2 se = 0.0647): it gets seed 1 too (0.84, mean 0.82)
    and is picked; the old rule picked B among the first contenders, C on one seed beside it."""
    curves = {
        "lstm": {
            1e-3: {0: [0.6, 0.7, 0.8, 0.90], 1: [0.6, 0.7, 0.6, 0.66]},
            3e-3: {0: [0.6, 0.7, 0.8, 0.80], 1: [0.6, 0.7, 0.8, 0.84]},
            1e-2: {0: [0.6, 0.7, 0.8, 0.88], 1: [0.6, 0.7, 0.7, 0.74]},
        }
    }
    calls = []
    fake_runs(monkeypatch, curves, calls)
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3,1e-2]") == 0
    assert sorted({c[1] for c in calls if c[2] == 1}) == [1e-3, 3e-3, 1e-2]
    best = json.loads((tmp_path / "studies" / "flipflop-smoke" / "best.json").read_text())["models"]["lstm"]
    assert best["values"] == {"train.lr": 0.003} and best["val"] == pytest.approx(0.82)
    assert {e["config"]: e["seeds"]["1"] for e in best["evidence"]["contenders"]} == {"train.lr=0.001": 0.66, "train.lr=0.01": 0.74}


def test_a_pick_whose_neighbour_collapsed_gives_way_to_the_stable_neighbour(tmp_path, monkeypatch, capsys):
    """ListOps-like (n = 500, chance 0.148): 1e-2 clears the level (0.25, 0.30) and falls back to 0.15, so
    it diverged; 3e-3 (mean 0.34) is picked beside it, and 1e-3 (mean 0.33, within 2 se = 0.0597) is taken
    instead, flagged."""
    curves = {"gut": {1e-3: [0.24, 0.30, 0.31, 0.33], 3e-3: [0.26, 0.31, 0.33, 0.34], 1e-2: [0.25, 0.30, 0.15, 0.15]}}
    fake_runs(monkeypatch, curves, [], n=500, chance=LISTOPS)
    assert tune(tmp_path, "gut", "train.lr=[1e-3,3e-3,1e-2]") == 0
    folder = tmp_path / "studies" / "flipflop-smoke"
    best = json.loads((folder / "best.json").read_text())["models"]["gut"]
    assert best["values"] == {"train.lr": 0.001} and best["val"] == pytest.approx(0.33)
    assert best["flags"][0] == (
        "its grid neighbour train.lr=0.01 diverged: its validation fell back to the trivial level (15.0% after 30.0%, chance 14.8%)"
    )
    assert best["flags"][1] == "train.lr=0.001, stable and within the noise of train.lr=0.003, is taken instead"
    state = json.loads((folder / "bracket.json").read_text())["gut"]
    assert state["unstable_pick"] == "train.lr=0.003" and state["configs"]["train.lr=0.01"]["diverged"].startswith("its validation")
    assert "FLAGGED: its grid neighbour train.lr=0.01 diverged" in capsys.readouterr().out


def test_an_extension_whose_loss_rose_flags_the_edge_pick(tmp_path, monkeypatch):
    """GUT on ListOps (t4cpu-listops) as it would be with a diverging extension: 3e-3 leads 1e-3 beyond the
    noise at rung 1 (0.29 - 0.22 = 0.07 > 2 se = 0.055) and finishes alone: it still gets the second seed
    (no pick rests on one seed; the stand-in's seed 1 is its seed 0) and is picked, at the grid's edge: 9e-3
    joins, its training loss rising (2.40 -> 2.45), at the level, and stops at rung 1. The pick is
    flagged; no stable neighbour finished, so it stays."""
    curves = {"gut": {1e-3: [0.20, 0.22, 0.25, 0.30], 3e-3: [0.26, 0.29, 0.32, 0.34], 9e-3: [0.148] * 4}}
    fake_runs(monkeypatch, curves, [], n=500, chance=LISTOPS, losses={"gut": {9e-3: [2.40, 2.45, 2.5, 2.6]}})
    assert tune(tmp_path, "gut", "train.lr=[1e-3,3e-3]") == 0
    folder = tmp_path / "studies" / "flipflop-smoke"
    best = json.loads((folder / "best.json").read_text())["models"]["gut"]
    assert best["values"] == {"train.lr": 0.003} and best["evidence"]["pick"]["seeds"] == {"0": 0.34, "1": 0.34}
    assert best["flags"] == [
        "its grid neighbour train.lr=0.009 diverged: its training loss ended above its first value (2.45 > 2.4)",
        "no stable neighbour within the noise of train.lr=0.003: it stays the pick, flagged",
    ]
    state = json.loads((folder / "bracket.json").read_text())["gut"]
    ext = state["configs"]["train.lr=0.009"]
    assert ext["stopped_at"] == 20 and ext["losses"] == {"10": 2.4, "20": 2.45}


def test_a_model_that_learned_nothing_gets_no_pick_and_a_table_reads_it_as_not_tuned(tmp_path, monkeypatch, capsys):
    """Every score of lstm at the level (0.5 on 300: cleared at 0.5577): no rung stops anything, no second
    seed is trained, nothing is picked: best.json's models leave lstm out and its nothing_learned names
    it, the overlay has gru-tuned only, and a table with both rows reads lstm as not tuned (its cells at
    the table's own settings) and gru at its pick."""
    from bench.report.tables import load_table
    from bench.report.tuned import apply_tuned

    flat = [0.50, 0.51, 0.52, 0.52]
    curves = {
        "lstm": {1e-3: flat, 3e-3: flat, 1e-2: [0.5, 0.55, 0.5, 0.5]},
        "gru": {1e-3: [0.5, 0.6, 0.7, 0.9], 3e-3: [0.5, 0.55, 0.6, 0.6], 1e-2: [0.5, 0.5, 0.5, 0.5]},
    }
    calls = []
    fake_runs(monkeypatch, curves, calls, chance=(0.5, 300, "most frequent target"))
    assert tune(tmp_path, "lstm,gru", "train.lr=[1e-3,3e-3,1e-2]") == 0
    assert not [c for c in calls if c[0] == "lstm" and c[2] == 1] and {c[1] for c in calls if c[0] == "lstm" and c[3] == 40} == {
        1e-3,
        3e-3,
        1e-2,
    }
    folder = tmp_path / "studies" / "flipflop-smoke"
    best = json.loads((folder / "best.json").read_text())
    assert list(best["models"]) == ["gru"] and best["models"]["gru"]["values"] == {"train.lr": 0.001}
    assert best["nothing_learned"]["lstm"]["best_val"] == pytest.approx(0.52)
    assert "no score of any configuration at any rung clears the trivial level (50.0%" in best["nothing_learned"]["lstm"]["why"]
    overlay = (folder / "tuned.yaml").read_text()
    assert "gru-tuned" in overlay and "lstm-tuned" not in overlay
    printed = capsys.readouterr()
    assert "bench: lstm: nothing learned: no score" in printed.err
    assert next(line for line in printed.out.splitlines() if line.startswith("| lstm ")).split("|")[2].strip() == "nothing learned"
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "toy.yaml").write_text(
        "title: toy\nsource: none\npreset: smoke\nseeds: [2]\nmetric: last_acc\nset: [train.max_epochs=4]\n"
        "tuned: [flipflop-smoke]\ntasks: [flipflop]\nsplits: [T32_p1]\nrows:\n"
        "  - {model: lstm, paper: [90]}\n  - {model: gru, paper: [90]}\n"
    )
    table = load_table("toy", folder=tmp_path / "tables")
    apply_tuned(table, tmp_path, "smoke")
    assert table.tuned_text["lstm"] == "not tuned" and ("lstm", "flipflop") not in table.tuned_sets
    assert table.tuned_text["gru"].startswith("train.lr=0.001 (4 trials") and table.tuned_pending == {}  # the grid's 3 and 3.33e-4


def test_every_model_at_chance_writes_best_json_and_no_overlay(tmp_path, monkeypatch, capsys):
    """With the exhaustive grid (--pruner none, Optuna's trials), the same rule reads the trials' scores
    against the chance level of the best trial's record: none clears it, so nothing is picked; best.json
    is still written (the study is finished: a table does not wait for it), tuned.yaml is not."""
    import bench.tune.validation

    fake_runs(monkeypatch, {"lstm": {1e-3: [0.5] * 4, 3e-3: [0.52] * 4}}, [])
    monkeypatch.setattr(bench.tune.validation, "record_chance", lambda out, record, objective: (0.5, 300, "most frequent target"))
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]", ["--pruner", "none"]) == 0
    folder = tmp_path / "studies" / "flipflop-smoke"
    best = json.loads((folder / "best.json").read_text())
    assert best["models"] == {} and best["nothing_learned"]["lstm"]["best_val"] == pytest.approx(0.52)
    assert not (folder / "tuned.yaml").exists()
    assert "no score of any trial clears the trivial level" in capsys.readouterr().err


def test_a_validation_under_1000_examples_is_one_line_naming_its_setting_and_the_reason_is_recorded(tmp_path, monkeypatch, capsys):
    """flip-flop's smoke validation: 8 sequences per test distribution, 32 in all, set by data.n_val_each;
    2 SE of a difference near 50% is 200 sqrt(0.5 / 32) = 25.0 points. The study records the size and,
    given with --val-reason, why it goes on."""
    fake_runs(monkeypatch, {"lstm": {1e-3: [0.5] * 4, 3e-3: [0.6] * 4}}, [])
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]") == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "validation split has" in line]
    assert lines == [
        "bench: the validation split has 32 examples, under the 1,000 a tuned table should select on (2 SE of a difference "
        "near 50% is 25.0 points at this size): raise it with --set data.n_val_each=..., or give --val-reason TEXT to "
        "record why the study goes on at this size"
    ]
    folder = tmp_path / "studies" / "flipflop-smoke"
    assert json.loads((folder / "study.json").read_text())["validation"] == {
        "n": 32,
        "minimum": 1000,
        "settings": ["data.n_val_each"],
        "reason": None,
    }
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]", ["--val-reason", "a smoke test of the plumbing"]) == 0
    err = capsys.readouterr().err
    assert (
        "32 examples, under the 1,000 a tuned table should select on (2 SE of a difference near 50% is 25.0 points at this size); "
        "going on, because: a smoke test of the plumbing (recorded in study.json)" in err
    )
    assert json.loads((folder / "study.json").read_text())["validation"]["reason"] == "a smoke test of the plumbing"
    assert json.loads((folder / "best.json").read_text())["validation"]["reason"] == "a smoke test of the plumbing"
    assert tune(tmp_path, "lstm", "train.lr=[1e-3,3e-3]", ["--val-reason", " "]) == 2


# ---- the rules replayed on the committed studies -----------------------------------------------------------


def replay_module():
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("protocol_replay", root / "scripts" / "benchmarks" / "protocol_replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rules_replay_runs_a_recorded_bracket_again_and_names_the_run_it_lacks(tmp_path):
    """pl-mqar's Transformer bracket as recorded (hand-written here): with no chance level the rules
    replay the same bracket up to 3e-3, alone at the end, and then ask for its second seed (no pick
    rests on one seed), a run the study never trained; given that seed's score they replay the same
    pick, 3e-3, on both seeds. With MQAR's level the first rung is passed and 3e-4 and 1e-3 would go on
    to step 500, runs the study never trained: the new pick needs them."""
    replay = replay_module()
    meta = {
        "task": "mqar",
        "preset": "small",
        "models": ["transformer"],
        "space": ["train.lr=[0.0003,0.001,0.003,0.01]"],
        "set": ["data.n_test=1000"],
        "seed": 100,
        "pruner": "sync",
        "trials": 4,
        "objective": "token_acc",
    }
    old = {
        "fractions": [0.25, 0.5, 1.0],
        "steps": {"0": 250, "1": 500, "2": 1000},
        "n": 300,
        "full_steps": 1000,
        "second": {},
        "configs": {
            "train.lr=0.0003": {"values": {"train.lr": 0.0003}, "scores": {"0": 0.0093}, "stopped_at": 250},
            "train.lr=0.001": {"values": {"train.lr": 0.001}, "scores": {"0": 0.01}, "stopped_at": 250},
            "train.lr=0.003": {"values": {"train.lr": 0.003}, "scores": {"0": 0.0943, "1": 0.9996, "2": 1.0}},
            "train.lr=0.01": {"values": {"train.lr": 0.01}, "scores": {"0": 0.1029, "1": 0.1039}, "stopped_at": 500},
        },
    }
    alone = replay.replay_bracket(tmp_path, meta, "transformer", old, None)
    assert alone["needs"] == "train.lr=0.003 on seed 101" and alone["contention"] == ["train.lr=0.003"]
    row = replay.rules_row("pl-mqar", "transformer", {"train.lr": 0.003}, old, alone, None)
    assert (row["new"], row["changed"]) == ("needs training", None)
    seeded = {**old, "second": {"train.lr=0.003": {"values": {"train.lr": 0.003}, "seed": 101, "score": 0.9}}}
    same = replay.replay_bracket(tmp_path, meta, "transformer", seeded, None)
    assert same["pick"] == "train.lr=0.003" and same["evidence"]["pick"]["seeds"] == {"100": 1.0, "101": 0.9}
    new = replay.replay_bracket(tmp_path, meta, "transformer", old, MQAR)
    assert new["needs"] == (
        "train.lr=0.0003 to step 500 (the old bracket stopped it at step 250); "
        "train.lr=0.001 to step 500 (the old bracket stopped it at step 250)"
    )
    assert new["decisions"][0]["passed"] and new["decisions"][0]["kept"] == list(old["configs"])
    row = replay.rules_row("pl-mqar", "transformer", {"train.lr": 0.003}, old, new, MQAR)
    assert (row["old"], row["new"], row["changed"], row["passed"]) == ("train.lr=0.003", "needs training", None, "250")


def test_the_committed_rules_replay_rebuilds_from_the_committed_studies():
    """results/protocol-rules-replay.md is what protocol_replay.py --rules writes from results/studies and
    the records (no number typed)."""
    root = Path(__file__).resolve().parent.parent
    committed = (root / "results" / "protocol-rules-replay.md").read_text()
    got = subprocess.run(
        [sys.executable, "scripts/benchmarks/protocol_replay.py", "--rules"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert committed.split("\n", 2)[2].strip() == got.strip()
