"""Gated Universal Transformer Latent Bottleneck (GUTLB) [HALT §5.2, Alg. 4].

TLB (``bench/models/tlb.py``, Alg. 2) whose per-chunk layer stack is replaced by ONE shared gated
block iterated with GUT's global, transition-aware halting:

    for t, C_0 in enumerate(chunks):
        for l = 1..L (until sum alpha >= alpha_thresh):
            A_l = C_{l-1} + Attention1(C_{l-1})                 # chunk self-attention, xPos per chunk
            A_l = A_l + Attention2(A_l -> M^t)                  # memory read (no positions)
            C_l = GatedFeedForward(C_{l-1}, A_l)                # eqs. 9-11
            alpha_hat_{l-1} = halt([mean(C_{l-1}); mean(C_l)])   # eq. 17, one per chunk
            S_l = halting mixture of C_0..C_l                    # eq. 16
        M^{t+1} = MemoryUpdate_{1..U}(M^t, S_L)                 # memory attends to S_L
    per-token output: LN(S_L) of each chunk; sequence summary: LN(final memory) mean over slots

Causal (flip-flop): chunk self-attention is causal, the chunk reads only memory built from
earlier chunks, and the "global" halting uses prefix means within the chunk (one halting
probability per position), so position t never depends on positions > t.

Cost (issue 25): within a chunk, LN(M^t)'s keys and values are projected once for every iteration;
``halt`` mode freezes halted units on the device and asks once per chunk whether all have halted
(``DepthHalting.forward(freeze=True)``: one host sync per chunk, upperbound's outputs).
"""
from __future__ import annotations

import torch
from torch import Tensor

from .base import BackboneOutput
from .layers.gated import RecurrentBlock, mean_over_iterations
from .layers.halting import DepthHalting
from .layers.memory import keep_where
from .tlb import TLB


