"""scripts/same_training.py: records that differ only by a data setting paired with their twins,
and what training decided compared; on hand-made records, and on two real runs whose only
difference is the test size."""

import json
from pathlib import Path

from script_helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("scripts/same_training.py")


CURVE = [{"epoch": 0, "step": 125, "token_acc": 0.25}, {"epoch": 1, "step": 250, "token_acc": 0.5}]


def _record(out: Path, model: str, seed: int, overrides: list[str], name: str, curve=CURVE, status: str = "ok"):
    path = out / "runs" / "mqar" / "small" / model / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "model": model,
                "task": "mqar",
                "preset": "small",
                "seed": seed,
                "overrides": overrides,
                "status": status,
                "val_history": curve,
                "best_step": curve[-1]["step"],
                "best_val": curve[-1]["token_acc"],
                "steps_run": 250,
                "epochs_run": 2,
            }
        )
    )
    return path


def test_pairs_twins_by_everything_but_the_given_override(tmp_path, capsys):
    s = _script()
    other = ["model.d_model=128"]
    _record(tmp_path, "lstm", 0, other, "seed0-a")
    _record(tmp_path, "lstm", 0, [*other, "data.n_test=1000"], "seed0-b")
    _record(tmp_path, "lstm", 1, other, "seed1-a")
    _record(tmp_path, "lstm", 1, [*other, "data.n_test=1000"], "seed1-b", curve=[CURVE[0], {**CURVE[1], "token_acc": 0.51}])
    _record(tmp_path, "gru", 0, [], "seed0-a")  # no twin with the override: not paired
    _record(tmp_path, "gru", 0, ["model.d_model=32", "data.n_test=1000"], "seed0-b")  # another cell: not paired
    _record(tmp_path, "transformer", 0, [], "seed0-a")
    _record(tmp_path, "transformer", 0, ["data.n_test=1000"], "seed0-b", status="failed")  # unfinished: not paired
    found = s.pairs(tmp_path, ["mqar"], {"data.n_test=1000"})
    assert sorted((new.stem, old.stem, new.parent.name) for new, old in found["mqar"]) == [
        ("seed0-b", "seed0-a", "lstm"),
        ("seed1-b", "seed1-a", "lstm"),
    ]
    assert s.main(["mqar", "--set", "data.n_test=1000", "--out", str(tmp_path)]) == 1  # seed 1's curve differs
    shown = capsys.readouterr().out
    assert "| mqar   |       2 |          1 |        1 |" in shown
    assert "runs/mqar/small/lstm/seed1-b.json" in shown and "val_history, best_val" in shown


def test_a_differing_pair_says_on_which_machines_the_two_ran():
    s = _script()
    avx2 = {"device": {"type": "cpu", "cpu": "AMD EPYC (family 25, model 1, stepping 1)", "isa": "AVX2"}}
    avx512 = {"device": {"type": "cpu", "cpu": "AMD EPYC (family 25, model 17, stepping 1)", "isa": "AVX512"}}
    assert s.machines(avx2, avx512) == (
        "cpu AMD EPYC (family 25, model 1, stepping 1) vs AMD EPYC (family 25, model 17, stepping 1); isa AVX2 vs AVX512"
    )
    assert s.machines(avx2, avx2) == "the same cpu and isa"
    assert s.machines(avx2, {"device": {"type": "cpu", "threads": 1}}) == "not recorded in the twin"
    assert s.machines({}, {}) == "not recorded in the record and the twin"


def test_a_missing_results_folder_is_one_line_and_status_2(tmp_path, capsys):
    assert _script().main(["mqar", "--set", "data.n_test=1000", "--out", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_real_twins_that_differ_in_test_size_train_the_same(tmp_path):
    """Two real runs in one process, the second with a larger test set: paired, and the same training."""
    import bench

    small = ["train.max_epochs=1", "data.train_mix=[[16,2,256]]", "data.n_val=32"]
    for extra in ([], ["data.n_test=100"]):
        bench.run("lstm", "mqar", preset="smoke", overrides=[*small, *extra], out=tmp_path, progress=False)
    found = _script().pairs(tmp_path, ["mqar"], {"data.n_test=100"})["mqar"]
    assert len(found) == 1
    ((new, old),) = found
    a, b = json.loads(new.read_text()), json.loads(old.read_text())
    assert _script().differences(a, b) == []
    assert a["metrics"]["L16_kv2"]["n"] == 100 and b["metrics"]["L16_kv2"]["n"] == 64
