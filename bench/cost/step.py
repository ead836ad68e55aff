"""One model's training step as `bench run` builds it (``TrainingStep``: a resolved model, the
harness's head, loss, gradient clipping and optimizer), timed (``timed``) or counted
(``instrumented_step``, ``count_forward_backward``)."""

from __future__ import annotations

import time

import torch

from ..config import RunConfig
from ..runner.build import instantiate_model, instantiate_task
from ..runner.module import Head, TaskModule, forward_batch, task_loss
from .common import Row, Setup, resolve_rows
from .counters import OpCounter, SavedBytes


class TrainingStep:
    """A resolved model with the harness's head, loss, gradient clipping and optimizer; calling it
    runs one training step on ``batch`` and returns the step's stats (halting depth ...)."""

    def __init__(self, config: RunConfig, setup: Setup, name: str | None = None):
        self.name, self.config = name or config.model.name, config
        train = config.train
        self.device = torch.device(setup.device)
        self.task = instantiate_task(config.task)
        torch.manual_seed(0)
        self.backbone = instantiate_model(config.model, self.task.vocab_size).to(self.device)
        self.module = TaskModule(self.backbone, self.task, train, steps_per_epoch=1).to(self.device)
        self.head: Head = self.module.head
        self.optimizer = self.module.configure_optimizers()["optimizer"]
        self.grad_clip = train.grad_clip
        self.batch_size = setup.batch or train.batch_size
        self.autocast = setup.dtype == "bf16"
        self.compiled = False
        self.module.train()

    def host_counters(self) -> set[int]:
        """Data pointers of the optimizer's step counters: torch.optim keeps them on the host
        (not capturable / fused), so reading them never waits for a GPU."""
        return {
            s["step"].data_ptr()
            for s in self.optimizer.state.values()
            if isinstance(s.get("step"), torch.Tensor) and s["step"].device.type == "cpu"
        }

    @property
    def parameters(self) -> list[torch.Tensor]:
        return [p for p in self.module.parameters() if p.requires_grad]

    def compile(self) -> None:
        from torch import _dynamo

        _dynamo.config.allow_rnn = True  # as bench run's train.compile does
        self.backbone.compile()
        self.compiled = True

    def __call__(self, batch: dict) -> dict:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits, aux, stats = forward_batch(self.backbone, self.head, batch)
            loss = task_loss(self.task.kind, logits.float(), batch) + aux
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.grad_clip)
        self.optimizer.step()
        return stats

    def release(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, fn, *args):
    _sync(device)
    t0 = time.perf_counter()
    result = fn(*args)
    _sync(device)
    return time.perf_counter() - t0, result


def halt_depth(stats: dict) -> float | None:
    depth = stats.get("halt_depth") if isinstance(stats, dict) else None
    if depth is None:
        return None
    return float(depth.float().mean()) if isinstance(depth, torch.Tensor) else float(depth)


def instrumented_step(step: TrainingStep, batch: dict) -> dict:
    """One training step under the op counter and the saved-tensor hooks (never timed); the
    first step of a model is run before, uncounted, so the optimizer's state exists."""
    if not step.optimizer.state:
        step(batch)
    with OpCounter(step.host_counters()) as counter, SavedBytes(exclude=step.parameters) as saved:
        stats = step(batch)
    return {
        "ops": counter.ops,
        "all_ops": counter.all_ops,
        "syncs": counter.syncs,
        "saved_bytes": saved.nbytes,
        "sync_ops": dict(counter.sync_names),
        "halt_depth": halt_depth(stats),
    }


def count_forward_backward(step: TrainingStep, batch: dict) -> dict:
    """Ops and syncs of forward + loss + backward only (no optimizer): a cross-check of the step's counts."""
    step.release()  # no gradients to accumulate into
    with OpCounter(step.host_counters()) as counter:
        with torch.autocast(step.device.type, dtype=torch.bfloat16, enabled=step.autocast):
            logits, aux, _ = forward_batch(step.backbone, step.head, batch)
            loss = task_loss(step.task.kind, logits.float(), batch) + aux
        loss.backward()
    step.release()
    return {"ops": counter.ops, "all_ops": counter.all_ops, "syncs": counter.syncs}


def training_step(registry, row: Row, setup: Setup) -> TrainingStep:
    """The TrainingStep of one row, resolved as `bench cost` resolves its rows (``resolve_rows``)."""
    configs, _ = resolve_rows(registry, [row], setup)
    return TrainingStep(configs[row], setup, row.name)


def build_steps(configs: dict[Row, RunConfig], setup: Setup) -> dict[Row, TrainingStep]:
    """Every row's TrainingStep from its resolved config (``resolve_rows``: bad input has failed before any build)."""
    return {row: TrainingStep(config, setup, row.name) for row, config in configs.items()}
