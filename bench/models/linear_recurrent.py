"""The stack the matrix-state recurrences share: a Transformer with its attention replaced by a
recurrent token mixer (linear-transformer, deltanet, gated-deltanet, retnet, gla, mamba2, mlstm).

    x_0 = Embed(tokens)                                  (B, T, d), no positional encoding:
                                                         decays, rotations and causality carry order
    x'_l = x_{l-1} + Mixer_l(LN x_{l-1})                 the family's recurrence (its own file)
    x_l  = x'_l + FFN(LN x'_l)                           d_ff = 0: no FFN (a pure Mamba-2 stack)
    h    = LN(x_L)

Causal only (a recurrence reads the past); classification tasks pool the per-position states
(the harness's mean over real positions). Right padding never reaches a real position.

A mixer maps (x (B, T, d), state | None) to (y (B, T, d), new state): ``None`` starts from zeros
(training), a state continues a stream. Streaming: state = {"layers": [each mixer's state]}; each
is a fixed set of tensors (the (dk, dv) matrix per head, a conv window, ...): its bytes do not grow
with the stream. ``recurrence`` runs one of the two mechanisms (bench/models/layers/
linear_recurrence.py) chunkwise, or by its step form for a single new token.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import Backbone, BackboneOutput
from .layers.dropout import Dropout
from .layers.feedforward import FeedForward
from .layers.linear_recurrence import delta_rule, delta_rule_step, gated_linear_attention, gated_linear_attention_step


def heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, H * hd) -> (B, H, T, hd)."""
    B, T, _ = x.shape
    return x.view(B, T, n_heads, -1).transpose(1, 2)


def merge(x: Tensor) -> Tensor:
    """(B, H, T, hd) -> (B, T, H * hd)."""
    B, H, T, hd = x.shape
    return x.transpose(1, 2).reshape(B, T, H * hd)


def head_norm(x: Tensor, n_heads: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """GroupNorm with one group per head, at every position: x (B, T, H * hd) normalised over each head's hd
    channels, then the per-channel affine (weight, bias (H * hd) or None). The same function as
    ``F.group_norm(x.reshape(B * T, H * hd), H, weight, bias, eps)``, as a layer norm over (..., H, hd)
    (whose backward is the cheaper on the CPU: docs/linear_recurrence.md, "Speed")."""
    y = F.layer_norm(x.unflatten(-1, (n_heads, -1)), (x.shape[-1] // n_heads,), eps=eps).flatten(-2)  # (B, T, H * hd)
    if weight is not None and bias is not None:
        return torch.addcmul(bias, y, weight)
    return y if weight is None else y * weight


def recurrence(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    beta: Tensor | None = None,
    log_decay: Tensor | None = None,
    state: Tensor | None = None,
    chunk_size: int = 64,
    decay_sign: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The delta rule (``beta`` given) or gated linear attention on (B, H, T, .) inputs from ``state``
    (None: zeros): chunkwise, or the step form when one token continues a stream."""
    if state is not None and q.shape[2] == 1:
        ld = None if log_decay is None else log_decay[:, :, 0]
        if beta is not None:
            o, S = delta_rule_step(q[:, :, 0], k[:, :, 0], v[:, :, 0], beta[:, :, 0], ld, state)
        else:
            o, S = gated_linear_attention_step(
                q[:, :, 0], k[:, :, 0], v[:, :, 0], ld, state, None if decay_sign is None else decay_sign[:, :, 0]
            )
        return o[:, :, None], S
    if beta is not None:
        return delta_rule(q, k, v, beta, log_decay, initial_state=state, chunk_size=chunk_size)
    return gated_linear_attention(q, k, v, log_decay, initial_state=state, chunk_size=chunk_size, decay_sign=decay_sign)


class RecurrentBlock(nn.Module):
    """x + Mixer(LN x), then + FFN(LN .) (pre-LN, as the Transformer block)."""

    def __init__(self, mixer: nn.Module, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.ln_mix = nn.LayerNorm(d_model)
        self.mixer = mixer
        self.ln_ffn = nn.LayerNorm(d_model) if d_ff > 0 else None
        self.ffn = FeedForward(d_model, d_ff, dropout) if d_ff > 0 else None
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor, state=None):
        y, state = self.mixer(self.ln_mix(x), state)
        x = x + self.drop(y)
        if self.ffn is not None:
            x = x + self.drop(self.ffn(self.ln_ffn(x)))
        return x, state


class LinearRecurrent(Backbone):
    """Embedding, ``n_layers`` recurrent blocks around ``make_mixer()``, final LayerNorm."""

    supports_bidirectional = False
    supports_streaming = True

    def __init__(
        self, vocab_size: int, causal: bool, d_model: int, n_layers: int, d_ff: int, dropout: float, make_mixer: Callable[[], nn.Module]
    ):
        if not causal:
            raise ValueError(f"{type(self).__name__} is a causal recurrence; it has no bidirectional form")
        super().__init__(vocab_size, causal, d_model)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.drop = Dropout(dropout)
        self.blocks = nn.ModuleList(RecurrentBlock(make_mixer(), d_model, d_ff, dropout) for _ in range(n_layers))
        self.ln_out = nn.LayerNorm(d_model)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        x = self.drop(self.embed(tokens))  # (B, T, d)
        for block in self.blocks:
            x, _ = block(x)
        return BackboneOutput(hidden=self.ln_out(x), aux_loss=self.zero_aux(x))

    # ---- streaming -----------------------------------------------------------------------
    def init_state(self, batch_size: int, device=None) -> dict:
        dtype = self.embed.weight.dtype
        return {"layers": [block.mixer.init_state(batch_size, device or self.embed.weight.device, dtype) for block in self.blocks]}

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        x = self.drop(self.embed(tokens))  # (B, t, d)
        layers = []
        for block, layer_state in zip(self.blocks, state["layers"]):
            x, layer_state = block(x, layer_state)
            layers.append(layer_state)
        return BackboneOutput(hidden=self.ln_out(x), aux_loss=self.zero_aux(x)), {"layers": layers}
