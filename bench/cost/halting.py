"""`bench cost --halting` (HALT Table 5): the depth-recurrent models in each mode (halt /
upperbound / no-halt) at each bound (``max_layers``), training steps measured as
``measure_steps`` measures them; ratios to no-halt at the same bound."""

from __future__ import annotations

import math
from dataclasses import replace

from ..config import RunConfig
from ..errors import UserError
from ..registry import constructor_params
from ..targets import import_model_class
from .common import Row, Setup
from .step import build_steps
from .tables import _spread
from .training import measure_steps

HALTING_MODELS = ("ut", "gut", "gutlb")
HALTING_MODES = ("halt", "upperbound", "no-halt")


def halting_rows(registry, rows: list[Row], bounds: list[int]) -> list[Row]:
    """Each row at each bound (max_layers) in each mode; UserError for a model without halting modes."""
    for row in rows:
        entry = registry.model_entry(row.model)
        if not {"mode", "max_layers"} <= set(constructor_params(import_model_class(entry["target"], f"models.{row.model}"))):
            raise UserError(
                f"--halting: model {row.name!r} has no halting modes (no mode / max_layers parameter); "
                f"use depth-recurrent models such as {', '.join(HALTING_MODELS)}"
            )
    return [
        replace(row, sets=(*row.sets, f"model.max_layers={bound}", f"model.mode={mode}"), label=row.name, bound=bound, mode=mode)
        for row in rows
        for bound in bounds
        for mode in HALTING_MODES
    ]


def measure_halting(configs: dict[Row, RunConfig], setup: Setup, progress=None) -> list[dict]:
    """HALT Table 5: the rows of ``halting_rows``, resolved (``resolve_rows``); ratios to no-halt."""
    steps = build_steps(configs, setup)
    measured = measure_steps(steps, setup, setup.lengths, progress)
    n_train = next(iter(steps.values())).task.params.get("n_train")
    out = []
    for cell, row in measured:
        row["mode"], row["bound"] = cell.mode, cell.bound
        if row["status"] == "ok" and isinstance(n_train, int):
            row["epoch_min"] = math.ceil(n_train / row["batch"]) * row["step_s"] / 60
        out.append(row)
    no_halt = {(r["model"], r["bound"], r["length"]): r for r in out if r["mode"] == "no-halt"}
    for row in out:  # ratio to no-halt of the same model, bound and length
        ref = no_halt.get((row["model"], row["bound"], row["length"]))
        for key in ("step_s", "ops", "syncs"):
            ok = row["status"] == "ok" and ref is not None and ref["status"] == "ok" and ref.get(key)
            row[f"{key}_ratio"] = row[key] / ref[key] if ok else None
    return out


def halting_table(rows: list[dict], setup: Setup) -> tuple[list[str], list[list[str]]]:
    headers = ["model", "T", "bound", "mode", "ms/step", "spread", "× no-halt", "min/epoch", "halt depth", "ops/step", "syncs"]
    table = []
    for r in rows:
        ok = r["status"] == "ok"
        table.append(
            [
                r["model"],
                r["length"],
                r["bound"],
                r["mode"],
                f"{1000 * r['step_s']:,.1f}" if ok else r["status"],
                _spread(r),
                f"{r['step_s_ratio']:.2f}" if r.get("step_s_ratio") is not None else "—",
                f"{r['epoch_min']:,.1f}" if r.get("epoch_min") is not None else "—",
                f"{r['halt_depth']:.2f}" if r.get("halt_depth") is not None else "—",
                f"{r['ops']:,}" if r.get("ops") is not None else "—",
                f"{r['syncs']:,}" if r.get("syncs") is not None else "—",
            ]
        )
    return headers, table
