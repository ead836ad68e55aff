"""`bench curves`: validation metric (or train loss, lr) against training step, one line per
run, drawn from the metrics.csv each run writes beside its record (CSVLogger)."""

from __future__ import annotations

import csv
import logging
from pathlib import Path

from ..errors import UserError
from ..records import overrides_tag

log = logging.getLogger(__name__)


def read_curve(path: Path, metric: str) -> tuple[list[float], list[float]]:
    steps, values = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get(metric) not in (None, ""):
                steps.append(float(row.get("global_step") or row["step"]))
                values.append(float(row[metric]))
    return steps, values


def _columns(path: Path) -> list[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


def find_curves(out: Path, models: list[str], task: str, preset: str, overrides) -> dict[str, list[Path]]:
    tag = overrides_tag(overrides)
    found: dict[str, list[Path]] = {}
    for model in models:
        for path in sorted((Path(out) / "runs" / task / preset / model).glob("seed*/metrics.csv")):
            if path.parent.name.partition("-")[2] == tag:
                found.setdefault(model, []).append(path)
    return found


def _checked_curves(out: Path, models: list[str], task: str, preset: str, overrides, metric: str) -> dict[str, list[Path]]:
    """The runs' metrics.csv per model; one line when there are none or none has ``metric``, a
    warning naming the models that have none."""
    curves = find_curves(out, models, task, preset, overrides)
    if not curves:
        raise UserError(
            f"no curves (metrics.csv) for {', '.join(models)} on {task!r} with preset {preset!r} under {out}/runs; "
            "runs write them since resumable runs; train with bench run or compare --run"
        )
    columns = {column for paths in curves.values() for path in paths for column in _columns(path)}
    if metric not in columns:
        drawable = sorted(columns - {"step", "global_step", "epoch"})
        raise UserError(f"--metric {metric!r} is not a column of these runs' metrics.csv; choose one of {', '.join(drawable)}")
    missing = [m for m in models if m not in curves]
    if missing:
        log.warning(
            f"bench: warning: no runs of {', '.join(missing)} on {task!r} with preset {preset!r} under {out}/runs; the plot leaves them out"
        )
    return curves


def draw_curves(out: Path, models: list[str], tasks: list[str], preset: str, overrides=None, metric: str = "val_metric") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = {task: _checked_curves(out, models, task, preset, overrides, metric) for task in tasks}  # every check before a file
    written = []
    for task, curves in found.items():
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        for i, (model, paths) in enumerate(curves.items()):
            for j, path in enumerate(paths):
                steps, values = read_curve(path, metric)
                scale = 100 if metric == "val_metric" else 1
                ax.plot(steps, [scale * v for v in values], color=f"C{i}", alpha=0.85, marker=".", label=model if j == 0 else None)
        ax.set_xlabel("training step")
        ax.set_ylabel("validation metric (%)" if metric == "val_metric" else metric)
        ax.set_title(f"{task} ({preset}); one line per seed")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        folder = Path(out) / "leaderboards" / "plots"
        folder.mkdir(parents=True, exist_ok=True)
        tag = overrides_tag(overrides)
        path = folder / f"curves--{preset}--{task}--{metric}{'--set-' + tag if tag else ''}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
