"""Mamba-2: the state space dual (SSD) layer (Dao & Gu, ICML 2024, "Transformers are SSMs: Generalized
Models and Efficient Algorithms Through Structured State Space Duality"), per head h of P channels,
state size N:

    [z, xBC, dt] = W_in u                                                   (1)   [Dao & Gu §7.1, Fig. 6: parallel projections]
    [x, B, C] = SiLU(ShortConv(xBC))                                        (2)   B_t, C_t in R^N shared by the heads
    Delta_t = softplus(dt_t + dt_bias),  A = -exp(A_log)   (one scalar per head)   (3)
    a_t = exp(Delta_t A)  in (0, 1]                                         (4)   [Dao & Gu eq. 16: scalar-times-identity A_t]
    h_t = a_t h_{t-1} + B_t (Delta_t x_t)^T,   y_t = h_t^T C_t + D x_t      (5)   [Dao & Gu eq. 1 with SSD's A_t = a_t I]
    out = W_out RMSNorm(y * SiLU(z))                                        (6)   [Dao & Gu §7.1: gated norm]

h_t in R^{N x P} per head: eq. (5) is ``gated_linear_attention`` with q = C, k = B, v = Delta x and
the per-head log decay Delta_t A (the "SSD" dual of masked attention). d_inner = expand * d_model,
P = d_inner / n_heads.

``negative_transitions=True`` (Grazzi et al., ICLR 2025, "Unlocking state-tracking in linear RNNs
through negative eigenvalues", §4): a_t = 2 exp(Delta_t A) - 1 in (-1, 1], run as a sign and a log
magnitude (``decay_sign``), so a head can flip its state's sign each step (parity).

A, dt_bias and D initialised as the reference (A uniform in [1, 16], softplus(dt_bias) log-uniform
in [1e-3, 0.1], D = 1). ``d_ff`` > 0 keeps the FFN sublayer of the shared stack
(bench/models/linear_recurrent.py); ``d_ff: 0`` is the pure Mamba-2 stack.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..schema import AT_LEAST_1
from .layers.short_conv import ShortConv
from .linear_recurrent import LinearRecurrent, heads, merge, recurrence


class SSD(nn.Module):
    #: the values its own settings may take (bench/models/base.py: Backbone.setting_domains)
    setting_domains = {"d_state": AT_LEAST_1, "expand": AT_LEAST_1, "conv_size": AT_LEAST_1}

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        chunk_size: int = 64,
        d_state: int = 16,
        expand: int = 2,
        conv_size: int = 4,
        negative_transitions: bool = False,
    ):
        super().__init__()
        d_inner = expand * d_model
        if d_inner % n_heads:
            raise ValueError(f"expand * d_model = {d_inner} must be divisible by n_heads {n_heads}")
        self.n_heads, self.head_dim, self.d_state, self.d_inner = n_heads, d_inner // n_heads, d_state, d_inner
        self.chunk_size, self.negative_transitions = chunk_size, negative_transitions
        self.in_proj = nn.Linear(d_model, 2 * d_inner + 2 * d_state + n_heads, bias=False)  # eq. (1)
        self.conv = ShortConv(d_inner + 2 * d_state, conv_size)
        self.A_log = nn.Parameter(torch.log(torch.empty(n_heads).uniform_(1, 16)))
        dt = torch.exp(torch.empty(n_heads).uniform_(math.log(1e-3), math.log(0.1)))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^{-1}(dt)
        self.D = nn.Parameter(torch.ones(n_heads))
        self.norm = nn.RMSNorm(d_inner)
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def init_state(self, batch_size: int, device=None, dtype=None) -> dict:
        h = torch.zeros(batch_size, self.n_heads, self.d_state, self.head_dim, device=device, dtype=dtype)
        return {"h": h, "conv": self.conv.init_state(batch_size, device, dtype)}

    def forward(self, u: Tensor, state: dict | None = None) -> tuple[Tensor, dict]:
        Bsz, T, _ = u.shape
        z, xBC, dt = self.in_proj(u).split((self.d_inner, self.d_inner + 2 * self.d_state, self.n_heads), dim=-1)  # eq. (1)
        xBC, conv_state = self.conv(xBC, None if state is None else state["conv"])
        x, B, C = F.silu(xBC).split((self.d_inner, self.d_state, self.d_state), dim=-1)  # eq. (2)
        delta = F.softplus(dt + self.dt_bias).transpose(1, 2)  # (Bsz, H, T), eq. (3)
        log_a = -self.A_log.exp()[None, :, None] * delta  # log exp(Delta A) <= 0, eq. (4)
        sign = None
        if self.negative_transitions:  # a = 2 exp(Delta A) - 1 in (-1, 1]
            a = 2 * log_a.exp() - 1
            sign = torch.where(a < 0, -1.0, 1.0).to(a.dtype)
            log_a = a.abs().clamp_min(1e-30).log()
        x = heads(x, self.n_heads)  # (Bsz, H, T, P)
        q = C[:, None].expand(Bsz, self.n_heads, T, self.d_state)  # (Bsz, H, T, N)
        k = B[:, None].expand(Bsz, self.n_heads, T, self.d_state)
        y, h = recurrence(
            q,
            k,
            x * delta[..., None],
            log_decay=log_a,
            decay_sign=sign,
            state=None if state is None else state["h"],
            chunk_size=self.chunk_size,
        )  # eq. (5)
        y = merge(y + self.D[:, None, None] * x)  # (Bsz, T, d_inner)
        return self.out_proj(self.norm(y * F.silu(z))), {"h": h, "conv": conv_state}  # eq. (6)


class Mamba2(LinearRecurrent):
    """Mamba-2 [Dao & Gu 2024] (SSD); ``negative_transitions``: a_t in (-1, 1] [Grazzi et al. 2025]."""

    setting_domains = SSD.setting_domains

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
        d_state: int = 16,
        expand: int = 2,
        conv_size: int = 4,
        negative_transitions: bool = False,
    ):
        params = {"chunk_size": chunk_size, "d_state": d_state, "expand": expand, "conv_size": conv_size}
        params["negative_transitions"] = negative_transitions
        super().__init__(vocab_size, causal, d_model, n_heads, n_layers, d_ff, dropout, mixer={"target": SSD, "params": params})
