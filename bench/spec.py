"""A resolved run: small frozen objects whose every value knows its source, and the one merge
that makes them (`layer`). The precedence of the sources is bench/config.py's docstring."""

from __future__ import annotations

import copy
from dataclasses import dataclass

DEFAULT = "constructor default"
# the settings every backbone takes (bench/registry.py BACKBONE_SETTINGS), the harness's, not a constructor's
BACKBONE_DEFAULT = "every backbone's default"


def layer(layers: list[tuple[str, dict | None]]) -> tuple[dict, dict]:
    """The one merge of bench/config.py's precedence: named layers, lowest first ->
    (values, {dotted key: the source its value came from}); nested dicts merge key by key."""
    values, sources = {}, {}
    for source, given in layers:
        _merge(values, sources, given or {}, source, "")
    return values, sources


def _merge(values: dict, sources: dict, given: dict, source: str, prefix: str) -> None:
    for key, value in given.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            if value:
                sources.pop(path, None)
            _merge(values[key], sources, value, source, path + ".")
            continue
        values[key] = copy.deepcopy(value)
        for stale in [p for p in sources if p == path or p.startswith(path + ".")]:
            del sources[stale]
        sources.update(dict.fromkeys(flat({path: value}), source))


def flat(values: dict, prefix: str = "") -> dict:
    """{'rsa': {'kinds': [5, 0]}, 'd_model': 20} -> {'rsa.kinds': [5, 0], 'd_model': 20} (an empty dict is a leaf)."""
    out = {}
    for key, value in values.items():
        out.update(flat(value, f"{prefix}{key}.") if isinstance(value, dict) and value else {f"{prefix}{key}": value})
    return out


@dataclass(frozen=True)
class ModelSpec:
    name: str
    target: str
    cls: type
    params: dict  # every constructor parameter with a value, defaults included
    causal: bool
    sources: dict  # dotted param key (and "causal") -> source


@dataclass(frozen=True)
class TaskSpec:
    name: str
    target: str
    cls: type
    values: dict  # every constructor parameter with a value, defaults included
    preset: str
    sources: dict  # dotted param key -> source

    @property
    def params(self) -> dict:
        """What the registry, the preset and --set give (the class fills in its own defaults)."""
        given = {path.split(".")[0] for path, source in self.sources.items() if source != DEFAULT}
        return {k: v for k, v in self.values.items() if k in given}
