"""Transformer-XL relative positional attention (Dai et al., 2019, §3.3), shared by XL and BRT.

Queries x (B, Tq, d) attend to a context (B, Tk, d) whose last Tq positions are x itself
(context = [memory; x]); with R the sinusoid of the relative distance i - j:

    A_ij = q_i.k_j  +  q_i.W_R R_{i-j}  +  u.k_j  +  v.W_R R_{i-j}           (§3.3, terms a-d)
         = (q_i + u).k_j + (q_i + v).r_{i-j}

The position term is computed once per query row and distance and aligned to keys with the
"rel-shift" (§3.3 / App. B), done here as a strided view. It enters ``attend`` as an additive
bias, so any backend serves; the attention mask is folded into that same bias.

Per forward pass, not per layer and segment: the model builds the sinusoids R once and each
layer projects them once (``project_relative``); each segment builds its mask bias once for all
layers (``attention.additive_mask``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention, additive_mask, attend


def sinusoid(dist: Tensor, d_model: int) -> Tensor:
    """(L,) relative distances (may be negative) -> (L, d) [sin | cos] embeddings R."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2, device=dist.device, dtype=torch.float32) / d_model))
    angles = dist.float().unsqueeze(1) * inv_freq  # (L, d/2)
    return torch.cat((angles.sin(), angles.cos()), dim=-1)


def relative_sinusoid(max_dist: int, d_model: int, device) -> Tensor:
    """R for the distances max_dist, max_dist - 1, ..., -max_dist: (2 max_dist + 1, d)."""
    return sinusoid(torch.arange(max_dist, -max_dist - 1, -1, device=device), d_model)


def project_relative(attns: list[RelativeAttention], max_dist: int, device) -> list[Tensor]:
    """Every layer's W_R R for the distances max_dist..-max_dist, (H, 2 max_dist + 1, hd) each:
    the sinusoids built once and each layer's projection once, for a whole forward pass."""
    if not attns:
        return []
    R = relative_sinusoid(max_dist, attns[0].d_model, device)  # (2 max_dist + 1, d)
    return [attn.project(R) for attn in attns]


def rel_shift(x: Tensor, n_keys: int) -> Tensor:
    """Align per-distance scores to per-key scores (the Transformer-XL rel-shift).

    x: (..., Tq, L) with L = n_keys + Tq - 1 and column c holding distance n_keys - 1 - c.
    Returns (..., Tq, n_keys) with out[i, j] = x[i, j + Tq - 1 - i], i.e. the score for the
    distance (n_keys - Tq + i) - j between query i (aligned to the end of the keys) and key j.
    Element (i, j) sits at i L + j + Tq - 1 - i = (Tq - 1) + i (L - 1) + j of the flattened rows,
    so the result is a view: rows of L - 1 read from offset Tq - 1 (the paper pads a zero column
    and reshapes, which copies twice).
    """
    *lead, Tq, L = x.shape
    if Tq == 1:
        return x[..., :n_keys]
    flat = x.flatten(-2)  # (..., Tq L): a view when each row is contiguous, as einsum leaves it
    return flat[..., Tq - 1 : Tq - 1 + Tq * (L - 1)].unflatten(-1, (Tq, L - 1))[..., :n_keys]


