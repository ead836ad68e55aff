"""A table's tuned rows (``tuned:`` in bench/tables/*.yaml): the best values of the ``bench tune``
studies it names (``OUT/studies/NAME/best.json``) as overrides of the rows they tuned, and the
printed column that says which setting each row was read at."""
from __future__ import annotations

import json
from pathlib import Path

from ..config import canonical_text
from .table_parts import Table

TUNED_HEADER = "tuned"


def apply_tuned(table: Table, out: Path, preset: str) -> None:
    """Read the best values of the studies the table names (``OUT/studies/NAME/best.json``, written
    by bench tune): a row whose model a study tuned, on the study's task and at the preset read,
    gets the values as overrides in that task's cells (``cell_set``) and its text in the tuned
    column; every other row is marked not tuned, saying why."""
    table.tuned_sets, table.tuned_text = {}, {}
    if not table.tuned:
        return
    found, missing = [], []
    for name in table.tuned:
        try:
            found.append(json.loads((Path(out) / "studies" / name / "best.json").read_text()))
        except (OSError, ValueError):
            missing.append(name)
    for row in table.rows:
        texts = []
        for study in found:
            best = study.get("models", {}).get(row.model)
            if best is None or study.get("task") not in {c.task for c in table.columns}:
                continue
            if study.get("preset") != preset:
                texts.append(f"not tuned at preset {preset} (study {study['study']}: {study.get('preset')})")
                continue
            items = tuple(f"{k}={canonical_text(v)}" for k, v in sorted(best["values"].items()))
            table.tuned_sets[row.model, study["task"]] = items
            texts.append(f"{' '.join(items)} ({best['trials']} trials, val {100 * best['val']:.1f})")
        table.tuned_text[row.label] = "; ".join(texts) or ("not tuned" + (f" (no study {', '.join(missing)} under {out}/studies)"
                                                                          if missing else ""))


def with_tuned_column(table: Table, headers: list[str], rows: list[list]) -> tuple[list[str], list[list]]:
    """The printed table with one more column: each row's tuned setting, or "not tuned"."""
    if not table.tuned:
        return headers, rows
    at = headers.index("row")
    return [*headers, TUNED_HEADER], [[*r, table.tuned_text.get(r[at], "not tuned")] for r in rows]
