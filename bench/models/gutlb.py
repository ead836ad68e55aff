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
        mean gate and whether the chunk has a real token). Nothing is stored on the module.
        ``a1`` is always None here (no layer stack: ``TLB.first_attention`` returns None).

        Compiled (``compile``): this driver stays eager and runs the depth loop in Python, each
        iteration one call of the compiled ``depth_iteration`` (one graph for every iteration of
        every chunk), then the compiled ``memory_step``; ``halt`` mode's one early-exit check per
        chunk sits between two calls, outside any graph."""
        key_mask = None if self.causal else mask
        kv = self.block.read.keys_values(memory)  # LN(M^t)'s keys / values, read by every iteration
        # gate_mean's mask-only parts, once per chunk: no sequence is ever dropped (freeze below)
        mf = mask.unsqueeze(-1).to(c0.dtype)  # (B, g, 1)
        n = mf.sum() * c0.shape[-1]
        n_c, seen = n.clamp_min(1.0), n > 0
        gates: list[tuple[Tensor, Tensor]] = []
        compiled = getattr(self, "_iteration_step", None)

        if compiled is None:
            def step(c: Tensor, s: Tensor, rows: Tensor | None) -> Tensor:  # one iteration of the shared block
                out, gate = self.block_iteration(c, s, kv, rope, key_mask, mf, n_c)
                if gate is not None:
                    gates.append((gate, seen))
                return out

            # freeze: halted units stay frozen on the device, one early-exit check per chunk (rows is None)
            res = self.halting(step, c0, mask, freeze=True)
            return res.output, self.memory_step(memory, res.output, mask, active), (res.ponder, res.depth, active, tuple(gates))

        # the iteration index as a 0-dim tensor (a Python int would be a constant of the graph: one per l)
        levels = torch.arange(1, self.halting.max_iters + 1, device=c0.device).to(c0.dtype).unbind(0)

        def iterate(l: int, h: Tensor, s: Tensor, c, x_prev, parts: tuple, rows: None):  # freeze: rows stay None
            h, s, c, x_prev, gate = compiled(levels[l - 1], h, s, c, x_prev, parts, kv, rope, key_mask, mf, n_c)
            if gate is not None:
                gates.append((gate, seen))
            return h, s, c, x_prev

        res = self.halting(None, c0, mask, freeze=True, iterate=iterate)
        new_memory = self._update_step(memory, res.output, mask, active)
        return res.output, new_memory, (res.ponder, res.depth, active, tuple(gates))

    def block_iteration(
        self, c: Tensor, s: Tensor, kv: tuple, rope, key_mask: Tensor | None, mf: Tensor, n_c: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        """One iteration of the shared block: H_{l-1} (B, g, d), S_{l-1}, the memory read's keys / values
        -> (H_l, the mean gate over the chunk's real positions (= gate_mean, bitwise) or None)."""
        out = self.block(
            c, context=s if self.attend_to_mixture else None, memory=kv, rope=rope, key_mask=key_mask, causal=self.causal,
        )
        gate = None if self.block.last_gate is None else (self.block.last_gate * mf).sum() / n_c
        return out, gate

    def depth_iteration(self, level: Tensor, h: Tensor, s: Tensor, carry, x_prev, parts: tuple, kv: tuple, rope,
                        key_mask: Tensor | None, mf: Tensor, n_c: Tensor):
        """``DepthHalting.iteration`` with the shared block: the step ``compile`` compiles, once (static
        shapes: every chunk g long, ``level`` a tensor) -> (H_l, S_l, carry, x_prev, mean gate or None)."""
        gate: list[Tensor] = []

        def step(c: Tensor, s: Tensor, rows: Tensor | None) -> Tensor:
            out, g = self.block_iteration(c, s, kv, rope, key_mask, mf, n_c)
            if g is not None:
                gate.append(g)
            return out

        h, s, carry, x_prev = self.halting.iteration(step, level, h, s, carry, x_prev, parts)
        return h, s, carry, x_prev, (gate[0] if gate else None)

    def memory_step(self, memory: Tensor, chunk: Tensor, mask: Tensor, active: Tensor) -> Tensor:
        """M^{t+1} = the update layers' memory attending to S_L (B, g, d); the old memory where the
        chunk has no real token (``active`` (B,) False)."""
        new_memory = memory
        for update in self.updates:
            new_memory = update(new_memory, chunk, mask)  # memory attends to S_L
        return keep_where(active, new_memory, memory)

    def compile(self, *args, **kwargs) -> None:
        """``train.compile`` / ``bench cost --compile``: compiles ONE depth iteration (block + halting
        update, ``depth_iteration``) and the memory update (``memory_step``), each once, reused by
        every iteration of every chunk of every batch; the chunk driver ``chunk_states`` and its depth
        loop stay eager (TLB.forward's compiled layout: every chunk padded to g). TLB's ``compile``
        would compile the whole chunk step, unrolling max_layers iterations into it."""
        self._iteration_step = torch.compile(self.depth_iteration, *args, **kwargs)
        self._update_step = torch.compile(self.memory_step, *args, **kwargs)
        self._chunk_step = self.chunk_states  # eager driver, TLB.forward's static-shape chunks

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
