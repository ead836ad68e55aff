"""A table's tuned rows (``tuned:`` in bench/tables/*.yaml): the best values of the ``bench tune``
studies it names (``OUT/studies/NAME/best.json``) as overrides of the rows they tuned, and the
printed column that says which setting each row was read at.

A study tuned a cell when it tuned the cell's model on the cell's task, at the preset read, with
the cell's settings: its fixed ``--set`` (best.json's ``set``) is the cell's overrides (the table's,
the row's and the column's ``set``), compared as a run's identity compares them (canonical
spelling, order-free, settings that do not change the run left out) and apart from the keys the
study tuned. Two rows of one model at two settings (Table 3's TLB at chunk 3 and at chunk 25) are
so tuned by a study each, and a row whose settings no study had says which study was near and how
its settings differ. A tuned cell's overrides are then the trial's, so its seed-``study seed``
record is the study's best trial itself, read, not trained again.

A table's ``overlays`` instead name studies whose registry overlays (``OUT/studies/NAME/tuned.yaml``,
the ``M-tuned`` models bench tune writes) are loaded with the table (``overlay_registry``): a row
names such a model, which keeps the study's best values at whatever settings the row adds (the
budget sweep: each family at the learning rate tuned at its preset width, trained wider); its
tuned column names the study, its best values and the settings the row adds to the study's."""

from __future__ import annotations

import json
from pathlib import Path

from ..config import canonical_text
from ..errors import UserError
from ..records import identity_overrides, record_path
from ..schema import load_yaml
from .cells import CHANCE_ROW
from .table_parts import Table

TUNED_HEADER = "tuned"


def _fixed(items, tuned_keys) -> set[str]:
    """The identity of a run's overrides, the tuned keys left out."""
    return {i for i in identity_overrides(list(items)) if i.partition("=")[0] not in tuned_keys}


def _difference(study: dict, theirs: set[str], ours: set[str]) -> str:
    """Why a study of the row's model did not tune it: the settings in which they differ."""
    only_study, only_row = sorted(theirs - ours), sorted(ours - theirs)
    parts = [f"tuned with {' '.join(only_study)}" if only_study else "", f"the row has {' '.join(only_row)}" if only_row else ""]
    return f"study {study['study']} " + ", ".join(p for p in parts if p)


def _overlay_path(out: Path, study: str) -> Path:
    return Path(out) / "studies" / study / "tuned.yaml"


def overlay_registry(table: Table, registry, out: Path):
    """``registry`` with the overlays of the table's ``overlays`` studies added after the user's
    own files (a new Registry, so that grid workers load the same layers); UserError naming the
    study when its overlay is not under OUT/studies."""
    if not table.overlays:
        return registry
    paths = [_overlay_path(out, name) for name in table.overlays]
    missing = next((name for name, path in zip(table.overlays, paths) if not path.is_file()), None)
    if missing is not None:
        raise UserError(
            f"table {table.name} takes its rows' models from bench tune study {missing}'s overlay, and "
            f"{_overlay_path(out, missing)} does not exist: run that study first, or give --out the folder that holds it"
        )
    return type(registry)(",".join(map(str, [*registry.user_paths, *paths])))


def _overlay_texts(table: Table, out: Path) -> None:
    """Each row whose model an overlay study wrote: the study, its best values and the settings
    the row adds to the study's (``tuned_text``)."""
    for name in table.overlays:
        if not _overlay_path(out, name).is_file():  # said by overlay_registry where the table is read
            continue
        models = (load_yaml(_overlay_path(out, name), f"studies/{name}/tuned.yaml") or {}).get("models") or {}
        try:
            best = json.loads((Path(out) / "studies" / name / "best.json").read_text())
        except (OSError, ValueError):
            best = {}
        for row in table.rows:
            base = (models.get(row.model) or {}).get("base")
            found = best.get("models", {}).get(base) if base else None
            if found is None:
                continue
            keys = set(found["values"])
            items = " ".join(f"{k}={canonical_text(v)}" for k, v in sorted(found["values"].items()))
            added = sorted(_fixed([*table.set, *row.set], keys) - _fixed(best.get("set", []), keys))
            table.tuned_text[row.label] = (
                f"{items} ({row.model}: study {name}, {found['trials']} trials, val {100 * found['val']:.1f}"
                + (f"; the row adds {' '.join(added)}" if added else "")
                + ")"
            )


