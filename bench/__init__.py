"""bench: recurrent Transformer families side by side on one task suite.

Python API::

    import bench
    task = bench.build_task("parity", preset="smoke")
    model = bench.build_model("transformer", task="parity", preset="smoke")
    out = model(tokens, mask)          # .hidden (B, T, d), .aux_loss, .stats
    record = bench.run(model="transformer", task="parity", preset="smoke", seed=0, out="results")
    state = model.init_state(batch_size)  # streaming (causal models): out, state = model.step(tokens, state)
    bench.generate("results/runs/copy/smoke/transformer/seed0.json", prompt="s3 s7 <sep>", tokens=5)
    outcomes = bench.load_outcomes(record["path"])  # {split: {"index", "correct", "token_correct", "tokens", "length"}}
"""

from __future__ import annotations

import importlib
import sys
import types

from .errors import RunFailed, RunInterrupted, UserError

#: the API, imported on first use (PEP 562): ``import bench`` and the CLI's light commands
#: (--help, list, validate, explain) never import Lightning
_LAZY = {"Registry": ".registry", "build_model": ".runner", "build_task": ".runner", "load_outcomes": ".metrics", "run": ".runner"}

__all__ = ["Registry", "RunFailed", "RunInterrupted", "UserError", "build_model", "build_task", "generate", "load_outcomes", "run"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # the next access is a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "generate"})


class _Package(types.ModuleType):
    """``bench.generate`` is the function, also once the submodule bench/generate.py is imported
    (the import system then sets the package's attribute to the submodule: ignored here)."""

    @property
    def generate(self):
        from .generate import generate

        return generate

    @generate.setter
    def generate(self, value) -> None:
        pass


sys.modules[__name__].__class__ = _Package
