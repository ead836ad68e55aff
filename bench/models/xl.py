"""Transformer-XL (Dai et al., 2019): segment recurrence with relative positional attention.

The sequence is cut into segments of ``segment_len`` tokens, processed in order. Layer l of
segment tau attends to [memory; current], where the memory is the cached input of layer l
over the previous ``mem_len`` positions, with the gradient stopped (Dai et al. eq. in §3.2):

    h~^{l-1}_tau = [SG(m^{l-1}_{tau-1}) ; h^{l-1}_tau]                       (B, M+T, d)
    q = h^{l-1}_tau W_q,   k = h~ W_k,   v = h~ W_v
    A_ij = q_i.k_j  +  q_i.W_R R_{i-j}  +  u.k_j  +  v.W_R R_{i-j}           (§3.3, terms a-d)
         = (q_i + u).k_j + (q_i + v).r_{i-j}
    h^l_tau = block(h^{l-1}_tau)  (pre-LN here [HALT §3]: x + Attn(LN x); x + FFN(LN x))

R is the sinusoid of the relative distance; the position term is computed for every distance
once per query row and aligned with the "rel-shift" trick (§3.3 / App. B) instead of building
a (T, M+T, d) tensor (``bench/models/layers/relative.py``). It enters ``attend`` as an additive bias,
so any backend serves. R and each layer's projection W_R R are built once per forward, the
attention mask once per segment; every layer and segment shares them.

Streaming (causal): each layer caches the keys and values of its context, [memory; segment
prefix] (a memory position's key is its cached layer input's key, so caching keys and values is
caching the memory); when a segment completes, every cache keeps its last ``mem_len`` positions,
which is the next segment's memory. Tokens fed in any pieces are cut at the forward's segment
boundaries, so every position sees exactly the keys it sees in ``forward``. State: {"pos": position
within the current segment, "layers": [{"k", "v"} (B, H, <= mem_len + segment_len, hd), and "r" the
projected relative positions of the distances seen (H, <= mem_len + segment_len, hd)]}, bounded.

Causal (LM tasks): queries see memory and the current segment up to themselves; position t
never depends on positions > t. Non-causal (classification): attention is bidirectional
*within* the segment and also reads the memory of earlier segments, but never later segments;
so the model is not causal then, and early tokens see less context than late ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .base import Adaptation, Backbone, BackboneOutput, StreamingUnsupported
from .layers import RelativeBlock, additive_mask, project_relative, rsa_gate_stats
from .layers.relative import keep_last
from .layers.rsa import adapt_rsa


@dataclass
class SegmentMemory:
    """What one segment leaves to the next: per-layer cached inputs and their padding mask."""

    mems: list[Tensor]  # n_layers x (B, M, d), detached
    mask: Tensor  # (B, M) True = real token

    @staticmethod
    def extend(prev: SegmentMemory | None, layer_inputs: list[Tensor], mask: Tensor, mem_len: int) -> SegmentMemory:
        """Append this segment's layer inputs, keep the last ``mem_len`` positions, stop gradients."""
        if prev is not None:
            layer_inputs = [torch.cat((m, h), dim=1) for m, h in zip(prev.mems, layer_inputs)]
            mask = torch.cat((prev.mask, mask), dim=1)
        keep = slice(max(mask.shape[1] - mem_len, 0), None)
        return SegmentMemory([h[:, keep].detach() for h in layer_inputs], mask[:, keep])


def context_key_mask(causal: bool, memory: SegmentMemory | None, mask: Tensor) -> Tensor | None:
    """Key mask over [memory; segment]. Causal + right padding: real queries never see pads.
    Bidirectional: always the mask (checking whether it hides anything would cost a host sync)."""
    if causal:
        return None
    return mask if memory is None else torch.cat((memory.mask, mask), dim=1)  # (B, M+T)


def segment_mask_bias(causal: bool, memory: SegmentMemory | None, mask: Tensor) -> tuple[Tensor | None, Tensor | None]:
    """(key mask (B, M+T), additive attention mask (B|1, 1, T, M+T)) of one segment, for every layer."""
    key_mask = context_key_mask(causal, memory, mask)
    B, T = mask.shape
    n_keys = T + (0 if memory is None else memory.mask.shape[1])
    return key_mask, additive_mask(B, T, n_keys, causal, key_mask, mask.device)


