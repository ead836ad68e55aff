"""A run is planned once: `bench run` plans every seed before it trains any (every check on the
input first), and the run carries out that plan, resolving nothing again; the plan's training
settings are typed (TrainConfig)."""
import bench.runner.lifecycle as lifecycle
from bench.cli import main
from bench.config import TrainConfig
from bench.errors import UserError


def test_bench_run_plans_each_seed_once_and_runs_that_plan(tmp_path, monkeypatch, capsys):
    resolved, built = [], []
    resolve_run = lifecycle.resolve_run

    def counting(registry, model, task, preset, overrides=None):
        resolved.append((model, task, preset))
        return resolve_run(registry, model, task, preset, overrides)

    def stop(plan):  # the first step after planning: stop there, before any data or training
        built.append(plan)
        raise UserError("stopped before building")

    monkeypatch.setattr(lifecycle, "resolve_run", counting)
    monkeypatch.setattr(lifecycle, "build", stop)
    argv = ["run", "--model", "lstm", "--task", "parity", "--preset", "smoke", "--seeds", "0,1", "--set", "train.lr=0.003",
            "--out", str(tmp_path)]
    assert main(argv) == 2 and "stopped before building" in capsys.readouterr().err
    assert resolved == [("lstm", "parity", "smoke")] * 2  # seeds 0 and 1, planned once each; the run of seed 0 resolved nothing
    (plan,) = built
    assert plan.seed == 0 and isinstance(plan.train, TrainConfig) and plan.train.lr == 0.003
    assert plan.train is plan.config.train and plan.record.parent == tmp_path / "runs" / "parity" / "smoke" / "lstm"
