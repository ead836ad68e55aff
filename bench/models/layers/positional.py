"""Positional encodings: xPos / RoPE (rotary, applied to q and k) and absolute ones
(sinusoidal, learned) added to the token embeddings. ``none`` gives a NoPE model.

Positions come from the padding mask, ``cumsum(mask) - 1``, so left padding and packed
chunks (TLB restarts positions per chunk) are handled by the caller passing positions.

Every table here is built on the positions' device from shapes and device tensors only (no
``.item()``, no CPU-built table copied over): a model builds its rotary tables once per
forward (``Rotary.tables``) and every layer applies them (``apply_rotary``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from .dropout import Dropout

POSITIONAL_ENCODINGS = ("xpos", "rope", "sinusoidal", "learned", "none")
ROTARY = ("xpos", "rope")


def positions_from_mask(mask: Tensor) -> Tensor:
    """(B, T) bool -> (B, T) long positions 0..n-1 over the real tokens."""
    return (mask.long().cumsum(-1) - 1).clamp_min(0)


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryTables(NamedTuple):
    """cos, sin and the xPos scale (None for RoPE) of one set of positions, each (B, 1, T, hd)
    for positions (B, T) or (T, hd) for positions (T,): broadcastable to q and k (B, H, T, hd)."""

    cos: Tensor
    sin: Tensor
    scale: Tensor | None

    def rows(self, rows: Tensor | None) -> RotaryTables:
        """The tables of a subset of the batch (UT / GUT halting drops finished sequences)."""
        if rows is None:
            return self
        return RotaryTables(self.cos[rows], self.sin[rows], None if self.scale is None else self.scale[rows])


def apply_rotary(q: Tensor, k: Tensor, rope_q: RotaryTables, rope_k: RotaryTables | None = None) -> tuple[Tensor, Tensor]:
    """Rotate q and k (B, H, T*, hd) by their positions' angles; xPos scales q up and k down.
    ``rope_k`` defaults to ``rope_q`` (self-attention: keys at the queries' positions)."""
    rope_k = rope_q if rope_k is None else rope_k
    q = q * rope_q.cos.to(q.dtype) + _rotate_half(q) * rope_q.sin.to(q.dtype)
    k = k * rope_k.cos.to(k.dtype) + _rotate_half(k) * rope_k.sin.to(k.dtype)
    if rope_q.scale is not None:
        q = q * rope_q.scale.to(q.dtype)
        k = k / rope_k.scale.to(k.dtype)
    return q, k


def rotate(x: Tensor, tables: RotaryTables) -> Tensor:
    """The rotary rotation alone, without the xPos scale: x (B, H, T, hd) at the tables' positions.
    Streaming caches keys rotated this way (the angle of a position never changes) and scales the
    whole cache by the current xPos center at each step (``Rotary.xpos_scale``)."""
    return x * tables.cos.to(x.dtype) + _rotate_half(x) * tables.sin.to(x.dtype)


class Rotary(nn.Module):
    """Rotary embedding, optionally with the xPos scale (Sun et al., 2023).

    xPos multiplies q by zeta^(n/scale_base) and k by zeta^(-n/scale_base), so the logit
    between positions m and n decays like zeta^((m-n)/scale_base): relative and length-stable.
    The scale exponent uses positions shifted by a shared ``center`` (half the largest
    position, kept on the device); the shift cancels in q.k and keeps zeta^(+-n) inside float
    range on long inputs. The module has no weights: one per model serves every layer.
    """

    def __init__(self, head_dim: int, use_xpos: bool = True, scale_base: float = 512.0, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary encodings need an even head dimension, got {head_dim}")
        half = head_dim // 2
        self.register_buffer("inv_freq", base ** (-torch.arange(half, dtype=torch.float32) / half), persistent=False)
        zeta = (torch.arange(0, head_dim, 2, dtype=torch.float32) + 0.4 * head_dim) / (1.4 * head_dim)
        self.register_buffer("zeta", zeta, persistent=False)
        self.use_xpos = use_xpos
        self.scale_base = scale_base

    def tables(self, pos: Tensor, center: Tensor | None = None) -> RotaryTables:
        """Positions (B, T) or (T,) -> their cos / sin / scale tables; ``center`` (a 0-dim tensor)
        defaults to max(pos) / 2."""
        angles = pos.float().unsqueeze(-1) * self.inv_freq  # (..., T, hd/2)
        angles = torch.cat((angles, angles), dim=-1)  # (..., T, hd)
        scale = None
        if self.use_xpos:
            center = pos.max() / 2 if center is None else center
            scale = self.xpos_scale(pos, center)
        cos, sin = angles.cos(), angles.sin()
        if pos.dim() == 2:  # (B, T, hd) -> (B, 1, T, hd): one table for every head
            cos, sin, scale = cos.unsqueeze(1), sin.unsqueeze(1), None if scale is None else scale.unsqueeze(1)
        return RotaryTables(cos, sin, scale)

    def continuing(self, n: int, t: int, device=None) -> tuple[RotaryTables, Tensor | None]:
        """Streaming: the tables of t new positions n..n+t-1 (t, hd), and the xPos scale of all
        n + t key positions (n+t, hd; None for RoPE) that ``MultiHeadAttention.step`` divides its
        cached keys by. Both use the center (n + t - 1) / 2, a forward's max(pos) / 2 over the
        n + t positions (the center cancels in q.k; this choice keeps the float error of a forward)."""
        positions = torch.arange(n, n + t, device=device)  # (t,)
        center = torch.tensor((n + t - 1) / 2, device=device)
        rope = self.tables(positions, center)
        key_scale = None if rope.scale is None else self.xpos_scale(torch.arange(n + t, device=device), center)
        return rope, key_scale

    def xpos_scale(self, pos: Tensor, center: Tensor) -> Tensor:
        """(..., T) positions -> (..., T, hd) xPos scale zeta^((pos - center) / scale_base)."""
        expo = (pos.float() - center).unsqueeze(-1) / self.scale_base
        scale = self.zeta**expo  # (..., T, hd/2)
        return torch.cat((scale, scale), dim=-1)

    def forward(self, q: Tensor, k: Tensor, pos_q: Tensor, pos_k: Tensor) -> tuple[Tensor, Tensor]:
        # q: (B, H, Tq, hd), k: (B, H, Tk, hd); pos_*: (B, T*) or (T*,), one center for both
        center = torch.maximum(pos_q.max(), pos_k.max()) / 2 if self.use_xpos else None
        return apply_rotary(q, k, self.tables(pos_q, center), self.tables(pos_k, center))


def make_rotary(pos_encoding: str, head_dim: int) -> Rotary | None:
    """The model's rotary module for ``xpos`` / ``rope``, None for the other encodings."""
    return Rotary(head_dim, use_xpos=(pos_encoding == "xpos")) if pos_encoding in ROTARY else None


def sinusoidal(positions: Tensor, d_model: int) -> Tensor:
    """(...) positions -> (..., d) absolute sinusoids, sin / cos interleaved (Vaswani et al.):
    PE[n, 2i] = sin(n w_i), PE[n, 2i+1] = cos(n w_i), w_i = 10000^(-2i/d)."""
    div = torch.exp(torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = positions.float().unsqueeze(-1) * div  # (..., ceil(d/2))
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[..., :d_model]


class AbsolutePositionalEmbedding(nn.Module):
    """Sinusoidal (fixed, any length) or learned (up to ``max_len``) vectors added to embeddings."""

    def __init__(self, kind: str, d_model: int, max_len: int = 4096):
        super().__init__()
        if kind not in ("sinusoidal", "learned"):
            raise ValueError(f"absolute positional encoding must be sinusoidal or learned, got {kind!r}")
        self.kind = kind
        self.d_model = d_model
        self.max_len = max_len
        if kind == "learned":
            self.table = nn.Embedding(max_len, d_model)
            nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, positions: Tensor) -> Tensor:  # (B, T) -> (B, T, d)
        if self.kind == "sinusoidal":
            return sinusoidal(positions, self.d_model)
        # Positions from the mask stay below the input length: checking the length needs no sync.
        if positions.shape[-1] > self.max_len:
            raise ValueError(
                f"learned positions go up to {self.max_len - 1} but the input is {positions.shape[-1]} tokens long; "
                "raise model.max_len or use sinusoidal/xpos"
            )
        return self.table(positions)


class TokenEmbedding(nn.Module):
    """Embedding plus an optional absolute PE; rotary encodings are applied inside attention."""

    def __init__(self, vocab_size: int, d_model: int, pos_encoding: str, max_len: int, dropout: float):
        super().__init__()
        if pos_encoding not in POSITIONAL_ENCODINGS:
            raise ValueError(f"unknown pos_encoding {pos_encoding!r}; choose one of {', '.join(POSITIONAL_ENCODINGS)}")
        self.embed = nn.Embedding(vocab_size, d_model)
        absolute = pos_encoding in ("sinusoidal", "learned")
        self.abs_pos = AbsolutePositionalEmbedding(pos_encoding, d_model, max_len) if absolute else None
        self.drop = Dropout(dropout)

    def forward(self, tokens: Tensor, positions: Tensor) -> Tensor:  # (B, T) -> (B, T, d)
        x = self.embed(tokens)
        if self.abs_pos is not None:
            x = x + self.abs_pos(positions)
        return self.drop(x)

    def continuing(self, tokens: Tensor, n: int) -> Tensor:
        """Streaming: t new tokens (B, t) at positions n..n+t-1 of the stream -> (B, t, d); a
        learned table too short for them is one clear error."""
        B, t = tokens.shape
        if self.abs_pos is not None and self.abs_pos.kind == "learned" and n + t > self.abs_pos.max_len:
            raise ValueError(
                f"learned positions go up to {self.abs_pos.max_len - 1} but the stream reaches position {n + t - 1}; "
                "raise model.max_len or use sinusoidal/xpos"
            )
        return self(tokens, torch.arange(n, n + t, device=tokens.device).expand(B, t))
