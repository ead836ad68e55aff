"""What went wrong in a run that finished: the ``trouble`` a record states, so that a seed whose
training failed is told apart from one that learned little.

- **collapsed**: the tested weights predict one class for every example of a split (kinds with one
  label per example: the split's ``predicted_classes`` is 1, bench/metrics.py);
- **diverged**: the training loss was not finite at a validation, or ended above its first value;
- **stuck**: the training loss fell by less than ``STUCK_SHARE`` of its first value (a run that
  stayed at the prior, e.g. ListOps at ln 10 = 2.30 from start to end).

The training loss is the mean since the previous validation, as the run's metrics.csv keeps it (one
value per validation). A run whose loss is not finite during training fails (bench/runner/module.py:
RunFailed), with no record of status ok; these are the troubles of runs that did not.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

STUCK_SHARE = 0.02  # a training loss that fell by less than this share of its first value did not train


def loss_rose(losses: list[float]) -> bool:
    """Whether a training loss (the mean since the previous validation, at each validation, in
    order) is not finite somewhere or ended above its first value: the run diverged (what the
    tuning protocol's divergence check reads too, bench/tune/protocol.py)."""
    if any(not math.isfinite(x) for x in losses):
        return True
    return len(losses) >= 2 and losses[-1] > losses[0]


def loss_trouble(losses: list[float]) -> str | None:
    """The training curve's trouble ("diverged: ..." or "stuck: ..."), or None; no verdict on fewer than 2 values."""
    if len(losses) < 2:
        return None
    if any(not math.isfinite(x) for x in losses):
        return "diverged: a non-finite training loss"
    first, last = losses[0], losses[-1]
    if loss_rose(losses):
        return f"diverged: the training loss ended above its first value ({first:.4g} -> {last:.4g})"
    if first - last < STUCK_SHARE * abs(first):
        return f"stuck: the training loss did not fall ({first:.4g} -> {last:.4g})"
    return None


def collapsed_splits(metrics: dict) -> list[str]:
    """The splits on which the tested weights predicted one class (``predicted_classes`` 1)."""
    return [split for split, m in metrics.items() if isinstance(m, dict) and m.get("predicted_classes") == 1]


def troubles(metrics: dict, losses: list[float]) -> list[str]:
    """A finished run's troubles, each one line (empty: none found)."""
    found = []
    splits = collapsed_splits(metrics)
    if splits:
        found.append(f"collapsed: one class predicted on {', '.join(splits)}")
    curve = loss_trouble(losses)
    if curve:
        found.append(curve)
    return found


def losses_of(rows: list[dict]) -> list[float]:
    """The training losses of a run's curve rows (metrics.csv's, or the CSV logger's), in step order."""
    found = []
    for row in rows:
        loss, step = row.get("train_loss"), row.get("global_step", row.get("step"))
        if loss not in (None, "") and step not in (None, ""):
            found.append((float(step), float(loss)))
    return [loss for _, loss in sorted(found)]


def curve_losses(folder: Path) -> list[float]:
    """The training losses in a run folder's metrics.csv ([] without one)."""
    try:
        with open(Path(folder) / "metrics.csv", newline="") as f:
            return losses_of(list(csv.DictReader(f)))
    except (OSError, ValueError):
        return []
