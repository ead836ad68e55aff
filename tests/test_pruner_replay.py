"""scripts/pruner_replay.py: Optuna's pruners replayed on recorded validation curves, checked
against a search worked out by hand."""

from pathlib import Path

import pytest
from script_helpers import load_script

pytest.importorskip("optuna")
ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("scripts/pruner_replay.py")


META = {
    "task": "flipflop",
    "preset": "small",
    "models": ["transformer"],
    "seed": 0,
    "trials": 4,
    "space": ["train.lr=[3e-4,1e-3,3e-3,1e-2]"],
    "set": [],
}
STEPS = (235, 470, 705, 940)
# lr: its validation score at each step; the last is its final score
CURVES = {
    "0.003": (0.80, 0.90, 0.92, 0.93),
    "0.01": (0.85, 0.91, 0.93, 0.94),
    "0.001": (0.70, 0.88, 0.95, 0.97),
    "0.0003": (0.60, 0.70, 0.75, 0.80),
}


def _curves():
    return {f"train.lr={lr}": (list(zip(STEPS, values)), values[-1]) for lr, values in CURVES.items()}


def test_the_grid_runs_in_the_order_bench_tune_ran_it():
    # the committed t3cpu search ran its grid in this order (seed 0): results/studies/t3cpu
    ran = _script().replay(META, _curves(), _script().pruners(940)["none"], "transformer")
    assert [r["key"] for r in ran] == ["train.lr=0.003", "train.lr=0.01", "train.lr=0.001", "train.lr=0.0003"]
    assert all(r["stopped"] == 940 for r in ran)
    assert _script().picked(ran) == "train.lr=0.001"  # the best final score: the exhaustive grid's pick


def test_asha_prunes_a_late_starter_at_the_first_validation():
    # 3e-3 runs first and finishes; 1e-2 is the best so far at every step and finishes; 1e-3
    # (0.70) and 3e-4 (0.60) are below the best so far at step 235 (0.85; with fewer than 4
    # trials at a rung only the best is promoted) and stop there, though 1e-3 ends best (0.97).
    script = _script()
    ran = script.replay(META, _curves(), script.pruners(940)["asha (bench)"], "transformer")
    assert [(r["key"].split("=")[1], r["stopped"]) for r in ran] == [("0.003", 940), ("0.01", 940), ("0.001", 235), ("0.0003", 235)]
    assert sum(r["stopped"] for r in ran) / 940 == pytest.approx(2350 / 940)
    assert script.picked(ran) == "train.lr=0.01"  # regret 0.97 - 0.94 = 3 points


def test_a_first_rung_at_half_the_run_stops_them_at_470():
    script = _script()
    ran = script.replay(META, _curves(), script.pruners(940)["asha, first rung at 1/2"], "transformer")
    # at step 470, 1e-3 (0.88) is below 0.91 and 3e-4 (0.70) below it too
    assert [r["stopped"] for r in ran] == [940, 940, 470, 470]
    assert script.picked(ran) == "train.lr=0.01"


def test_the_median_pruner_compares_with_the_trials_before():
    script = _script()
    curves = _curves()
    # Optuna's median is over the finished trials (3e-3 and 1e-2): 1e-3 (0.70) is below their
    # median at step 235 (0.825) and stops; 3e-4 now starts at 0.83, above it, goes on to 470,
    # where 0.86 is below their median (0.905), and stops
    curves["train.lr=0.0003"] = (list(zip(STEPS, (0.83, 0.86, 0.90, 0.91))), 0.91)
    ran = script.replay(META, curves, script.pruners(940)["median"], "transformer")
    assert [(r["key"].split("=")[1], r["stopped"]) for r in ran] == [("0.003", 940), ("0.01", 940), ("0.001", 235), ("0.0003", 470)]
