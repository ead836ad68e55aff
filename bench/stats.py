"""Small numeric helpers the reports and progress lines share: mean and sample std over seeds,
and the estimated time left of a loop."""
from __future__ import annotations

import math


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """(mean, sample std) of a non-empty list; the std is None for a single value."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def eta_text(elapsed: float, done: float, remaining: float) -> str:
    """'eta 42s' from the time ``done`` units took and the units ``remaining``; 'eta -' before any is done."""
    if done <= 0 or remaining < 0:
        return "eta -"
    return f"eta {elapsed / done * remaining:.0f}s"
