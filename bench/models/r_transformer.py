"""R-Transformer [RT §3]: LocalRNN + multi-head attention + FFN per layer, no positional encoding.

Layer i (pre-LN residual sublayers, as in the authors' code):
    x = x + LocalRNN(LN x)          repeated ``rnn_per_layer`` times   (eqs. 2-3, local structure)
    x = x + MHA(LN x)               causal over the whole prefix       (eqs. 4-6, global dependencies)
    x = x + FFN(LN x)               ReLU by default                    (eq. 7)
(the last two lines are the shared pre-LN ``TransformerBlock``, without positions).
Order information comes only from the LocalRNN windows (left-padded, so causal) and, in the
decoder, from causal masking: no positional encoding anywhere.

Streaming (causal): each LocalRNN keeps its last M-1 inputs, each attention a KV cache (no
positions to continue).

``norm="reference"`` / ``attn_bias=True`` (``model.faithful=reference`` sets both): the authors' code's
LayerNorm (unbiased std, eps outside the root) and biased attention projections
(DSE-MSU/R-transformer ``models/RTransformer.py``: ``LayerNorm`` lines 11-22, ``MHPooling``'s
``clones(nn.Linear(d_model, d_model), 4)``).

The paper targets autoregressive tasks; with ``causal=False`` (classification) attention becomes
bidirectional over real tokens while the LocalRNN windows stay left-to-right.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import Backbone, BackboneOutput, StreamingUnsupported
from .layers import TransformerBlock
from .layers.feedforward import ACTIVATIONS
from .layers.local_rnn import LocalRNN

NORMS = ("torch", "reference")  # model.norm


class CodeLayerNorm(nn.Module):
    """The R-Transformer code's LayerNorm (DSE-MSU/R-transformer, ``models/RTransformer.py`` lines
    11-22): weight * (x - mean) / (std + eps) + bias with the UNBIASED std and eps = 1e-6 outside the
    root (torch's: the biased variance, eps inside the root). Same parameters as ``nn.LayerNorm``."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps
        self.normalized_shape = (d_model,)

    def forward(self, x: Tensor) -> Tensor:  # (..., d)
        mean = x.mean(-1, keepdim=True)
        return self.weight * (x - mean) / (x.std(-1, keepdim=True) + self.eps) + self.bias


def use_code_norm(module: nn.Module) -> None:
    """Every ``nn.LayerNorm`` under ``module`` replaced by ``CodeLayerNorm`` (fresh: ones and zeros)."""
    for name, child in list(module.named_children()):
        if isinstance(child, nn.LayerNorm):
            setattr(module, name, CodeLayerNorm(child.normalized_shape[0]))
        else:
            use_code_norm(child)


class RTransformerLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, window, cell, rnn_per_layer, dropout, activation, backend, attn_bias=False):
        super().__init__()
        self.ln_rnn = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(rnn_per_layer))
        self.rnns = nn.ModuleList(LocalRNN(d_model, window, cell) for _ in range(rnn_per_layer))
        self.drop = nn.Dropout(dropout)
        # MHA (no positions) + FFN (eq. 7: ReLU by default)
        self.block = TransformerBlock(d_model, n_heads, d_ff, dropout=dropout, backend=backend, activation=activation, attn_bias=attn_bias)

    def forward(self, x: Tensor, key_mask: Tensor | None, causal: bool) -> Tensor:  # (B, T, d)
        for ln, rnn in zip(self.ln_rnn, self.rnns):
            x = x + self.drop(rnn(ln(x)))
        return self.block(x, key_mask=key_mask, causal=causal)

    def init_state(self, batch_size: int, device=None) -> dict:
        d = self.block.ln_attn.normalized_shape[0]
        dtype = self.block.ln_attn.weight.dtype
        return {
            "rnn": [rnn.init_state(batch_size, d, device, dtype) for rnn in self.rnns],
            "attn": self.block.init_cache(batch_size, device),
        }

    def step(self, x: Tensor, state: dict) -> tuple[Tensor, dict]:  # x (B, t, d): new positions
        windows = []
        for ln, rnn, prev in zip(self.ln_rnn, self.rnns, state["rnn"]):
            y, prev = rnn.step(ln(x), prev)
            x = x + self.drop(y)
            windows.append(prev)
        x, cache = self.block.step(x, state["attn"])
        return x, {"rnn": windows, "attn": cache}


class RTransformer(Backbone):
    supports_streaming = True
    recurrence = "local-rnn"  # bounded_state stays False: its attention caches grow; the LocalRNN windows do not
    #: model.faithful=reference: the code's LayerNorm (unbiased std, eps outside the root) and biased
    #: attention projections
    reference_options = {"norm": "reference", "attn_bias": True}

    def __init__(
        self,
        vocab_size: int,
        causal: bool,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        window: int = 7,
        cell: str = "gru",
        rnn_per_layer: int = 1,
        activation: str = "relu",
        dropout: float = 0.1,
        attn_backend: str = "sdpa",
        norm: str = "torch",
        attn_bias: bool = False,
    ):
        super().__init__(vocab_size, causal, d_model)
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {', '.join(NORMS)}, not {norm!r}")
        self.embed = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            RTransformerLayer(d_model, n_heads, d_ff, window, cell, rnn_per_layer, dropout, activation, attn_backend, attn_bias)
            for _ in range(n_layers)
        )
        self.ln_out = nn.LayerNorm(d_model)
        if norm == "reference":  # the code's LayerNorm everywhere (eval outputs differ by up to ~1e-2)
            use_code_norm(self)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        key_mask = None if (self.causal or mask is None) else mask.bool()  # no sync to skip an all-real mask
        x = self.drop(self.embed(tokens))  # (B, T, d)
        for layer in self.layers:
            x = layer(x, key_mask, self.causal)
        return BackboneOutput(hidden=self.ln_out(x), aux_loss=self.zero_aux(x))

    def bounded_state_part(self, state: list) -> list:
        """The LocalRNN windows (the last window - 1 inputs of every layer's RNNs); the attention caches grow."""
        return [layer["rnn"] for layer in state]

    def init_state(self, batch_size: int, device=None) -> list:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        return [layer.init_state(batch_size, device) for layer in self.layers]

    def step(self, tokens: Tensor, state: list) -> tuple[BackboneOutput, list]:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        x = self.drop(self.embed(tokens))  # (B, t, d)
        new_state = []
        for layer, layer_state in zip(self.layers, state):
            x, layer_state = layer.step(x, layer_state)
            new_state.append(layer_state)
        return BackboneOutput(hidden=self.ln_out(x), aux_loss=self.zero_aux(x)), new_state
