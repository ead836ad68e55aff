"""A cost table's ``cost.weights`` (bench/cost/weights.py): the timed training steps start from the
tested checkpoint of the run the entry names, and a run that is missing, unfinished or without its
checkpoint stops the measurement in one line before anything is timed."""

import json

import pytest
import torch

import bench.cost
from bench.cli import main
from bench.cost.weights import sha256
from bench.records import (
    base_record,
    read_record,
    record_checkpoint,
    record_path,
    write_json_atomic,
)
from bench.runner.lifecycle import run

TINY = {"length": 6, "batch": 2, "repeats": 1, "warmup": 0}
WEIGHTS = {"seed": 0, "set": ["train.max_epochs=1", "data.n_train=64", "data.n_val=16", "data.n_test=16", "data.test_splits=[test]"]}


def trained_table(registry):
    """halt-table5-cpu-trained at the smoke preset, bound 10 only, tiny shapes, one-epoch weights."""
    from bench.report import reproduce as rep

    table, preset, _ = rep.select_table("halt-table5-cpu-trained", registry, preset="smoke")
    table.columns = table.columns[:1]
    table.set = ["model.d_model=16", "model.d_ff=32"]
    table.cost.update(TINY, weights=dict(WEIGHTS))
    return table, preset


def train_weights(out, table, preset):
    overrides = [*table.set, *table.columns[0].set, *WEIGHTS["set"]]
    run(model="gut", task="listops", preset=preset, seed=0, out=out, overrides=overrides, progress=False, logger="csv")
    return record_path(out, "gut", "listops", preset, 0, overrides)


def test_the_timed_models_start_from_the_runs_checkpoint(tmp_path, registry, monkeypatch):
    from bench.report import reproduce as rep

    table, preset = trained_table(registry)
    record = train_weights(tmp_path, table, preset)
    checkpoint = record_checkpoint(record, read_record(record))
    trained = torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    seen = {}
    measure_steps = bench.cost.measure_steps

    def capture(steps, *args, **kwargs):  # the models as the timing gets them
        seen.update({name: {k: v.clone() for k, v in step.module.state_dict().items()} for name, step in steps.items()})
        return measure_steps(steps, *args, **kwargs)

    monkeypatch.setattr(bench.cost, "measure_steps", capture)
    path = rep.measure_cost(table, registry, preset, tmp_path)
    assert len(seen) == 3  # the three halting modes at bound 10
    for name, state in seen.items():
        assert state and all(torch.equal(v, trained[k]) for k, v in state.items()), name
    fresh = bench.cost.training_step(
        registry,
        bench.cost.Row("gut", tuple(table.cell_set(table.rows[-1], table.columns[0]))),
        bench.cost.Setup(task="listops", preset=preset, lengths=[6]),
    ).module.state_dict()
    assert not all(torch.equal(v, trained[k]) for k, v in fresh.items())  # loading changed something
    measured = json.loads(path.read_text())
    for row in measured["rows"]:
        assert row["weights"]["record"] == str(record.relative_to(tmp_path))
        assert row["weights"]["checkpoint_sha256"] == sha256(checkpoint)
        unit = sorted(k for k in trained if ".halting.unit." in k)
        assert row["weights"]["unused"] == (unit if row["row"] == "GUT No Halt Upperbound" else []) and unit
    result = rep.reproduce(table, registry, preset, tmp_path, "bench reproduce halt-table5-cpu-trained --preset smoke")
    assert "trained weights" in result["note"] and str(record.relative_to(tmp_path)) in result["note"]
    assert "fresh weights" not in result["note"]


@pytest.mark.parametrize("state", ["no record", "failed", "no checkpoint"])
def test_a_missing_or_unfinished_run_is_one_line(state, tmp_path, registry, monkeypatch, capsys):
    from bench.report import reproduce as rep

    table, preset = trained_table(registry)
    if state != "no record":  # a record without its run's checkpoint: failed, or finished elsewhere
        overrides = [*table.set, *table.columns[0].set, *WEIGHTS["set"]]
        record = record_path(tmp_path, "gut", "listops", preset, 0, overrides)
        record.parent.mkdir(parents=True)
        rec = base_record("gut", "listops", preset, 0, overrides)
        if state == "failed":
            rec.update(status="failed", error="diverged")
        else:  # finished, with what a report reads, and its checkpoint named
            rec.update(
                status="ok",
                primary_metric="acc",
                report_metrics=["acc"],
                test_splits=["test"],
                metrics={"val": {"n": 16, "acc": 0.5}, "test": {"n": 16, "acc": 0.5}},
                checkpoint="seed0/ckpt/best.ckpt",
            )
        write_json_atomic(record, rec)
    monkeypatch.setattr(rep, "select_table", lambda name, registry, *a, **k: (table, preset, registry))
    monkeypatch.setattr(bench.cost, "measure_steps", lambda *a, **k: pytest.fail("timed without its weights"))
    assert main(["reproduce", "halt-table5-cpu-trained", "--preset", "smoke", "--run", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    expected = {"no record": "has no record", "failed": "is not finished (status 'failed')", "no checkpoint": "has no tested checkpoint"}[
        state
    ]
    assert len(err.splitlines()) == 1 and "cost.weights" in err and expected in err and "bench run --out" in err, err
    assert not list((tmp_path / "reproduce").glob("*--measured.json")) if (tmp_path / "reproduce").exists() else True