class TransformerXL(Backbone):
    supports_streaming = True

    @property
    def recurrence(self) -> str:
        """Chunk recurrence: the memory carries the past into the next segment; without one (``mem_len``
        0: Transformer*, one segment as long as its inputs) nothing recurs ("none")."""
        return "chunk" if self.mem_len > 0 else "none"

    @property
    def bounded_state(self) -> bool:
        """The memory and at most one segment's caches; without a memory (Transformer*) the one
        segment's caches grow with the stream."""
        return self.mem_len > 0

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
        segment_len: int = 64,
        mem_len: int = 64,
        attn_backend: str = "sdpa",
        rsa: dict | None = None,
    ):
        super().__init__(vocab_size, causal, d_model)
        if segment_len < 1 or mem_len < 0:
            raise ValueError(f"segment_len must be >= 1 and mem_len >= 0, got {segment_len}, {mem_len}")
        self.segment_len, self.mem_len = segment_len, mem_len
        self.embed = nn.Embedding(vocab_size, d_model)
        kw = dict(dropout=dropout, attn_dropout=attn_dropout, backend=attn_backend, rsa=rsa)
        self.layers = nn.ModuleList(RelativeBlock(d_model, n_heads, d_ff, **kw) for _ in range(n_layers))
        self.drop = nn.Dropout(dropout)
        self.ln_out = nn.LayerNorm(d_model)

    def relative_positions(self, max_dist: int, device) -> list[Tensor]:
        """Every layer's W_R R for the distances -max_dist..max_dist: (H, 2 max_dist + 1, hd) each."""
        return project_relative([layer.attn for layer in self.layers], max_dist, device)

    def forward_segment(
        self, tokens: Tensor, mask: Tensor, memory: SegmentMemory | None = None, rel: list[Tensor] | None = None
    ) -> tuple[Tensor, SegmentMemory | None]:
        """One segment (B, T) -> (hidden (B, T, d), memory for the next segment). ``rel``: the
        layers' relative positions (``relative_positions``), built here when None."""
        x = self.drop(self.embed(tokens))  # (B, T, d)
        key_mask, mask_bias = segment_mask_bias(self.causal, memory, mask)
        if rel is None:
            rel = self.relative_positions(tokens.shape[1] + (0 if memory is None else memory.mask.shape[1]) - 1, x.device)
        inputs = []
        for l, layer in enumerate(self.layers):
            inputs.append(x)
            x = layer(
                x,
                cached=None if memory is None else memory.mems[l],
                causal=self.causal,
                key_mask=key_mask,
                rel=rel[l],
                mask_bias=mask_bias,
            )
        new_memory = SegmentMemory.extend(memory, inputs, mask, self.mem_len) if self.mem_len > 0 else None
        return self.ln_out(x), new_memory

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        mask = self.full_mask(tokens, mask)  # (B, T)
        S = self.segment_len
        rel = self.relative_positions(min(S, tokens.shape[1]) + self.mem_len - 1, tokens.device)  # once per forward
        memory, outs = None, []
        for s in range(0, tokens.shape[1], S):
            h, memory = self.forward_segment(tokens[:, s : s + S], mask[:, s : s + S], memory, rel)
            outs.append(h)
        hidden = torch.cat(outs, dim=1)  # (B, T, d)
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden), stats=rsa_gate_stats(self))

    # ---- streaming -----------------------------------------------------------------------
    def init_state(self, batch_size: int, device=None) -> dict:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        return {"pos": 0, "layers": [layer.init_cache(batch_size, device) for layer in self.layers]}

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        S, pos, caches, outs = self.segment_len, state["pos"], state["layers"], []
        start = 0
        while start < tokens.shape[1]:
            piece = tokens[:, start : start + S - pos]  # never crosses a segment boundary
            x = self.drop(self.embed(piece))  # (B, t, d)
            new_caches = []
            for layer, cache in zip(self.layers, caches):
                x, cache = layer.step(x, cache)
                new_caches.append(cache)
            caches, pos, start = new_caches, pos + piece.shape[1], start + piece.shape[1]
            outs.append(self.ln_out(x))
            if pos == S:  # segment complete: its last mem_len layer inputs become the memory
                caches = [keep_last(cache, self.mem_len) for cache in caches]
                pos = 0
        hidden = torch.cat(outs, dim=1)  # (B, t, d)
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden), stats=rsa_gate_stats(self)), {"pos": pos, "layers": caches}
