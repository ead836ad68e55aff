"""RetNet: retention with fixed per-head decays (Sun et al. 2023, "Retentive Network: A Successor to
Transformer for Large Language Models"), per head h with decay gamma_h:

    Q = (X W_Q) . Theta,  K = (X W_K) . conj(Theta)                         (1)   [Sun eq. 5: rotations by position]
    S_n = gamma_h S_{n-1} + K_n^T V_n,   o_n = Q_n S_n                      (2)   [Sun eq. 6: recurrent form]
    gamma_h = 1 - 2^{-5-h},  h = 0..H-1                                     (3)   [Sun §2.2: multi-scale retention]
    Y = GroupNorm_h(o)  (each head normalised on its own)                    (4)   [Sun eq. 8]
    out = W_O (swish(X W_G) * Y)                                            (5)   [Sun eq. 8]

K is scaled by 1 / sqrt(d_head) [Sun §2.2]. The rotation Theta (RoPE angles of the absolute
position n) makes Q_n K_m^T depend on n - m; in the recurrent form each key is rotated at its own
position before entering S, so streaming continues the positions from the number of tokens seen
(the state: S per head and that count). Eq. (2) is ``gated_linear_attention`` with the constant
per-head log decay log gamma_h. Value width: the paper's 2 x d is here d (as every family here).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .layers.positional import Rotary, rotate
from .linear_recurrent import LinearRecurrent, head_norm, heads, merge, recurrence


class MultiScaleRetention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, chunk_size: int = 64):
        super().__init__()
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(f"d_model {d_model} must split into n_heads {n_heads} heads of an even size (rotations)")
        self.n_heads, self.head_dim, self.chunk_size = n_heads, d_model // n_heads, chunk_size
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.gate = nn.Linear(d_model, d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.rotary = Rotary(self.head_dim, use_xpos=False)
        # eq. (3): log gamma_h, fixed (a buffer, not learned)
        self.register_buffer("log_gamma", torch.log1p(-(2.0 ** (-5.0 - torch.arange(n_heads, dtype=torch.float64)))).float())

    def init_state(self, batch_size: int, device=None, dtype=None) -> dict:
        return {"S": torch.zeros(batch_size, self.n_heads, self.head_dim, self.head_dim, device=device, dtype=dtype), "n": 0}

    def forward(self, x: Tensor, state: dict | None = None) -> tuple[Tensor, dict]:
        B, T, _ = x.shape
        n = 0 if state is None else state["n"]
        q, k, v = (heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))  # (B, H, T, hd)
        tables = self.rotary.tables(torch.arange(n, n + T, device=x.device))  # (T, hd) each
        q, k = rotate(q, tables), rotate(k, tables) / math.sqrt(self.head_dim)  # eq. (1)
        log_decay = self.log_gamma.to(x.dtype)[None, :, None].expand(B, self.n_heads, T)  # (B, H, T)
        o, S = recurrence(q, k, v, log_decay=log_decay, state=None if state is None else state["S"], chunk_size=self.chunk_size)  # eq. (2)
        o = head_norm(merge(o), self.n_heads)  # (B, T, d), eq. (4), per head
        return self.out(F.silu(self.gate(x)) * o), {"S": S, "n": n + T}  # eq. (5)


class RetNet(LinearRecurrent):
    """RetNet [Sun et al. 2023]: multi-scale retention, fixed decays 1 - 2^{-5-h}."""

    def __init__(
        self,
        vocab_size: int,
        causal: bool = True,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        chunk_size: int = 64,
    ):
        mixer = {"target": MultiScaleRetention, "params": {"chunk_size": chunk_size}}
        super().__init__(vocab_size, causal, d_model, n_heads, n_layers, d_ff, dropout, mixer=mixer)
