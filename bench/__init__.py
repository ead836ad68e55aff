"""bench: recurrent Transformer families side by side on one task suite.

Python API::

    import bench
    task = bench.build_task("parity", preset="smoke")
    model = bench.build_model("transformer", task="parity", preset="smoke")
    out = model(tokens, mask)          # .hidden (B, T, d), .aux_loss, .stats
    record = bench.run(model="transformer", task="parity", preset="smoke", seed=0, out="results")
    state = model.init_state(batch_size)  # streaming (causal models): out, state = model.step(tokens, state)
    bench.generate("results/runs/copy/smoke/transformer/seed0.json", prompt="s3 s7 <sep>", tokens=5)
"""
from .errors import RunFailed, UserError
from .generate import generate  # light: Lightning is imported only when a run is rebuilt
from .registry import Registry
from .runner import build_model, build_task, run

__all__ = ["Registry", "RunFailed", "UserError", "build_model", "build_task", "generate", "run"]
