"""Shared by the tests of scripts/ (which are files, not a package): a script loaded as a module by its path."""

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(relpath: str) -> ModuleType:
    """The script at ROOT/relpath (e.g. "scripts/pruner_replay.py") imported under its file's stem."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
