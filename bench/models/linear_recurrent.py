"""The stack the matrix-state recurrences share: a Transformer with its attention replaced by a
recurrent token mixer (linear-transformer, deltanet, gated-deltanet, retnet, gla, mamba2, mlstm, hgrn2).

    x_0 = Embed(tokens)                                  (B, T, d), no positional encoding:
                                                         decays, rotations and causality carry order
    x'_l = x_{l-1} + Mixer_l(LN x_{l-1})                 the family's recurrence (its own file)
    x_l  = x'_l + FFN(LN x'_l)                           d_ff = 0: no FFN (a pure Mamba-2 stack)
    h    = LN(x_L)

Causal only (a recurrence reads the past); classification tasks pool the per-position states
(the harness's mean over real positions). Right padding never reaches a real position.

The mixer is data: ``mixer: {target: "module:Class", params: {...}}`` (a class in place of the
string from code); layer l's mixer is ``Class(d_model=, n_heads=, layer_idx=l, n_layers=L, **params)``,
``layer_idx`` and ``n_layers`` given where the constructor names them (a per-layer setting, e.g.
HGRN2's forget-gate lower bound, reads its layer from them). ``mixers: {every: k, mixer: {...}}``
puts another mixer in every k-th layer (layers k-1, 2k-1, ...): a hybrid is a registry entry
(``CausalSelfAttention`` below is softmax attention as a mixer). A family (gla.py, ...) is this
stack with its own mixer: its constructor states the mixer, so its records hold no ``mixer`` key.

A mixer maps (x (B, T, d), state | None) to (y (B, T, d), new state): ``None`` starts from zeros
(training), a state continues a stream. Streaming: state = {"layers": [each mixer's state]}. A
recurrent mixer's state is a fixed set of tensors (the (dk, dv) matrix per head, a conv window,
...): its bytes do not grow with the stream; a mixer declares it (``bounded_state``), and the
stack's state is bounded when every layer's is (attention's KV cache grows with the stream).
``recurrence`` runs one of the two mechanisms (bench/models/layers/linear_recurrence.py)
chunkwise, or by its step form for a single new token.
"""

from __future__ import annotations

import importlib
import inspect

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import Backbone, BackboneOutput
from .layers.attention import MultiHeadAttention
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


def mixer_class(target) -> type:
    """The class a mixer spec's ``target`` names: a class, or "package.module:ClassName"."""
    if inspect.isclass(target):
        return target
    if not isinstance(target, str) or ":" not in target:
        raise ValueError(f"mixer target must look like 'package.module:ClassName', got {target!r}")
    module_name, _, name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"mixer target {target!r} cannot be imported ({type(exc).__name__}: {exc})") from None
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise ValueError(f"mixer target {target!r} is not an nn.Module class")
    return cls


def build_mixer(spec: dict, d_model: int, n_heads: int, layer_idx: int, n_layers: int) -> nn.Module:
    """Layer ``layer_idx``'s mixer from ``spec`` = {target, params}: the stack's sizes and the layer's
    place (those the constructor names) beside the spec's params."""
    if not isinstance(spec, dict) or "target" not in spec or set(spec) - {"target", "params"}:
        raise ValueError(f"a mixer is {{target: 'module:Class', params: {{...}}}}, got {spec!r}")
    cls = mixer_class(spec["target"])
    accepted = inspect.signature(cls).parameters
    given = {"d_model": d_model, "n_heads": n_heads, "layer_idx": layer_idx, "n_layers": n_layers}
    params = dict(spec.get("params") or {})
    clash = sorted(set(params) & set(given))
    unknown = sorted(set(params) - set(accepted))
    if clash or unknown:
        what = f"{', '.join(clash)} set by the stack" if clash else f"{', '.join(unknown)} not accepted by {cls.__name__}"
        raise ValueError(f"mixer {cls.__name__} params: {what} (it takes {', '.join(p for p in accepted if p not in given)})")
    return cls(**{k: v for k, v in given.items() if k in accepted}, **params)


def layer_mixers(mixer: dict, mixers: dict | None, n_layers: int) -> list[dict]:
    """Each layer's mixer spec: ``mixer``, or ``mixers["mixer"]`` in every ``mixers["every"]``-th layer."""
    if mixers is None:
        return [mixer] * n_layers
    every = mixers.get("every") if isinstance(mixers, dict) else None
    if set(mixers) != {"every", "mixer"} or not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ValueError(f"mixers is {{every: k >= 1, mixer: {{target, params}}}} (the mixer of every k-th layer), got {mixers!r}")
    return [mixers["mixer"] if (layer + 1) % every == 0 else mixer for layer in range(n_layers)]


class CausalSelfAttention(nn.Module):
    """Softmax attention as a mixer (bench/models/layers/attention.py, causal, no positional encoding:
    the recurrent layers of a hybrid carry order). Its streaming state is the KV cache of every
    position seen: it grows with the stream."""

    bounded_state = False

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, n_heads, dropout=dropout)

    def init_state(self, batch_size: int, device=None, dtype=None) -> dict:
        return self.attention.init_cache(batch_size, device)

    def forward(self, x: Tensor, state: dict | None = None) -> tuple[Tensor, dict | None]:
        if state is None:
            return self.attention(x, causal=True), None
        return self.attention.step(x, state)


class LinearRecurrent(Backbone):
    """Embedding, ``n_layers`` recurrent blocks around each layer's mixer, final LayerNorm."""

    supports_bidirectional = False
    supports_streaming = True
    recurrence = "linear"

    def __init__(
        self,
        vocab_size: int,
        causal: bool = True,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        *,
        mixer: dict,
        mixers: dict | None = None,
    ):
        if not causal:
            raise ValueError(f"{type(self).__name__} is a causal recurrence; it has no bidirectional form")
        super().__init__(vocab_size, causal, d_model)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.drop = Dropout(dropout)
        specs = layer_mixers(mixer, mixers, n_layers)
        self.blocks = nn.ModuleList(
            RecurrentBlock(build_mixer(spec, d_model, n_heads, layer, n_layers), d_model, d_ff, dropout) for layer, spec in enumerate(specs)
        )
        self.ln_out = nn.LayerNorm(d_model)

    @property
    def bounded_state(self) -> bool:
        """Whether the streaming state stops growing: every layer's mixer declares its own (recurrent
        mixers: a fixed size; attention: a KV cache that grows)."""
        return all(getattr(block.mixer, "bounded_state", True) for block in self.blocks)

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
