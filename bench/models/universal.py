"""Universal Transformer (UT) and Gated Universal Transformer (GUT) [HALT §4.1, §5.1].

UT (Alg. 1): one shared pre-LN block iterated up to ``max_layers`` times, token-level halting
    A_l = Attention(H_{l-1} as Q, S_{l-1} as K, V);  H_l = FeedForward(A_l)
    alpha_hat^(t)_{l-1} = halt(h^(t)_{l-1})                                (eq. 5)
GUT (Alg. 3) changes three things, each switchable for the ablations:
    gate        H_l = GatedFeedForward(H_{l-1}, A_l)                        (eqs. 9-11)
    global_halt alpha_hat_{l-1} = halt(mean(H_{l-1}))                       (eqs. 12-14; K, V = H_{l-1})
    transition  alpha_hat_{l-1} = halt([mean(H_{l-1}); mean(H_l)])          (eq. 17)
The output is the halting mixture S (eqs. 7, 16), final-LayerNormed. Causal GUT uses prefix
means, one halting probability per position (see ``layers/halting.py``).

The tasks add START/END tokens; a non-causal GUT pools the END position (the last real
token, ``pool="end"``) as the reference code does; UT mean-pools (``pooled=None``).
Loss: L = L_main + beta * L_ACT (App. A: beta = 0.1, 0 for logical inference).

Streaming (causal; every mode): the depth loop's ``DepthHalting.step`` with one attention cache
per iteration (keys / values of LN(S_{l-1}) for UT, of LN(H_{l-1}) for GUT, of every earlier
position as frozen at that depth) and GUT's running prefix sums; positions continue from the
number seen, for the absolute encodings and rotary / xPos alike (as ``Transformer.step``). State:
{"n", "caches": [max_layers caches], "sum_prev", "sum_new"}; it grows with the stream, as
attention does. ``step`` reports halt_depth and ponder per new position (B, t); its aux_loss is
0 (the ACT cost is a training loss of the whole sequence: use ``forward`` to train).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import Backbone, BackboneOutput, StreamingUnsupported
from .layers import TokenEmbedding, make_rotary, positions_from_mask
from .layers.gated import RecurrentBlock, gate_mean, mean_over_iterations
from .layers.halting import DepthHalting, take


def last_real_state(hidden: Tensor, mask: Tensor) -> Tensor:
    """(B, T, d), (B, T) -> (B, d): the state at each sequence's last real position (END)."""
    last = (mask.long().sum(-1) - 1).clamp_min(0)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


