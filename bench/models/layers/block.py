"""The Transformer blocks [HALT §3], one shared implementation and the named variants the families use.

``TransformerBlock``, the pre-LayerNorm block every family of [HALT] is built from:

    A = x + Attn(LN x, LN context)       multi-head attention (rotary or none; ``rsa``: RSA's REMs)
    A = Read(A, M)                       ``read=True`` only: the chunk reads the memory slots
                                         (TLB's Alg. 2 line 11 / GUTLB's Alg. 4 line 11, ``memory.py``)
    y = A + FFN(LN A)

The keys and values are LN x (self-attention), LN context (UT attends to its halting mixture), or
[LN cached; LN x] (XL / BRT: the cached previous segment, then the segment itself).
``activation`` (the FFN's) and ``attn_bias`` (biased Q, K, V, O projections) are parameters of the
parts. The named variants change one part or the residual order, each in its own class:

    PostLNBlock     the post-LN block of Vaswani et al. (2017), torch's ``nn.TransformerEncoderLayer``
                    default: A = LN(x + Attn(x, context)), y = LN(A + FFN(A))   (``transformer`` with
                    ``norm_first=False``)
    RelativeBlock   the pre-LN block with Transformer-XL relative attention (Dai et al. 2019): XL,
                    Transformer*, BRT's XL layers
    RecurrentBlock  (``gated.py``) the block UT iterates in depth; GUT's gated block (eqs. 9-11)
                    with ``gate=True``, GUTLB's with the memory read too

Which family builds which: pre-LN ``TransformerBlock``: Transformer (and its RSA hosts), NoPE,
R-Transformer (no positions, ReLU, ``attn_bias`` for its reference options); with ``read=True``: TLB
(and RSA-TLB, TLB-FR).

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
    """The pre-LN block (module docstring): attention sublayer, the memory read if ``read``, FFN sublayer."""

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
        read: bool = False,
        activation: str = "gelu",
        attn_bias: bool = False,
    ):
        super().__init__()
        self.ln_attn = nn.LayerNorm(d_model)
        self.attn = self.make_attention(d_model, n_heads, backend=backend, rsa=rsa, attn_dropout=attn_dropout, attn_bias=attn_bias)
        self.read = MemoryRead(d_model, n_heads, dropout=dropout, attn_dropout=attn_dropout, backend=backend) if read else None
        self.ln_ffn = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.drop = Dropout(dropout)

    @staticmethod
    def make_attention(d_model: int, n_heads: int, *, backend: str, rsa: dict | None, attn_dropout: float, attn_bias: bool) -> nn.Module:
        """The attention sublayer's attention: plain multi-head (rotary or none, RSA's REMs if ``rsa``)."""
        return MultiHeadAttention(d_model, n_heads, backend=backend, rsa=rsa, dropout=attn_dropout, bias=attn_bias)

    def mix(
        self, x: Tensor, *, context: Tensor | None = None, cached: Tensor | None = None, memory: Tensor | None = None, **attn
    ) -> Tensor:
        """A (B, T, d): the attention sublayer, then the memory read if any. ``attn``: the attention's
        own arguments (key_mask, causal, and rope for plain attention or rel, mask_bias for relative)."""
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

    def ffn_residual(self, a: Tensor) -> Tensor:  # y = A + FFN(LN A)
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
        (UT's halting mixture; plain attention), so the cache holds LN(context)'s."""
        if context is None:
            y, cache = self.attn.step(self.ln_attn(x), cache, **attn)
        else:
            y, cache = self.attn.step(self.ln_attn(x), cache, context=self.ln_attn(context), **attn)
        a = x + self.drop(y)
        return (a if self.read is None else self.read(a, memory)), cache


class PostLNBlock(TransformerBlock):
    """The post-LN block (Vaswani et al. 2017): A = LN(x + Attn(x, context)), y = LN(A + FFN(A)); the
    same parts as ``TransformerBlock`` (``ln_attn`` normalises the attention's sum, ``ln_ffn`` the
    FFN's), no memory read."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, **kw):
        super().__init__(d_model, n_heads, d_ff, **kw)
        if self.read is not None:
            raise ValueError("the memory read (TLB) is defined for the pre-LN block only; use TransformerBlock")

    def mix(self, x: Tensor, *, context: Tensor | None = None, cached: Tensor | None = None, memory: Tensor | None = None, **attn):
        ctx = context if cached is None else torch.cat((cached, x), dim=1)  # (B, Tk, d) or None: the raw stream
        return self.ln_attn(x + self.drop(self.attn(x, context=ctx, **attn)))

    def ffn_residual(self, a: Tensor) -> Tensor:  # y = LN(A + FFN(A))
        return self.ln_ffn(a + self.drop(self.ffn(a)))

    def mix_step(self, x: Tensor, cache: dict, *, context: Tensor | None = None, memory: Tensor | None = None, **attn):
        if context is not None:
            raise ValueError("a streaming context is defined for the pre-LN block only")
        y, cache = self.attn.step(x, cache, **attn)
        return self.ln_attn(x + self.drop(y)), cache


class RelativeBlock(TransformerBlock):
    """The pre-LN block with Transformer-XL relative attention (``RelativeAttention``: the logits
    (q+u).k + (q+v).W_R R_{i-j}; ``attn``: rel, mask_bias): XL, Transformer*, BRT's XL layers."""

    @staticmethod
    def make_attention(d_model: int, n_heads: int, *, backend: str, rsa: dict | None, attn_dropout: float, attn_bias: bool) -> nn.Module:
        if attn_bias:
            raise ValueError("the relative attention has no attn_bias option (unbiased projections)")
        return RelativeAttention(d_model, n_heads, backend=backend, rsa=rsa, attn_dropout=attn_dropout)
