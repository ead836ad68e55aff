"""Linear Transformer: the fast weight programmer of [NOPE §4] (Katharopoulos et al. 2020, "Transformers
are RNNs"; Schlag, Irie & Schmidhuber 2021, "Linear Transformers are secretly fast weight programmers").

Softmax attention with the softmax removed and a positive feature map phi, per head:

    q_t, k_t, v_t = W_q x_t, W_k x_t, W_v x_t                          (1)   [NOPE eq. 1]
    phi(x) = elu(x) + 1                                                (2)   [Katharopoulos eq. 7]
    W_t = W_{t-1} + v_t (x) phi(k_t),   z_t = z_{t-1} + phi(k_t)       (3)   [NOPE eq. 7; Katharopoulos eq. 18-19]
    y_t = W_t phi(q_t) / (z_t . phi(q_t))                              (4)   [NOPE eq. 8, normalised: Katharopoulos eq. 20]
    out_t = W_o [y_t^1; ...; y_t^H]                                    (5)

W_0 = 0, z_0 = 0. Eq. (3)-(4) are ``gated_linear_attention`` with no decay on the values extended
by a constant 1: its last output column is the normaliser z_t . phi(q_t), so one (dk, dv + 1) state
per head holds W and z. The transition is the identity ("not true recurrence", [NOPE §4]): no
positional encoding, so a one-layer model's last output is the same for any order of the prefix
and two layers are position-sensitive (the nope-properties table checks both).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .linear_recurrent import LinearRecurrent, heads, merge, recurrence

EPS = 1e-6  # added to the normaliser z_t . phi(q_t) > 0


class FastWeightAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, chunk_size: int = 64):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be divisible by n_heads {n_heads}")
        self.n_heads, self.head_dim, self.chunk_size = n_heads, d_model // n_heads, chunk_size
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def init_state(self, batch_size: int, device=None, dtype=None) -> Tensor:
        return torch.zeros(batch_size, self.n_heads, self.head_dim, self.head_dim + 1, device=device, dtype=dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        q, k, v = (heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))  # (B, H, T, hd), eq. (1)
        phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1  # eq. (2)
        v1 = torch.cat((v, torch.ones_like(v[..., :1])), dim=-1)  # (B, H, T, hd + 1): [v; 1]
        o, state = recurrence(phi_q, phi_k, v1, state=state, chunk_size=self.chunk_size)  # eq. (3): [W_t phi(q_t); z_t . phi(q_t)]
        y = o[..., :-1] / (o[..., -1:] + EPS)  # eq. (4)
        return self.out(merge(y)), state  # eq. (5)


class LinearTransformer(LinearRecurrent):
    """Linear Transformer / fast weight programmer (phi = elu + 1, normalised) [NOPE §4]."""

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
        mixer = {"target": FastWeightAttention, "params": {"chunk_size": chunk_size}}
        super().__init__(vocab_size, causal, d_model, n_heads, n_layers, d_ff, dropout, mixer=mixer)
