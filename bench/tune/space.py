"""The search space of ``bench tune``: ``--space KEY=DIST(...)`` or ``--grid KEY=[v, ...]`` items
parsed into Optuna distributions, every value checked the way ``--set`` checks it.

    train.lr=loguniform(1e-4,1e-2)     FloatDistribution(1e-4, 1e-2, log=True)
    train.weight_decay=uniform(0,0.1)  FloatDistribution(0, 0.1)
    model.n_layers=int(1,4)            IntDistribution(1, 4)          (logint(a,b): log=True)
    train.schedule=choice(constant,cosine)  CategoricalDistribution (categorical(...) alike)
    train.lr=[1e-4,3e-4,1e-3]          a grid axis (GridSampler)

Keys are ``model.*`` or ``train.*`` settings (a tuned value becomes a per-family setting of a
registry overlay; a ``data.*`` setting is the task's, the same for every family). Every bound and
choice is resolved with the study's models, task, preset and --set (bench/config.py:
``resolve_run``): an unknown key, a value of the wrong type or outside the setting's domain is
refused there, in the words ``--set`` uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import canonical_text, parse_value, resolve_run
from ..errors import UserError
from ..records import NOT_IDENTITY

DISTRIBUTIONS = ("loguniform", "uniform", "int", "logint", "choice", "categorical")
_ITEM = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.DOTALL)


@dataclass(frozen=True)
class Param:
    """One tuned setting: its dotted key, distribution kind and arguments (bounds or choices)."""

    key: str
    kind: str
    args: tuple

    @property
    def text(self) -> str:
        """The canonical spelling (study.json keeps it; a study is continued only with the same space)."""
        if self.kind == "grid":
            return f"{self.key}=[{','.join(canonical_text(a) for a in self.args)}]"
        return f"{self.key}={self.kind}({','.join(canonical_text(a) for a in self.args)})"

    def distribution(self):
        import optuna.distributions as d

        if self.kind in ("loguniform", "uniform"):
            return d.FloatDistribution(float(self.args[0]), float(self.args[1]), log=self.kind == "loguniform")
        if self.kind in ("int", "logint"):
            return d.IntDistribution(self.args[0], self.args[1], log=self.kind == "logint")
        return d.CategoricalDistribution(list(self.args))

    def suggest(self, trial):
        """This setting's value for ``trial`` (a grid axis is a categorical one: GridSampler's)."""
        if self.kind in ("loguniform", "uniform"):
            return trial.suggest_float(self.key, float(self.args[0]), float(self.args[1]), log=self.kind == "loguniform")
        if self.kind in ("int", "logint"):
            return trial.suggest_int(self.key, self.args[0], self.args[1], log=self.kind == "logint")
        return trial.suggest_categorical(self.key, list(self.args))


def _split_args(raw: str) -> list:
    return [parse_value(a.strip()) for a in raw.split(",")] if raw.strip() else []


def parse_space(items: list[str] | None, grid: list[str] | None) -> list[Param]:
    """``--space`` or ``--grid`` items as Params (syntax only; ``check_space`` checks the values)."""
    if items and grid:
        raise UserError("give --space (sampled, TPE) or --grid (every value, GridSampler), not both")
    if not items and not grid:
        raise UserError('name what to tune: --space "train.lr=loguniform(1e-4,1e-2)" or --grid "train.lr=[1e-4,3e-4,1e-3]"')
    params = []
    for item in items or []:
        m = _ITEM.match(str(item))
        if not m:
            raise UserError(
                f"--space {item!r}: write KEY=DIST(ARGS), e.g. train.lr=loguniform(1e-4,1e-2); DIST is one of {', '.join(DISTRIBUTIONS)}"
            )
        key, kind, args = m.group(1), m.group(2), _split_args(m.group(3))
        if kind not in DISTRIBUTIONS:
            raise UserError(f"--space {item!r}: unknown distribution {kind!r}; choose one of {', '.join(DISTRIBUTIONS)}")
        kind = "choice" if kind == "categorical" else kind
        if kind == "choice":
            if not args or len(set(map(canonical_text, args))) != len(args):
                raise UserError(f"--space {item!r}: choice(...) takes one or more distinct values, e.g. choice(constant,cosine)")
            if any(not isinstance(a, (bool, int, float, str)) for a in args):
                raise UserError(f"--space {item!r}: choices are numbers, words or true/false")
        else:
            numbers = len(args) == 2 and all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args)
            whole = numbers and all(isinstance(a, int) for a in args)
            if not numbers or (kind in ("int", "logint") and not whole):
                what = "two whole numbers" if kind in ("int", "logint") else "two numbers"
                raise UserError(f"--space {item!r}: {kind}(LOW,HIGH) takes {what}, got {m.group(3).strip()!r}")
            if not args[0] < args[1]:
                raise UserError(f"--space {item!r}: LOW must be below HIGH")
            if kind in ("loguniform", "logint") and args[0] <= 0:
                raise UserError(f"--space {item!r}: a log scale needs LOW > 0")
            if kind in ("loguniform", "uniform"):
                args = [float(a) for a in args]
        params.append(Param(key, kind, tuple(args)))
    for item in grid or []:
        key, eq, raw = str(item).partition("=")
        values = parse_value(raw) if eq else None
        if not eq or not isinstance(values, list) or not values:
            raise UserError(f"--grid {item!r}: write KEY=[V1,V2,...], e.g. train.lr=[1e-4,3e-4,1e-3]")
        if any(not isinstance(v, (bool, int, float, str)) for v in values) or len(set(map(canonical_text, values))) != len(values):
            raise UserError(f"--grid {item!r}: the values must be distinct numbers, words or true/false")
        params.append(Param(key.strip(), "grid", tuple(values)))
    keys = [p.key for p in params]
    for key in keys:
        section = key.partition(".")[0]
        if keys.count(key) > 1:
            raise UserError(f"{key} is named twice; give each tuned setting once")
        if section not in ("model", "train"):
            raise UserError(
                f"{key}: only model.* and train.* settings are tuned per family (a data.* setting is the task's); "
                "e.g. train.lr, train.weight_decay, model.dropout"
            )
        if key in NOT_IDENTITY:
            raise UserError(f"{key} changes how a run executes, not what it learns: there is nothing to tune")
    return params


def check_space(params: list[Param], registry, models: list[str], task: str, preset: str, overrides: list[str] | None) -> None:
    """Every bound and choice resolved for every model (unknown key, type, choices, domain: the
    checks of ``--set``), and no tuned key also fixed by ``--set``; one UserError line."""
    fixed = {str(o).partition("=")[0].strip() for o in overrides or []}
    for p in params:
        flag = "--grid" if p.kind == "grid" else "--space"
        if p.key in fixed:
            raise UserError(f"{flag} {p.text}: {p.key} is also fixed by --set; tune it or fix it, not both")
        for value in p.args:
            for model in models:
                try:
                    resolve_run(registry, model, task, preset, [*(overrides or []), f"{p.key}={canonical_text(value)}"])
                except UserError as exc:
                    raise UserError(f"{flag} {p.text}: {exc}") from None
