"""HGRN2 (Qin, Yang, Sun, Shen, Li, Sun & Zhong, COLM 2024, "HGRN2: Gated Linear RNNs with State
Expansion"): HGRN's gated linear RNN with its state expanded by an outer product, per layer k of L
and per head h of H, expand ratio n = d / H (row vectors, as the paper):

    f_t = gamma^k + (1 - gamma^k) * sigmoid(W_f x_t)               (1)   forget gate, lower-bounded [HGRN]
    gamma^k = [Cumsum(Softmax(Gamma, dim=0))]_k,                   (2)   the lower bound of layer k [HGRN]
        Cumsum(p)_k = sum_{i<=k} p_i - p_0                               Gamma in R^{L x d} learned: gamma^0 = 0,
                                                                         rising with depth, below 1
    i_t = SiLU(W_i x_t)                                            (3)   input
    o_t = sigmoid(W_o x_t)                                         (4)   output gate
    S_t = Diag{f_t} S_{t-1} + (1 - f_t)^T i_t    (n, n) per head   (5)   state expansion: the outer product
                                                                         replaces HGRN's (1 - f_t) * i_t
    y_t = o_t S_t                                                  (6)   the output gate reads the state
    out_t = W_out RMSNorm([y_t^1; ...; y_t^H])                     (7)

[HGRN]: Qin, Yang & Zhong, NeurIPS 2023, "Hierarchically Gated Recurrent Neural Network for Sequence
Modeling", whose gate, lower bound and input / output gates HGRN2 keeps. The numbers (1)-(7) are this
file's, in the paper's order.

Eq. (5)-(6) are gated linear attention (the paper's linear attention form): query o_t, key 1 - f_t
(the input gate tied to the forget gate), value i_t, per-channel decay f_t: ``gated_linear_attention``
with log f_t = log(gamma + (1 - gamma) sigmoid(.)), computed as logaddexp(log gamma, log(1 - gamma) +
logsigmoid(.)) (layer 0: logsigmoid(.)). Gamma is one parameter of the stack (the softmax runs over
the layers): the model builds it and every layer's mixer holds it, reading its own row by
``layer_idx``. Gamma starts at 0, so gamma^k = k / L at initialisation.

Simplified against the paper: bench's shared stack (bench/models/linear_recurrent.py: pre-LN
residual blocks with a GELU FFN where the paper has RMSNorm and a GLU); projections without bias and
no short convolution (as flash-linear-attention's layer); the output gate is a sigmoid as the
authors' code (hgru2-pytorch), where flash-linear-attention applies SiLU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .linear_recurrent import LinearRecurrent, heads, merge, recurrence


class ForgetLowerBounds(nn.Module):
    """Gamma (n_layers, width) and each layer's lower bound gamma^k, eq. (2)."""

    def __init__(self, n_layers: int, width: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(n_layers, width))

    def forward(self, layer_idx: int) -> Tensor:
        p = self.gamma.softmax(dim=0)  # (L, width), each channel's distribution over the layers
        return p[1 : layer_idx + 1].sum(dim=0)  # (width,): Cumsum(p)_k - p_0


class HGRN2Layer(nn.Module):
    """Eq. (1)-(7) in layer ``layer_idx``: H heads whose state is (n, n), n = d / H."""

    host_reads = "the chunk length follows the strongest forget gate, read once a call (layers/linear_recurrence.py)"

    def __init__(self, d_model: int, n_heads: int, layer_idx: int, lower_bounds: ForgetLowerBounds, chunk_size: int = 64):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be divisible by n_heads {n_heads} (the expand ratio is d_model / n_heads)")
        self.n_heads, self.expand_ratio, self.layer_idx, self.chunk_size = n_heads, d_model // n_heads, layer_idx, chunk_size
        self.forget_gate = nn.Linear(d_model, d_model, bias=False)  # W_f, eq. (1)
        self.input = nn.Linear(d_model, d_model, bias=False)  # W_i, eq. (3)
        self.output_gate = nn.Linear(d_model, d_model, bias=False)  # W_o, eq. (4)
        self.norm = nn.RMSNorm(d_model, eps=1e-5)
        self.out = nn.Linear(d_model, d_model, bias=False)  # W_out, eq. (7)
        self.lower_bounds = lower_bounds  # Gamma, shared by every layer of the stack

    def init_state(self, batch_size: int, device=None, dtype=None) -> Tensor:
        return torch.zeros(batch_size, self.n_heads, self.expand_ratio, self.expand_ratio, device=device, dtype=dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        log_f = F.logsigmoid(self.forget_gate(x))  # (B, T, d): log sigmoid(W_f x_t)
        if self.layer_idx > 0:  # layer 0: gamma^0 = 0, f_t = sigmoid(W_f x_t)
            gamma = self.lower_bounds(self.layer_idx).to(x.dtype)  # (d,), eq. (2)
            log_f = torch.logaddexp(gamma.log(), torch.log1p(-gamma) + log_f)  # eq. (1)
        i = F.silu(self.input(x))  # eq. (3)
        o = torch.sigmoid(self.output_gate(x))  # eq. (4)
        key = -torch.expm1(log_f)  # 1 - f_t: the input gate, tied to the forget gate
        H = self.n_heads
        y, state = recurrence(
            heads(o, H), heads(key, H), heads(i, H), log_decay=heads(log_f, H), state=state, chunk_size=self.chunk_size
        )  # eq. (5)-(6)
        return self.out(self.norm(merge(y))), state  # eq. (7)


class HGRN2(LinearRecurrent):
    """HGRN2 [Qin et al. 2024]: eq. (1)-(7), the forget gate's lower bound rising with depth."""

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
        mixer = {"target": HGRN2Layer, "params": {"lower_bounds": ForgetLowerBounds(n_layers, d_model), "chunk_size": chunk_size}}
        super().__init__(vocab_size, causal, d_model, n_heads, n_layers, d_ff, dropout, mixer=mixer)
