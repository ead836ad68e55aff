"""Runs survive interruption: a run killed (SIGKILL) or stopped (SIGINT / SIGTERM) and started
again with the same command continues from its last checkpoint and ends with exactly the
metrics of a run that was never interrupted (CPU, same threads: bitwise)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import bench
from bench.cli import main

ROOT = Path(__file__).resolve().parent.parent
# a mid-epoch validation every 3 steps (8 steps per epoch), dropout on: the data position and
# the RNG state both matter for the result
ARGS = [
    "--model",
    "transformer",
    "--task",
    "parity",
    "--preset",
    "smoke",
    "--set",
    "train.max_epochs=3",
    "--set",
    "train.val_every_steps=3",
    "--set",
    "model.dropout=0.1",
    "--set",
    "train.num_threads=1",
    "--quiet",
]


def cli_with_signal(out: Path, step: int, signame: str, extra=(), during: str = "train") -> subprocess.CompletedProcess:
    """`bench run ARGS` in a fresh process that sends itself ``signame`` at training step ``step``
    (``during="validation"``: in the validation after that step; ``"test"``: while testing)."""
    code = (
        "import sys; from tests.fixtures.signal_at import install; install(%d, %r, %r); "
        "from bench.cli import main; sys.exit(main(sys.argv[1:]))" % (step, signame, during)
    )
    return subprocess.run(
        [sys.executable, "-c", code, "run", *ARGS, *extra, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def record(out: Path) -> dict:
    (path,) = Path(out).rglob("seed0*.json")
    return json.loads(path.read_text())


def same_result(a: dict, b: dict) -> bool:
    keys = ("metrics", "val_history", "best_step", "best_val", "steps_run", "train_tokens")
    return all(a[k] == b[k] for k in keys)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    assert main(["run", *ARGS, "--out", str(out)]) == 0
    rec = record(out)
    assert rec["resumed_from"] == []
    return rec


@pytest.mark.slow
@pytest.mark.parametrize(
    "kill_step,extra,checkpoint_step",
    [
        (7, (), 6),  # mid-epoch, checkpoint of the validation at step 6
        (9, ("--set", "train.val_every_steps=4"), 8),  # just after an epoch ended with a validation (step 8)
    ],
)
def test_sigkill_then_same_command_resumes_to_identical_metrics(tmp_path, uninterrupted, kill_step, extra, checkpoint_step):
    killed = cli_with_signal(tmp_path, kill_step, "SIGKILL", extra)
    assert killed.returncode == -signal.SIGKILL
    assert not list(tmp_path.rglob("seed0*.json")), "a killed run writes no record"
    assert main(["run", *ARGS, *extra, "--out", str(tmp_path)]) == 0
    resumed = record(tmp_path)
    assert resumed["resumed_from"] == [checkpoint_step]
    if not extra:
        assert same_result(resumed, uninterrupted)
    else:  # a different validation schedule: compare with its own uninterrupted twin
        twin = tmp_path / "twin"
        assert main(["run", *ARGS, *extra, "--out", str(twin)]) == 0
        assert same_result(resumed, record(twin))


@pytest.mark.slow
@pytest.mark.parametrize("signame,status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_sigint_sigterm_checkpoint_and_say_how_to_resume(tmp_path, uninterrupted, signame, status):
    stopped = cli_with_signal(tmp_path, 5, signame)
    assert stopped.returncode == status, stopped.stderr
    lines = [ln for ln in stopped.stderr.splitlines() if ln.startswith("bench:")]
    assert "preset smoke" in lines[0], "the first line names the run and its preset"
    assert len(lines) == 2 and "step 6" in lines[1] and "same command" in lines[1], stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert main(["run", *ARGS, "--out", str(tmp_path)]) == 0
    resumed = record(tmp_path)
    assert resumed["resumed_from"] == [6]  # the checkpoint written on the signal, after step 6's batch
    assert same_result(resumed, uninterrupted)


@pytest.mark.slow
@pytest.mark.parametrize("signame,status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_mid_validation_stops_after_it_with_a_checkpoint(tmp_path, uninterrupted, signame, status):
    """Lightning answers SIGTERM mid-validation with its own exit (status 0, no word, no
    checkpoint): bench's stop has to win there too. The validation after step 6 finishes, its
    checkpoint is the resume point, and the resumed run ends as if never stopped."""
    several = ("--set", "train.eval_batch_size=4")  # validation in several batches: the signal comes before the last
    stopped = cli_with_signal(tmp_path, 6, signame, several, during="validation")
    assert stopped.returncode == status, stopped.stderr
    assert "stopped by %s at step 6" % signame in stopped.stderr and "Traceback" not in stopped.stderr, stopped.stderr
    assert main(["run", *ARGS, *several, "--out", str(tmp_path)]) == 0
    resumed = record(tmp_path)
    assert resumed["resumed_from"] == [6]
    twin = tmp_path / "twin"
    assert main(["run", *ARGS, *several, "--out", str(twin)]) == 0
    assert same_result(resumed, record(twin))


@pytest.mark.slow
@pytest.mark.parametrize("signame,status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_testing_stops_and_the_same_command_finishes_the_run(tmp_path, uninterrupted, signame, status):
    stopped = cli_with_signal(tmp_path, 0, signame, during="test")
    assert stopped.returncode == status, stopped.stderr
    assert "stopped by %s" % signame in stopped.stderr and "Traceback" not in stopped.stderr, stopped.stderr
    assert not list(tmp_path.rglob("seed0*.json")), "a stopped run writes no record"
    assert main(["run", *ARGS, "--out", str(tmp_path)]) == 0
    assert same_result(record(tmp_path), uninterrupted)


EVAL_WITH_SIGNAL = """
import os, signal, sys
import lightning as L
import bench.runner.evaluate as evaluate
from bench.cli import main
from tests.fixtures.signal_at import SignalAt

