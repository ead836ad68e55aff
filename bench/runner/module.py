"""The LightningModule that joins any backbone to any task: the head and loss of the task's kind,
the loss, AdamW/Adam with warm-up and a schedule, and evaluation by per-example outcomes."""

from __future__ import annotations

import math
import time

import lightning as L
import torch
from torch import Tensor, nn

from bench.tasks.kinds import kind_of

from ..config import TrainConfig
from ..errors import RunFailed
from ..metrics import OutcomeBuffer, example_outcomes

NONFINITE_CHECK_EVERY = 25  # steps between host syncs that look for a NaN / inf training loss


def gather_buffers(buffers: dict[int, OutcomeBuffer], world_size: int) -> dict[int, OutcomeBuffer]:
    """Every rank's per-example outcomes, merged and ordered by example index, each example once
    (a sampler that pads its shards repeats some), on every rank (so all ranks compute the same
    metrics and select the same best epoch)."""
    if world_size <= 1:
        return buffers
    import torch.distributed as dist

    mine = {i: ({k: torch.cat(v) for k, v in b.parts.items()}, dict(b.scalar_stats)) for i, b in buffers.items()}
    everyone: list = [None] * world_size
    dist.all_gather_object(everyone, mine)
    merged: dict[int, OutcomeBuffer] = {}
    for i in sorted({i for rank in everyone for i in rank}):
        shards = [rank[i] for rank in everyone if i in rank]
        parts = {k: torch.cat([p[k] for p, _ in shards]) for k in shards[0][0]}
        order = torch.argsort(parts["index"], stable=True)
        first = torch.ones_like(order, dtype=torch.bool)
        first[1:] = parts["index"][order][1:] != parts["index"][order][:-1]
        order = order[first]
        buf = merged[i] = OutcomeBuffer()
        buf.parts.update({k: [v[order]] for k, v in parts.items()})
        for _, scalars in shards:
            for name, vals in scalars.items():
                buf.scalar_stats[name].extend(vals)
    return merged


class Head(nn.Module):
    """Maps backbone output to logits: the output layer of the task's kind (bench/tasks/kinds.py)."""

    def __init__(self, kind: str, d_model: int, vocab_size: int, num_classes: int, num_labels: int):
        super().__init__()
        self.task_kind = kind_of(kind)
        self.out = self.task_kind.output_layer(d_model, vocab_size, num_classes, num_labels)

    def forward(self, out, mask: Tensor, out2=None, mask2: Tensor | None = None) -> Tensor:
        return self.task_kind.logits(self.out, out, mask, out2, mask2)


def task_loss(kind: str, logits: Tensor, batch: dict) -> Tensor:
    return kind_of(kind).loss(logits, batch)


def lr_lambda(train: TrainConfig, steps_per_epoch: int, total_steps: int):
    """The learning rate's multiplier at each optimizer step: linear warm-up over
    ``train.warmup_steps``, then ``train.schedule``."""
    warm = int(train.warmup_steps)
    sched = train.schedule

    def f(step: int) -> float:
        if warm and step < warm:
            return (step + 1) / warm
        if sched == "constant":
            return 1.0
        if sched == "inverse_sqrt":
            return math.sqrt(max(warm, 1)) / math.sqrt(max(step, 1)) if step >= max(warm, 1) else 1.0
        if sched == "step":  # "halved every N epochs" style
            return train.step_gamma ** (step // max(1, steps_per_epoch * train.step_every_epochs))
        progress = min(1.0, (step - warm) / max(1, total_steps - warm))
        if sched == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * progress))  # cosine

    return f


def decay_groups(module: nn.Module) -> tuple[list, list]:
    """(decayed, not decayed) trainable parameters, by dimension: matrices and embeddings (ndim >= 2)
    are decayed; biases, norm gains, gates and other scalars or vectors (ndim < 2) are not, whatever
    their names (AdamW only; Adam decays every parameter, as the papers using it do)."""
    decay, no_decay = [], []
    for p in module.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return decay, no_decay


