"""--logger wandb | mlflow: Lightning's WandbLogger / MLFlowLogger beside the CSV curve, local
files only (W&B offline unless WANDB_MODE is set; MLflow a file store under the run's folder
unless MLFLOW_TRACKING_URI is set: nothing here contacts a server), and one line when the package
is missing. The smoke runs need the optional packages (pip install "bench[wandb]" / "bench[mlflow]")."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from bench.cli import main

SMOKE = ["run", "--model", "transformer", "--task", "parity", "--preset", "smoke", "--quiet", "--set", "train.max_epochs=1"]


@pytest.fixture
def local_only(tmp_path, monkeypatch):
    """No server and no home folder: W&B and MLflow keep everything under tmp_path."""
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_PROJECT", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(var, raising=False)
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "home" / var.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    return tmp_path / "out"


def record_folder(out: Path, capsys) -> Path:
    printed = capsys.readouterr().out
    path = Path(next(ln for ln in printed.splitlines() if ln.startswith("record: ")).split(" ", 1)[1])
    assert json.loads(path.read_text())["status"] == "ok"
    assert (path.with_suffix("") / "metrics.csv").is_file(), "the CSV curve is kept beside the other logger"
    return path.with_suffix("")


def test_wandb_runs_offline_and_writes_its_files_under_the_run(local_only, capsys):
    pytest.importorskip("wandb")
    assert main([*SMOKE, "--logger", "wandb", "--out", str(local_only)]) == 0
    folder = record_folder(local_only, capsys)
    runs = list((folder / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("run-*.wandb")), "an offline W&B run under the run's folder"


def test_mlflow_writes_a_file_store_under_the_run(local_only, capsys):
    pytest.importorskip("mlflow")
    assert main([*SMOKE, "--logger", "mlflow", "--out", str(local_only)]) == 0
    folder = record_folder(local_only, capsys)
    metrics = list((folder / "mlruns").glob("*/*/metrics/val_metric"))
    assert len(metrics) == 1 and metrics[0].read_text().strip(), "val_metric logged to the local file store"


@pytest.mark.parametrize("kind", ["wandb", "mlflow", "tensorboard"])
def test_a_missing_logger_package_is_one_line_and_writes_nothing(kind, tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("wandb", "mlflow", "tensorboard", "tensorboardX") else real(name, *a)
    )
    out = tmp_path / "out"
    assert main([*SMOKE, "--logger", kind, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--logger {kind} needs the" in err and "pip install" in err, err
    assert not out.exists(), "nothing is written"


def test_lightning_log_levels_are_given_back_after_a_run(tmp_path):
    """A run quiets Lightning's INFO lines while it trains, and leaves the levels as it found them."""
    import logging

    import lightning.pytorch  # noqa: F401 - its import sets its own level (INFO): set ours after it

    from bench.logs import LIGHTNING, quiet

    loggers = [logging.getLogger(name) for name in LIGHTNING]
    before = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.DEBUG)
        with quiet():
            assert all(lg.level == logging.WARNING for lg in loggers)
        assert all(lg.level == logging.DEBUG for lg in loggers)
        assert main([*SMOKE, "--logger", "none", "--out", str(tmp_path)]) == 0
        assert all(lg.level == logging.DEBUG for lg in loggers), [lg.level for lg in loggers]
    finally:
        for lg, level in zip(loggers, before):
            lg.setLevel(level)
