"""Logging conventions. Library code logs to ``bench.*`` loggers (notes at INFO, problems at
WARNING) and never prints; the CLI (bench/cli/) writes them to stderr. Other libraries' log
levels are changed only for a while (``quiet``), never for the rest of the process. A progress
line's estimated time left: ``eta_text``."""

from __future__ import annotations

import contextlib
import logging

#: Lightning's loggers: its INFO lines (GPU available, TPU ...) are noise inside a run
LIGHTNING = ("lightning.pytorch", "lightning.fabric", "lightning")


@contextlib.contextmanager
def quiet(names=LIGHTNING, level: int = logging.WARNING):
    """Raise these loggers to ``level`` inside the block and give them back their own levels after."""
    loggers = [logging.getLogger(name) for name in names]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, lvl in zip(loggers, before):
            lg.setLevel(lvl)


def eta_text(elapsed: float, done: float, remaining: float) -> str:
    """'eta 42s' from the time ``done`` units took and the units ``remaining``; 'eta -' before any is done."""
    if done <= 0 or remaining < 0:
        return "eta -"
    return f"eta {elapsed / done * remaining:.0f}s"