class UT(Backbone):
    """Universal Transformer with token-level halting; GUT below only changes defaults."""

    supports_streaming = True

    def __init__(
        self,
        vocab_size: int,
        causal: bool,
        d_model: int = 128,
        n_heads: int = 4,
        d_ff: int = 256,
        max_layers: int = 8,
        gate: bool = False,
        global_halt: bool = False,
        transition: bool = False,
        beta: float = 0.1,
        threshold: float = 0.999,
        mode: str = "halt",
        halt_bias_init: float = 0.0,
        pool: str = "mean",
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        pos_encoding: str = "xpos",
        attn_backend: str = "sdpa",
        max_len: int = 4096,
    ):
        super().__init__(vocab_size, causal, d_model)
        if pool not in ("mean", "end"):
            raise ValueError(f"pool must be 'mean' or 'end', got {pool!r}")
        self.embed = TokenEmbedding(vocab_size, d_model, pos_encoding, max_len, dropout)
        self.block = RecurrentBlock(d_model, n_heads, d_ff, gate=gate, dropout=dropout, attn_dropout=attn_dropout, backend=attn_backend)
        self.rotary = make_rotary(pos_encoding, d_model // n_heads)
        self.halting = DepthHalting(
            d_model, max_layers, global_halt=global_halt, transition=transition, causal=causal,
            mode=mode, threshold=threshold, bias_init=halt_bias_init,
        )
        # Alg. 1 (token-level) attends to the mixture S_{l-1}; Alg. 3 (global) to H_{l-1}.
        self.attend_to_mixture = not global_halt
        self.beta = beta
        self.pool = pool
        self.ln_out = nn.LayerNorm(d_model)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        key_mask = None if (self.causal or mask is None) else mask.bool()  # no sync to skip an all-real mask
        mask = self.full_mask(tokens, mask)  # (B, T)
        positions = positions_from_mask(mask)  # (B, T)
        rope = None if self.rotary is None else self.rotary.tables(positions)  # once, for every iteration
        gates: list[tuple[Tensor, Tensor]] = []

        def step(h: Tensor, s: Tensor, rows: Tensor | None) -> Tensor:  # one shared-block iteration
            out = self.block(
                h, context=s if self.attend_to_mixture else None, rope=None if rope is None else rope.rows(rows),
                key_mask=take(key_mask, rows), causal=self.causal,
            )
            if self.block.last_gate is not None:
                gates.append(gate_mean(self.block.last_gate, take(mask, rows)))
            return out

        compiled = getattr(self, "_iteration_step", None)
        if compiled is None:
            res = self.halting(step, self.embed(tokens, positions), mask)
        else:  # ``compile``: the depth loop in Python, each iteration one call of the compiled depth_iteration
            # the iteration index as a 0-dim tensor (a Python int would be a constant of the graph: one per l)
            levels = torch.arange(1, self.halting.max_iters + 1, device=tokens.device).to(torch.get_default_dtype()).unbind(0)

            def iterate(l: int, h: Tensor, s: Tensor, c, x_prev, parts: tuple, rows: Tensor | None):
                h, s, c, x_prev, gate = compiled(
                    levels[l - 1], h, s, c, x_prev, parts, None if rope is None else rope.rows(rows), take(key_mask, rows), take(mask, rows),
                )
                if gate is not None:
                    gates.append(gate)
                return h, s, c, x_prev

            res = self.halting(None, self.embed(tokens, positions), mask, iterate=iterate)
        hidden = self.ln_out(res.output)  # (B, T, d)
        stats: dict = {"halt_depth": res.depth.detach()}
        if gates:
            stats["gate_mean"] = mean_over_iterations(gates)
        pooled = last_real_state(hidden, mask) if (self.pool == "end" and not self.causal) else None
        aux = self.beta * res.ponder.mean() if self.beta else self.zero_aux(hidden)
        return BackboneOutput(hidden=hidden, aux_loss=aux, stats=stats, pooled=pooled)

    def depth_iteration(self, level: Tensor, h: Tensor, s: Tensor, carry, x_prev, parts: tuple, rope,
                        key_mask: Tensor | None, mask: Tensor):
        """``DepthHalting.iteration`` with the shared block, on the running sequences' rows (``rope``,
        ``key_mask``, ``mask`` already theirs): what ``compile`` compiles, once for every l (``level``
        a tensor) -> (H_l, S_l, carry, x_prev, gate_mean's pair or None)."""
        gate: list = []

        def step(h: Tensor, s: Tensor, rows: None) -> Tensor:
            out = self.block(h, context=s if self.attend_to_mixture else None, rope=rope, key_mask=key_mask, causal=self.causal)
            if self.block.last_gate is not None:
                gate.append(gate_mean(self.block.last_gate, mask))
            return out

        h, s, carry, x_prev = self.halting.iteration(step, level, h, s, carry, x_prev, parts)
        return h, s, carry, x_prev, (gate[0] if gate else None)

    def compile(self, *args, **kwargs) -> None:
        """``train.compile`` / ``bench cost --compile`` (in place): compiles ONE depth iteration (block +
        halting update, ``depth_iteration``), reused by every iteration, instead of the whole forward,
        whose graph unrolls max_layers iterations (and, in ``halt`` mode, breaks at every exit check).
        The depth loop, its exit checks and the row dropping stay eager: a batch that drops rows runs
        the iteration on fewer rows, which dynamo compiles once more with a dynamic batch size."""
        self._iteration_step = torch.compile(self.depth_iteration, *args, **kwargs)

    # ---- streaming -----------------------------------------------------------------------
    def init_state(self, batch_size: int, device=None) -> dict:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        caches = [self.block.init_cache(batch_size, device) for _ in range(self.halting.max_iters)]
        return self.halting.init_state(caches, batch_size, device)

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        t = tokens.shape[1]
        n = state["n"]
        h0 = self.embed.continuing(tokens, n)  # H_0 (B, t, d)
        rope, key_scale = (None, None) if self.rotary is None else self.rotary.continuing(n, t, tokens.device)
        gates: list[tuple[Tensor, Tensor]] = []

        def block_step(h: Tensor, s: Tensor, cache: dict) -> tuple[Tensor, dict]:  # one iteration, t new positions
            out, cache = self.block.step(
                h, cache, context=s if self.attend_to_mixture else None, rope=rope, key_scale=key_scale,
            )
            if self.block.last_gate is not None:
                gates.append(gate_mean(self.block.last_gate, torch.ones_like(tokens, dtype=torch.bool)))
            return out, cache

        res, state = self.halting.step(block_step, h0, state)
        hidden = self.ln_out(res.output)  # (B, t, d)
        stats: dict = {"halt_depth": res.depth.detach(), "ponder": res.ponder.detach()}  # (B, t) each
        if gates:
            stats["gate_mean"] = mean_over_iterations(gates)
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden), stats=stats), state


class GUT(UT):
    """Gated UT: gate (eqs. 9-11) + global (eqs. 12-14) transition-aware (eq. 17) halting."""

    def __init__(
        self,
        vocab_size: int,
        causal: bool,
        gate: bool = True,
        global_halt: bool = True,
        transition: bool = True,
        pool: str = "end",
        **kwargs,
    ):
        super().__init__(vocab_size, causal, gate=gate, global_halt=global_halt, transition=transition, pool=pool, **kwargs)
