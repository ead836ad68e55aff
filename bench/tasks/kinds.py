"""Task kinds: what a split's examples hold and everything the harness does with them, in one
class per kind. A ``TaskKind`` owns

- ``columns``: the columns an example carries beside ``tokens`` (and ``length``), and
  ``collate``, which pads them into a batch;
- ``pair``: two sequences per example (the backbone encodes both, ``forward_batch``);
- ``output_layer`` / ``logits``: the head put on the backbone;
- ``loss``: the training loss from the logits and the batch;
- ``outcomes``: per-example correctness (``correct``, ``tok_correct``, ``n_scored``,
  ``last_correct``), from which bench/metrics.py computes acc / token_acc / last_acc, and, for
  kinds with one class label per example, the ``label`` (the split's ``majority`` share) and the
  ``prediction`` (how many classes the model predicts: ``predicted_classes``);
- ``random_batch``: a batch of random data of the kind (``bench cost``).

Defining a subclass with a ``name`` registers it in ``KINDS``; a task class names its kind by
that string (``kind = "classify"``). A new kind is one class: nothing else in the harness
switches on kind names.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import trivial
from .base import IGNORE, PAD

#: every kind by name (filled by TaskKind.__init_subclass__)
KINDS: dict[str, TaskKind] = {}


def pad(seqs: list, value, dtype=torch.long) -> tuple[Tensor, Tensor]:
    """Right-pad sequences: (B, T) values and (B, T) mask."""
    lens = [len(s) for s in seqs]
    T = max(lens)
    out = torch.full((len(seqs), T), value, dtype=dtype)
    mask = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        out[i, : lens[i]] = torch.from_numpy(np.array(s)).to(dtype)  # a copy: arrow buffers are read-only
        mask[i, : lens[i]] = True
    return out, mask


def masked_mean(hidden: Tensor, mask: Tensor) -> Tensor:  # (B, T, d), (B, T) -> (B, d)
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


def pool(out, mask: Tensor) -> Tensor:
    """One vector per sequence: the backbone's own pooled state, else the mean over real positions."""
    return out.pooled if out.pooled is not None else masked_mean(out.hidden, mask)


def kind_of(name: str) -> TaskKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown task kind {name!r}; kinds: {', '.join(KINDS)}") from None


class TaskKind:
    """One kind of task (see the module docstring); subclasses set ``name`` and override what differs."""

    name: ClassVar[str] = ""
    columns: ClassVar[tuple[str, ...]] = ()
    pair: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name:
            KINDS[cls.name] = cls()

    def __repr__(self) -> str:
        return f"<task kind {self.name}>"

    # ---- data ----------------------------------------------------------------------------
    def collate(self, examples: list[dict], batch: dict) -> None:
        """Adds the kind's columns of ``examples`` to ``batch`` (which holds tokens and mask)."""
        raise NotImplementedError

    # ---- head and loss -------------------------------------------------------------------
    def output_layer(self, d_model: int, vocab_size: int, num_classes: int, num_labels: int) -> nn.Module:
        raise NotImplementedError

    def logits(self, layer: nn.Module, out, mask: Tensor, out2=None, mask2: Tensor | None = None) -> Tensor:
        return layer(out.hidden)  # (B, T, labels | vocab)

    def loss(self, logits: Tensor, batch: dict) -> Tensor:
        raise NotImplementedError

    # ---- evaluation ----------------------------------------------------------------------
    def outcomes(self, logits: Tensor, batch: dict) -> dict:
        """Per-example correctness for one batch: 1-D tensors of length B."""
        raise NotImplementedError

    def scored_targets(self, columns: dict) -> list | None:
        """Per example of a split (its columns, as bench/data.py holds them), the target tokens
        its ``token_acc`` scores: what a token-level chance level is counted over (None: the
        kind has no token targets)."""
        return None

    def example_targets(self, columns: dict) -> list | None:
        """Per example of a split, every target its scoring compares with, as integers (the
        ``scored_targets``; a label per example for classification kinds): what the trivial
        strategies answer (bench/tasks/trivial.py)."""
        return self.scored_targets(columns)

    def scored_inputs(self, columns: dict, offset: int = 0) -> list:
        """Per example, the input token at each scored position shifted by ``offset`` (0: the
        token read there, -1: the one before it; -1 where there is none), aligned with
        ``example_targets``; empty for kinds with no scored position (one label per example)."""
        return [np.zeros(0, dtype=np.int64) for _ in columns["tokens"]]

    def trivial_strategies(self) -> dict:
        """The strategies that score on every task of the kind without solving it, by name
        (bench/tasks/trivial.py; a task adds its own: Task.trivial_strategies)."""
        return {}

    # ---- cost ----------------------------------------------------------------------------
    def random_batch(self, task, batch: dict, tokens, gen: torch.Generator, device) -> None:
        """Adds random targets of the kind to ``batch`` (uniform ``tokens()`` and a full mask)."""
        raise NotImplementedError