class Trainer(L.Trainer):  # bench eval's trainer, with a signal at its first test batch
    def __init__(self, **kwargs):
        super().__init__(**kwargs, callbacks=[SignalAt(0, getattr(signal, sys.argv[1]), during="test")])

evaluate.L.Trainer = Trainer
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("signame,status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_bench_eval_stops_it_and_writes_nothing(tmp_path, signame, status):
    rec = bench.run(model="lstm", task="parity", preset="smoke", out=tmp_path, progress="none", overrides=["train.max_epochs=1"])
    stopped = subprocess.run(
        [sys.executable, "-c", EVAL_WITH_SIGNAL, signame, "eval", rec["path"]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert stopped.returncode == status, stopped.stderr  # Lightning alone: SIGTERM exits 0, SIGINT exits 1
    assert "stopped by %s" % signame in stopped.stderr and "Traceback" not in stopped.stderr, stopped.stderr
    assert not list(tmp_path.rglob("eval*.json"))


def test_finished_run_is_not_retrained_and_rerun_starts_over(tmp_path, capsys):
    args = ["run", "--model", "lstm", "--task", "parity", "--preset", "smoke", "--quiet", "--out", str(tmp_path)]
    assert main(args) == 0
    first = record(tmp_path)
    capsys.readouterr()
    assert main(args) == 0
    assert "already finished" in capsys.readouterr().err  # a note: stderr
    assert record(tmp_path)["date"] == first["date"]
    ckpts = sorted(p.name for p in tmp_path.rglob("*.ckpt"))
    assert ckpts == ["best.ckpt"], "a finished run keeps only its tested checkpoint"
    assert main([*args, "--rerun"]) == 0
    again = record(tmp_path)
    assert again["resumed_from"] == [] and again["metrics"] == first["metrics"]


def test_select_last_tests_the_final_weights(tmp_path):
    rec = bench.run(
        model="transformer",
        task="parity",
        preset="smoke",
        out=tmp_path,
        progress="none",
        overrides=["train.max_epochs=3", "train.select=last"],
    )
    assert rec["select"] == "last" and rec["checkpoint"].endswith("last.ckpt")
    assert rec["metrics"]["val"]["acc"] == rec["val_history"][-1]["acc"] == rec["last_val"]


def test_eval_reevaluates_the_tested_checkpoint(tmp_path, capsys):
    rec = bench.run(model="transformer", task="parity", preset="smoke", out=tmp_path, progress="none", overrides=["train.max_epochs=2"])
    capsys.readouterr()
    assert main(["eval", rec["path"]]) == 0
    out = capsys.readouterr().out
    evaluated = json.loads((Path(rec["path"]).with_suffix("") / "eval.json").read_text())
    assert evaluated["metrics"] == rec["metrics"]
    assert f"{100 * rec['metrics']['bin0']['acc']:.1f}" in out
    # other data: a different test-length set is evaluated with the same weights
    assert main(["eval", rec["path"], "--set", "data.n_test=50"]) == 0
    other = [p for p in Path(rec["path"]).with_suffix("").glob("eval-*.json")]
    assert len(other) == 1 and json.loads(other[0].read_text())["metrics"]["bin0"]["n"] == 50
