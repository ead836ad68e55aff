"""DeltaNet: linear attention with the delta rule (Schlag, Irie & Schmidhuber 2021, §4.2; Yang, Wang,
Zhang, Shen & Kim 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length").

Instead of adding v_t under key k_t, the fast weights replace the value currently stored there by
a mix of it and v_t, with strength beta_t. Per head:

    q_t, k_t, v_t = SiLU(ShortConv(W_{q,k,v} x)_t)                          (1)   [Yang 2024 §3.3: conv + SiLU]
    q_t, k_t = q_t / ||q_t||,  k_t / ||k_t||                                 (2)   [Yang 2024 §3.3: L2 norm]
    beta_t = r * sigmoid(w_beta . x_t)                                      (3)   r = beta_range: 1, or 2 [Grazzi]
    S_t = S_{t-1} - beta_t k_t (k_t^T S_{t-1} - v_t^T)
        = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T                 (4)   [Yang 2024 eq. 2; Schlag eq. 17-19]
    o_t = S_t^T q_t                                                         (5)
    out_t = W_o RMSNorm_head(o_t)                                           (6)   [Yang 2024 §3.3: output norm]

With ||k_t|| = 1 the transition I - beta_t k_t k_t^T has eigenvalues 1 (orthogonal to k_t) and
1 - beta_t: in [0, 1) for beta in (0, 1); ``beta_range=2`` lets it reach (-1, 1), the negative
eigenvalues that Grazzi et al. (ICLR 2025, "Unlocking state-tracking in linear RNNs through
negative eigenvalues") show parity and modular counting need. Eq. (4) runs chunkwise by the UT
transform (``delta_rule``) in chunks of ``chunk_size`` (16 by default: on the CPU the UT transform's
(C, C) solve and products cost O(C) per token, and 16 trains fastest at head width 16);
``conv_size=0`` drops the convolution (then (1) is SiLU(W x)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..schema import AT_LEAST_0, Domain
from .layers.short_conv import ShortConv
from .linear_recurrent import LinearRecurrent, heads, merge, recurrence

#: r in eq. (3): 1 keeps beta in (0, 1), 2 lets the transition reach negative eigenvalues [Grazzi]
BETA_RANGE = Domain(lambda v: 0 < v <= 2, "in (0, 2]")


class DeltaRuleAttention(nn.Module):
    """Eq. (1)-(6); with ``gated`` the Gated DeltaNet mixer (bench/models/gated_deltanet.py) adds the
    decay alpha_t and the output gate."""

    #: the values its own settings may take (bench/models/base.py: Backbone.setting_domains)
    setting_domains = {"conv_size": AT_LEAST_0, "beta_range": BETA_RANGE}  # conv_size 0: no convolution

    def __init__(self, d_model: int, n_heads: int, chunk_size: int = 16, conv_size: int = 4, beta_range: float = 1.0, gated: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be divisible by n_heads {n_heads}")
        if not 0 < beta_range <= 2:
            raise ValueError(f"beta_range must be in (0, 2] (1: beta in (0, 1); 2: beta in (0, 2)); got {beta_range}")
        self.n_heads, self.head_dim, self.chunk_size, self.beta_range = n_heads, d_model // n_heads, chunk_size, beta_range
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.conv = ShortConv(3 * d_model, conv_size) if conv_size > 0 else None
        self.beta = nn.Linear(d_model, n_heads)
        self.norm = nn.RMSNorm(self.head_dim)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.gated = gated
        if gated:  # Gated DeltaNet: alpha_t = exp(-exp(A_log) softplus(w_a . x_t + dt_bias)), gate SiLU(W_g x)
            self.alpha = nn.Linear(d_model, n_heads, bias=False)
            self.A_log = nn.Parameter(torch.log(torch.empty(n_heads).uniform_(1, 16)))
            dt = torch.exp(torch.empty(n_heads).uniform_(torch.log(torch.tensor(1e-3)).item(), torch.log(torch.tensor(0.1)).item()))
            self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^{-1}(dt)
            self.gate = nn.Linear(d_model, d_model, bias=False)

    def init_state(self, batch_size: int, device=None, dtype=None) -> dict:
        S = torch.zeros(batch_size, self.n_heads, self.head_dim, self.head_dim, device=device, dtype=dtype)
        conv = None if self.conv is None else self.conv.init_state(batch_size, device, dtype)
        return {"S": S, "conv": conv}

    def forward(self, x: Tensor, state: dict | None = None) -> tuple[Tensor, dict]:
        qkv = self.qkv(x)  # (B, T, 3d)
        conv_state = None
        if self.conv is not None:
            qkv, conv_state = self.conv(qkv, None if state is None else state["conv"])
        q, k, v = (heads(t, self.n_heads) for t in F.silu(qkv).chunk(3, dim=-1))  # (B, H, T, hd), eq. (1)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)  # eq. (2)
        beta = (self.beta_range * torch.sigmoid(self.beta(x))).transpose(1, 2)  # (B, H, T), eq. (3)
        log_decay = None
        if self.gated:
            log_decay = (-self.A_log.exp() * F.softplus(self.alpha(x) + self.dt_bias)).transpose(1, 2)  # (B, H, T)
        o, S = recurrence(
            q, k, v, beta=beta, log_decay=log_decay, state=None if state is None else state["S"], chunk_size=self.chunk_size
        )  # eq. (4)-(5)
        o = self.norm(o)  # (B, H, T, hd)
        y = merge(o)
        if self.gated:
            y = y * F.silu(self.gate(x))
        return self.out(y), {"S": S, "conv": conv_state}  # eq. (6)


class DeltaNet(LinearRecurrent):
    """DeltaNet [Yang et al. 2024]; ``beta_range=2``: beta in (0, 2), negative eigenvalues [Grazzi et al. 2025]."""

    setting_domains = DeltaRuleAttention.setting_domains

    def __init__(
        self,
        vocab_size: int,
        causal: bool = True,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        chunk_size: int = 16,
        conv_size: int = 4,
        beta_range: float = 1.0,
    ):
        mixer = {"target": DeltaRuleAttention, "params": {"chunk_size": chunk_size, "conv_size": conv_size, "beta_range": beta_range}}
        super().__init__(vocab_size, causal, d_model, n_heads, n_layers, d_ff, dropout, mixer=mixer)