class GUTLB(TLB):
    # Streaming: TLB's step does the chunk bookkeeping; GUTLB streams once it overrides the chunk
    # stack (``stack_init_cache`` / ``stack_step``) with its halting loop. Until then it refuses.
    supports_streaming = True  # TLB.step's chunk bookkeeping around the halting stack below

    def __init__(
        self,
        vocab_size: int,
        causal: bool,
        d_model: int = 128,
        n_heads: int = 4,
        d_ff: int = 256,
        max_layers: int = 5,
        gate: bool = True,
        global_halt: bool = True,
        transition: bool = True,
        beta: float = 0.1,
        threshold: float = 0.999,
        mode: str = "halt",
        halt_bias_init: float = 0.0,
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        chunk_size: int = 20,
        memory_slots: int = 20,
        update_layers: int = 1,
        attn_backend: str = "sdpa",
    ):
        # TLB's embedding, memory slots, update layers and output norms; no per-layer stack.
        super().__init__(
            vocab_size, causal, d_model=d_model, n_heads=n_heads, n_layers=0, d_ff=d_ff, dropout=dropout,
            attn_dropout=attn_dropout, chunk_size=chunk_size, memory_slots=memory_slots,
            update_layers=update_layers, attn_backend=attn_backend,
        )
        self.block = RecurrentBlock(
            d_model, n_heads, d_ff, gate=gate, dropout=dropout, attn_dropout=attn_dropout, backend=attn_backend, read=True,
        )  # its attention takes TLB's xPos tables (self.rotary)
        self.halting = DepthHalting(
            d_model, max_layers, global_halt=global_halt, transition=transition, causal=causal,
            mode=mode, threshold=threshold, bias_init=halt_bias_init,
        )
        self.attend_to_mixture = not global_halt  # token-level ablation follows Alg. 1
        self.beta = beta

    def chunk_states(
        self, c0: Tensor, rope, mask: Tensor, active: Tensor, memory: Tensor, a1: Tensor | None = None
    ) -> tuple[Tensor, Tensor, tuple]:
        """Alg. 4's recurrent part of one chunk (``TLB.forward_chunk`` / ``TLB.forward`` embed it and
        build its xPos tables): C_0 (B, g, d) -> (S_L (B, g, d) before ``ln_out``, M^{t+1} (B, S, d),
        the chunk's statistics as values: ponder (B,), depth (B,), active (B,), and per iteration the
        mean gate and whether the chunk has a real token). Nothing is stored on the module, so a
        compiled step (``TLB.compile``) has no guard on a growing list.
        ``a1`` is always None here (no layer stack: ``TLB.first_attention`` returns None)."""
        key_mask = None if self.causal else mask
        kv = self.block.read.keys_values(memory)  # LN(M^t)'s keys / values, read by every iteration
        # gate_mean's mask-only parts, once per chunk: no sequence is ever dropped (freeze below)
        mf = mask.unsqueeze(-1).to(c0.dtype)  # (B, g, 1)
        n = mf.sum() * c0.shape[-1]
        n_c, seen = n.clamp_min(1.0), n > 0
        gates: list[tuple[Tensor, Tensor]] = []

        def step(c: Tensor, s: Tensor, rows: Tensor | None) -> Tensor:  # one iteration of the shared block
            out = self.block(
                c, context=s if self.attend_to_mixture else None, memory=kv,
                rope=rope, key_mask=key_mask, causal=self.causal,
            )
            if self.block.last_gate is not None:  # = gate_mean(last_gate, mask), bitwise
                gates.append(((self.block.last_gate * mf).sum() / n_c, seen))
            return out

        # freeze: halted units stay frozen on the device, one early-exit check per chunk (rows is None)
        res = self.halting(step, c0, mask, freeze=True)
        new_memory = memory
        for update in self.updates:
            new_memory = update(new_memory, res.output, mask)  # memory attends to S_L
        return res.output, keep_where(active, new_memory, memory), (res.ponder, res.depth, active, tuple(gates))

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        out = super().forward(tokens, mask)
        chunks, self._chunk_extras = self._chunk_extras, []  # chunk_states' statistics, chunk by chunk
        ponder, depth, real = (torch.stack(x, 1) for x in list(zip(*chunks))[:3])  # (B, n_chunks) each
        gates = [it for c in chunks for it in c[3]]  # (mean gate, any real token) per iteration
        real_f = real.to(ponder.dtype)
        n_real = real_f.sum(1).clamp_min(1.0)
        out.stats["halt_depth"] = ((depth * real_f).sum(1) / n_real).detach()  # mean iterations per chunk
        out.stats["total_depth"] = (depth * real_f).sum(1).detach()  # iterations over all chunks
        if gates:
            out.stats["gate_mean"] = mean_over_iterations(gates)
        if self.beta:
            out.aux_loss = self.beta * ((ponder * real_f).sum(1) / n_real).mean()
        return out

    # ---- streaming: TLB.step keeps the chunks and the memory; the stack is the depth loop ----
    def stack_init_cache(self, batch_size: int, device=None) -> dict:
        """A chunk's start: one empty block cache per iteration, and the causal halting units'
        prefix sums restarting with the chunk (``DepthHalting.init_state``)."""
        caches = [self.block.init_cache(batch_size, device) for _ in range(self.halting.max_iters)]
        return self.halting.init_state(caches, batch_size, device)

    def stack_step(self, x: Tensor, cache: dict, memory: Tensor, rope, key_scale: Tensor | None) -> tuple[Tensor, dict]:
        """Alg. 4's inner loop on t new positions of the current chunk: C_0 = x (B, t, d), every
        iteration reading M^t -> (S_L (B, t, d), the new halting state). As in ``forward_chunk``."""

        def block_step(c: Tensor, s: Tensor, block_cache: dict) -> tuple[Tensor, dict]:  # one iteration
            return self.block.step(
                c, block_cache, context=s if self.attend_to_mixture else None, memory=memory, rope=rope, key_scale=key_scale,
            )

        res, cache = self.halting.step(block_step, x, cache)
        return res.output, cache
