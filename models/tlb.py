"""Temporal Latent Bottleneck (Didolkar et al., 2022) as simplified in [HALT §4.2, Alg. 2].

    chunks = split(H_0) into chunks of g tokens          (TLB-FR: into k = 5 chunks [HALT §6.6])
    M^0 = learned slots (S, d)
    for t, C_0 in enumerate(chunks):
        for l = 1..L:                                       # chunk processing
            A_l = C_{l-1} + Attention1_l(C_{l-1})           #   self-attention, xPos restarting per chunk
            A_l = A_l + Attention2_l(A_l -> M^t)            #   read the past (no positions)
            C_l = A_l + FFN_l(A_l)
        M^t_0 = M^t
        for l = 1..U:                                       # recurrent memory update
            M^t_l = M^t_{l-1} + Attention3_l(M^t_{l-1} -> C_L);  M^t_l += FFN_l(M^t_l)
        M^{t+1} = M^t_U
    per-token output: LN(C_L) of each chunk;  sequence summary: mean over slots of LN(M^final)

(Every "+ f(.)" is pre-LN with a residual [HALT §3]; ``models.layers.memory`` holds the read
and update layers.) Tokens of chunk t read only M^t, built from chunks < t, and the chunk
self-attention is causal when the task requires it, so a causal TLB never lets position t see
positions > t. A chunk made only of padding keeps the old memory (as in the reference code).

Chunking: fixed-size slices of g tokens, so chunk boundaries do not depend on the padded
length (Alg. 2's torch.chunk(H, ceil(n/g)) gives the same chunks when g divides n). TLB-FR
slices into ceil(T/k)-token chunks, i.e. exactly torch.chunk(H, k); its boundaries depend on
the padded length T of the batch (never on token content).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .base import Backbone, BackboneOutput
from .layers import Rotary, TransformerBlock, positions_from_mask, rsa_gate_stats
from .layers.dropout import Dropout
from .layers.positional import RotaryTables
from .layers.memory import MemoryUpdate, init_slots, keep_where


class TLB(Backbone):
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
        n_chunks: int = 0,
        memory_slots: int = 20,
        update_layers: int = 1,
        attn_backend: str = "sdpa",
        rsa: dict | None = None,
    ):
        super().__init__(vocab_size, causal, d_model)
        if chunk_size < 1 and n_chunks < 1:
            raise ValueError("TLB needs chunk_size >= 1 (or n_chunks >= 1 for TLB-FR)")
        self.chunk_size, self.n_chunks = chunk_size, n_chunks
        kw = dict(dropout=dropout, attn_dropout=attn_dropout, backend=attn_backend)
        self.embed = nn.Embedding(vocab_size, d_model)
        # chunk-processing layers: Attention1 (self, xPos) -> Attention2 (memory read) -> FFN
        self.layers = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff, rsa=rsa, read=True, **kw) for _ in range(n_layers))
        self.updates = nn.ModuleList(MemoryUpdate(d_model, n_heads, d_ff, **kw) for _ in range(update_layers))
        self.memory0 = init_slots(memory_slots, d_model)  # M^0
        self.drop = Dropout(dropout)
        self.ln_out = nn.LayerNorm(d_model)
        self.ln_mem = nn.LayerNorm(d_model)
        self.rotary = Rotary(d_model // n_heads, use_xpos=True)  # weightless: one for every layer

    def chunk_length(self, T: int) -> int:
        """g for TLB; ceil(T / k) for TLB-FR (n_chunks = k > 0 takes precedence)."""
        return math.ceil(T / self.n_chunks) if self.n_chunks > 0 else self.chunk_size

    def initial_memory(self, batch: int) -> Tensor:
        return self.memory0.expand(batch, -1, -1)  # (B, S, d)

    def forward_chunk(self, tokens: Tensor, mask: Tensor, memory: Tensor) -> tuple[Tensor, Tensor]:
        """One chunk (B, g) and M^t (B, S, d) -> (per-token states (B, g, d), M^{t+1})."""
        c0 = self.drop(self.embed(tokens))  # C_0 (B, g, d)
        rope = self.rotary.tables(positions_from_mask(mask))  # xPos restarts in every chunk; shared by the layers
        c, new_memory = self.chunk_states(c0, rope, mask, mask.any(-1), memory)
        return self.ln_out(c), new_memory

    def chunk_states(
        self, c0: Tensor, rope, mask: Tensor, active: Tensor, memory: Tensor, a1: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Alg. 2's recurrent part of one chunk: C_0 (B, g, d), its xPos tables, mask (B, g), whether each
        sequence has a real token in it (B,) and M^t (B, S, d) -> (C_L (B, g, d) before ``ln_out``, M^{t+1}).
        ``a1``: A_1 = C_0 + Attention1_1(C_0) (B, g, d) when ``forward`` computed it for every chunk at once."""
        c = c0
        key_mask = None if self.causal else mask  # causal + right padding: real tokens never see pads
        layers = iter(self.layers)
        if a1 is not None:  # layer 1 resumes at its memory read (Attention2) and FFN
            first = next(layers)
            c = first.ffn_residual(first.read(a1, memory))
        for layer in layers:
            c = layer(c, memory=memory, rope=rope, key_mask=key_mask, causal=self.causal)
        new_memory = memory
        for update in self.updates:
            new_memory = update(new_memory, c, mask)
        return c, keep_where(active, new_memory, memory)

    def first_attention(self, c0: Tensor, tables: RotaryTables, mask: Tensor, g: int) -> Tensor | None:
        """Layer 1's self-attention sublayer reads no memory (Alg. 2: A_1 = C_0 + Attention1_1(C_0)):
        one batched call over every full chunk, rows (b, t), instead of one call per chunk. C_0 (B, T, d),
        the chunks' xPos tables (B, n, g, hd), mask (B, T) -> A_1 (B, T // g, g, d), or None (no layers
        (GUTLB) or no full chunk). The last, shorter chunk keeps its own call (bitwise: no padded keys)."""
        B, T, d = c0.shape
        n = T // g
        if not self.layers or n == 0:
            return None
        layer = self.layers[0]
        x = c0[:, : n * g].reshape(B * n, g, d)  # (B n, g, d)
        rope = RotaryTables(*(None if v is None else v[:, :n].reshape(B * n, 1, g, v.shape[-1]) for v in tables))
        key_mask = None if self.causal else mask[:, : n * g].reshape(B * n, g)
        a = layer.attn(layer.ln_attn(x), rope=rope, key_mask=key_mask, causal=self.causal)  # pre-LN (TransformerBlock.mix)
        return (x + layer.drop(a)).view(B, n, g, d)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        B, T = tokens.shape
        # TLB-FR's chunk length follows the longest real sequence (trailing padding never changes
        # the chunking): a data-dependent shape, so it reads the lengths (one host sync). TLB's doesn't.
        longest = T if (self.n_chunks <= 0 or mask is None) else int(mask.sum(-1).max())
        mask = self.full_mask(tokens, mask)  # (B, T)
        g = self.chunk_length(longest)
        # Everything that does not read the memory, for every chunk at once (one call each instead of
        # one per chunk): C_0 = Dropout(Embed(tokens)), the chunk positions (restarting per chunk), their
        # xPos tables, and which sequences have a real token in each chunk. The last chunk is padded to g.
        n = -(-T // g)  # number of chunks, ceil(T / g)
        pad = n * g - T
        c0 = self.drop(self.embed(tokens))  # (B, T, d)
        if pad:
            mask_g = torch.cat((mask, mask.new_zeros(B, pad)), dim=1)  # (B, n*g)
        else:
            mask_g = mask
        pos = positions_from_mask(mask_g.view(B, n, g))  # (B, n, g): 0.. within each chunk
        center = pos.amax(dim=(0, 2), keepdim=True) / 2  # (1, n, 1): each chunk's own xPos center, max/2
        tables = self.rotary.tables(pos, center)  # cos / sin / scale (B, n, g, hd)
        active = mask_g.view(B, n, g).any(-1)  # (B, n)
        a1 = self.first_attention(c0, tables, mask, g)  # (B, T // g, g, d) or None
        memory, outs = self.initial_memory(B), []
        for t, s in enumerate(range(0, T, g)):
            w = min(g, T - s)  # the last chunk may be shorter
            rope = RotaryTables(*(None if x is None else x[:, t, :w].unsqueeze(1) for x in tables))  # (B, 1, w, hd)
            a1_t = a1[:, t] if a1 is not None and t < a1.shape[1] else None
            h, memory = self.chunk_states(c0[:, s : s + w], rope, mask[:, s : s + w], active[:, t], memory, a1_t)
            outs.append(h)
        hidden = self.ln_out(torch.cat(outs, dim=1))  # (B, T, d)
        pooled = self.ln_mem(memory).mean(dim=1)  # (B, d) LN(final memory), mean over slots
        stats = {"n_chunks": float(len(outs)), **rsa_gate_stats(self)}
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden), stats=stats, pooled=pooled)
