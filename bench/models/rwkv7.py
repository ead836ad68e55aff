"""RWKV-7 "Goose" (Peng, Zhang, Goldstein, Alcaide, Du, Hou, Lin, Liu, Lu, Merrill, et al. 2025,
"RWKV-7 'Goose' with Expressive Dynamic State Evolution"): a matrix state per head whose transition is
a per-channel decay plus a rank-one update, the generalised delta rule.

Per layer, on x (B, T, d) with H heads of N = d / H channels; x'_t = x_{t-1} (token shift; x'_1 = 0,
or the stream's last input):

    x_c = x + (x' - x) * mu_c           for c in r, w, k, v, a, g             (1)   token shift, per-channel lerp
    r = W_r x_r,  k = W_k x_k,  v = W_v x_v                                   (2)   receptance (the query), key, value
    w = exp(-e^{-1/2} sigmoid(w_0 + tanh(x_w A_w) B_w))  in (0.545, 1)       (3)   decay per channel (a LoRA)
    v <- v + (v_1 - v) * sigmoid(v_0 + x_v A_v B_v)   in layers 2..L          (4)   value residual: v_1 = layer 1's v
    a = sigmoid(a_0 + x_a A_a B_a)  in (0, 1)                                 (5)   in-context learning rate
    g = sigmoid(x_g A_g) B_g                                                  (6)   output gate
    kappa^ = normalise_head(k * xi),  k~ = k * (1 + (a - 1) * alpha)          (7)   removal key, replacement key
    S_t = (diag(w_t) - (a_t * kappa^_t) kappa^_t^T) S_{t-1} + k~_t v_t^T      (8)   the generalised delta rule
    p_t = GroupNorm_head(S_t^T r_t) + ((r_t * rho * k~_t) . 1_head) v_t       (9)   read, per-head norm, bonus
    out = W_o (g * p)                                                         (10)

and the channel mix, x_k = x + (x' - x) * mu_k',  out = W_v' ReLU(W_k' x_k)^2   (11). The block:
x <- x + TimeMix(LN x); x <- x + ChannelMix(LN x).

S is (N, N) per head in bench's orientation (S^T r reads it; the paper writes its transpose, the
state times the transition). (8) is ``dplr_delta_rule`` (bench/models/layers/linear_recurrence.py)
with read direction a = -kappa^, write direction b = kappa^ * a_t, key k~, log decay log w: the
state's component along kappa^ is decayed and then reduced by the in-context rate a_t, and k~ v^T
written. With a_t = 1, w = 1 and k~ = kappa^ it is the delta rule with beta = 1 (the key's old
value replaced).

As the authors' code (BlinkDL/RWKV-LM, RWKV-v7/train_temp/rwkv7_train_simplified.py, read for the
initialisation): projections without bias; mu_c = 1 - (i/d)^(p_c (1 - l/L)) (p = 0.2 for r and g,
0.9 for w and a, 0.7 for k and v; l the layer index from 0); w_0 = -6 + 6 (i/(d-1))^(1 + (l/(L-1))^0.3)
+ 1/2 + 5/2 z_i (z a per-head zigzag in [-1, 1], squared with its sign); a_0 = -0.19 + 0.3 z + 0.4 lin,
v_0 = 0.73 - 0.4 lin (lin = i/(d-1) - 1/2); xi = 0.71 - 0.1 lin; alpha = 1.02; rho = -0.04; the LoRAs'
first matrices zero and second orthogonal (gain 0.1); W_r, W_v uniform +-0.5/sqrt(d), W_k +-0.05/sqrt(d),
W_o zero; GroupNorm eps 64e-5; the channel mix's W_k' orthogonal (gain 2), W_v' zero, mu_k' = 0.

Simplified against the paper: the channel mix's width is the preset's ``d_ff`` (the paper's 4 d);
LoRA ranks ``lora_rank`` (8, the authors' setting for small widths); no LayerNorm after the
embedding; the harness's dropout on both residual branches. ``chunk_size`` 32: the chunked form's chunk (at head
width 16 a training step is fastest at 16-32 on the CPU, measured against 8 and 64; the chunk changes
the rounding, not the function). Streaming: per layer S (B, H, N, N) and
the two token-shift inputs (B, d): a fixed size whatever the context; v_1 is recomputed at each
position (layer 1 at the same token), never stored.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..schema import AT_LEAST_1
from .base import Backbone, BackboneOutput
from .layers.dropout import Dropout
from .layers.linear_recurrence import dplr_delta_rule, dplr_delta_rule_step
from .linear_recurrent import head_norm, heads, merge

DECAY_SCALE = math.exp(-0.5)  # eq. (3): log w = -e^{-1/2} sigmoid(.), so every log w lies in (-DECAY_SCALE, 0)


def token_shift(x: Tensor, last: Tensor | None) -> tuple[Tensor, Tensor]:
    """x (B, T, d), last (B, d) or None (zeros) -> (x' with x'_t = x_{t-1}, the new last input x_T)."""
    first = x.new_zeros(x.shape[0], 1, x.shape[2]) if last is None else last[:, None].to(x.dtype)
    return torch.cat((first, x[:, :-1]), dim=1), x[:, -1]


def lora(d: int, rank: int) -> tuple[nn.Parameter, nn.Parameter]:
    """A (d, rank) = 0 and B (rank, d) orthogonal with gain 0.1 (the authors' init): x A B starts at 0."""
    B = torch.empty(rank, d)
    nn.init.orthogonal_(B, gain=0.1 * (math.sqrt(rank / d) if rank > d else 1.0))
    return nn.Parameter(torch.zeros(d, rank)), nn.Parameter(B)


class TimeMix(nn.Module):
    """Eq. (1)-(10)."""

    #: the values its own settings may take (bench/models/base.py: Backbone.setting_domains)
    setting_domains = {"lora_rank": AT_LEAST_1}

    def __init__(self, d_model: int, n_heads: int, layer: int, n_layers: int, lora_rank: int = 8, chunk_size: int = 32):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be divisible by n_heads {n_heads}")
        d, N = d_model, d_model // n_heads
        self.n_heads, self.layer, self.chunk_size = n_heads, layer, chunk_size
        i = torch.arange(d, dtype=torch.float32)
        depth = 1 - layer / n_layers  # 1 to ~0
        depth01 = layer / max(1, n_layers - 1)  # 0 to 1
        self.mu = nn.Parameter(torch.stack([1 - (i / d) ** (p * depth) for p in (0.2, 0.9, 0.7, 0.7, 0.9, 0.2)]))  # r w k v a g
        lin = i / (d - 1) - 0.5 if d > 1 else torch.zeros(1)
        zig = ((i % N) - (N - 1) / 2) / max((N - 1) / 2, 1)
        zig = zig * zig.abs()
        self.w0 = nn.Parameter(-6 + 6 * (i / max(d - 1, 1)) ** (1 + depth01**0.3) + 0.5 + 2.5 * zig)
        self.w1, self.w2 = lora(d, lora_rank)
        self.a0 = nn.Parameter(-0.19 + 0.3 * zig + 0.4 * lin)
        self.a1, self.a2 = lora(d, lora_rank)
        if layer > 0:  # eq. (4): the value residual, from the second layer on
            self.v0 = nn.Parameter(0.73 - 0.4 * lin)
            self.v1, self.v2 = lora(d, lora_rank)
        self.g1, self.g2 = lora(d, lora_rank)
        self.xi = nn.Parameter(0.71 - 0.1 * lin)  # the removal key's channel scale (k_k in the code)
        self.alpha = nn.Parameter(torch.full((d,), 1.02))  # the replacement key's mix (k_a)
        self.rho = nn.Parameter(torch.full((n_heads, N), -0.04))  # the bonus's scale (r_k)
        self.receptance, self.key, self.value, self.output = (nn.Linear(d, d, bias=False) for _ in range(4))
        for lin_, s in ((self.receptance, 0.5), (self.key, 0.05), (self.value, 0.5)):
            nn.init.uniform_(lin_.weight, -s / math.sqrt(d), s / math.sqrt(d))
        nn.init.zeros_(self.output.weight)
        self.ln_x = nn.GroupNorm(n_heads, d, eps=64e-5)

    def init_state(self, batch_size: int, device=None, dtype=None) -> dict:
        N = self.mu.shape[1] // self.n_heads
        return {
            "S": torch.zeros(batch_size, self.n_heads, N, N, device=device, dtype=dtype),
            "shift": torch.zeros(batch_size, self.mu.shape[1], device=device, dtype=dtype),
        }

    def forward(self, x: Tensor, v_first: Tensor | None, state: dict | None = None) -> tuple[Tensor, Tensor, dict]:
        """x (B, T, d); v_first layer 1's values (None in layer 1) -> (out, v_first, state)."""
        B, T, d = x.shape
        shifted, last = token_shift(x, None if state is None else state["shift"])
        xr, xw, xk, xv, xa, xg = (x[:, :, None] + (shifted - x)[:, :, None] * self.mu).unbind(2)  # (B, T, d) each, eq. (1)
        r, k, v = self.receptance(xr), self.key(xk), self.value(xv)  # eq. (2)
        log_w = -DECAY_SCALE * torch.sigmoid(self.w0 + torch.tanh(xw @ self.w1) @ self.w2)  # (B, T, d), eq. (3): log w
        if v_first is None:
            v_first = v
        else:
            v = v + (v_first - v) * torch.sigmoid(self.v0 + xv @ self.v1 @ self.v2)  # eq. (4)
        a = torch.sigmoid(self.a0 + xa @ self.a1 @ self.a2)  # eq. (5)
        g = torch.sigmoid(xg @ self.g1) @ self.g2  # eq. (6)
        kappa = F.normalize(heads(k * self.xi, self.n_heads), dim=-1)  # (B, H, T, N), eq. (7)
        k = k * (1 + (a - 1) * self.alpha)  # k~
        r, k, v, a, log_w = (heads(t, self.n_heads) for t in (r, k, v, a, log_w))  # (B, H, T, N)
        S0 = None if state is None else state["S"]
        if S0 is not None and T == 1:  # eq. (8), one token of a stream
            o, S = dplr_delta_rule_step(r[:, :, 0], k[:, :, 0], v[:, :, 0], -kappa[:, :, 0], (kappa * a)[:, :, 0], log_w[:, :, 0], S0)
            o = o[:, :, None]
        else:
            o, S = dplr_delta_rule(
                r, k, v, -kappa, kappa * a, log_w, initial_state=S0, chunk_size=self.chunk_size, decay_floor=-DECAY_SCALE
            )  # eq. (3)'s bound: no host read of the decays
        o = head_norm(merge(o), self.n_heads, self.ln_x.weight, self.ln_x.bias, self.ln_x.eps)  # (B, T, d), eq. (9)
        bonus = (r * self.rho[:, None] * k).sum(-1, keepdim=True) * v  # (B, H, T, N)
        o = o + merge(bonus)
        return self.output(g * o), v_first, {"S": S, "shift": last}  # eq. (10)


class ChannelMix(nn.Module):
    """Eq. (11): token shift, then W_v' ReLU(W_k' x_k)^2."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.mu = nn.Parameter(torch.zeros(d_model))
        self.key = nn.Linear(d_model, d_ff, bias=False)
        self.value = nn.Linear(d_ff, d_model, bias=False)
        nn.init.orthogonal_(self.key.weight, gain=2.0)
        nn.init.zeros_(self.value.weight)

    def forward(self, x: Tensor, last: Tensor | None = None) -> tuple[Tensor, Tensor]:
        shifted, last = token_shift(x, last)
        xk = x + (shifted - x) * self.mu
        return self.value(torch.relu(self.key(xk)) ** 2), last


class RWKV7Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, layer: int, n_layers: int, lora_rank: int, chunk_size: int):
        super().__init__()
        self.ln_time, self.ln_channel = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.time = TimeMix(d_model, n_heads, layer, n_layers, lora_rank, chunk_size)
        self.channel = ChannelMix(d_model, d_ff)
        self.drop = Dropout(dropout)

    def init_state(self, batch_size: int, device=None, dtype=None) -> dict:
        shift = torch.zeros(batch_size, self.channel.mu.shape[0], device=device, dtype=dtype)
        return {"time": self.time.init_state(batch_size, device, dtype), "channel": shift}

    def forward(self, x: Tensor, v_first: Tensor | None, state: dict | None = None) -> tuple[Tensor, Tensor, dict]:
        y, v_first, time_state = self.time(self.ln_time(x), v_first, None if state is None else state["time"])
        x = x + self.drop(y)
        y, channel_state = self.channel(self.ln_channel(x), None if state is None else state["channel"])
        return x + self.drop(y), v_first, {"time": time_state, "channel": channel_state}


class RWKV7(Backbone):
    """RWKV-7 [Peng et al. 2025]: embedding, ``n_layers`` blocks of eq. (1)-(11), final LayerNorm."""

    supports_bidirectional = False
    supports_streaming = True
    recurrence = "linear"
    bounded_state = True  # each layer's matrix state and its token shifts

    setting_domains = TimeMix.setting_domains

    def __init__(
        self,
        vocab_size: int,
        causal: bool = True,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        lora_rank: int = 8,
        chunk_size: int = 32,
    ):
        if not causal:
            raise ValueError("RWKV7 is a causal recurrence; it has no bidirectional form")
        if d_ff < 1:
            raise ValueError(f"RWKV-7's channel mix needs d_ff >= 1; got {d_ff}")
        super().__init__(vocab_size, causal, d_model)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.drop = Dropout(dropout)
        self.blocks = nn.ModuleList(
            RWKV7Block(d_model, n_heads, d_ff, dropout, layer, n_layers, lora_rank, chunk_size) for layer in range(n_layers)
        )
        self.ln_out = nn.LayerNorm(d_model)

    def _run(self, tokens: Tensor, state: dict | None) -> tuple[BackboneOutput, dict]:
        x = self.drop(self.embed(tokens))  # (B, T, d)
        v_first, layers = None, []
        for i, block in enumerate(self.blocks):
            x, v_first, layer_state = block(x, v_first, None if state is None else state["layers"][i])
            layers.append(layer_state)
        return BackboneOutput(hidden=self.ln_out(x), aux_loss=self.zero_aux(x)), {"layers": layers}

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        return self._run(tokens, None)[0]

    def init_state(self, batch_size: int, device=None) -> dict:
        dtype, device = self.embed.weight.dtype, device or self.embed.weight.device
        return {"layers": [block.init_state(batch_size, device, dtype) for block in self.blocks]}

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        return self._run(tokens, state)
