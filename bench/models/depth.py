"""Depth recurrence shared by UT, GUT (``universal.py``) and GUTLB (``gutlb.py``) [HALT Alg. 1, 3, 4].

One shared block (``layers/gated.py``) iterated under dynamic halting (``layers/halting.py``):

    H_0 = input;  S_0 = H_0
    for l = 1..L (until every unit halted):
        H_l = Block(H_{l-1}, K, V = S_{l-1} (Alg. 1) or H_{l-1} (Alg. 3, 4), [memory read: Alg. 4])
        alpha_hat_{l-1}, S_l = halting update (eqs. 5-7, 15-17)
    output S_L

The algorithm first: ``DepthRecurrent.reference_depth`` is that loop as the paper prints it (Alg. 1 / 3
lines 1-13, Alg. 4 lines 8-20), the whole batch at every iteration, and ``reference_block`` the block's
equations written out; the families' ``reference_forward`` (``universal.py``, ``gutlb.py``) put them
around their input and output. The fast executor the models run is checked equal to them
(tests/test_universal.py, tests/test_halting.py): ``BlockIteration`` is the one line
``H_l = Block(...)``, bound to one input (positions, masks, the memory read);
``DepthRecurrent.iterate_block`` runs the loop (``DepthHalting``: sequences whose units all halted
leave the batch, pool(H_{l-1}) carried over), eagerly or, after ``compile``, with one compiled
iteration (block + halting update) reused for every l; ``stream_block`` is the loop on t new
positions of a stream (``DepthHalting.step``).
"""

from __future__ import annotations