class Classify(TaskKind):
    """ "tokens": [..], "label": int; pooled -> num_classes."""

    name = "classify"
    columns = ("label",)

    def collate(self, examples, batch):
        batch["label"] = torch.tensor([int(ex["label"]) for ex in examples])

    def output_layer(self, d_model, vocab_size, num_classes, num_labels):
        return nn.Linear(d_model, num_classes)

    def logits(self, layer, out, mask, out2=None, mask2=None):
        return layer(pool(out, mask))

    def loss(self, logits, batch):
        return F.cross_entropy(logits, batch["label"])

    def outcomes(self, logits, batch):
        correct = logits.argmax(-1) == batch["label"]
        ones = torch.ones_like(correct, dtype=torch.long)
        return {
            "correct": correct,
            "tok_correct": correct.long(),
            "n_scored": ones,
            "last_correct": correct.float(),
            "label": batch["label"],
            "prediction": logits.argmax(-1),
        }

    def example_targets(self, columns):
        return [np.asarray([int(x)]) for x in columns["label"]]

    def trivial_strategies(self):
        return {trivial.MOST_FREQUENT: trivial.most_frequent_target}

    def random_batch(self, task, batch, tokens, gen, device):
        batch["label"] = torch.randint(0, task.num_classes, (batch["tokens"].shape[0],), generator=gen).to(device)


class PairClassify(Classify):
    """ "tokens": [..], "tokens2": [..], "label": int; each encoded, [u; v; u*v; |u-v|] -> MLP."""

    name = "pair_classify"
    columns = ("tokens2", "label")
    pair = True

    def collate(self, examples, batch):
        batch["tokens2"], batch["mask2"] = pad([ex["tokens2"] for ex in examples], PAD)
        super().collate(examples, batch)

    def output_layer(self, d_model, vocab_size, num_classes, num_labels):
        return nn.Sequential(nn.Linear(4 * d_model, d_model), nn.GELU(), nn.Linear(d_model, num_classes))

    def logits(self, layer, out, mask, out2=None, mask2=None):
        u, v = pool(out, mask), pool(out2, mask2)
        return layer(torch.cat([u, v, u * v, (u - v).abs()], dim=-1))

    def random_batch(self, task, batch, tokens, gen, device):
        super().random_batch(task, batch, tokens, gen, device)
        batch["tokens2"], batch["mask2"] = tokens(), batch["mask"]


