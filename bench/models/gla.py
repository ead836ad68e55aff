"""Gated Linear Attention (Yang, Wang, Shen, Panda & Kim, ICML 2024, "Gated Linear Attention
Transformers with Hardware-Efficient Training"): linear attention with a data-dependent decay per key
channel, per head:

    q_t, k_t, v_t = W_Q x_t, W_K x_t, W_V x_t                               (1)   dk = expand_k * d_head
    alpha_t = sigmoid(W_alpha^2 W_alpha^1 x_t + b_alpha)^{1/tau}  in (0, 1)^dk  (2)   [GLA §4.4: low rank 16, tau = 16]
    S_t = diag(alpha_t) S_{t-1} + k_t v_t^T,   o_t = S_t^T q_t / sqrt(dk)   (3)   [GLA eq. 3]
    r_t = SiLU(W_r x_t + b_r)                                               (4)   output gate
    out_t = W_O (r_t * LayerNorm_head(o_t))                                 (5)   [GLA §4.4]

log alpha_t = logsigmoid(.) / tau; eq. (3) is ``gated_linear_attention`` with that per-channel
log decay (chunks of at most 8 steps: the (C, C, dk) decay tensor).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..schema import AT_LEAST_1, POSITIVE
from .linear_recurrent import LinearRecurrent, heads, merge, recurrence


class GatedLinearAttention(nn.Module):
    host_reads = "the chunk length follows the strongest decay, read once a call (layers/linear_recurrence.py)"

    #: the values its own settings may take (bench/models/base.py: Backbone.setting_domains)
    setting_domains = {"expand_k": POSITIVE, "gate_rank": AT_LEAST_1, "tau": POSITIVE}  # eq. (1) dk = expand_k * d_head; eq. (2)

    def __init__(self, d_model: int, n_heads: int, chunk_size: int = 64, expand_k: float = 0.5, gate_rank: int = 16, tau: float = 16.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be divisible by n_heads {n_heads}")
        self.n_heads, self.head_dim, self.chunk_size, self.tau = n_heads, d_model // n_heads, chunk_size, tau
        self.key_dim = max(1, int(round(expand_k * self.head_dim)))
        self.q = nn.Linear(d_model, n_heads * self.key_dim, bias=False)
        self.k = nn.Linear(d_model, n_heads * self.key_dim, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.alpha = nn.Sequential(nn.Linear(d_model, gate_rank, bias=False), nn.Linear(gate_rank, n_heads * self.key_dim))
        self.gate = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(self.head_dim)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def init_state(self, batch_size: int, device=None, dtype=None) -> Tensor:
        return torch.zeros(batch_size, self.n_heads, self.key_dim, self.head_dim, device=device, dtype=dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        q = heads(self.q(x), self.n_heads) / math.sqrt(self.key_dim)  # (B, H, T, dk), eq. (1) and (3)'s scale
        k, v = heads(self.k(x), self.n_heads), heads(self.v(x), self.n_heads)  # (B, H, T, dk), (B, H, T, hd)
        log_alpha = heads(F.logsigmoid(self.alpha(x)) / self.tau, self.n_heads)  # (B, H, T, dk), eq. (2)
        o, state = recurrence(q, k, v, log_decay=log_alpha, state=state, chunk_size=self.chunk_size)  # eq. (3)
        y = F.silu(self.gate(x)) * merge(self.norm(o))  # eq. (4)-(5)
        return self.out(y), state


class GLA(LinearRecurrent):
    """Gated Linear Attention [Yang et al. 2024]: data-dependent per-channel decay."""

    setting_domains = GatedLinearAttention.setting_domains

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
        expand_k: float = 0.5,
    ):
        mixer = {"target": GatedLinearAttention, "params": {"chunk_size": chunk_size, "expand_k": expand_k}}
        super().__init__(vocab_size, causal, d_model, n_heads, n_layers, d_ff, dropout, mixer=mixer)
