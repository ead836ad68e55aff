"""A cost table's ``cost.weights`` entry, ``{seed, set}``: which run's trained weights each cell's
training step is timed on (loaded by bench/cost/weights.py at ``--run``). For each cell it names
the record of the cell's model trained on the cell's task at the table's preset with the table's,
the column's and the entry's ``set``, never the row's: every row of a column loads the same
weights (in HALT Table 5 the rows are halting modes, the columns upper bounds). Reading it imports
no torch: a table is rebuilt, listed and checked without its checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..records import record_path
from ..schema import Schema


@dataclass
class WeightsEntry(Schema):
    """The seed and the ``set`` (beside the table's and the column's) of the runs whose tested
    checkpoints the cells load."""

    seed: int
    set: list[str] | None = None


def cell_runs(table, preset: str) -> dict[str, dict]:
    """For each cell ``"i:j"`` of a cost table with ``cost.weights``, the run whose weights it loads:
    {record (relative to the output folder), model, task, seed, set}."""
    entry = WeightsEntry.from_mapping(
        table.cost["weights"],
        f"tables/{table.name}.yaml, cost.weights",
        "weights is {seed, set}, e.g. {seed: 0, set: [train.max_epochs=6]}",
    )
    runs = {}
    for i, row in enumerate(table.rows):
        for j, col in enumerate(table.columns):
            overrides = [*table.set, *col.set, *(entry.set or [])]
            runs[f"{i}:{j}"] = {
                "record": str(record_path(Path(), row.model, col.task, preset, entry.seed, overrides)),
                "model": row.model,
                "task": col.task,
                "seed": entry.seed,
                "set": overrides,
            }
    return runs


def describe(runs: dict[str, dict]) -> str:
    """The note's words for where the weights come from."""
    records = ", ".join(dict.fromkeys(r["record"] for r in runs.values()))
    return f"trained weights: every row of a column loads the tested checkpoint of one run ({records})"