class RelativeAttention(nn.Module):
    """Multi-head attention with Transformer-XL relative positions and the u, v biases.

    ``forward(x (B, Tq, d), context (B, Tk, d) | None, key_mask (B, Tk) | None, causal)``; the
    queries are aligned to the end of the context (context = [memory; x]; None = x). The
    projections (and, for RSA variants, the REM parameters) live in a ``MultiHeadAttention``.
    """

    def __init__(self, d_model: int, n_heads: int, *, backend: str = "sdpa", attn_dropout: float = 0.0, rsa: dict | None = None):
        super().__init__()
        self.mha = MultiHeadAttention(d_model, n_heads, backend=backend, dropout=attn_dropout, rsa=rsa)
        H, hd = self.mha.n_heads, self.mha.head_dim
        self.r_proj = nn.Linear(d_model, H * hd, bias=False)  # W_{k,R}
        self.u = nn.Parameter(torch.randn(H, 1, hd) * 0.02)  # content bias (term c)
        self.v = nn.Parameter(torch.randn(H, 1, hd) * 0.02)  # position bias (term d)
        self.d_model = d_model

    def project(self, R: Tensor) -> Tensor:
        """r = W_{k,R} R: sinusoids (L, d) of ``relative_sinusoid`` -> (H, L, hd)."""
        r = self.r_proj(R.to(self.r_proj.weight.dtype))  # (L, H*hd)
        return r.view(-1, self.mha.n_heads, self.mha.head_dim).transpose(0, 1)

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        *,
        key_mask: Tensor | None = None,
        causal: bool = False,
        rel: Tensor | None = None,
        mask_bias: Tensor | None = None,
    ) -> Tensor:
        """``rel``: this layer's ``project(relative_sinusoid(D))`` with D >= Tk - 1, shared by every
        segment of a forward pass (built here when None). ``mask_bias``: ``additive_mask`` of
        (causal, key_mask), shared by every layer of a segment (built here when None)."""
        mha = self.mha
        ctx = x if context is None else context
        B, Tq, Tk = x.shape[0], x.shape[1], ctx.shape[1]
        q = mha.split_heads(mha.q_proj(x))  # (B, H, Tq, hd)
        k = mha.split_heads(mha.k_proj(ctx))  # (B, H, Tk, hd)
        v = mha.split_heads(mha.v_proj(ctx))
        if rel is None:
            rel = self.project(relative_sinusoid(Tk - 1, self.d_model, x.device))
        D = (rel.shape[1] - 1) // 2
        if D < Tk - 1:
            raise ValueError(f"relative positions cover distances up to {D}, but {Tk} keys need {Tk - 1}")
        # Distances Tk-1 ... -(Tq-1): negative ones only matter without causal masking.
        r = rel[:, D - Tk + 1 : D + Tq]  # (H, Tk+Tq-1, hd)
        if mask_bias is None:
            mask_bias = additive_mask(B, Tq, Tk, causal, key_mask, x.device)
        return self._attend(q, k, v, r, mask_bias, key_mask=key_mask, causal=causal)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, r: Tensor, mask_bias: Tensor | None, *, key_mask, causal) -> Tensor:
        """q (B, H, Tq, hd) aligned to the end of k, v (B, H, Tk, hd); r (H, Tk+Tq-1, hd) the projected
        sinusoids of the distances Tk-1 .. -(Tq-1) -> the output projection's result (B, Tq, d)."""
        mha = self.mha
        Tk = k.shape[2]
        pos = rel_shift(torch.einsum("bhqd,hld->bhql", q + self.v, r), Tk)  # terms (b) + (d): (B, H, Tq, Tk)
        scale = 1.0 / math.sqrt(mha.head_dim)  # attend scales q.k only
        bias = pos * scale if mask_bias is None else torch.add(mask_bias, pos, alpha=scale)  # one pass
        out = attend(
            q + self.u, k, v, bias=bias, backend=mha.backend, dropout_p=mha.dropout if self.training else 0.0
        )  # (B, H, Tq, hd): terms (a) + (c) + the position bias, masked
        if mha.rsa is not None:  # RSA-XL [RSA App. D.2]: non-square REM, lags shifted by the memory length
            out = mha.rsa(out, v, key_mask=key_mask, causal=causal, offset=Tk - q.shape[2])
        return mha.o_proj(mha.merge_heads(out))

    # ---- streaming: causal attention over a cache of the context's keys and values ----------
    def init_cache(self, batch_size: int, device=None) -> dict:
        """An empty context: keys k and values v (B, H, 0, hd), which the host trims (``keep_last``:
        XL to the memory at a segment's end, BRT to the finished block), and r (H, 0, hd): W_R R of
        the distances 0, 1, ... seen so far, so a step projects only distances it has not seen."""
        cache = self.mha.init_cache(batch_size, device)
        r = self.r_proj.weight.new_zeros(self.mha.n_heads, 0, self.mha.head_dim, device=device)
        return {"k": cache["k"], "v": cache["v"], "r": r}

    def step(self, x: Tensor, cache: dict) -> tuple[Tensor, dict]:
        """t new positions x (B, t, d), already normalised, attend causally to the cached context
        and themselves, exactly as the last t queries of ``forward`` with context = [cache; x].
        With RSA the REM term is computed over that context window (exact, O(window) per step,
        like the attention itself). Returns (output (B, t, d), the cache with x's keys/values)."""
        mha = self.mha
        t = x.shape[1]
        q = mha.split_heads(mha.q_proj(x))  # (B, H, t, hd)
        k = torch.cat((cache["k"], mha.split_heads(mha.k_proj(x))), dim=2)  # (B, H, Tk, hd)
        v = torch.cat((cache["v"], mha.split_heads(mha.v_proj(x))), dim=2)
        Tk, seen = k.shape[2], cache["r"]
        if seen.shape[1] < Tk:  # project the distances not seen yet
            new = self.project(sinusoid(torch.arange(seen.shape[1], Tk, device=x.device), self.d_model))
            seen = torch.cat((seen, new), dim=1)  # (H, >= Tk, hd)
        # distances Tk-1 .. 0, then -1 .. -(t-1): those are masked (causal), so zeros serve
        r = torch.cat((seen[:, :Tk].flip(1), seen.new_zeros(seen.shape[0], t - 1, seen.shape[2])), dim=1)  # (H, Tk+t-1, hd)
        mask_bias = additive_mask(x.shape[0], t, Tk, True, None, x.device)
        return self._attend(q, k, v, r, mask_bias, key_mask=None, causal=True), {"k": k, "v": v, "r": seen}


def keep_last(cache: dict, n: int) -> dict:
    """A ``RelativeAttention`` cache keeping the keys and values of its last n positions."""
    start = max(cache["k"].shape[2] - n, 0)
    return {**cache, "k": cache["k"][:, :, start:], "v": cache["v"][:, :, start:]}