from collections.abc import Callable
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

    # ---- the algorithm as printed (the reference the executor below is tested against) ----------
    def reference_block(self, h: Tensor, s: Tensor, *, rope, key_mask: Tensor | None, memory: Tensor | None = None) -> Tensor:
        """Alg. 1 / 3 lines 4-5 (Alg. 4 lines 10-12) written out with the block's parameters, eval mode:
        H_{l-1} (B, T, d) and S_{l-1} -> H_l (each "Attention" / "FeedForward" pre-LN with a residual [HALT §3])."""
        b = self.block
        kv = s if self.attend_to_mixture else h  # K, V: S_{l-1} (Alg. 1 line 4), H_{l-1} (Alg. 3 line 4)
        a = h + b.attn(b.ln_attn(h), context=b.ln_attn(kv), rope=rope, key_mask=key_mask, causal=self.causal)  # eq. 3
        if memory is not None:  # Alg. 4 line 11: A_l = Attention2(A_l as Q, M^t as K, V), no positions
            a = a + b.read.attn(b.read.ln_x(a), context=b.read.ln_mem(memory))
        z = b.ln_ffn(a)
        h_inter = a + b.ffn(z)  # eq. 4 (UT: H_l), eq. 9
        if b.gate is None:
            return h_inter
        g = torch.sigmoid(b.gate(z))  # eq. 10
        return g * h_inter + (1 - g) * h  # eq. 11: H_l = GatedFeedForward(H_{l-1}, A_l)

    def reference_depth(self, h0: Tensor, mask: Tensor, block: Callable[[Tensor, Tensor], Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """Alg. 1 / 3 lines 1-13 (Alg. 4 lines 5, 8-20) as printed: every sequence runs every iteration (no
        row dropping, nothing carried over), S_l the halting mixture of the stored H_0..H_l. Comments
        give the line of each algorithm: [1: Alg. 1, 3: Alg. 3, 4: Alg. 4]. ``block``:
        (H_{l-1}, S_{l-1}) -> H_l. H_0 (B, T, d), mask (B, T) -> (S_L, ponder (B,), depth (B,)), ponder
        and depth averaged over the units. ``halt_rules`` (``self.halting.rules``): ``paper`` as printed;
        the code's length cap (no update past iteration n + 1) and crossing step undone where chosen.
        ``no-halt``: H_L after L iterations (capped likewise), no halting unit."""
        hu, B = self.halting, h0.shape[0]
        m = mask.unsqueeze(-1).to(h0.dtype)  # (B, T, 1)

        def halt_input(h: Tensor) -> Tensor:  # what halt() reads of H: h^(t) [1: 6], mean(H) [3: 6, 4: 13] (eq. 14)
            if not hu.global_halt:
                return h  # (B, T, d)
            if hu.causal:  # one unit per position: the mean over real positions <= t
                return (h * m).cumsum(1) / m.cumsum(1).clamp_min(1.0)
            return (h * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp_min(1.0)  # eq. 14, (B, 1, d)

        units = mask if hu.per_position else torch.ones(B, 1, dtype=torch.bool, device=h0.device)  # (B, P)
        cap = mask.sum(-1, keepdim=True) + 1 if hu.length_cap else None  # the code's last iteration, n + 1
        running = units.clone()  # sum_{l'} alpha_{l'} < alpha_thresh [1: 3, 3: 3, 4: 9] (padding never runs)
        remain = torch.ones(units.shape, dtype=h0.dtype, device=h0.device)  # prod (1 - alpha_hat_{l'}), alpha_hat_{-1} = 0 [1: 1, 4: 5]
        steps = torch.zeros_like(remain)  # iterations each unit took
        hs, alphas = [h0], []  # H_0..H_{l}, alpha_0..alpha_{l-1}
        h, s = h0, h0  # H_0, S_0
        for l in range(1, hu.max_iters + 1):  # [1: 2, 3: 2, 4: 8]
            h_new = block(h, s)  # A_l, H_l [1: 4-5, 3: 4-5, 4: 10-12]
            if hu.unit is None:  # no-halt: H_l for every position (up to the cap), no halting computation
                h = s = h_new if cap is None else torch.where((l <= cap).unsqueeze(-1), h_new, h)
                continue
            take = running if cap is None else running & (l <= cap)
            x = halt_input(h) if not hu.transition else torch.cat([halt_input(h), halt_input(h_new)], -1)  # trans, eq. 17
            a_hat = hu.unit(x)  # alpha_hat_{l-1} = halt(.), eq. 5 [1: 6, 3: 7, 4: 14]
            alpha = remain * a_hat * take.to(h0.dtype)  # alpha_{l-1}, eqs. 6 / 15 [1: 7, 3: 8, 4: 15]
            if hu.undo_crossing:  # the code: the iteration taking the total to >= alpha_thresh is not taken
                take = take & (sum(alphas) + alpha < hu.threshold)
                alpha = alpha * take.to(h0.dtype)
            remain = torch.where(take, remain * (1 - a_hat), remain)
            steps = steps + take.to(h0.dtype)
            alphas.append(alpha)
            h = torch.where(take.unsqueeze(-1), h_new, h)  # else h_l = h_{l-1}, s_l = s_{l-1} [1: 9-11; 3: 10-11, 4: 17-18 break]
            hs.append(h)
            total = sum(alphas)  # sum_{l'=0}^{l-1} alpha_{l'}
            s = (1 - total).unsqueeze(-1) * h + sum(a.unsqueeze(-1) * hj for a, hj in zip(alphas, hs))  # eqs. 7 / 16 [1: 8, 3: 9, 4: 16]
            running = take & (total < hu.threshold)  # the condition for l + 1 [1: 3, 3: 3, 4: 9]
        if hu.unit is None:  # depth L, or n + 1 where the cap binds
            depth = torch.full((B,), float(hu.max_iters), dtype=h0.dtype, device=h0.device)
            return h, torch.zeros_like(depth), depth if cap is None else torch.minimum(depth, cap.squeeze(-1).to(h0.dtype))
        total = sum(alphas)
        cost = sum(a * j for j, a in enumerate(alphas, 1)) + (1 - total) * steps  # eq. 8 + the remainder's cost
        n_units = units.to(h0.dtype).sum(-1).clamp_min(1.0)
        return s, (cost * units).sum(-1) / n_units, (steps * units).sum(-1) / n_units

    # ---- the fast executor ------------------------------------------------------------------------
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
