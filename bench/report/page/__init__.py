"""``bench report``: one self-contained HTML page of what a results folder holds (every table
under OUT/reproduce/ rebuilt from its records, its claims judged, per-length curves, accuracy
against state bytes and measured cost, a page per family, the bench cost rows and every record
a cell read, with its per-example outcomes). Data flows one way: collect.py reads the folder
through the tables' own build (bench/report/table_kind.py), html.py and svg.py turn that into
text; nothing is fetched when the page is opened (styles, script and plots are inline)."""

from __future__ import annotations

import time
from pathlib import Path

from ...records import write_atomic
from .collect import collect
from .html import render

__all__ = ["build_report"]


def build_report(out: Path, dest: Path, registry, tables: list[str] | None = None) -> dict:
    """Build the page for the results folder ``out`` (only ``tables``, by name or file stem, when
    given) and write it to ``dest`` by rename (nothing half-written). Returns the path, its size in
    bytes, the seconds taken and what it holds."""
    start = time.perf_counter()
    report = collect(Path(out), registry, tables)
    text = render(report)
    write_atomic(Path(dest), text)
    return {
        "path": Path(dest),
        "bytes": len(text.encode("utf-8")),
        "seconds": time.perf_counter() - start,
        "tables": len(report.tables),
        "records": len(report.records),
        "families": len(report.families),
        "cost_rows": len(report.cost_rows),
    }
