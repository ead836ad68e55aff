"""Depth recurrence shared by UT, GUT (``universal.py``) and GUTLB (``gutlb.py``) [HALT Alg. 1, 3, 4].

One shared block (``layers/gated.py``) iterated under dynamic halting (``layers/halting.py``):

    H_0 = input;  S_0 = H_0
    for l = 1..L (until every unit halted):
        H_l = Block(H_{l-1}, K, V = S_{l-1} (Alg. 1) or H_{l-1} (Alg. 3, 4), [memory read: Alg. 4])
        alpha_hat_{l-1}, S_l = halting update (eqs. 5-7, 15-17)
    output S_L

``BlockIteration`` is that one line ``H_l = Block(...)``, bound to one input (positions, masks, the
memory read); ``DepthRecurrent.iterate_block`` runs the loop, eagerly or, after ``compile``, with one
compiled iteration (block + halting update) reused for every l; ``stream_block`` is the loop on t
new positions of a stream (``DepthHalting.step``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .layers.gated import RecurrentBlock, gate_mean, gate_mean_of, gate_parts
from .layers.halting import DepthHalting, HaltingOutput, take
from .layers.positional import RotaryTables


@dataclass
class BlockIteration:
    """H_l = Block(H_{l-1}) on the running sequences' rows (``rows``: None = all): attending to S_{l-1}
    where ``attend_to_mixture`` (Alg. 1), else to H_{l-1}; reading ``memory`` (Alg. 4: LN(M^t)'s keys /
    values) if given. Each iteration's mean gate over the real positions (``gate_mean``) is appended
    to ``gates``; its mask-only parts come precomputed (``gate_parts``) or from ``mask``, once per
    set of rows."""

    block: RecurrentBlock
    attend_to_mixture: bool
    causal: bool
    rope: RotaryTables | None = None
    key_mask: Tensor | None = None
    memory: tuple | None = None
    mask: Tensor | None = None
    gate_parts: tuple | None = None
    gates: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self._parts_rows: Tensor | None = None  # the rows ``gate_parts`` belongs to

    def __call__(self, h: Tensor, s: Tensor, rows: Tensor | None = None) -> Tensor:
        out, gate = self.block(
            h,
            context=s if self.attend_to_mixture else None,
            memory=self.memory,
            rope=None if self.rope is None else self.rope.rows(rows),
            key_mask=take(self.key_mask, rows),
            causal=self.causal,
        )
        if gate is not None:
            if self.gate_parts is None or self._parts_rows is not rows:
                self.gate_parts, self._parts_rows = gate_parts(take(self.mask, rows), gate.dtype, gate.shape[-1]), rows
            self.gates.append(gate_mean_of(gate, *self.gate_parts))
        return out


class DepthRecurrent:
    """The depth loop of a host holding ``block`` (RecurrentBlock), ``halting`` (DepthHalting),
    ``attend_to_mixture`` and ``causal``."""

    block: RecurrentBlock
    halting: DepthHalting
    attend_to_mixture: bool
    causal: bool

    def iterate_block(self, h0: Tensor, mask: Tensor, shared: BlockIteration) -> HaltingOutput:
        """Alg. 1 / 3 / 4's inner loop on H_0 (B, T, d) -> S_L, ponder, depth; ``shared.gates`` collects
        the mean gates. Eager, or the iteration ``compile`` compiled (the loop, its exit checks and
        the row dropping stay eager)."""
        compiled = getattr(self, "_iteration_step", None)
        if compiled is None:
            return self.halting(shared, h0, mask)
        # the iteration index as a 0-dim tensor (a Python int would be a constant of the graph: one per l)
        levels = torch.arange(1, self.halting.max_iters + 1, device=h0.device).to(h0.dtype).unbind(0)
        given = shared.gate_parts

        def iterate(l: int, h: Tensor, s: Tensor, c, x_prev, parts: tuple, rows: Tensor | None):
            rope = None if shared.rope is None else shared.rope.rows(rows)
            h, s, c, x_prev, gate = compiled(
                levels[l - 1],
                h,
                s,
                c,
                x_prev,
                parts,
                rope,
                take(shared.key_mask, rows),
                None if given is not None else take(shared.mask, rows),
                shared.memory,
                given,
            )
            if gate is not None:
                shared.gates.append(gate)
            return h, s, c, x_prev

        return self.halting.run(iterate, h0, mask, compiled=True)

    def depth_iteration(
        self,
        level: Tensor,
        h: Tensor,
        s: Tensor,
        carry,
        x_prev,
        parts: tuple,
        rope,
        key_mask: Tensor | None,
        mask: Tensor | None,
        memory: tuple | None,
        given: tuple | None,
    ):
        """``DepthHalting.iteration`` with the shared block, on the running sequences' rows (``rope``,
        ``key_mask``, ``mask`` already theirs): what ``compile`` compiles, once for every l (``level``
        a tensor) -> (H_l, S_l, carry, x_prev, the mean gate's pair or None)."""
        shared = BlockIteration(self.block, self.attend_to_mixture, self.causal, rope, key_mask, memory, mask, given)
        h, s, carry, x_prev = self.halting.iteration(shared, level, h, s, carry, x_prev, parts)
        return h, s, carry, x_prev, (shared.gates[0] if shared.gates else None)

    def compile_iteration(self, *args, **kwargs) -> None:
        """Compiles ONE depth iteration (block + halting update, ``depth_iteration``), reused by every
        iteration, instead of a graph unrolling max_layers iterations (and, in ``halt`` mode, breaking
        at every exit check). A batch that drops rows runs it on fewer rows, which dynamo compiles
        once more with a dynamic batch size."""
        self._iteration_step = torch.compile(self.depth_iteration, *args, **kwargs)

    def init_depth_state(self, batch_size: int, device=None) -> dict:
        """An empty stream of the loop: one empty block cache per iteration (``DepthHalting.init_state``)."""
        caches = [self.block.init_cache(batch_size, device) for _ in range(self.halting.max_iters)]
        return self.halting.init_state(caches, batch_size, device)

    def stream_block(
        self, h0: Tensor, state: dict, *, rope, key_scale, memory: Tensor | None = None, gates: list | None = None
    ) -> tuple[HaltingOutput, dict]:
        """The loop on t new positions (causal): H_0 (B, t, d) and the halting state (one block cache
        per iteration) -> (S_L of the new positions, the new state); ``gates`` (if given) collects
        each iteration's mean gate."""

        def block_step(h: Tensor, s: Tensor, cache: dict) -> tuple[Tensor, dict]:  # one iteration, t new positions
            out, gate, cache = self.block.iterate_step(
                h,
                cache,
                context=s if self.attend_to_mixture else None,
                memory=memory,
                rope=rope,
                key_scale=key_scale,
            )
            if gates is not None and gate is not None:
                gates.append(gate_mean(gate, torch.ones(h.shape[:2], dtype=torch.bool, device=h.device)))
            return out, cache

        return self.halting.step(block_step, h0, state)
