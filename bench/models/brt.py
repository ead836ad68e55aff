"""Block-Recurrent Transformer (Hutchins et al., 2022), as restated in [RSA §4.3, App. E.3].

The sequence is cut into blocks of W = ``block_size`` tokens, processed in order. Every layer
is Transformer-XL style (``models.xl``): tokens attend, with relative positions, to the
current block plus the cached (stop-gradient) previous block. One layer, the third from the
top as in [RSA], is *recurrent*: it also carries S state vectors c (B, S, d) across blocks.

Recurrent layer, block t (tokens x, state c_t; learned state IDs e added to the state):
  vertical   x' = x + SelfAttn_rel(LN x | [mem; x]) + CrossAttn(LN x -> LN c_t + e)
             x'' = x' + FFN(LN x')
  horizontal h  = SelfAttn(LN c_t + e) + CrossAttn(LN c_t + e -> LN x)     (current block)
             c'  = gate_1(c_t, h);   c_{t+1} = gate_2(c', FFN(LN c'))   (gates replace residuals)
Gates (``gate``):
  fixed  z = W_z h + b_z,  g = sigmoid(b_g),  c = c * g + z * (1 - g)
  lstm   z = tanh(W_z h + b_z),  i = sigmoid(W_i h + b_i - 1),  f = sigmoid(W_f h + b_f + 1),
         c = c * f + z * i
The paper concatenates the two attention outputs and projects them with one linear map; the
sum of two attentions, each with its own output projection, is the same function class.

Streaming (causal): every layer caches the keys and values of [previous block; current block
prefix]; the recurrent layer also keeps the current block's normalised inputs LN x, which the
horizontal direction reads once the block completes. Then c_{t+1} is computed exactly as in
``forward`` and every cache keeps the finished block (the next block's XL cache). State: {"pos":
position within the block, "layers": [{"k", "v", "r"}] (``RelativeAttention.init_cache``), "c":
(B, S, d), "block": (B, pos, d)}, bounded by 2W keys per layer.

Causality: tokens of block t read only c_t, built from blocks < t, and attend causally over
[previous block; current block]; so a causal BRT never lets position t see positions > t.
Gradients flow through the state across all blocks of a sequence (the model's recurrence),
but not through the XL caches (as in Transformer-XL). A block with no real token leaves the
state untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .base import Adaptation, Backbone, BackboneOutput, StreamingUnsupported
from .layers import FeedForward, MultiHeadAttention, RelativeAttention, RelativeBlock, project_relative, rsa_gate_stats
from .layers.memory import init_slots, keep_where
from .layers.relative import keep_last
from .layers.rsa import adapt_rsa
from .xl import SegmentMemory, segment_mask_bias

GATES = ("fixed", "lstm")


class FixedGate(nn.Module):
    """c_next = c * sigmoid(b_g) + (W_z h + b_z) * (1 - sigmoid(b_g)); b_g learned per channel."""

    def __init__(self, d_model: int, bias_init: float = 1.0):
        super().__init__()
        self.z = nn.Linear(d_model, d_model)
        self.b_g = nn.Parameter(torch.full((d_model,), bias_init))

    def forward(self, c: Tensor, h: Tensor) -> Tensor:
        g = torch.sigmoid(self.b_g)
        return c * g + self.z(h) * (1 - g)


class LSTMGate(nn.Module):
    """LSTM-style input/forget gates; the -1 / +1 offsets start it biased towards remembering."""

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, 3 * d_model)  # W_z, W_i, W_f stacked

    def forward(self, c: Tensor, h: Tensor) -> Tensor:
        z, i, f = self.proj(h).chunk(3, dim=-1)
        return c * torch.sigmoid(f + 1.0) + torch.tanh(z) * torch.sigmoid(i - 1.0)


class BlockRecurrentLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_state, *, gate="fixed", dropout=0.0, attn_dropout=0.0, backend="sdpa", rsa=None):
        super().__init__()
        if gate not in GATES:
            raise ValueError(f"unknown BRT gate {gate!r}; choose one of {', '.join(GATES)}")
        kw = dict(backend=backend, dropout=attn_dropout)
        self.state_ids = init_slots(n_state, d_model)  # learned state IDs: the state is a set otherwise
        # vertical direction (tokens)
        self.ln_x = nn.LayerNorm(d_model)
        self.ln_c = nn.LayerNorm(d_model)
        self.token_self = RelativeAttention(d_model, n_heads, backend=backend, attn_dropout=attn_dropout, rsa=rsa)
        self.token_cross = MultiHeadAttention(d_model, n_heads, **kw)
        self.ln_x_ffn = nn.LayerNorm(d_model)
        self.x_ffn = FeedForward(d_model, d_ff, dropout)
        # horizontal direction (state)
        self.state_self = MultiHeadAttention(d_model, n_heads, **kw)
        self.state_cross = MultiHeadAttention(d_model, n_heads, **kw)
        self.ln_c_ffn = nn.LayerNorm(d_model)
        self.c_ffn = FeedForward(d_model, d_ff, dropout)
        Gate = FixedGate if gate == "fixed" else LSTMGate
        self.gate_attn, self.gate_ffn = Gate(d_model), Gate(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, c, *, cached, block_mask, **attn):
        # x (B, W, d), c (B, S, d), cached (B, M, d) | None, block_mask (B, W);
        # attn: the relative self-attention's key_mask, causal, rel, mask_bias
        hx = self.ln_x(x)
        ctx = hx if cached is None else torch.cat((self.ln_x(cached), hx), dim=1)  # (B, M+W, d)
        hc = self.ln_c(c) + self.state_ids  # (B, S, d)
        x = self.vertical(x, hx, hc, self.token_self(hx, ctx, **attn))
        return x, keep_where(block_mask.any(-1), self.horizontal(c, hc, hx, block_mask), c)

    def vertical(self, x, hx, hc, self_attn):
        """x' = x + SelfAttn_rel + CrossAttn(LN x -> LN c_t + e); x'' = x' + FFN(LN x')."""
        x = x + self.drop(self_attn + self.token_cross(hx, context=hc))
        return x + self.drop(self.x_ffn(self.ln_x_ffn(x)))

    def horizontal(self, c, hc, hx, block_mask=None):
        """c_{t+1} from c_t (B, S, d) and the block's LN x (B, W, d): attention, then the two gates."""
        h = self.state_self(hc) + self.state_cross(hc, context=hx, key_mask=block_mask)  # (B, S, d)
        c_new = self.gate_attn(c, self.drop(h))
        return self.gate_ffn(c_new, self.drop(self.c_ffn(self.ln_c_ffn(c_new))))

    def step(self, x, c, cache, block):
        """Streaming, t new positions of the current block: x (B, t, d), c = c_t, ``cache`` the
        token self-attention's, ``block`` (B, pos, d) the block's LN x so far -> (x'', cache, block)."""
        hx = self.ln_x(x)
        self_attn, cache = self.token_self.step(hx, cache)
        x = self.vertical(x, hx, self.ln_c(c) + self.state_ids, self_attn)
        return x, cache, torch.cat((block, hx), dim=1)


@dataclass
class BRTState:
    cache: SegmentMemory | None  # previous block's layer inputs (XL cache, detached)
    c: Tensor  # (B, S, d) recurrent state, differentiable across blocks


class BlockRecurrentTransformer(Backbone):
    supports_streaming = True
    recurrence = "chunk"
    bounded_state = True  # the recurrent state vectors and at most one block's caches

    @classmethod
    def adapt(cls, params: dict, data: dict) -> list[Adaptation]:
        """The REM kinds fitted to n_heads where they exceed it (layers/rsa.py: fit_kinds)."""
        return adapt_rsa(params)

    def __init__(
        self,
        vocab_size: int,
        causal: bool,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 4,
        d_ff: int = 256,
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        block_size: int = 32,
        n_state: int = 32,
        gate: str = "fixed",
        recurrent_layer: int = -3,
        attn_backend: str = "sdpa",
        rsa: dict | None = None,
    ):
        super().__init__(vocab_size, causal, d_model)
        self.block_size = block_size
        self.recurrent_index = recurrent_layer % n_layers if n_layers >= abs(recurrent_layer) else 0  # -3: third from top
        kw = dict(dropout=dropout, attn_dropout=attn_dropout, backend=attn_backend, rsa=rsa)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(
            BlockRecurrentLayer(d_model, n_heads, d_ff, n_state, gate=gate, **kw)
            if l == self.recurrent_index
            else RelativeBlock(d_model, n_heads, d_ff, **kw)  # an XL layer
            for l in range(n_layers)
        )
        self.state0 = init_slots(n_state, d_model)
        self.drop = nn.Dropout(dropout)
        self.ln_out = nn.LayerNorm(d_model)

    def initial_state(self, batch: int) -> BRTState:
        return BRTState(None, self.state0.expand(batch, -1, -1))

    def relative_positions(self, max_dist: int, device) -> list[Tensor]:
        """Every layer's W_R R of its relative self-attention, distances -max_dist..max_dist."""
        attns = [layer.token_self if l == self.recurrent_index else layer.attn for l, layer in enumerate(self.layers)]
        return project_relative(attns, max_dist, device)  # (H, 2 max_dist + 1, hd) each

    def forward_block(self, tokens: Tensor, mask: Tensor, state: BRTState, rel: list[Tensor] | None = None) -> tuple[Tensor, BRTState]:
        """One block (B, W) -> (hidden (B, W, d), state for the next block). ``rel``: the layers'
        relative positions (``relative_positions``), built here when None."""
        x = self.drop(self.embed(tokens))  # (B, W, d)
        key_mask, mask_bias = segment_mask_bias(self.causal, state.cache, mask)  # shared by every layer
        if rel is None:
            rel = self.relative_positions(tokens.shape[1] + (0 if state.cache is None else state.cache.mask.shape[1]) - 1, x.device)
        c, inputs = state.c, []
        for l, layer in enumerate(self.layers):
            inputs.append(x)
            cached = None if state.cache is None else state.cache.mems[l]
            attn = dict(causal=self.causal, key_mask=key_mask, rel=rel[l], mask_bias=mask_bias)
            if l == self.recurrent_index:
                x, c = layer(x, c, cached=cached, block_mask=mask, **attn)
            else:
                x = layer(x, cached=cached, **attn)
        # The XL cache keeps exactly the previous block (sliding window of 2W keys).
        return self.ln_out(x), BRTState(SegmentMemory.extend(None, inputs, mask, self.block_size), c)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        mask = self.full_mask(tokens, mask)  # (B, T)
        W = self.block_size
        rel = self.relative_positions(2 * min(W, tokens.shape[1]) - 1, tokens.device)  # once per forward
        state, outs = self.initial_state(tokens.shape[0]), []
        for s in range(0, tokens.shape[1], W):
            h, state = self.forward_block(tokens[:, s : s + W], mask[:, s : s + W], state, rel)
            outs.append(h)
        hidden = torch.cat(outs, dim=1)  # (B, T, d)
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden), stats=rsa_gate_stats(self))

    # ---- streaming -----------------------------------------------------------------------
    def init_state(self, batch_size: int, device=None) -> dict:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        caches = [
            (layer.token_self if l == self.recurrent_index else layer).init_cache(batch_size, device) for l, layer in enumerate(self.layers)
        ]
        c = self.state0.detach().expand(batch_size, -1, -1).to(device or self.state0.device).clone()
        return {"pos": 0, "layers": caches, "c": c, "block": c.new_zeros(batch_size, 0, self.d_model)}

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        W, pos, caches, c, block = self.block_size, state["pos"], state["layers"], state["c"], state["block"]
        outs, start = [], 0
        while start < tokens.shape[1]:
            piece = tokens[:, start : start + W - pos]  # never crosses a block boundary
            x = self.drop(self.embed(piece))  # (B, t, d)
            new_caches = []
            for l, (layer, cache) in enumerate(zip(self.layers, caches)):
                if l == self.recurrent_index:
                    x, cache, block = layer.step(x, c, cache, block)
                else:
                    x, cache = layer.step(x, cache)
                new_caches.append(cache)
            caches, pos, start = new_caches, pos + piece.shape[1], start + piece.shape[1]
            outs.append(self.ln_out(x))
            if pos == W:  # block complete: update the recurrent state, keep the block as the XL cache
                layer = self.layers[self.recurrent_index]
                c = layer.horizontal(c, layer.ln_c(c) + layer.state_ids, block)
                caches = [keep_last(cache, W) for cache in caches]
                pos, block = 0, block[:, :0]
        hidden = torch.cat(outs, dim=1)  # (B, t, d)
        out = BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden), stats=rsa_gate_stats(self))
        return out, {"pos": pos, "layers": caches, "c": c, "block": block}
