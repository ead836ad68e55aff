"""Gated Universal Transformer Latent Bottleneck (GUTLB) [HALT §5.2, Alg. 4].

The chunk recurrence of TLB (``chunked.py``, Alg. 2) whose per-chunk stack is ONE shared gated block
iterated with GUT's global, transition-aware halting (``depth.py``):

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

Within a chunk, LN(M^t)'s keys and values are projected once for every iteration. ``halt`` mode
freezes halted units on the device and asks once per chunk whether all have halted
(``DepthHalting(exit="freeze")``: one host sync per chunk, upperbound's outputs).

The algorithm first: ``reference_stack`` (in ``ChunkRecurrent.reference_forward``'s chunk loop) is
Alg. 4 lines 8-20 as printed, the depth loop of ``depth.py``'s ``reference_depth`` on each chunk;
``forward`` and its compiled form are tested equal to it (tests/test_universal.py).

Streaming (causal): the stack's state is the depth loop's (one block cache per iteration and the
prefix sums of the causal halting units), restarting with every chunk.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .chunked import ChunkRecurrent
from .depth import BlockIteration, DepthRecurrent
from .layers.gated import RecurrentBlock, gate_parts, mean_over_iterations
from .layers.halting import DepthHalting


class GUTLB(DepthRecurrent, ChunkRecurrent):
    recurrence = "depth"  # a depth recurrence inside each chunk (ChunkRecurrent's memory between chunks)
    host_reads = "halting (mode halt): a chunk's depth loop ends once every position has halted"
    #: model.faithful=reference: the chunk models' options and the code's halting rules (per chunk)
    reference_options = {**ChunkRecurrent.reference_options, "halt_rules": "reference"}

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
        halt_rules: str = "paper",
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        chunk_size: int = 20,
        memory_slots: int = 20,
        update_layers: int = 1,
        attn_backend: str = "sdpa",
        update_ffn: str = "d_ff",
        classifier: str = "linear",
        final_norm: bool = True,
    ):
        super().__init__(vocab_size, causal, d_model, chunk_size)
        kw = {"dropout": dropout, "attn_dropout": attn_dropout, "backend": attn_backend}
        self.build_memory(
            n_heads, d_ff, memory_slots, update_layers, update_ffn=update_ffn, classifier=classifier, final_norm=final_norm, **kw
        )
        self.block = RecurrentBlock(d_model, n_heads, d_ff, gate=gate, read=True, **kw)  # xPos: self.rotary's
        self.halting = DepthHalting(
            d_model,
            max_layers,
            global_halt=global_halt,
            transition=transition,
            causal=causal,
            mode=mode,
            threshold=threshold,
            bias_init=halt_bias_init,
            exit="freeze",
            rules=halt_rules,
        )
        self.attend_to_mixture = not global_halt  # token-level ablation follows Alg. 1
        self.beta = beta

    def chunk_stack(self, c0: Tensor, rope, mask: Tensor, memory: Tensor, a1: Tensor | None) -> tuple[Tensor, tuple]:
        """Alg. 4's inner loop on one chunk: C_0 (B, g, d) -> (S_L (B, g, d), the chunk's statistics:
        ponder (B,), depth (B,), and per iteration the mean gate and whether the chunk has a real token)."""
        kv = self.block.read.keys_values(memory)  # LN(M^t)'s keys / values, read by every iteration
        parts = gate_parts(mask, c0.dtype, c0.shape[-1])  # gate_mean's mask-only parts, once per chunk
        key_mask = None if self.causal else mask
        shared = BlockIteration(self.block, self.attend_to_mixture, self.causal, rope, key_mask, kv, mask, parts)
        res = self.iterate_block(c0, mask, shared)
        return res.output, (res.ponder, res.depth, tuple(shared.gates))

    def reference_stack(self, c0: Tensor, mask: Tensor, memory: Tensor, rope) -> tuple[Tensor, tuple]:
        """Alg. 4 lines 8-20 as printed (eval mode; ``ChunkRecurrent.reference_forward``): the depth loop
        of ``depth.py``'s ``reference_depth`` on the chunk, its block (lines 10-12: Attention1, the
        memory read Attention2, GatedFeedForward) written out in ``reference_block``."""
        key_mask = None if self.causal else mask

        def block(c: Tensor, s: Tensor) -> Tensor:  # lines 10-12: C_l from C_{l-1} (and S_{l-1}, token-level ablation)
            return self.reference_block(c, s, rope=rope, key_mask=key_mask, memory=memory)

        s_last, ponder, depth = self.reference_depth(c0, mask, block)  # S_L of the chunk, line 16
        return s_last, (ponder, depth, ())

    def self_attentions(self) -> list:
        return [self.block.attn]

    def chunk_statistics(self, stats: list, active: Tensor) -> tuple[dict, Tensor | None]:
        """halt_depth (mean iterations per chunk with a real token), total_depth, gate_mean (B,) and the
        ACT loss beta * mean ponder."""
        ponder, depth = (torch.stack(x, 1) for x in list(zip(*stats))[:2])  # (B, n_chunks) each
        real_f = torch.stack(active.unbind(0), 1).to(ponder.dtype)  # (B, n_chunks)
        gates = [it for chunk in stats for it in chunk[2]]  # (mean gate, any real token) per iteration
        n_real = real_f.sum(1).clamp_min(1.0)
        out = {
            "halt_depth": ((depth * real_f).sum(1) / n_real).detach(),  # mean iterations per chunk
            "total_depth": (depth * real_f).sum(1).detach(),
        }  # iterations over all chunks
        if gates:
            out["gate_mean"] = mean_over_iterations(gates)
        aux = self.beta * ((ponder * real_f).sum(1) / n_real).mean() if self.beta else None
        return out, aux

    def compile(self, *args, **kwargs) -> None:
        """``train.compile`` / ``bench cost --compile``: compiles ONE depth iteration (block + halting
        update) and the memory update, each once, reused by every iteration of every chunk of every
        batch; the chunk step and its depth loop stay eager (``ChunkRecurrent.chunk_steps``' compiled
        layout: every chunk padded to g). Compiling the whole chunk step would unroll max_layers
        iterations into it."""
        self.compile_iteration(*args, **kwargs)
        self._update_step = torch.compile(self.update_memory, *args, **kwargs)
        self._chunk_step = self.chunk_step  # eager driver, static-shape chunks

    # ---- streaming ----
    def stack_init_cache(self, batch_size: int, device=None) -> dict:
        return self.init_depth_state(batch_size, device)

    def stack_step(self, x: Tensor, cache: dict, memory: Tensor, rope, key_scale: Tensor | None) -> tuple[Tensor, dict]:
        res, cache = self.stream_block(x, cache, rope=rope, key_scale=key_scale, memory=memory)
        return res.output, cache
