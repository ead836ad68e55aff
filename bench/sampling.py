"""Data order as a function of (seed, epoch), sharded over ranks, and resumable mid-epoch.

Lightning checkpoints neither a plain DataLoader's position nor the global RNG, so the
training order is computed, not drawn: epoch e visits ``randperm(n, seed=f(seed, e))``. The
training loader is *stateful* (``state_dict`` / ``load_state_dict``): Lightning stores its
state in every checkpoint and gives it back before the first batch of a resumed run, which
then starts at the batch after the last one trained, in the same order.

Under several processes (DDP), training shards the permutation (padded so every rank runs the
same number of steps); evaluation shards the examples without padding, so each is scored exactly
once, and the per-example outcomes are gathered by index (``TaskModule``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Sampler


def rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class EpochPermutation(Sampler[int]):
    """Example order of one epoch: a seeded permutation, this rank's shard, from a start offset."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed = n, seed
        self.epoch = 0
        self.resume: tuple[int, int] | None = None  # (epoch, examples of this rank's shard already trained)

    def set_epoch(self, epoch: int) -> None:  # called by Lightning before every epoch
        self.epoch = epoch
        if self.resume and self.resume[0] != epoch:
            self.resume = None

    def shard(self) -> list[int]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(self.n, generator=g).tolist()
        rank, world = rank_and_world()
        order += order[: (-len(order)) % world]  # pad to a multiple of world: equal steps on every rank
        return order[rank::world]

    def __iter__(self) -> Iterator[int]:
        # a resumed epoch may be iterated more than once before its first batch (Lightning
        # prefetches when it sets up the data): each iteration starts at the resume point
        start = self.resume[1] if self.resume and self.resume[0] == self.epoch else 0
        return iter(self.shard()[start:])

    def __len__(self) -> int:
        _, world = rank_and_world()
        return -(-self.n // world)


class ResumableLoader(DataLoader):
    """A training DataLoader whose checkpointed state is (epoch, batches already trained).

    ``position`` is set by the run (``TrainingPosition`` callback) to read the trainer's own
    progress counters: the loader itself cannot count, since Lightning prefetches a batch."""

    def __init__(self, dataset, batch_size: int, seed: int, collate_fn):
        self.order = EpochPermutation(len(dataset), seed)
        g = torch.Generator().manual_seed(seed)  # never draw from the global RNG (it is checkpointed)
        super().__init__(dataset, batch_size=batch_size, sampler=self.order, collate_fn=collate_fn, generator=g)
        self.position: Callable[[], tuple[int, int]] = lambda: (self.order.epoch, 0)

    def state_dict(self) -> dict:
        epoch, batches = self.position()
        if batches >= len(self):
            epoch, batches = epoch + 1, 0
        return {"epoch": epoch, "batches": batches}

    def load_state_dict(self, state: dict) -> None:
        self.order.epoch = state["epoch"]
        self.order.resume = (state["epoch"], state["batches"] * self.batch_size)


class EvalShard(Sampler[int]):
    """Evaluation order: this rank's examples, in order, no padding (each example once overall)."""

    def __init__(self, n: int):
        self.n = n

    def __iter__(self) -> Iterator[int]:
        rank, world = rank_and_world()
        return iter(range(rank, self.n, world))

    def __len__(self) -> int:
        rank, world = rank_and_world()
        return len(range(rank, self.n, world))


def eval_loader(dataset, batch_size: int, collate_fn) -> DataLoader:
    return DataLoader(
        dataset, batch_size=batch_size, sampler=EvalShard(len(dataset)), collate_fn=collate_fn, generator=torch.Generator().manual_seed(0)
    )