def tag_positions_ok(logits: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """Per position of a 'tag' task, whether every label's sign is right: (B, T, K) logits and
    {0, 1} labels, (B, T) mask -> (B, T) bool (False at padding)."""
    return ((logits > 0) == (labels > 0.5)).all(-1) & mask


class Tag(TaskKind):
    """ "tokens": [..], "labels": [[0/1] * num_labels per position]; per-position multi-label,
    a string is correct iff every position is."""

    name = "tag"
    columns = ("labels",)

    def collate(self, examples, batch):
        seqs = [ex["labels"] for ex in examples]
        T = batch["tokens"].shape[1]
        lab = torch.zeros(len(seqs), T, seqs[0].shape[-1])
        for i, s in enumerate(seqs):
            lab[i, : len(s)] = torch.from_numpy(np.array(s, dtype=np.float32))
        batch["labels"] = lab

    def output_layer(self, d_model, vocab_size, num_classes, num_labels):
        return nn.Linear(d_model, num_labels)

    def loss(self, logits, batch):
        per = F.binary_cross_entropy_with_logits(logits, batch["labels"], reduction="none").mean(-1)  # (B, T)
        m = batch["mask"].to(per.dtype)
        return (per * m).sum() / m.sum().clamp_min(1.0)

    def outcomes(self, logits, batch):
        mask = batch["mask"]
        pos_ok = tag_positions_ok(logits, batch["labels"], mask)  # (B, T)
        n = mask.sum(-1)
        tok = pos_ok.sum(-1)
        last = pos_ok.gather(1, (n - 1).clamp_min(0).unsqueeze(1)).squeeze(1).float()
        return {"correct": tok == n, "tok_correct": tok, "n_scored": n, "last_correct": last}

    def scored_targets(self, columns):
        """Each position's label vector as one integer (label j is bit j): a position is right iff
        its whole vector is, so the chance guess is the split's most frequent vector."""
        return [np.asarray(labels, dtype=np.int64) @ (1 << np.arange(np.shape(labels)[-1])) for labels in columns["labels"]]

    def scored_inputs(self, columns, offset=0):
        out = []
        for tokens, labels in zip(columns["tokens"], columns["labels"]):
            tokens = np.asarray(tokens, dtype=np.int64)[len(tokens) - len(labels) :]  # "<s>" is scored with the first label
            out.append(trivial.shifted(tokens, np.arange(len(tokens)), offset))
        return out

    def trivial_strategies(self):
        return {
            trivial.MOST_FREQUENT: trivial.most_frequent_target,
            trivial.MOST_FREQUENT_LAST: trivial.most_frequent_last_target,
            trivial.TOKEN_LOOKUP: trivial.best_label_of_symbol,
        }

    def random_batch(self, task, batch, tokens, gen, device):
        B, T = batch["tokens"].shape
        batch["labels"] = torch.randint(0, 2, (B, T, task.num_labels), generator=gen).float().to(device)


class LM(TaskKind):
    """ "tokens": [..], "targets": [..] next-token targets, IGNORE = not scored."""

    name = "lm"
    columns = ("targets",)

    def collate(self, examples, batch):
        batch["targets"], _ = pad([ex["targets"] for ex in examples], IGNORE)

    def output_layer(self, d_model, vocab_size, num_classes, num_labels):
        return nn.Linear(d_model, vocab_size)

    def loss(self, logits, batch):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["targets"].reshape(-1), ignore_index=IGNORE)

    def outcomes(self, logits, batch):
        targets = batch["targets"]
        scored = targets != IGNORE
        ok = (logits.argmax(-1) == targets) & scored
        n = scored.sum(-1)
        tok = ok.sum(-1)
        T = targets.shape[1]
        last_idx = torch.where(scored, torch.arange(T, device=targets.device), -1).max(-1).values
        last = ok.gather(1, last_idx.clamp_min(0).unsqueeze(1)).squeeze(1).float()
        last = torch.where(last_idx >= 0, last, torch.full_like(last, float("nan")))
        return {"correct": tok == n, "tok_correct": tok, "n_scored": n, "last_correct": last}

    def scored_targets(self, columns):
        return [np.asarray(t)[np.asarray(t) != IGNORE] for t in columns["targets"]]

    def scored_inputs(self, columns, offset=0):
        return [
            trivial.shifted(np.asarray(tokens, dtype=np.int64), np.flatnonzero(np.asarray(targets) != IGNORE), offset)
            for tokens, targets in zip(columns["tokens"], columns["targets"])
        ]

    def trivial_strategies(self):
        return {
            trivial.MOST_FREQUENT: trivial.most_frequent_target,
            trivial.MOST_FREQUENT_LAST: trivial.most_frequent_last_target,
            trivial.REPEAT_TOKEN: trivial.repeat_current_token,
            trivial.REPEAT_PREVIOUS: trivial.repeat_previous_token,
        }

    def random_batch(self, task, batch, tokens, gen, device):
        batch["targets"] = tokens()
