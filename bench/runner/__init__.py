"""One run: resolve -> build -> fit (Lightning, checkpoints, resume) -> evaluate -> record."""
from .lifecycle import build_model, build_task, instantiate_model, instantiate_task, run

__all__ = ["build_model", "build_task", "instantiate_model", "instantiate_task", "run"]
