"""Write ``trouble`` (bench/runner/health.py: collapsed, diverged, stuck) into run records made
before records stated it, from what their run folders keep.

- diverged / stuck: from the training losses of the metrics.csv beside the record
  (health.loss_trouble), where the folder has one;
- collapsed: for kinds with one label per example, from the per-example outcomes beside the record
  and the split's labels regenerated from the record's task config (as scripts/backfill_majority.py
  regenerates them): the tested weights predicted one class on a split exactly when the examples
  they got right are those of one class (every example of one label right, every other wrong; an
  all-wrong split counts too: one class none of the examples has), on every split they were tested on.

A record that has ``trouble`` is left alone; ``trouble`` goes after ``learned``, where a new record
has it. Records whose split sizes do not match their regenerated data are named and left alone.

    python scripts/backfill_trouble.py results/runs            # prints what it would write
    python scripts/backfill_trouble.py results/runs --write
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench.errors import UserError  # noqa: E402
from bench.metrics import load_outcomes  # noqa: E402
from bench.records import run_folder  # noqa: E402
from bench.runner.health import collapsed_splits, curve_losses, troubles  # noqa: E402
from scripts._bench_util import run_backfill  # noqa: E402
from scripts.backfill_majority import generated, task_class  # noqa: E402


def one_class(correct: np.ndarray, labels: np.ndarray) -> bool:
    """Whether the right answers are exactly those of one predicted class: the examples right are
    all the examples of one label (or none at all)."""
    right = correct.astype(bool)
    if not right.any():
        return True
    found = np.unique(labels[right])
    return len(found) == 1 and bool((right == (labels == found[0])).all())


def predicted_classes(rec: dict, path: Path, cache: dict) -> dict | str:
    """{split: {"predicted_classes": 1}} for each split the record's tested weights collapsed on
    (kinds with one label per example, from its outcomes), {} when none or not decidable, or why not."""
    task = (rec.get("config") or {}).get("task") or {}
    try:
        cls = task_class(task)
    except (UserError, KeyError):
        return {}
    if cls.kind not in ("classify", "pair_classify") or "outcomes" not in rec:
        return {}
    if str(task.get("version", "1")) != str(cls.version):
        return {}
    try:
        outcomes = load_outcomes(path)
    except UserError:
        return {}
    found = {}
    for split, arrays in outcomes.items():
        _, columns = generated(task, split, cache)
        labels = np.asarray(columns["label"])
        if len(labels) != len(arrays["correct"]):
            return f"split sizes differ: {split}"
        order = np.argsort(arrays["index"])
        if one_class(np.asarray(arrays["correct"])[order], labels[np.asarray(arrays["index"])[order]]):
            found[split] = {"predicted_classes": 1}
    return found if found and len(found) == len(outcomes) else {}


def backfill(path: Path, cache: dict) -> tuple[dict | None, str]:
    """(the record with ``trouble`` written, or None, what was done or why not)."""
    rec = json.loads(path.read_text())
    if rec.get("status") != "ok" or "trouble" in rec:
        return None, "nothing to write"
    collapsed = predicted_classes(rec, path, cache)
    if isinstance(collapsed, str):
        return None, collapsed
    metrics = {split: {**(rec.get("metrics") or {}).get(split, {}), **collapsed.get(split, {})} for split in rec.get("metrics") or {}}
    found = troubles({s: metrics[s] for s in collapsed_splits(metrics)}, curve_losses(run_folder(path)))
    out = {}
    for key, value in rec.items():
        out[key] = value
        if key == "learned":
            out["trouble"] = found
    out.setdefault("trouble", found)
    return out, "; ".join(found) or "none"


def main() -> int:
    return run_backfill(__doc__, backfill, unsaid=("none",))


if __name__ == "__main__":
    raise SystemExit(main())