def apply_tuned(table: Table, out: Path, preset: str) -> None:
    """Read the best values of the studies the table names (``OUT/studies/NAME/best.json``, written
    by bench tune): each cell a study tuned (the module docstring) gets the study's best values as
    overrides (``cell_set``), its row the values in the tuned column; every other row is marked
    not tuned, saying why. Where two studies tuned one cell with the same settings, the one named
    later in ``tuned:`` gives its values (a row re-tuned by a later study: its tuned column names both)."""
    table.tuned_sets, table.tuned_text, table.tuned_pending = {}, {}, {}
    _overlay_texts(table, out)
    if not table.tuned:
        return
    found, missing = [], []
    for name in table.tuned:
        try:
            found.append(json.loads((Path(out) / "studies" / name / "best.json").read_text()))
        except (OSError, ValueError):
            missing.append(name)
    table.tuned_pending = {name: _pending(out, name) for name in missing}
    for row in table.rows:
        if row.label in table.tuned_text:  # its model is an overlay's
            continue
        by_column, why_not = {}, []
        for col in table.columns:
            tuned_by = None
            for study in found:
                best = study.get("models", {}).get(row.model)
                if best is None or study.get("task") != col.task:
                    continue
                if study.get("preset") != preset:
                    why_not.append(f"not tuned at preset {preset} (study {study['study']}: {study.get('preset')})")
                    continue
                keys = set(best["values"])
                theirs, ours = _fixed(study.get("set", []), keys), _fixed([*table.set, *row.set, *col.set], keys)
                if theirs != ours:
                    why_not.append(_difference(study, theirs, ours))
                    continue
                earlier = tuned_by
                tuned_by = study
                items = tuple(f"{k}={canonical_text(v)}" for k, v in sorted(best["values"].items()))
                table.tuned_sets[row.label, col.label] = items
                seed = study.get("seed", 0)
                own = seed in table.seeds and best.get("record") == str(
                    record_path(Path(out), row.model, col.task, preset, seed, table.cell_set(row, col)).relative_to(Path(out))
                )
                again = f"; re-tuned by {study['study']}, first tuned by {earlier['study']}" if earlier is not None else ""
                by_column[col.label] = (
                    f"{' '.join(items)} ({best['trials']} trials, val {100 * best['val']:.1f}"
                    + (f"; seed {seed}: the best trial" if own else "")
                    + _seeds_text(study, table.seeds)
                    + again
                    + ")"
                )
        texts = list(dict.fromkeys(by_column.values()))
        if texts:
            table.tuned_text[row.label] = "; ".join(texts)
            continue
        reasons = list(dict.fromkeys(why_not)) + ([f"no study {', '.join(missing)} under {out}/studies"] if missing else [])
        table.tuned_text[row.label] = "not tuned" + (f" ({'; '.join(reasons)})" if reasons else "")


def _seeds_text(study: dict, seeds) -> str:
    """Which seeds the study's trials trained and which objective selected (studies that record
    them: bench tune writes ``tuning_seeds`` and ``objective`` in best.json), and any of the table's
    seeds among them (a selected run would then be in the table)."""
    tuned = study.get("tuning_seeds")
    if tuned is None:
        return ""
    both = sorted(set(tuned) & set(seeds))
    return f"; selected on val {study.get('objective')}, tuning seeds {','.join(map(str, tuned))}" + (
        f"; seed(s) {','.join(map(str, both))} also tuned: not apart from the selection" if both else ""
    )


def _pending(out: Path, name: str) -> tuple[str, tuple[str, ...]] | None:
    """An unfinished study's (task, models) from its study.json (written when bench tune starts
    it); None when there is none to read: then it may tune any cell."""
    try:
        meta = json.loads((Path(out) / "studies" / name / "study.json").read_text())
        return str(meta["task"]), tuple(meta["models"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def waiting_cells(table: Table) -> list[tuple[str, str]]:
    """The (row label, column label) cells no study tuned that a study of the table which has not
    finished (no best.json) may tune: one tuning the cell's task and the row's model, or one not
    started (no study.json: it may tune anything). They are not trained at the table's values yet
    (apply_tuned first); the other cells are, so one column's final seeds train while another
    column's study runs."""
    pending = list(table.tuned_pending.values())
    return [
        (row.label, col.label)
        for row in table.rows
        for col in table.columns
        if (row.label, col.label) not in table.tuned_sets and any(p is None or (p[0] == col.task and row.model in p[1]) for p in pending)
    ]


def with_tuned_column(table: Table, headers: list[str], rows: list[list]) -> tuple[list[str], list[list]]:
    """The printed table with one more column: each row's tuned setting, or "not tuned"."""
    if not table.tuned and not table.overlays:
        return headers, rows
    at = headers.index("row")
    return [*headers, TUNED_HEADER], [[*r, table.tuned_text.get(r[at], "" if r[at] == CHANCE_ROW else "not tuned")] for r in rows]
