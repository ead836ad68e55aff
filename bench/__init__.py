"""bench: recurrent Transformer families side by side on one task suite.

Python API::

    import bench
    task = bench.build_task("parity", preset="smoke")
    model = bench.build_model("transformer", task="parity", preset="smoke")
    out = model(tokens, mask)          # .hidden (B, T, d), .aux_loss, .stats
    record = bench.run(model="transformer", task="parity", preset="smoke", seed=0, out="results")
"""
from .errors import RunFailed, UserError
from .registry import Registry
from .runner import build_model, build_task, run

__all__ = ["Registry", "RunFailed", "UserError", "build_model", "build_task", "run"]
