"""The SLURM launcher through submitit's local executor: the same cells give the same records as
the local launcher, a job requeued mid-cell resumes that cell from its checkpoint, and a bad
profile is one line."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

submitit = pytest.importorskip("submitit")

from bench.cli import main  # noqa: E402
from bench.cpus import available_cpus  # noqa: E402
from bench.errors import UserError  # noqa: E402
from bench.grid.slurm import load_profile, run_slurm  # noqa: E402

GRID = [
    "compare",
    "--models",
    "transformer,lstm",
    "--tasks",
    "parity",
    "--preset",
    "smoke",
    "--set",
    "train.max_epochs=1",
    "--run",
    "--accelerator",
    "cpu",
]

# A cell command that, once, sends the requeue signal to its job (as SLURM does before a time
# limit) at step 3, and waits until the job has told it to stop (bench then checkpoints).
REQUEUE_AT_STEP_3 = """
import os, signal, sys, time
from pathlib import Path
import lightning as L
import bench.runner.lifecycle as lifecycle
from bench.cli import main
from bench.runner.callbacks import GracefulStop

mark = Path(sys.argv[1])

class RequeueAt(L.Callback):
    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_step == 3 and not mark.exists():
            mark.touch()
            os.kill(os.getppid(), signal.SIGUSR2)
            stop = next(c for c in trainer.callbacks if isinstance(c, GracefulStop))
            for _ in range(600):
                if stop.signum:
                    return
                time.sleep(0.1)

make_trainer = lifecycle.make_trainer
lifecycle.make_trainer = lambda plan, task, data, progress, logger, extra: make_trainer(
    plan, task, data, progress, logger, [*extra, RequeueAt()])
sys.exit(main(sys.argv[2:]))
"""


def records(out: Path) -> dict:
    found = {}
    for path in sorted((out / "runs").rglob("*.json")):
        rec = json.loads(path.read_text())
        found[rec["model"]] = rec
    return found


@pytest.mark.slow
def test_slurm_launcher_matches_local_and_resumes_a_requeued_cell(tmp_path, capsys):
    threads = max(1, available_cpus() // 2)  # what the local launcher gives each of 2 jobs
    assert main([*GRID, "--jobs", "2", "--out", str(tmp_path / "local")]) == 0

    script = tmp_path / "requeue_at.py"
    script.write_text(REQUEUE_AT_STEP_3)
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        textwrap.dedent(f"""\
        executor: local
        gpus_per_cell: 0
        cpus_per_cell: {threads}
        cells_per_job: 2
        timeout_min: 10
        cell_command: {sys.executable} {script} {tmp_path / "requeued"}
        """)
    )
    capsys.readouterr()
    assert main([*GRID, "--launcher", "slurm", "--slurm-profile", str(profile), "--out", str(tmp_path / "slurm")]) == 0
    out = capsys.readouterr().err  # progress: stderr
    assert "[2/2] ok" in out and "FAIL" not in out, out
    assert (tmp_path / "requeued").exists(), "the job was never signalled"

    local, slurm = records(tmp_path / "local"), records(tmp_path / "slurm")
    assert set(local) == set(slurm) == {"transformer", "lstm"}
    for model in local:
        assert slurm[model]["status"] == local[model]["status"] == "ok"
        assert slurm[model]["metrics"] == local[model]["metrics"], model
        assert slurm[model]["steps_run"] == local[model]["steps_run"]
        assert slurm[model]["param_count"] == local[model]["param_count"]
    assert slurm["transformer"]["resumed_from"], "the requeued cell started over instead of resuming"
    assert not slurm["lstm"]["resumed_from"] and not local["transformer"]["resumed_from"]
    job_logs = "".join(p.read_text() for p in (tmp_path / "slurm" / "slurm").glob("*_log.out"))
    assert "Requeued job" in job_logs


@pytest.mark.parametrize(
    "text, message",
    [
        ("partiton: gpu\n", "unknown setting 'partiton'; valid: .* did you mean 'partition'"),
        ("timeout_min: soon\n", "timeout_min must be int or float"),
        ("cells_per_job: 0\n", "cells_per_job must be greater than 0"),
        ("executor: kubernetes\n", "executor must be slurm or local"),
        ("timeout_min: 1.5\n", "whole minutes on SLURM"),
        ("setup: [1, 2]\n", "setup must be a list of shell lines"),
        ("- a list\n", "must be a mapping of settings"),
        ("partition: [gpu\n", "is not valid YAML at line 2"),
    ],
)
def test_bad_profile_is_one_line(tmp_path, text, message):
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=message) as info:
        load_profile(path)
    assert "\n" not in str(info.value)


def test_profile_defaults_and_overrides(tmp_path):
    path = tmp_path / "profile.yaml"
    path.write_text("partition: gpu\ncells_per_job: 4\n")
    prof = load_profile(path, ["timeout_min=120", "sbatch={exclusive: true}"])
    assert (prof["partition"], prof["cells_per_job"], prof["timeout_min"], prof["gpus_per_cell"]) == ("gpu", 4, 120, 1)
    assert prof["sbatch"] == {"exclusive": True} and prof["executor"] == "slurm"
    with pytest.raises(UserError, match="cannot be read"):
        load_profile(tmp_path / "missing.yaml")


def test_cli_bad_profile_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "profile.yaml"
    path.write_text("gpus_per_cel: 1\n")
    code = main([*GRID, "--launcher", "slurm", "--slurm-profile", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "did you mean 'gpus_per_cell'" in err, err


def test_missing_submitit_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit now raises ImportError
    with pytest.raises(UserError, match=r'needs submitit: pip install "bench\[slurm\]"'):
        run_slurm([], tmp_path, None, trainer_args={}, rerun=False, profile=None)