def forward_batch(backbone: nn.Module, head: Head, batch: dict):
    """Runs the backbone (twice for pair tasks) and the head. Returns logits, aux loss, stats.

    Pair tasks: the aux (ACT) loss is the mean of the two encodings' losses, as in the [HALT]
    reference code (models/sentence_pair_framework.py: (aux_loss1.mean() + aux_loss2.mean()) / 2),
    so beta weighs the same ponder cost on a pair task as on a single-sequence one."""
    out = backbone(batch["tokens"], batch["mask"])
    if head.task_kind.pair:
        out2 = backbone(batch["tokens2"], batch["mask2"])
        stats = {k: (v + out2.stats[k]) / 2 if k in out2.stats else v for k, v in out.stats.items()}
        return head(out, batch["mask"], out2, batch["mask2"]), (out.aux_loss + out2.aux_loss) / 2, stats
    return head(out, batch["mask"]), out.aux_loss, out.stats


class TaskModule(L.LightningModule):
    """Any backbone on any task. Training keeps its counters on the device (no host sync per
    step); evaluation scores per-example outcomes, gathered by example index across ranks."""

    def __init__(self, backbone: nn.Module, task, train: TrainConfig, steps_per_epoch: int):
        super().__init__()
        self.backbone = backbone
        self.kind = task.kind
        self.head = Head(task.kind, backbone.d_model, task.vocab_size, task.num_classes, task.num_labels)
        self.train_cfg = train
        self.steps_per_epoch = steps_per_epoch
        self.length_bin = task.length_bin
        self.metric = task.metric
        self.eval_buffers: dict[int, OutcomeBuffer] = {}
        self.last_eval: dict[int, dict] = {}
        self.last_outcomes: dict[int, dict] = {}  # per loader, the per-example arrays of last_eval
        # survive a resume (on_save_checkpoint / on_load_checkpoint)
        self.train_tokens = 0  # this rank's, up to the last validation
        self.train_time_s = 0.0  # seconds in training batches, all sessions of the run
        self.val_time_s = self.test_time_s = 0.0  # seconds in validation / testing, this session
        self._eval_t0 = 0.0
        self.resumed_from: list[int] = []
        self._reset_running()

    @property
    def total_steps(self) -> int:
        """Optimizer steps of the whole run, as Lightning's estimated_stepping_batches would say;
        computed, not asked: asking sets up the training data before a checkpoint is restored."""
        t = self.train_cfg
        by_epochs = self.steps_per_epoch * t.max_epochs if t.max_epochs not in (-1, None) else None
        by_steps = t.max_steps if t.max_steps not in (-1, None) else None
        return min(x for x in (by_epochs, by_steps, 2**62) if x is not None)

    def _reset_running(self) -> None:
        self._loss_sum = self._loss_count = self._tokens = self._nonfinite = None
        self._batch_t0 = 0.0

    def _accumulate(self, name: str, value: Tensor) -> None:
        current = getattr(self, name)
        setattr(self, name, value if current is None else current + value)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        logits, aux, _ = forward_batch(self.backbone, self.head, batch)
        loss = task_loss(self.kind, logits, batch) + aux
        self._accumulate("_nonfinite", (~torch.isfinite(loss.detach())).long())
        self._accumulate("_loss_sum", loss.detach().float())
        self._accumulate("_loss_count", torch.ones((), device=loss.device))
        self._accumulate("_tokens", batch["mask"].sum() + (batch["mask2"].sum() if "mask2" in batch else 0))
        self.log("loss", loss.detach(), prog_bar=True, logger=False, on_step=True, on_epoch=False, batch_size=batch["tokens"].shape[0])
        return loss

    def on_train_batch_start(self, batch, batch_idx):
        self._batch_t0 = time.perf_counter()

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.train_time_s += time.perf_counter() - self._batch_t0
        if (self.global_step % NONFINITE_CHECK_EVERY == 0) and self._nonfinite is not None:
            self.check_finite()

    def running_loss(self) -> Tensor | None:
        """Mean training loss over the batches since the last validation (None before any)."""
        return None if self._loss_count is None else self._loss_sum / self._loss_count

    def check_finite(self) -> None:
        """One host sync every NONFINITE_CHECK_EVERY steps and before every validation."""
        if self._nonfinite is not None and int(self._nonfinite) > 0:
            raise RunFailed(f"non-finite training loss before step {self.global_step}; lower train.lr or check the model")

    # ---- evaluation: validation and test share one path --------------------------------------
    def _eval_step(self, batch: dict, dataloader_idx: int) -> None:
        logits, _, stats = forward_batch(self.backbone, self.head, batch)
        buf = self.eval_buffers.setdefault(dataloader_idx, OutcomeBuffer())
        buf.add(example_outcomes(self.kind, logits, batch), batch["length"], stats, batch["tokens"].shape[0], index=batch["index"])

    def _eval_end(self) -> None:
        buffers = gather_buffers(self.eval_buffers, self.trainer.world_size if self._trainer else 1)
        self.last_eval = {i: buf.summarize(self.length_bin) for i, buf in sorted(buffers.items())}
        self.last_outcomes = {i: buf.arrays() for i, buf in sorted(buffers.items())}  # kept beside the record after testing
        self.eval_buffers = {}

    def on_validation_start(self):
        self.check_finite()
        self._eval_t0 = time.perf_counter()

    def on_validation_end(self):
        self.val_time_s += time.perf_counter() - self._eval_t0

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self._eval_step(batch, dataloader_idx)

    def on_validation_epoch_end(self):
        self._eval_end()
        if self.trainer.sanity_checking or 0 not in self.last_eval:
            return
        curve = {"val_metric": self.last_eval[0][self.metric], "global_step": float(self.global_step), "train_time_s": self.train_time_s}
        if self._loss_count is not None:  # train loss since the previous validation (mean over batches)
            mean_loss = torch.as_tensor(self.running_loss(), device=self.device)
            curve["train_loss"] = float(self.trainer.strategy.reduce(mean_loss, reduce_op="mean"))  # over ranks
            self.train_tokens += int(self._tokens)
            self._loss_sum = self._loss_count = self._tokens = None
        curve.update(self.watched())
        if self.trainer.optimizers:
            curve["lr"] = self.trainer.optimizers[0].param_groups[0]["lr"]
        self.log_dict(curve, prog_bar=False, logger=True, on_epoch=True, batch_size=1)

    def watched(self) -> dict:
        """The last validation's scores of train.watch_splits (eval loaders 1.., after val), as
        ``<split>_<metric>``: logged and kept in the history, never selected on."""
        return {f"{split}_{self.metric}": self.last_eval[i][self.metric] for i, split in enumerate(self.train_cfg.watch_splits, start=1)}

    def on_train_end(self):
        self.check_finite()
        if self._tokens is not None:  # batches after the last validation
            self.train_tokens += int(self._tokens)
            self._tokens = None

    def on_test_start(self):
        self._eval_t0 = time.perf_counter()

    def on_test_end(self):
        self.test_time_s += time.perf_counter() - self._eval_t0

    def test_step(self, batch, batch_idx, dataloader_idx=0):
        self._eval_step(batch, dataloader_idx)

    def on_test_epoch_end(self):
        self._eval_end()

    # ---- what a checkpoint carries beyond weights and optimizer --------------------------------
    RUNNING = ("_loss_sum", "_loss_count", "_tokens", "_nonfinite")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        running = {k: float(getattr(self, k)) for k in self.RUNNING if getattr(self, k) is not None}
        checkpoint["bench"] = {
            "train_tokens": self.train_tokens,
            "train_time_s": self.train_time_s,
            "resumed_from": list(self.resumed_from),
            "running": running,
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if self._trainer is None or self.trainer.state.fn != "fit":
            return  # testing or evaluating a checkpoint: weights only, the counters stay
        state = checkpoint.get("bench", {})
        self.train_tokens = state.get("train_tokens", 0)
        self.train_time_s = state.get("train_time_s", 0.0)
        self.resumed_from = [*state.get("resumed_from", []), checkpoint["global_step"]]
        self._reset_running()
        for k, v in state.get("running", {}).items():  # python floats: they add to device tensors
            setattr(self, k, v)

    def configure_optimizers(self):
        t = self.train_cfg
        decay, no_decay = decay_groups(self)
        groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        opt_cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
        if t.optimizer == "adam":
            groups = [{"params": decay + no_decay, "weight_decay": t.weight_decay}]
        opt = opt_cls(groups, lr=t.lr, betas=tuple(t.betas))
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(t, self.steps_per_epoch, self.total_steps))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
