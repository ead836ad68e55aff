"""A run is planned once: `bench run` plans every seed before it trains any (every check on the
input first), and the run carries out that plan, resolving nothing again; the plan's training
settings are typed (TrainConfig)."""

import bench.runner.lifecycle as lifecycle
import bench.runner.planning as planning
from bench.cli import main
from bench.config import TrainConfig
from bench.errors import UserError


def test_bench_run_plans_each_seed_once_and_runs_that_plan(tmp_path, monkeypatch, capsys):
    resolved, built = [], []
    resolve_run = planning.resolve_run

    def counting(registry, model, task, preset, overrides=None):
        resolved.append((model, task, preset))
        return resolve_run(registry, model, task, preset, overrides)

    def stop(plan):  # the first step after planning: stop there, before any data or training
        built.append(plan)
        raise UserError("stopped before building")

    monkeypatch.setattr(planning, "resolve_run", counting)
    monkeypatch.setattr(lifecycle, "build", stop)
    argv = [
        "run",
        "--model",
        "lstm",
        "--task",
        "parity",
        "--preset",
        "smoke",
        "--seeds",
        "0,1",
        "--set",
        "train.lr=0.003",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 2 and "stopped before building" in capsys.readouterr().err
    assert resolved == [("lstm", "parity", "smoke")] * 2  # seeds 0 and 1, planned once each; the run of seed 0 resolved nothing
    (plan,) = built
    assert plan.seed == 0 and isinstance(plan.train, TrainConfig) and plan.train.lr == 0.003
    assert plan.train is plan.config.train and plan.record.parent == tmp_path / "runs" / "parity" / "smoke" / "lstm"


def test_the_note_on_long_testing_is_given_for_the_cpu_only(monkeypatch, caplog):
    """Flip-flop's paper preset tests 6 x 10,000 sequences of up to 1,024 tokens with a d-512
    Transformer: hours on one CPU core, which the plan notes; on a GPU that note would be wrong."""
    import logging

    import torch

    from bench.config import resolve_run
    from bench.runner.build import _registry
    from bench.runner.guards import check_forward_fits, runs_on_cpu

    config = resolve_run(_registry(None), "transformer", "flipflop", "paper", [])
    with caplog.at_level(logging.INFO, logger="bench.runner.guards"):
        check_forward_fits(config, config.train, on_cpu=True)
        check_forward_fits(config, config.train, on_cpu=False)
    notes = [r.getMessage() for r in caplog.records if "long work" in r.getMessage()]
    assert len(notes) == 1 and "testing at length 1,024" in notes[0] and "on one CPU core" in notes[0]

    assert runs_on_cpu({"accelerator": "cpu"}) and not runs_on_cpu({"accelerator": "gpu"})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert not runs_on_cpu({}) and runs_on_cpu({"accelerator": "cpu"})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert runs_on_cpu({}) and runs_on_cpu({"accelerator": "auto"})
