"""The stale check: which records were made with settings the registry no longer gives (a preset
edited since the run, a constructor default changed), marked † in the tables that ask for it.

A table is built from what its records hold (their resolved ``config``) and never resolves a run
itself; this module does, for the records a table reads: it resolves each cell as ``bench run``
would today (bench/config.py: ``resolve_run``, which imports the model classes and merges the
presets) and compares the record's config with it (bench/records.py: ``config_changes``). Its answer
is data that a table's build takes (``stale``: {run: {seed: the changed settings}}), asked for by
``bench reproduce --check-stale`` (and the page, for a table made with it), ``bench reproduce --list
--records`` and ``bench compare`` (``mark_stale``); ``--run`` trains stale records again instead (the
grid resolves every run it plans). tests/test_rebuild.py holds every committed table to keeping,
with the check, the records its build keeps without it (cells.newest_settings), and to no stale cell."""

from __future__ import annotations

from pathlib import Path

from ..config import resolve_run
from ..errors import UserError
from ..records import config_changes
from .cells import cell_records


def run_key(model: str, task: str, overrides) -> tuple:
    """The key of a run in a stale map: (model, task, its overrides sorted)."""
    return model, task, tuple(sorted(overrides))


def current_config(registry, model: str, task: str, preset: str, overrides: list[str]) -> dict | None:
    """What a run of this cell would be made with today (None: the cell cannot run)."""
    try:
        return resolve_run(registry, model, task, preset, overrides).public()
    except UserError:
        return None


def stale(rec: dict, current: dict | None) -> str | None:
    """The settings the record was made with that the registry no longer gives (None if none)."""
    return config_changes(rec.get("config"), current)


def stale_runs(registry, out: Path, preset: str, runs, seeds: list[int]) -> dict[tuple, dict[int, str]]:
    """{run_key: {seed: the settings its record was made with that the registry no longer gives}}
    for the finished records of ``runs`` ((model, task, overrides), each resolved once) under
    ``out`` at ``preset``; runs and seeds whose records are current are left out."""
    found: dict[tuple, dict[int, str]] = {}
    for model, task, overrides in runs:
        key = run_key(model, task, overrides)
        if key in found:
            continue
        ok = [r for r in cell_records(out, model, task, preset, list(overrides), seeds) if r.get("status") == "ok"]
        current = current_config(registry, model, task, preset, list(overrides)) if ok else None
        found[key] = {r["seed"]: why for r in ok if (why := stale(r, current))}
    return {key: by_seed for key, by_seed in found.items() if by_seed}


def mark_stale(registry, records: dict, preset: str, overrides) -> dict:
    """{(model, task): the changed settings} for cells holding finished records made with settings
    the registry no longer gives; each such record gets ``rec["stale"]`` (in memory only)."""
    marked = {}
    for (model, task), recs in records.items():
        current = current_config(registry, model, task, preset, overrides)
        if current is None:
            continue  # the cell cannot be resolved today (a model or task renamed): nothing to compare with
        for rec in recs:
            changed = config_changes(rec.get("config"), current) if rec.get("status") == "ok" else None
            if changed:
                rec["stale"] = changed
                marked.setdefault((model, task), changed)
    return marked
