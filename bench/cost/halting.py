"""`bench cost --halting` (HALT Table 5): the depth-recurrent models in each mode (halt /
upperbound / no-halt) at each bound (``max_layers``), training steps measured as
``measure_steps`` measures them; ratios to no-halt at the same bound."""
from __future__ import annotations

import math

from ..config import resolve_run
from ..errors import UserError
from .common import Setup, check_models, label_sets, model_of
from .step import build_steps
from .tables import _spread
from .training import measure_steps


HALTING_MODELS = ("ut", "gut", "gutlb")
HALTING_MODES = ("halt", "upperbound", "no-halt")


def measure_halting(registry, models: list[str], setup: Setup, bounds: list[int], progress=None) -> list[dict]:
    """HALT Table 5: each model at each bound (max_layers) in each mode; ratios to no-halt."""
    setup.check()
    for name in models:
        config = resolve_run(registry, model_of(name), setup.task, setup.preset, [*setup.overrides, *label_sets(name)])
        if not {"mode", "max_layers"} <= set(config.model.params):
            raise UserError(f"--halting: model {name!r} has no halting modes (no mode / max_layers parameter); "
                            f"use depth-recurrent models such as {', '.join(HALTING_MODELS)}")
    overrides = {}
    for name in models:
        for bound in bounds:
            for mode in HALTING_MODES:
                overrides[f"{name}@{bound}@{mode}"] = [f"model.max_layers={bound}", f"model.mode={mode}"]
    check_models(registry, models, setup)
    steps = build_steps(registry, list(overrides), setup, overrides)
    rows = measure_steps(steps, setup, setup.lengths, progress)
    n_train = steps[next(iter(steps))].task.params.get("n_train")
    for row in rows:
        row["model"], bound, row["mode"] = row["model"].split("@")
        row["bound"] = int(bound)
        if row["status"] == "ok" and isinstance(n_train, int):
            row["epoch_min"] = math.ceil(n_train / row["batch"]) * row["step_s"] / 60
    no_halt = {(r["model"], r["bound"], r["length"]): r for r in rows if r["mode"] == "no-halt"}
    for row in rows:  # ratio to no-halt of the same model, bound and length
        ref = no_halt.get((row["model"], row["bound"], row["length"]))
        for key in ("step_s", "ops", "syncs"):
            ok = row["status"] == "ok" and ref is not None and ref["status"] == "ok" and ref.get(key)
            row[f"{key}_ratio"] = row[key] / ref[key] if ok else None
    return rows


def halting_table(rows: list[dict], setup: Setup) -> tuple[list[str], list[list[str]]]:
    headers = ["model", "T", "bound", "mode", "ms/step", "spread", "× no-halt", "min/epoch", "halt depth", "ops/step", "syncs"]
    table = []
    for r in rows:
        ok = r["status"] == "ok"
        table.append([r["model"], r["length"], r["bound"], r["mode"], f"{1000 * r['step_s']:,.1f}" if ok else r["status"], _spread(r),
                      f"{r['step_s_ratio']:.2f}" if r.get("step_s_ratio") is not None else "—",
                      f"{r['epoch_min']:,.1f}" if r.get("epoch_min") is not None else "—",
                      f"{r['halt_depth']:.2f}" if r.get("halt_depth") is not None else "—",
                      f"{r['ops']:,}" if r.get("ops") is not None else "—", f"{r['syncs']:,}" if r.get("syncs") is not None else "—"])
    return headers, table
