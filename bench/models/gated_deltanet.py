"""Gated DeltaNet (Yang, Kautz & Hatamizadeh, ICLR 2025, "Gated Delta Networks: Improving Mamba2 with
Delta Rule"): the delta rule of DeltaNet with Mamba-2's data-dependent decay, per head:

    q_t, k_t, v_t = SiLU(ShortConv(W_{q,k,v} x)_t),  q_t, k_t L2-normalised   (1)   as DeltaNet eq. (1)-(2)
    beta_t = r * sigmoid(w_beta . x_t)                                      (2)   r = beta_range (1, or 2 [Grazzi])
    alpha_t = exp(-exp(A_log) * softplus(w_alpha . x_t + dt_bias))  in (0, 1] (3)   the Mamba-2 gate
    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T         (4)   [Yang 2025 eq. 10 (gated delta rule)]
    o_t = S_t^T q_t                                                         (5)
    out_t = W_o (RMSNorm_head(o_t) * SiLU(W_g x_t))                         (6)   output norm and gate [Yang 2025 §3.3]

alpha_t -> 1 gives DeltaNet; beta_t -> 0 gives a Mamba-2-like decaying memory: the decay erases
everything quickly, the delta rule one key precisely. Eq. (4) runs chunkwise (``delta_rule`` with a
per-head ``log_decay`` = log alpha_t); A_log and dt_bias are initialised as Mamba-2's (A in [1, 16],
softplus(dt_bias) log-uniform in [1e-3, 0.1]).
"""

from __future__ import annotations

from .deltanet import DeltaRuleAttention
from .linear_recurrent import LinearRecurrent


class GatedDeltaNet(LinearRecurrent):
    """Gated DeltaNet [Yang et al. 2025]: eq. (1)-(6) (the gated ``DeltaRuleAttention``)."""

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
        params = {"chunk_size": chunk_size, "conv_size": conv_size, "beta_range": beta_range, "gated": True}
        super().__init__(
            vocab_size, causal, d_model, n_heads, n_layers, d_ff, dropout, mixer={"target": DeltaRuleAttention, "params": params}
        )
