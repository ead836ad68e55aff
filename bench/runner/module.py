"""The LightningModule that joins any backbone to any task: a head chosen by the task's kind,
the loss, AdamW/Adam with warm-up and a schedule, and evaluation by per-example outcomes."""
from __future__ import annotations

import math

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.base import IGNORE

from ..errors import RunFailed
from ..metrics import OutcomeBuffer, example_outcomes


def masked_mean(hidden: Tensor, mask: Tensor) -> Tensor:  # (B, T, d), (B, T) -> (B, d)
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


class Head(nn.Module):
    """Maps backbone output to logits according to the task kind."""

    def __init__(self, kind: str, d_model: int, vocab_size: int, num_classes: int, num_labels: int):
        super().__init__()
        self.kind = kind
        if kind == "classify":
            self.out = nn.Linear(d_model, num_classes)
        elif kind == "pair_classify":  # [u; v; u*v; |u-v|] -> MLP
            self.out = nn.Sequential(nn.Linear(4 * d_model, d_model), nn.GELU(), nn.Linear(d_model, num_classes))
        elif kind == "tag":
            self.out = nn.Linear(d_model, num_labels)
        elif kind == "lm":
            self.out = nn.Linear(d_model, vocab_size)
        else:
            raise ValueError(f"unknown task kind {kind!r}")

    @staticmethod
    def pool(out, mask: Tensor) -> Tensor:
        return out.pooled if out.pooled is not None else masked_mean(out.hidden, mask)

    def forward(self, out, mask: Tensor, out2=None, mask2: Tensor | None = None) -> Tensor:
        if self.kind == "classify":
            return self.out(self.pool(out, mask))
        if self.kind == "pair_classify":
            u, v = self.pool(out, mask), self.pool(out2, mask2)
            return self.out(torch.cat([u, v, u * v, (u - v).abs()], dim=-1))
        return self.out(out.hidden)  # (B, T, labels | vocab)


def task_loss(kind: str, logits: Tensor, batch: dict) -> Tensor:
    if kind in ("classify", "pair_classify"):
        return F.cross_entropy(logits, batch["label"])
    if kind == "tag":
        per = F.binary_cross_entropy_with_logits(logits, batch["labels"], reduction="none").mean(-1)  # (B, T)
        m = batch["mask"].to(per.dtype)
        return (per * m).sum() / m.sum().clamp_min(1.0)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["targets"].reshape(-1), ignore_index=IGNORE)


def lr_lambda(train: dict, steps_per_epoch: int, total_steps: int):
    warm = int(train["warmup_steps"])
    sched = train["schedule"]

    def f(step: int) -> float:
        if warm and step < warm:
            return (step + 1) / warm
        if sched == "constant":
            return 1.0
        if sched == "inverse_sqrt":
            return math.sqrt(max(warm, 1)) / math.sqrt(max(step, 1)) if step >= max(warm, 1) else 1.0
        if sched == "step":  # "halved every N epochs" style
            return train["step_gamma"] ** (step // max(1, steps_per_epoch * train["step_every_epochs"]))
        progress = min(1.0, (step - warm) / max(1, total_steps - warm))
        if sched == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * progress))  # cosine

    return f


def forward_batch(backbone: nn.Module, head: Head, batch: dict):
    """Runs the backbone (twice for pair tasks) and the head. Returns logits, aux loss, stats."""
    out = backbone(batch["tokens"], batch["mask"])
    if head.kind == "pair_classify":
        out2 = backbone(batch["tokens2"], batch["mask2"])
        stats = {k: (v + out2.stats[k]) / 2 if k in out2.stats else v for k, v in out.stats.items()}
        return head(out, batch["mask"], out2, batch["mask2"]), out.aux_loss + out2.aux_loss, stats
    return head(out, batch["mask"]), out.aux_loss, out.stats


class TaskModule(L.LightningModule):
    def __init__(self, backbone: nn.Module, task, train: dict, steps_per_epoch: int):
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
        self.train_tokens = 0

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        logits, aux, _ = forward_batch(self.backbone, self.head, batch)
        loss = task_loss(self.kind, logits, batch) + aux
        if not torch.isfinite(loss):
            raise RunFailed(f"non-finite training loss ({loss.item()}) at step {self.global_step}; lower train.lr or check the model")
        self.train_tokens += int(batch["mask"].sum()) + (int(batch["mask2"].sum()) if "mask2" in batch else 0)
        self.log("train_loss", loss.detach(), prog_bar=True, on_step=True, on_epoch=False, batch_size=batch["tokens"].shape[0])
        return loss

    # ---- evaluation: validation and test share one path --------------------------------------
    def _eval_step(self, batch: dict, dataloader_idx: int) -> None:
        logits, _, stats = forward_batch(self.backbone, self.head, batch)
        buf = self.eval_buffers.setdefault(dataloader_idx, OutcomeBuffer())
        buf.add(example_outcomes(self.kind, logits, batch), batch["length"], stats, batch["tokens"].shape[0])

    def _eval_end(self) -> None:
        self.last_eval = {i: buf.summarize(self.length_bin) for i, buf in sorted(self.eval_buffers.items())}
        self.eval_buffers = {}

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self._eval_step(batch, dataloader_idx)

    def on_validation_epoch_end(self):
        self._eval_end()
        if not self.trainer.sanity_checking and 0 in self.last_eval:
            self.log("val_metric", self.last_eval[0][self.metric], prog_bar=True)

    def test_step(self, batch, batch_idx, dataloader_idx=0):
        self._eval_step(batch, dataloader_idx)

    def on_test_epoch_end(self):
        self._eval_end()

    def configure_optimizers(self):
        t = self.train_cfg
        decay, no_decay = [], []
        for name, p in self.named_parameters():
            if p.requires_grad:
                (no_decay if p.dim() < 2 or "norm" in name or "ln" in name.split(".")[-2:][0] else decay).append(p)
        groups = [{"params": decay, "weight_decay": t["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
        opt_cls = torch.optim.AdamW if t["optimizer"] == "adamw" else torch.optim.Adam
        if t["optimizer"] == "adam":
            groups = [{"params": decay + no_decay, "weight_decay": t["weight_decay"]}]
        opt = opt_cls(groups, lr=t["lr"], betas=tuple(t["betas"]))
        total = self.trainer.estimated_stepping_batches if self.trainer else 1
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(t, self.steps_per_epoch, int(total)))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
