"""Temporal Latent Bottleneck (Didolkar et al., 2022) as simplified in [HALT §4.2, Alg. 2]: the
per-chunk stack of L layers, inside the chunk recurrence of ``chunked.py``.

    for l = 1..L:                                       # chunk processing, Alg. 2 lines 8-13
        A_l = C_{l-1} + Attention1_l(C_{l-1})           #   self-attention, xPos restarting per chunk
        A_l = A_l + Attention2_l(A_l -> M^t)            #   read the past (no positions)
        C_l = A_l + FFN_l(A_l)

(Every "+ f(.)" is pre-LN with a residual [HALT §3]; ``bench.models.layers.memory`` holds the read
and update layers.) The chunk self-attention is causal when the task requires it, so a causal TLB
never lets position t see positions > t. RSA-TLB puts REMs in Attention1 (``rsa``), restarting
with every chunk.

The algorithm first: ``reference_stack`` (in ``ChunkRecurrent.reference_forward``'s chunk loop) is
lines 8-13 above written out; ``forward``, the compiled chunk step and ``step`` are tested equal to it
(tests/test_tlb.py).

Layer 1's self-attention sublayer reads no memory: ``first_attention`` runs it for every full
chunk at once (``ChunkRecurrent.chunk_steps``).

Streaming: the stack's state is one KV cache per layer (keys rotated at positions 0..pos-1 of the
chunk, with RSA's REM state), reset at every chunk boundary as the chunk's attention restarts.
"""

from __future__ import annotations

from torch import Tensor, nn

from .base import Adaptation
from .chunked import ChunkRecurrent
from .layers import TransformerBlock
from .layers.positional import RotaryTables
from .layers.rsa import adapt_rsa


class TLB(ChunkRecurrent):
    @classmethod
    def adapt(cls, params: dict, data: dict) -> list[Adaptation]:
        """The REM kinds fitted to n_heads where they exceed it (layers/rsa.py: fit_kinds)."""
        return adapt_rsa(params)

    def __init__(
        self,
        vocab_size: int,
        causal: bool,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        chunk_size: int = 20,
        memory_slots: int = 20,
        update_layers: int = 1,
        attn_backend: str = "sdpa",
        rsa: dict | None = None,
        update_ffn: str = "d_ff",
        classifier: str = "linear",
        final_norm: bool = True,
    ):
        super().__init__(vocab_size, causal, d_model, chunk_size)
        kw = {"dropout": dropout, "attn_dropout": attn_dropout, "backend": attn_backend}
        # chunk-processing layers: Attention1 (self, xPos) -> Attention2 (memory read) -> FFN
        self.layers = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff, rsa=rsa, read=True, **kw) for _ in range(n_layers))
        self.build_memory(
            n_heads, d_ff, memory_slots, update_layers, update_ffn=update_ffn, classifier=classifier, final_norm=final_norm, **kw
        )

    def chunk_stack(self, c0: Tensor, rope, mask: Tensor, memory: Tensor, a1: Tensor | None) -> tuple[Tensor, tuple]:
        """Alg. 2 lines 8-13: C_0 (B, g, d) -> (C_L (B, g, d), no statistics). ``a1``: A_1 = C_0 +
        Attention1_1(C_0) (B, g, d) when ``first_attention`` computed it."""
        c = c0
        key_mask = None if self.causal else mask  # causal + right padding: real tokens never see pads
        layers = iter(self.layers)
        if a1 is not None:  # layer 1 resumes at its memory read (Attention2) and FFN
            first = next(layers)
            c = first.ffn_residual(first.read(a1, memory))
        for layer in layers:
            c = layer(c, memory=memory, rope=rope, key_mask=key_mask, causal=self.causal)
        return c, ()

    def reference_stack(self, c0: Tensor, mask: Tensor, memory: Tensor, rope) -> tuple[Tensor, tuple]:
        """Alg. 2 lines 8-13 written out with the layers' parameters (eval mode; ``reference_forward``)."""
        key_mask = None if self.causal else mask
        c = c0
        for layer in self.layers:  # line 8: for l = 1..L, each "+ f(.)" pre-LN with a residual [HALT §3]
            a = c + layer.attn(layer.ln_attn(c), rope=rope, key_mask=key_mask, causal=self.causal)  # line 9: Attention1_l(C_{l-1})
            a = a + layer.read.attn(layer.read.ln_x(a), context=layer.read.ln_mem(memory))  # line 11: Attention2_l(A_l -> M^t)
            c = a + layer.ffn(layer.ln_ffn(a))  # line 12: C_l = FeedForward_l(A_l)
        return c, ()

    def self_attentions(self) -> list:
        return [layer.attn for layer in self.layers]

    def first_attention(self, chunks: Tensor, tables: RotaryTables, masks: Tensor, n: int) -> Tensor | None:
        """Layer 1's self-attention sublayer reads no memory (A_1 = C_0 + Attention1_1(C_0)): one batched
        call over the first n chunks, rows (t, b), instead of one call per chunk. Chunks C_0 (N, B, g, d),
        their xPos tables (N, B, g, hd) and masks (N, B, g) -> A_1 (n, B, g, d), or None (no layer or
        n = 0). A shorter last chunk keeps its own call (eager: bitwise as chunk by chunk, no padded keys)."""
        if not self.layers or n == 0:
            return None
        _, B, g, d = chunks.shape
        layer = self.layers[0]
        x = chunks[:n].reshape(n * B, g, d)  # (n B, g, d)
        rope = RotaryTables(*(None if v is None else v[:n].reshape(n * B, 1, g, v.shape[-1]) for v in tables))
        key_mask = None if self.causal else masks[:n].reshape(n * B, g)
        a = layer.attn(layer.ln_attn(x), rope=rope, key_mask=key_mask, causal=self.causal)  # pre-LN, as block.mix
        return (x + layer.drop(a)).view(n, B, g, d)

    def step_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """The layers' and the memory updates' parameters, less layer 1's self-attention sublayer
        (compiled, every chunk is g long, so ``first_attention`` runs it outside the step)."""
        first_sublayer = (self.layers[0].attn, self.layers[0].ln_attn) if self.layers else ()
        first = {id(p) for m in first_sublayer for p in m.parameters()}
        named = self.named_parameters()
        return [(n, p) for n, p in named if n.startswith(("layers.", "updates.")) and id(p) not in first]

    # ---- streaming ----
    def stack_init_cache(self, batch_size: int, device=None) -> list:
        """An empty KV cache per layer (RSA: a zero REM state, the REM restarting in every chunk)."""
        return [layer.init_cache(batch_size, device) for layer in self.layers]

    def stack_step(self, x: Tensor, cache: list, memory: Tensor, rope, key_scale: Tensor | None) -> tuple[Tensor, list]:
        caches = []
        for layer, layer_cache in zip(self.layers, cache):
            x, layer_cache = layer.step(x, layer_cache, memory=memory, rope=rope, key_scale=key_scale)
            caches.append(layer_cache)
        return x, caches
