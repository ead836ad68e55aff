"""A run's size and time, said before it trains: its parameters, its optimizer steps, and a time
from a timed step. The step is timed on a copy of the run's module (its weights, RNG states and
data order are untouched: the run trains exactly as without the estimate) on a batch of training
examples taken evenly through the split; a forward pass of the same batch, per token, times the
validations and the tests. The estimate is a line of text (``estimate_line``) the runner logs to
``bench.progress`` before ``trainer.fit``; ``Estimate`` holds its numbers."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..data import collate
from .module import forward_batch, task_loss

LONG_S = 600.0  # an estimate longer than this (10 min) names the smoke preset
REPEATS = 2  # timed steps after one warm-up step; their mean counts (the fastest would flatter a loaded machine)


@dataclass(frozen=True)
class Estimate:
    params: int
    steps: int  # optimizer steps left to train
    step_s: float  # one optimizer step (accumulated batches included)
    train_s: float
    eval_s: float  # every validation and the tests

    @property
    def total_s(self) -> float:
        return self.train_s + self.eval_s


def _tokens(split) -> int:
    """Token positions in a split (its ``tokens`` column, and ``tokens2`` of a pair task)."""
    total = 0
    for name in ("tokens", "tokens2"):
        col = split.columns.get(name)
        if col is None:
            continue
        total += int(col.size) if isinstance(col, np.ndarray) and col.dtype != object else sum(len(t) for t in col)
    return total


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_step(module, data, device: torch.device) -> tuple[float, float]:
    """(seconds of one training batch: forward, backward, optimizer; seconds of a forward pass per
    token) of a copy of ``module`` on ``device``, on up to ``batch_size`` training examples taken
    evenly through the split. The copy is discarded; the RNG states are given back."""
    train = data.splits["train"]
    n = min(len(train), data.batch_size)
    batch = collate([train[int(i)] for i in np.linspace(0, len(train) - 1, n).round()], kind=data.task.kind)
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    tokens = int(batch["mask"].sum()) + (int(batch["mask2"].sum()) if "mask2" in batch else 0)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        twin = copy.deepcopy(module).to(device).train()
        opt = torch.optim.AdamW(twin.parameters(), lr=0.0)
        times = []
        for _ in range(1 + REPEATS):
            t0 = time.perf_counter()
            logits, aux, _ = forward_batch(twin.backbone, twin.head, batch)
            (task_loss(twin.kind, logits, batch) + aux).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            _sync(device)
            times.append(time.perf_counter() - t0)
        twin.eval()
        with torch.no_grad():
            t0 = time.perf_counter()
            forward_batch(twin.backbone, twin.head, batch)
            _sync(device)
            forward_s = time.perf_counter() - t0
        del twin, opt
    return sum(times[1:]) / REPEATS, forward_s / max(1, tokens)


def estimate(module, data, train, device: torch.device, start_step: int = 0) -> Estimate:
    """The run's size and time: ``module.total_steps`` optimizer steps (less ``start_step``, a
    resumed run's), each ``accumulate_grad_batches`` timed batches; a validation every
    ``val_every_steps`` (else every epoch) over val and the watched splits, and one test of val
    and every test split, at the measured forward time per token (a lower bound where test
    sequences are longer than training ones and attention's cost grows faster than their length)."""
    batch_s, token_s = time_step(module, data, device)
    total = module.total_steps
    steps = max(0, total - start_step)
    step_s = batch_s * train.accumulate_grad_batches
    every = train.val_every_steps or module.steps_per_epoch
    validations = math.ceil(steps / every) if every else 0
    watched = sum(_tokens(data.splits[s]) for s in ["val", *train.watch_splits])
    tested = sum(_tokens(data.splits[s]) for s in ["val", *data.test_splits()])
    return Estimate(
        params=sum(p.numel() for p in module.parameters()),
        steps=steps,
        step_s=step_s,
        train_s=steps * step_s,
        eval_s=(validations * watched + tested) * token_s,
    )


def duration(seconds: float) -> str:
    """'40 s', '12 min', '2.7 h', '3.1 days'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def estimate_line(est: Estimate, preset: str, resumed: bool = False) -> str:
    """One line: size, steps, the timed step and the time it makes; the smoke preset named when the
    estimate is longer than LONG_S and the run is not already at it."""
    params = f"{est.params / 1e6:.2f} M" if est.params >= 1e5 else f"{est.params:,}"
    line = (
        f"bench: {params} parameters, {est.steps:,} steps{' left' if resumed else ''}; a timed step takes {est.step_s:.3g} s: "
        f"about {duration(est.total_s)} ({duration(est.train_s)} training, {duration(est.eval_s)} validating and testing)"
    )
    if est.total_s > LONG_S and preset != "smoke":
        line += "; --preset smoke is a quick first run"
    return line
