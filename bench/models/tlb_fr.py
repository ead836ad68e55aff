"""TLB with fixed recurrence, TLB-FR [HALT §6.6]: Alg. 2 with the number of chunks k fixed (5)
instead of the chunk size g, so chunks grow with the input.

    k = 5
    for each sequence b (its own real length n_b):
        g_b = ceil(n_b / k)                                 # its own chunk length
        chunks_b = H_0[b] cut into k slices of g_b tokens   # = torch.chunk(H_0[b], k), trailing ones may be empty
    M^0 = learned slots
    for t = 0..k-1:                                         # the chunk t of every sequence, side by side
        C_t = [chunks_b[t] right-padded to max_b g_b]       # (B, G) with its mask
        h_t, M^{t+1} = forward_chunk(C_t, mask_t, M^t)      # [HALT Alg. 2]'s chunk step, unchanged
    per-token output: h_t at each token's own (t, j);  sequence summary: mean over slots of LN(M^final)

Each sequence is chunked by its own length, never by its batch's: a sequence alone and the same
sequence batched with a longer one give the same outputs (the chunk step masks the padding within
a chunk, and an all-padding chunk keeps the memory, as in TLB). Slicing by the batch's longest
sequence instead (torch.chunk over the padded batch) made a sequence's outputs depend on what else
was in its batch, and evaluation depend on the eval batch size.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import BackboneOutput
from .layers import rsa_gate_stats
from .layers.attention import stacked_qkv_weights
from .tlb import TLB


class TLBFixedRecurrence(TLB):
    """TLB-FR [HALT §6.6]: k chunks (5) per sequence, each ceil(n_b / k) tokens long."""

    supports_streaming = False  # a token's chunk depends on the whole sequence's length
    host_reads = "the chunk length ceil(n / 5) follows the longest sequence's length n"

    def __init__(self, vocab_size: int, causal: bool, n_chunks: int = 5, **kwargs):
        if n_chunks < 1:
            raise ValueError(f"tlb-fr needs n_chunks >= 1, got {n_chunks}")
        super().__init__(vocab_size, causal, **kwargs)  # chunk_size (if given) is TLB's; unused here
        self.n_chunks = n_chunks  # k

    def chunk_index(self, lengths: Tensor, T: int) -> tuple[Tensor, Tensor, int]:
        """Per sequence b and chunk t, the positions of its j-th token: (B, k, G) long, valid (B, k, G)
        bool, and G = max_b g_b, with g_b = ceil(n_b / k)."""
        k = self.n_chunks
        g = torch.div(lengths + k - 1, k, rounding_mode="floor")  # (B,) ceil(n_b / k)
        G = max(int(g.max()), 1) if lengths.numel() else 1  # one host sync, as TLB-FR always had
        t = torch.arange(k, device=lengths.device).view(1, k, 1)
        j = torch.arange(G, device=lengths.device).view(1, 1, G)
        pos = t * g.view(-1, 1, 1) + j  # (B, k, G)
        valid = (j < g.view(-1, 1, 1)) & (pos < lengths.view(-1, 1, 1))
        return pos.clamp(max=T - 1), valid, G

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        B, T = tokens.shape
        mask = self.full_mask(tokens, mask)  # (B, T), right padding
        lengths = mask.long().sum(-1)  # (B,) n_b
        pos, valid, G = self.chunk_index(lengths, T)  # (B, k, G) each
        memory, outs = self.initial_memory(B), []
        with stacked_qkv_weights(self.self_attentions()):  # [W_q; W_k; W_v] once per forward
            for t in range(self.n_chunks):
                chunk = torch.where(valid[:, t], tokens.gather(1, pos[:, t]), torch.zeros_like(pos[:, t]))  # (B, G)
                h, memory = self.forward_chunk(chunk, valid[:, t], memory)  # (B, G, d), (B, S, d)
                outs.append(h)
        stacked = torch.cat(outs, dim=1)  # (B, k*G, d): chunk t's j-th state at t*G + j
        # each real token p of sequence b sits at (t, j) = (p // g_b, p % g_b) of its own chunking
        g = torch.div(lengths + self.n_chunks - 1, self.n_chunks, rounding_mode="floor").clamp_min(1).view(-1, 1)
        p = torch.arange(T, device=tokens.device).view(1, T)
        where = (p // g) * G + p % g  # (B, T)
        where = torch.where(mask, where, torch.zeros_like(where)).clamp(max=stacked.shape[1] - 1)
        hidden = stacked.gather(1, where.unsqueeze(-1).expand(-1, -1, stacked.shape[-1]))  # (B, T, d)
        hidden = hidden.masked_fill(~mask.unsqueeze(-1), 0.0)  # padding positions: zeros
        pooled = self.summary(memory)  # (B, d) LN(final memory), mean over slots, through ``classifier``
        stats = {"n_chunks": float(self.n_chunks), **rsa_gate_stats(self)}
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden), stats=stats, pooled=pooled)

    def reference_forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        """[HALT §6.6] as written, eval mode: each sequence alone, its real tokens cut by torch.chunk(H_0, k)
        (chunks of ceil(n_b / k) tokens), through Alg. 2 (``ChunkRecurrent.reference_forward`` with
        g = ceil(n_b / k)); padding positions zero. ``forward`` is tested equal to it (tests/test_tlb.py)."""
        mask = self.full_mask(tokens, mask)
        B, T = tokens.shape
        hidden, pooled = self.memory0.new_zeros(B, T, self.d_model), []
        for b in range(B):
            n = int(mask[b].sum())
            if n == 0:  # no chunk with a real token: M^0
                pooled.append(self.summary(self.initial_memory(1))[0])
                continue
            out = super().reference_forward(tokens[b : b + 1, :n], chunk_size=-(-n // self.n_chunks))
            hidden[b, :n] = out.hidden[0]
            pooled.append(out.pooled[0])
        return BackboneOutput(
            hidden=hidden, aux_loss=self.zero_aux(hidden), stats={"n_chunks": float(self.n_chunks)}, pooled=torch.stack(pooled)
        )

    def streaming_refusal(self) -> str:
        return "TLBFixedRecurrence cannot stream: its chunk length ceil(n / 5) needs the whole sequence's length n"
