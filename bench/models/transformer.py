"""Plain Transformer encoder / causal decoder, and the NoPE decoder [NOPE].

    x_0 = Embed(tokens) (+ absolute PE)          (B, T, d)
    x_l = Block_l(x_{l-1})   l = 1..L            pre-LN, rotary/xPos inside attention if chosen
    h   = LN(x_L)                                (post-LN with norm_first=False: h = x_L)

The rotary tables and the key mask are built once per forward and shared by every layer.

Streaming (causal): each layer keeps a KV cache of every earlier position (``MultiHeadAttention
.step``); the new tokens' positions continue from the number already seen, for the absolute
encodings and for rotary/xPos alike (RSA: plus each layer's O(1) REM state). State:
{"n": tokens seen, "layers": [per-layer cache]}; it grows with the stream, as attention does.

NoPE: a causal decoder with no positional encoding at all. Causal masking alone lets it
recover positions: one layer is blind to the order of the prefix (the last position's output
is invariant to permuting it); two or more layers are fully position-sensitive.
"""

from __future__ import annotations

from torch import Tensor, nn

from .base import Adaptation, Backbone, BackboneOutput, StreamingUnsupported
from .layers import PostLNBlock, TokenEmbedding, TransformerBlock, make_rotary, positions_from_mask, rsa_gate_stats
from .layers.rsa import adapt_rsa


class Transformer(Backbone):
    supports_streaming = True

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
        n_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        pos_encoding: str = "xpos",
        attn_backend: str = "sdpa",
        max_len: int = 4096,
        rsa: dict | None = None,
        norm_first: bool = True,
    ):
        super().__init__(vocab_size, causal, d_model)
        self.embed = TokenEmbedding(vocab_size, d_model, pos_encoding, max_len, dropout)
        Block = TransformerBlock if norm_first else PostLNBlock  # pre-LN [HALT §3], or Vaswani et al.'s post-LN
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, d_ff, dropout=dropout, attn_dropout=attn_dropout, backend=attn_backend, rsa=rsa)
            for _ in range(n_layers)
        )
        self.rotary = make_rotary(pos_encoding, d_model // n_heads)  # weightless: one for every layer
        self.ln_out = nn.LayerNorm(d_model) if norm_first else nn.Identity()  # post-LN blocks end normalised

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        # Right padding: with causal masking real positions never see pads, so no key mask needed;
        # without a mask there is nothing to hide (decided here, not by asking the device).
        key_mask = None if (self.causal or mask is None) else mask.bool()
        mask = self.full_mask(tokens, mask)  # (B, T)
        positions = positions_from_mask(mask)  # (B, T)
        x = self.embed(tokens, positions)  # (B, T, d)
        rope = None if self.rotary is None else self.rotary.tables(positions)  # (B, 1, T, hd) each
        for block in self.blocks:
            x = block(x, rope=rope, key_mask=key_mask, causal=self.causal)
        # RSA hosts report each layer's REM gate sigmoid(mu) [RSA Fig. 3: the share of recurrence].
        return BackboneOutput(hidden=self.ln_out(x), aux_loss=self.zero_aux(x), stats=rsa_gate_stats(self))

    # ---- streaming -----------------------------------------------------------------------
    def init_state(self, batch_size: int, device=None) -> dict:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        return {"n": 0, "layers": [block.init_cache(batch_size, device) for block in self.blocks]}

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        t = tokens.shape[1]
        n = state["n"]
        x = self.embed.continuing(tokens, n)  # (B, t, d): the stream's positions continue
        # (t, hd) tables of the new positions; xPos: every cached key rescaled to the new center
        rope, key_scale = (None, None) if self.rotary is None else self.rotary.continuing(n, t, tokens.device)
        caches = []
        for block, cache in zip(self.blocks, state["layers"]):
            x, cache = block.step(x, cache, rope=rope, key_scale=key_scale)
            caches.append(cache)
        out = BackboneOutput(hidden=self.ln_out(x), aux_loss=self.zero_aux(x), stats=rsa_gate_stats(self))
        return out, {"n": n + t, "layers": caches}


class NoPE(Transformer):
    """Causal decoder without positional encoding [NOPE]."""

    supports_bidirectional = False

    def __init__(self, vocab_size: int, causal: bool = True, pos_encoding: str = "none", **kwargs):
        if pos_encoding != "none":
            raise ValueError(f"nope has no positional encoding; got pos_encoding={pos_encoding!r} (use transformer instead)")
        super().__init__(vocab_size, causal, pos_encoding="none", **kwargs)
