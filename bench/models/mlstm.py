"""mLSTM: xLSTM's matrix LSTM (Beck, Pöppel, Spanring, Auer, Prudnikova, Kopp, Klambauer, Brandstetter
& Hochreiter, NeurIPS 2024, "xLSTM: Extended Long Short-Term Memory"), in the paper's mLSTM block.

The cell [xLSTM §2.3], per head of width d_h, with an exponential input gate and a sigmoid forget gate:

    C_t = f_t C_{t-1} + i_t v_t k_t^T                  (d_h, d_h)           (1)   [xLSTM §2.3: cell state]
    n_t = f_t n_{t-1} + i_t k_t                        (d_h)                (2)   [normaliser state]
    h~_t = C_t q_t / max(|n_t^T q_t|, 1)               (d_h)                (3)   [hidden state before the output gate]
    i_t = exp(i~_t),  f_t = sigmoid(f~_t)              scalars per head     (4)   [exponential input, sigmoid forget gate]
    k_t scaled by 1 / sqrt(d_h);  C_0 = 0, n_0 = 0

The block around it [xLSTM §2.4, the mLSTM block figure; NX-AI/xlstm ``mLSTMLayer``], x_t of width d,
d_in = proj_factor * d (2), H heads of d_h = d_in / H:

    [u_t, z_t] = W_up x_t                              (B, T, 2 d_in)       (5)   pre up-projection, two branches
    c_t = SiLU(ShortConv(u)_t)                         (B, T, d_in)         (6)   the q / k path's causal conv (kernel 4)
    q_t = W_q c_t,  k_t = W_k c_t,  v_t = W_v u_t      block-diagonal       (7)   blocks of ``qkv_block`` (4) channels
    [i~_t; f~_t] = W_{if} [q_t; k_t; v_t] + b_{if}     (B, T, H) each       (8)   one input and one forget gate per head
    h_t = (GroupNorm_head(h~_t) + s * c_t) * SiLU(z_t) (B, T, d_in)         (9)   per-head norm, learnable skip s, output gate
    out_t = W_down h_t                                 (B, T, d)            (10)  down-projection

The paper's cell output gate o_t = sigmoid(W_o x_t) (h_t = o_t * h~_t) is, in the mLSTM block, the
SiLU of the second up-projected branch, eq. (9): as the paper's block and its code, there is no
second gate.

Stabilisation [xLSTM §2.3, the mLSTM's stabiliser as the sLSTM's]: exp(i~_t) overflows (float32
beyond i~ = 88), so the paper carries a running maximum m_t and the states scaled by exp(-m_t):

    m_t = max(log f_t + m_{t-1}, i~_t)                                      (11)
    C'_t = exp(log f_t + m_{t-1} - m_t) C'_{t-1} + exp(i~_t - m_t) v_t k_t^T   (and n'_t alike)   (12)
    h~_t = C'_t q_t / max(|n'_t^T q_t|, exp(-m_t))                          (13)

C'_t = exp(-m_t) C_t and n'_t = exp(-m_t) n_t, so (13) is (3) exactly, the bound 1 included: the
stabiliser changes the rounding, never the function, and it is carried here exactly (no cap on the
input gate). Every factor in (12) is at most 1: a decay exp(log f_t + m_{t-1} - m_t) <= 1 and an
input scale exp(i~_t - m_t) <= 1, whatever i~_t.

On the mechanism (bench/models/layers/linear_recurrence.py), per head: (12) is
``gated_linear_attention`` with the per-head log decay log f_t + m_{t-1} - m_t <= 0, the input
gate folded into the keys (k_t exp(i~_t - m_t)), and the values extended by a constant 1: its state
S_t = [C'_t^T | n'_t] (d_h, d_h + 1), and its output S_t^T q_t = [C'_t q_t; n'_t^T q_t], the numerator
and the normaliser of (13) in one pass. m_t in parallel: with F_t = sum_{r<=t} log f_r,

    m_t = F_t + max(m_0, max_{s<=t} (i~_s - F_s))                          (11') (11) unrolled; m_0 = 0

(11') rounds differently from (11), but m enters (12)-(13) only as a consistent rescaling, so any
rounding of it leaves (3) unchanged; for the same reason it is detached (no gradient flows through
m: the output does not depend on it). Streaming: the state is S per head, m_t per head and the
conv window, a fixed size whatever the context.

Simplified against the paper: the stack is bench's shared one (bench/models/linear_recurrent.py:
pre-LN residual blocks, final LayerNorm, no positional encoding), with the FFN sublayer of the
other families when ``d_ff`` > 0 (the class built with ``d_ff=0`` is the xLSTM[1:0] stack of mLSTM
blocks alone; the registry's presets keep the FFN, as for every linear family); no sLSTM blocks.
As the paper's code: projections without bias; m_0 = 0 (any m_0 gives the same output);
initialisation: gates' weights 0, forget biases evenly spaced in [3, 6], input biases N(0, 0.1);
W_up, W_q, W_k, W_v N(0, 2 / (5 d)); W_down N(0, (2 / (L sqrt(d)))^2), L = n_layers; skip s = 1.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..schema import AT_LEAST_1, POSITIVE
from .layers.short_conv import ShortConv
from .linear_recurrent import LinearRecurrent, head_norm, heads, merge, recurrence


def stabiliser(log_f: Tensor, i_pre: Tensor, m0: Tensor) -> Tensor:
    """Eq. (11') / (11): m_t = F_t + max(m_0, max_{s<=t}(i~_s - F_s)), F the cumulative log forget gate.
    log_f, i_pre (B, H, T); m0 (B, H) -> m (B, H, T), detached."""
    with torch.no_grad():
        F_ = log_f.detach().cumsum(-1)  # (B, H, T)
        running = torch.cummax(i_pre.detach() - F_, dim=-1).values  # (B, H, T)
        return F_ + torch.maximum(running, m0.detach()[..., None])


def mlstm_cell(
    q: Tensor, k: Tensor, v: Tensor, i_pre: Tensor, f_pre: Tensor, *, S: Tensor | None = None, m: Tensor | None = None, chunk_size: int = 32
) -> tuple[Tensor, Tensor, Tensor]:
    """Eq. (1)-(4) by their stabilised form (11)-(13) on ``gated_linear_attention``.

    q, k (B, H, T, dk), k already scaled by 1 / sqrt(dk); v (B, H, T, dv); i_pre, f_pre (B, H, T)
    the gates' pre-activations i~, f~; S (B, H, dk, dv + 1) = [C'^T | n'] and m (B, H) continue a
    stream (None: C_0 = 0, n_0 = 0, m_0 = 0). -> (h~ (B, H, T, dv), S, m at the last step)."""
    B, H, T, _ = q.shape
    m0 = q.new_zeros(B, H) if m is None else m.to(q.dtype)
    log_f = F.logsigmoid(f_pre)  # (B, H, T), eq. (4): log f_t
    m_t = stabiliser(log_f, i_pre, m0)  # (B, H, T), eq. (11)
    m_prev = torch.cat((m0[..., None], m_t[..., :-1]), dim=-1)  # m_{t-1}
    log_decay = log_f + m_prev - m_t  # (B, H, T), <= 0 up to rounding: eq. (12)'s forget factor
    k_in = k * (i_pre - m_t).exp()[..., None]  # (B, H, T, dk): eq. (12)'s input gate folded into the keys
    v1 = torch.cat((v, torch.ones_like(v[..., :1])), dim=-1)  # (B, H, T, dv + 1): [v; 1]
    o, S = recurrence(q, k_in, v1, log_decay=log_decay, state=S, chunk_size=chunk_size)  # [C'_t q_t; n'_t^T q_t]
    num, den = o[..., :-1], o[..., -1:]  # (B, H, T, dv), (B, H, T, 1)
    h = num / torch.maximum(den.abs(), (-m_t).exp()[..., None])  # eq. (13) = eq. (3)
    return h, S, m_t[..., -1]


class BlockDiagonal(nn.Module):
    """y = blockdiag(W_1, ..., W_{c/b}) x: blocks of b channels each mapped by its own (b, b) matrix."""

    def __init__(self, channels: int, block: int):
        super().__init__()
        if channels % block:
            raise ValueError(f"the inner width {channels} must be divisible by qkv_block {block}")
        self.block = block
        self.weight = nn.Parameter(torch.empty(channels // block, block, block))  # (blocks, out, in)

    def forward(self, x: Tensor) -> Tensor:
        # one dense (c, c) product with the blocks on the diagonal: a batch of (b, b) products has an inner
        # dimension of b (4), which the CPU's matrix kernels run several times slower than this product's
        n = self.weight.shape[0]
        eye = torch.eye(n, dtype=self.weight.dtype, device=self.weight.device)
        dense = torch.einsum("noi,nm->nomi", self.weight, eye).reshape(n * self.block, n * self.block)  # (c, c)
        return F.linear(x, dense)


class MLSTMLayer(nn.Module):
    """The mLSTM block's mixer: eq. (5)-(10) around the cell (1)-(4)."""

    #: the values its own settings may take (bench/models/base.py: Backbone.setting_domains)
    setting_domains = {"proj_factor": POSITIVE, "conv_size": AT_LEAST_1, "qkv_block": AT_LEAST_1}

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_layers: int = 1,
        chunk_size: int = 32,
        proj_factor: float = 2.0,
        conv_size: int = 4,
        qkv_block: int = 4,
    ):
        super().__init__()
        d_inner = int(round(proj_factor * d_model))
        if d_inner % n_heads:
            raise ValueError(f"proj_factor * d_model = {d_inner} must be divisible by n_heads {n_heads}")
        self.n_heads, self.head_dim, self.d_inner, self.chunk_size = n_heads, d_inner // n_heads, d_inner, chunk_size
        self.up = nn.Linear(d_model, 2 * d_inner, bias=False)  # eq. (5)
        self.conv = ShortConv(d_inner, conv_size)  # eq. (6)
        self.q, self.k, self.v = (BlockDiagonal(d_inner, qkv_block) for _ in range(3))  # eq. (7)
        self.igate = nn.Linear(3 * d_inner, n_heads)  # eq. (8)
        self.fgate = nn.Linear(3 * d_inner, n_heads)
        self.norm_weight = nn.Parameter(torch.ones(d_inner))  # eq. (9): per-head GroupNorm's scale
        self.skip = nn.Parameter(torch.ones(d_inner))  # eq. (9): the learnable skip s
        self.down = nn.Linear(d_inner, d_model, bias=False)  # eq. (10)
        small = math.sqrt(2 / (5 * d_model))
        for w in (self.up.weight, self.q.weight, self.k.weight, self.v.weight):
            nn.init.normal_(w, std=small)
        nn.init.normal_(self.down.weight, std=2 / max(1, n_layers) / math.sqrt(d_model))
        nn.init.zeros_(self.fgate.weight)
        with torch.no_grad():
            self.fgate.bias.copy_(torch.linspace(3.0, 6.0, n_heads))
        nn.init.zeros_(self.igate.weight)
        nn.init.normal_(self.igate.bias, std=0.1)

    def init_state(self, batch_size: int, device=None, dtype=None) -> dict:
        S = torch.zeros(batch_size, self.n_heads, self.head_dim, self.head_dim + 1, device=device, dtype=dtype)
        m = torch.zeros(batch_size, self.n_heads, device=device, dtype=dtype)
        return {"S": S, "m": m, "conv": self.conv.init_state(batch_size, device, dtype)}

    def forward(self, x: Tensor, state: dict | None = None) -> tuple[Tensor, dict]:
        B, T, _ = x.shape
        u, z = self.up(x).chunk(2, dim=-1)  # (B, T, d_in) each, eq. (5)
        c, conv_state = self.conv(u, None if state is None else state["conv"])
        c = F.silu(c)  # eq. (6)
        q, k, v = self.q(c), self.k(c), self.v(u)  # (B, T, d_in), eq. (7)
        gates = torch.cat((q, k, v), dim=-1)  # (B, T, 3 d_in)
        # both gates in one product (B, T, 2H): their backward's inner dimension is then 2H, not H (4: slow on the CPU)
        weight, bias = torch.cat((self.igate.weight, self.fgate.weight)), torch.cat((self.igate.bias, self.fgate.bias))
        i_pre, f_pre = F.linear(gates, weight, bias).transpose(1, 2).chunk(2, dim=1)  # (B, H, T) each, eq. (8)
        q, v = heads(q, self.n_heads), heads(v, self.n_heads)  # (B, H, T, d_h)
        k = heads(k, self.n_heads) / math.sqrt(self.head_dim)
        h, S, m = mlstm_cell(
            q,
            k,
            v,
            i_pre,
            f_pre,
            S=None if state is None else state["S"],
            m=None if state is None else state["m"],
            chunk_size=self.chunk_size,
        )  # eq. (1)-(4), (11)-(13)
        h = head_norm(merge(h), self.n_heads, self.norm_weight)  # (B, T, d_in), per head
        h = (h + self.skip * c) * F.silu(z)  # eq. (9)
        return self.down(h), {"S": S, "m": m, "conv": conv_state}  # eq. (10)


class MLSTM(LinearRecurrent):
    """mLSTM [Beck et al. 2024, xLSTM]: exponential input gate, sigmoid forget gate, normaliser, stabiliser m_t."""

    setting_domains = MLSTMLayer.setting_domains

    def __init__(
        self,
        vocab_size: int,
        causal: bool = True,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        chunk_size: int = 32,
        proj_factor: float = 2.0,
        conv_size: int = 4,
        qkv_block: int = 4,
    ):
        params = {"chunk_size": chunk_size, "proj_factor": proj_factor, "conv_size": conv_size, "qkv_block": qkv_block}
        super().__init__(vocab_size, causal, d_model, n_heads, n_layers, d_ff, dropout, mixer={"target": MLSTMLayer, "params": params})
