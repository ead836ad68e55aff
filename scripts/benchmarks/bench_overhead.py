"""Harness overhead: the Lightning training loop vs a bare torch loop, same model and data.

Both loops train the same backbone + head from the same initial weights on the same batches
(one DataLoader, same shuffling seed) with the same optimizer, schedule and gradient clipping;
validation is off in both. They alternate, several rounds, and the ratio of median epoch
times is printed. Goal: Lightning / bare <= 1.10.

    python scripts/benchmarks/bench_overhead.py [--model transformer] [--task parity] [--preset small] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import logging
import statistics
import time
import warnings

import lightning as L
import torch

from bench.config import TrainConfig, resolve_run
from bench.data import TaskData
from bench.registry import Registry
from bench.runner import instantiate_model, instantiate_task
from bench.runner.module import TaskModule, forward_batch, lr_lambda, task_loss


def bare_epoch(module: TaskModule, loader, train: TrainConfig) -> float:
    opt = torch.optim.AdamW(module.parameters(), lr=train.lr, weight_decay=train.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(train, len(loader), len(loader)))
    module.train()
    t0 = time.perf_counter()
    for batch in loader:
        logits, aux, _ = forward_batch(module.backbone, module.head, batch)
        loss = task_loss(module.kind, logits, batch) + aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), train.grad_clip)
        opt.step()
        sched.step()
    return time.perf_counter() - t0


class EpochTimer(L.Callback):
    """Times the training epoch itself (all per-step hooks included, Trainer set-up excluded)."""

    def on_train_epoch_start(self, trainer, module):
        self.t0 = time.perf_counter()

    def on_train_epoch_end(self, trainer, module):
        self.elapsed = time.perf_counter() - self.t0


def lightning_epoch(module: TaskModule, loader, train: dict) -> tuple[float, float]:
    timer = EpochTimer()
    trainer = L.Trainer(
        callbacks=[timer],
        max_epochs=1,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        gradient_clip_val=train.grad_clip,
        num_sanity_val_steps=0,
        accelerator="cpu",
        devices=1,
    )
    t0 = time.perf_counter()
    trainer.fit(module, train_dataloaders=loader)
    return timer.elapsed, time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="transformer")
    p.add_argument("--task", default="parity")
    p.add_argument("--preset", default="small")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)

    cfg = resolve_run(
        Registry(), args.model, args.task, args.preset, ["train.optimizer=adamw", "train.schedule=constant", "train.warmup_steps=0"]
    )
    train = cfg.train
    task = instantiate_task(cfg.task)
    data = TaskData(task, train.batch_size, train.eval_batch_size, seed=0)
    torch.manual_seed(0)
    template = TaskModule(instantiate_model(cfg.model, task.vocab_size), task, train, steps_per_epoch=1)
    times = {"bare": [], "lightning": [], "lightning_fit": []}
    for r in range(args.rounds + 1):  # round 0 warms up both paths and is discarded
        bare_t = bare_epoch(copy.deepcopy(template), data.train_loader(), train)
        light_t, fit_t = lightning_epoch(copy.deepcopy(template), data.train_loader(), train)
        if r:
            times["bare"].append(bare_t)
            times["lightning"].append(light_t)
            times["lightning_fit"].append(fit_t)
    bare, light = statistics.median(times["bare"]), statistics.median(times["lightning"])
    fit = statistics.median(times["lightning_fit"])
    n_batches = len(data.train_loader())
    print(f"model={args.model} task={args.task} preset={args.preset} batches/epoch={n_batches} threads={args.threads} rounds={args.rounds}")
    print(
        f"bare torch loop : median epoch {bare:.3f}s  ({1000 * bare / n_batches:.2f} ms/step)  all: {[round(t, 3) for t in times['bare']]}"
    )
    print(
        f"lightning loop  : median epoch {light:.3f}s  ({1000 * light / n_batches:.2f} ms/step)  "
        f"all: {[round(t, 3) for t in times['lightning']]}"
    )
    print(f"lightning fit() : median {fit:.3f}s including Trainer set-up/tear-down (a one-off per run)")
    print(f"overhead ratio lightning/bare = {light / bare:.3f}  (goal <= 1.10; per-epoch loop, set-up excluded)")
    print(f"one-epoch fit() / bare epoch  = {fit / bare:.3f}  (set-up included; amortised over a run's epochs)")


if __name__ == "__main__":
    main()
