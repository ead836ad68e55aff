"""The pre-LayerNorm Transformer block [HALT §3], shared by every family that has one:

    A = x + Attn(LN x, LN context)       attention: plain multi-head (rotary or none), or
                                         Transformer-XL relative (``relative=True``)
    A = Read(A, M)                       TLB only (``read=True``): the chunk reads the memory slots
    y = A + FFN(LN A)

``norm_first=False`` gives the post-LN block of Vaswani et al. (2017) instead (torch's
``nn.TransformerEncoderLayer`` default): A = LN(x + Attn(x, context)), y = LN(A + FFN(A)).

The keys and values are LN x (self-attention), LN context (UT attends to its halting mixture),
or [LN cached; LN x] (XL / BRT: the cached previous segment, then the segment itself).
``RecurrentBlock`` (``gated.py``) reuses ``mix`` and replaces the last residual by a gate.

Streaming (``step``): the same block on t new positions, the attention reading and extending this
layer's cache (``MultiHeadAttention.step`` / ``RelativeAttention.step``) instead of a context;
``mix_step`` is ``mix``'s streaming form (its ``context``: the new positions' keys / values, UT).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .dropout import Dropout
from .feedforward import FeedForward
from .memory import MemoryRead
from .relative import RelativeAttention


class TransformerBlock(nn.Module):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        backend: str = "sdpa",
        rsa: dict | None = None,
        relative: bool = False,
        read: bool = False,
        activation: str = "gelu",
        norm_first: bool = True,
        attn_bias: bool = False,
    ):
        super().__init__()
        if read and not norm_first:
            raise ValueError("the memory read (TLB) is defined for the pre-LN block only; use norm_first=True")
        self.norm_first = norm_first
        self.ln_attn = nn.LayerNorm(d_model)
        Attention = RelativeAttention if relative else MultiHeadAttention
        kw = dict(attn_dropout=attn_dropout) if relative else dict(dropout=attn_dropout, bias=attn_bias)
        self.attn = Attention(d_model, n_heads, backend=backend, rsa=rsa, **kw)
        self.read = MemoryRead(d_model, n_heads, dropout=dropout, attn_dropout=attn_dropout, backend=backend) if read else None
        self.ln_ffn = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.drop = Dropout(dropout)

    def mix(
        self, x: Tensor, *, context: Tensor | None = None, cached: Tensor | None = None, memory: Tensor | None = None, **attn
    ) -> Tensor:
        """A (B, T, d): the attention sublayer, then the memory read if any. ``attn``: the attention's
        own arguments (key_mask, causal, and rope for plain attention or rel, mask_bias for relative)."""
        if not self.norm_first:  # post-LN: attend to the raw stream, normalise the sum
            ctx = context if cached is None else torch.cat((cached, x), dim=1)  # (B, Tk, d) or None
            return self.ln_attn(x + self.drop(self.attn(x, context=ctx, **attn)))
        h = self.ln_attn(x)  # (B, T, d)
        if context is not None:
            ctx = self.ln_attn(context)  # (B, Tk, d)
        elif cached is not None:
            ctx = torch.cat((self.ln_attn(cached), h), dim=1)  # (B, M+T, d)
        else:
            ctx = None
        a = x + self.drop(self.attn(h, context=ctx, **attn))
        return a if self.read is None else self.read(a, memory)

    def forward(self, x: Tensor, **kw) -> Tensor:  # (B, T, d) -> (B, T, d)
        return self.ffn_residual(self.mix(x, **kw))

    def ffn_residual(self, a: Tensor) -> Tensor:  # y = A + FFN(LN A), or post-LN LN(A + FFN(A))
        if not self.norm_first:
            return self.ln_ffn(a + self.drop(self.ffn(a)))
        return a + self.drop(self.ffn(self.ln_ffn(a)))

    def init_cache(self, batch_size: int, device=None) -> dict:
        return self.attn.init_cache(batch_size, device)

    def step(self, x: Tensor, cache: dict, **kw) -> tuple[Tensor, dict]:
        """Streaming: x (B, t, d) the new positions, ``cache`` this layer's attention cache ->
        (y (B, t, d), new cache). ``kw``: ``mix_step``'s."""
        a, cache = self.mix_step(x, cache, **kw)
        return self.ffn_residual(a), cache

    def mix_step(
        self, x: Tensor, cache: dict, *, context: Tensor | None = None, memory: Tensor | None = None, **attn
    ) -> tuple[Tensor, dict]:
        """``mix`` on t new positions: (A (B, t, d), new cache). ``attn``: the attention's step
        arguments (rope / key_scale); ``memory``: the slots the memory read attends to (TLB), if the
        block has one; ``context`` (B, t, d): the new positions' keys / values come from LN(context)
        (UT's halting mixture; plain attention, pre-LN), so the cache holds LN(context)'s."""
        if not self.norm_first:  # post-LN: attend to the raw stream, normalise the sum
            if context is not None:
                raise ValueError("a streaming context is defined for the pre-LN block only")
            y, cache = self.attn.step(x, cache, **attn)
            return self.ln_attn(x + self.drop(y)), cache
        if context is None:
            y, cache = self.attn.step(self.ln_attn(x), cache, **attn)
        else:
            y, cache = self.attn.step(self.ln_attn(x), cache, context=self.ln_attn(context), **attn)
        a = x + self.drop(y)
        return (a if self.read is None else self.read(a, memory)), cache
