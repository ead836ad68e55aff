"""Memory layers shared by the chunk-recurrent models (TLB, GUTLB) [HALT Alg. 2 and 4].

A memory is a small set of S slot vectors ``M (B, S, d)`` carried from chunk to chunk. Two
operations touch it, and both are position-free (xPos is for self-attention only [SPEC §1]):

* ``MemoryRead``   the chunk reads the memory: ``A = A + Attention2(LN(A), LN(M), LN(M))``
                   (Alg. 2 "Integrating past memory"). Queries are chunk tokens, keys and
                   values are memory slots. The memory must come from *earlier* chunks only;
                   that is what keeps a causal model causal.
* ``MemoryUpdate`` one memory-update layer: the memory attends to the chunk's last states,
                   then an FFN (Alg. 2 "Recurrent memory update", ``Attention3`` + FFN):
                   ``M = M + Attention3(LN(M), LN(C_L), LN(C_L));  M = M + FFN(LN(M))``.

Both are pre-LN residual layers like every block here [HALT §3]. ``keep_where`` implements the
padding rule: a sequence whose chunk holds no real token keeps its old memory.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .dropout import Dropout
from .feedforward import FeedForward


class MemoryRead(nn.Module):
    """Cross-attention from a chunk to the memory slots, pre-LN with a residual.

    ``forward(x (B, T, d), memory (B, S, d), memory_mask (B, S) | None) -> (B, T, d)``.
    Memory keys carry no positions, so the read is permutation-invariant over slots.
    """

    def __init__(self, d_model: int, n_heads: int, *, dropout: float = 0.0, attn_dropout: float = 0.0, backend: str = "sdpa"):
        super().__init__()
        self.ln_x = nn.LayerNorm(d_model)
        self.ln_mem = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, backend=backend, dropout=attn_dropout)
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor | tuple[Tensor, Tensor], memory_mask: Tensor | None = None) -> Tensor:
        """``memory``: the slots (B, S, d), or their keys and values from ``keys_values`` (GUTLB reads
        one chunk's memory at every iteration: LN and projections once per chunk)."""
        kv = memory if isinstance(memory, tuple) else self.keys_values(memory)
        read = self.attn(self.ln_x(x), kv=kv, key_mask=memory_mask)  # (B, T, d)
        return x + self.drop(read)

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """M (B, S, d) -> the read's keys and values (B, H, S, hd): projections of LN(M)."""
        return self.attn.keys_values(self.ln_mem(memory))


class MemoryUpdate(nn.Module):
    """One memory-update layer: memory slots attend to the chunk states, then an FFN.

    ``forward(memory (B, S, d), chunk (B, T, d), chunk_mask (B, T) | None) -> (B, S, d)``.
    ``chunk_mask`` hides padded chunk positions from the memory. A chunk with no real token
    at all yields garbage here; callers discard it with ``keep_where``.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.0, attn_dropout: float = 0.0, backend: str = "sdpa"):
        super().__init__()
        self.ln_mem = nn.LayerNorm(d_model)
        self.ln_chunk = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, backend=backend, dropout=attn_dropout)
        self.ln_ffn = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.drop = Dropout(dropout)

    def forward(self, memory: Tensor, chunk: Tensor, chunk_mask: Tensor | None = None) -> Tensor:
        m = memory + self.drop(self.attn(self.ln_mem(memory), context=self.ln_chunk(chunk), key_mask=chunk_mask))
        return m + self.drop(self.ffn(self.ln_ffn(m)))  # (B, S, d)


def keep_where(active: Tensor, new: Tensor, old: Tensor) -> Tensor:
    """Per-sequence select: ``new`` where ``active[b]`` is True, else ``old`` (any trailing dims).

    Used so that a chunk/block made only of padding leaves the recurrent state untouched.
    """
    return torch.where(active.view(-1, *([1] * (new.dim() - 1))), new, old)


def init_slots(n_slots: int, d_model: int) -> nn.Parameter:
    """Learned initial memory / state slots. Small random values, not zeros: identical slots
    would receive identical updates forever (same query, same keys), collapsing S slots to one."""
    return nn.Parameter(torch.randn(n_slots, d_model) * 0.02)
