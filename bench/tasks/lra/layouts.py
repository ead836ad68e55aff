"""Where an LRA task's files may sit under the folder you give: each task's accepted layouts
(``Layout``), found at the folder itself or under the archive's / tfds' folders (``PREFIXES``), and
the one-line error naming what is missing (``locate``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..base import TaskError

ENV = "BENCH_LRA_DIR"

#: where under the given folder a layout may sit: the folder itself, the LRA archive
#: (lra_release.gz unpacks to lra_release/lra_release/...) and a tfds data folder
PREFIXES = ("", "lra_release/", "lra_release/lra_release/", "tensorflow_datasets/")


@dataclass(frozen=True)
class Layout:
    """One way a task's files are laid out: glob patterns per role (train / val / test) relative
    to a base folder; ``bases`` are where that folder may be under a prefix (globs; ``<v>``-style
    version folders of tfds are globbed and the highest version is taken)."""

    name: str
    parts: dict
    bases: tuple = ("",)
    shown: str = ""  # the files as a person writes them, for messages

    def patterns(self) -> list[str]:
        return [p for pats in self.parts.values() for p in pats]


@dataclass(frozen=True)
class Found:
    """A layout found complete: its base folder and the files of each role (sorted)."""

    layout: Layout
    base: Path
    files: dict

    def all_files(self) -> list[Path]:
        return sorted({p for fs in self.files.values() for p in fs})


def _version_key(path: Path):
    return [int(x) if x.isdigit() else x for x in re.split(r"[.\-]", path.name)]


def _bases(root: Path, layout: Layout) -> list[Path]:
    """Every candidate base folder of a layout under root, in PREFIXES order (tfds versions: newest first)."""
    out = []
    for prefix in PREFIXES:
        for base in layout.bases:
            pattern = prefix + base
            if "*" in pattern:
                out += sorted((p for p in root.glob(pattern) if p.is_dir()), key=_version_key, reverse=True)
            elif (root / pattern).is_dir():
                out.append(root / pattern)
    return list(dict.fromkeys(out))


def find_layout(root: Path, layouts: tuple) -> tuple[Found | None, tuple | None]:
    """(the first layout found complete under root, None) or (None, the nearest partial one as
    (layout, base, missing patterns), or None when no file of any layout is there)."""
    nearest, best = None, 0
    for layout in layouts:
        for base in _bases(root, layout):
            files = {role: sorted(p for pat in pats for p in base.glob(pat) if p.is_file()) for role, pats in layout.parts.items()}
            missing = [pat for pats in layout.parts.values() for pat in pats if not any(p.is_file() for p in base.glob(pat))]
            if not missing:
                return Found(layout, base, files), None
            have = len(layout.patterns()) - len(missing)
            if have > best:
                nearest, best = (layout, base, missing), have
    return None, nearest


def _describe(layout: Layout) -> str:
    return f"{layout.name}: {layout.shown or ', '.join(layout.patterns())}"


def locate(task: str, data_dir: str | None, layouts: tuple) -> Found:
    """The task's files under data_dir (else $BENCH_LRA_DIR); TaskError (one line) naming the
    layouts accepted and, when one is partly there, what it lacks."""
    root = data_dir or os.environ.get(ENV)
    accepted = "; or ".join(_describe(lay) for lay in layouts)
    if not root:
        raise TaskError(
            f"{task}: no data directory: set the task parameter data_dir or ${ENV} to the folder holding "
            f"{accepted} (check it with: bench data check --task {task} --root PATH)"
        )
    root = Path(root).expanduser()
    if not root.is_dir():
        raise TaskError(f"{task}: {root} is not a folder; give the folder holding {accepted} (data_dir or ${ENV})")
    found, nearest = find_layout(root, layouts)
    if found:
        return found
    if nearest is None:
        raise TaskError(
            f"{task}: no files of it under {root} or its {', '.join(p for p in PREFIXES if p)}: expected {accepted} "
            f"(set data_dir or ${ENV} to the folder holding them)"
        )
    layout, base, missing = nearest
    raise TaskError(f"{task}: missing {', '.join(missing)} in {base} (the rest of the {layout.name} is there; accepted: {accepted})")


def file_stats(files: list[Path]) -> dict:
    """Count, sizes and latest mtime of the input files, so a changed file invalidates the cache."""
    return {
        "n_files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "mtime": max((p.stat().st_mtime for p in files), default=0),
    }
