"""A run's trouble (bench/runner/health.py): collapsed, diverged, stuck; kept in its record, counted
in its cell."""

import json

import numpy as np
import pytest

from bench.runner.health import loss_trouble, troubles


def test_the_training_curve_says_diverged_or_stuck():
    assert loss_trouble([2.0, 1.2, 0.8]) is None
    assert loss_trouble([2.0, 2.5, 2.1]).startswith("diverged: the training loss ended above its first value (2 -> 2.1)")
    assert loss_trouble([2.0, float("nan")]) == "diverged: a non-finite training loss"
    # ListOps at the prior: ln 10 = 2.3026 from start to end, 0.25% lower: stuck (< 2%)
    assert loss_trouble([2.3058, 2.3005, 2.3001]).startswith("stuck: the training loss did not fall")
    assert loss_trouble([2.3058, 2.25]) is None  # 2.4% lower: it trained
    assert loss_trouble([2.0]) is None  # one value: no verdict


def test_one_class_predicted_on_a_split_is_collapsed():
    metrics = {"val": {"n": 4, "predicted_classes": 1}, "test": {"n": 4, "predicted_classes": 1}, "ood": {"n": 4, "predicted_classes": 3}}
    assert troubles(metrics, [2.0, 1.0]) == ["collapsed: one class predicted on val, test"]
    assert troubles({"val": {"n": 4, "predicted_classes": 2}}, [2.0, 1.0]) == []


def test_a_classification_run_records_how_many_classes_it_predicted(tmp_path):
    import bench

    rec = bench.run(model="transformer", task="listops", preset="smoke", seed=0, out=tmp_path, progress=False)
    assert rec["status"] == "ok" and isinstance(rec["trouble"], list)
    labels = {s: m["predicted_classes"] for s, m in rec["metrics"].items()}
    assert all(1 <= k <= 10 for k in labels.values())


def test_one_class_is_read_from_outcomes_and_labels():
    from script_helpers import load_script

    script = load_script("scripts/backfill_trouble.py")
    labels = np.array([0, 1, 1, 2, 1])
    assert script.one_class(np.array([0, 1, 1, 0, 1]), labels)  # right exactly on the examples of label 1
    assert not script.one_class(np.array([1, 1, 1, 0, 1]), labels)  # right on two labels' examples
    assert not script.one_class(np.array([0, 1, 0, 0, 1]), labels)  # some of label 1 wrong: not one constant class
    assert script.one_class(np.zeros(5), labels)  # nothing right: a class no example has


def test_backfill_finds_the_committed_collapsed_seed_and_the_cell_counts_it(tmp_path):
    """gut-no-gate at betas (0.9, 0.98) on ListOps (halt-table1-cpu-reference), seed 5: 10.6% on test,
    validation 9.75% at every validation, training loss 2.306 -> 2.300 (ln 10 = 2.303): the backfill
    writes back what the committed record says, from its outcomes, labels and metrics.csv."""
    import shutil

    from script_helpers import ROOT as root
    from script_helpers import load_script

    script = load_script("scripts/backfill_trouble.py")
    folder = root / "results/runs/listops/small/gut-no-gate"
    original = (folder / "seed5-94df86d1.json").read_text()
    rec = json.loads(original)
    assert rec["trouble"][0].startswith("collapsed: one class predicted on val, test, len200_300") and rec["trouble"][1].startswith("stuck")
    rec.pop("trouble")
    copy = tmp_path / "gut-no-gate"
    shutil.copytree(folder / "seed5-94df86d1", copy / "seed5-94df86d1")
    (copy / "seed5-94df86d1.json").write_text(json.dumps(rec, indent=2) + "\n")
    filled, what = script.backfill(copy / "seed5-94df86d1.json", {})
    assert what.startswith("collapsed: one class predicted on val, test, len200_300") and "; stuck" in what
    assert json.dumps(filled, indent=2) + "\n" == original


def test_a_cell_counts_its_troubled_seeds():
    from bench.report.cells import troubled_seeds

    recs = [{"trouble": ["collapsed: ...", "stuck: ..."]}, {"trouble": ["stuck: ..."]}, {"trouble": []}, {}]
    assert troubled_seeds(recs) == {"collapsed": 1, "stuck": 1}
    assert troubled_seeds([{}]) == {}


@pytest.mark.parametrize("table", ["halt-table1-cpu-reference"])
def test_the_committed_table_shows_the_collapsed_seeds(table):
    from script_helpers import ROOT as root

    text = (root / "results" / "reproduce" / f"{table}.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| gut-no-gate "))
    assert "(5, 1 learned, 4 collapsed, se 1.2) ~" in row
