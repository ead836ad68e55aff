"""bench tune's workers sharing one study: local processes (one SIGKILLed mid-run, its run resumed
from its checkpoint, a rerun training nothing finished) and SLURM jobs through submitit's local
executor."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from tune_helpers import TASK, studies, trial_record

from bench.cli import main
from bench.records import read_record

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_killed_worker_is_resumed_and_a_rerun_trains_nothing_finished(tmp_path):
    out = tmp_path / "out"
    lrs = [1e-3, 2e-3, 3e-3, 4e-3]
    sets = ("train.max_epochs=4",)
    argv = [
        sys.executable,
        "-m",
        "bench",
        "tune",
        "--models",
        "lstm",
        *TASK,
        "--set",
        sets[0],
        "--grid",
        f"train.lr=[{','.join(map(str, lrs))}]",
        "--pruner",
        "none",
        "--jobs",
        "2",
        "--out",
        str(out),
    ]
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
    assert (
        main(
            [
                "tune",
                "--models",
                "lstm",
                *TASK,
                "--set",
                sets[0],
                "--grid",
                f"train.lr=[{','.join(map(str, lrs))}]",
                "--pruner",
                "none",
                "--out",
                str(out),
            ]
        )
        == 0
    )
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
    assert (
        main(
            [
                "tune",
                "--models",
                "lstm",
                *TASK,
                "--set",
                "train.max_epochs=1",
                "--grid",
                "train.lr=[1e-3,3e-3]",
                "--jobs",
                "2",
                "--launcher",
                "slurm",
                "--slurm",
                "executor=local",
                "--slurm",
                "cpus_per_cell=1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out  # the default for a grid, --pruner sync: its brackets shared by the two jobs
    assert "| lstm " in printed and "finished" in printed and "Budget per row" in printed
    assert json.loads((out / "studies" / "flipflop-smoke" / "bracket.json").read_text())["lstm"]["done"]
    logs = sorted((out / "studies" / "flipflop-smoke" / "logs").glob("slurm-worker-*.log"))
    assert len(logs) == 2  # two jobs, each a worker on the one study
    assert all(read_record(trial_record(out, "lstm", lr))["status"] == "ok" for lr in (1e-3, 3e-3))
    # the study is finished: best.json names lstm, with its pick (and tuned.yaml), or as having learned nothing (the
    # smoke runs of one epoch stay near flip-flop's trivial level, which these workers compute for themselves)
    best = json.loads((out / "studies" / "flipflop-smoke" / "best.json").read_text())
    assert ("lstm" in best["models"]) == (out / "studies" / "flipflop-smoke" / "tuned.yaml").exists()
    assert ("lstm" in best["models"]) != ("lstm" in best["nothing_learned"])
