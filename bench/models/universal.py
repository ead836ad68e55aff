"""Universal Transformer (UT) and Gated Universal Transformer (GUT) [HALT §4.1, §5.1].

UT (Alg. 1): one shared pre-LN block iterated up to ``max_layers`` times, token-level halting
    A_l = Attention(H_{l-1} as Q, S_{l-1} as K, V);  H_l = FeedForward(A_l)
    alpha_hat^(t)_{l-1} = halt(h^(t)_{l-1})                                (eq. 5)
GUT (Alg. 3) changes three things, each switchable for the ablations:
    gate        H_l = GatedFeedForward(H_{l-1}, A_l)                        (eqs. 9-11)
    global_halt alpha_hat_{l-1} = halt(mean(H_{l-1}))                       (eqs. 12-14; K, V = H_{l-1})
    transition  alpha_hat_{l-1} = halt([mean(H_{l-1}); mean(H_l)])          (eq. 17)
The output is the halting mixture S (eqs. 7, 16), final-LayerNormed (``final_norm=False``: not,
as the reference code; ``classifier="mlp"``: the pooled state and every position's output through
Linear - ReLU before the task's Linear, the code's head on either). Causal GUT uses prefix
means, one halting probability per position (see ``layers/halting.py``).

The algorithm first: ``reference_forward`` is Alg. 1 / 3 as printed (the depth loop and the block
written out in ``depth.py``: ``reference_depth``, ``reference_block``), a plain loop over the
iterations with every sequence in every one; ``forward`` (sequences leave the batch as they halt),
the compiled iteration and ``step`` are tested equal to it (tests/test_universal.py).

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
from .depth import BlockIteration, DepthRecurrent
from .layers import TokenEmbedding, make_rotary, positions_from_mask
from .layers.feedforward import head_mlp
from .layers.gated import RecurrentBlock, mean_over_iterations
from .layers.halting import DepthHalting


def last_real_state(hidden: Tensor, mask: Tensor) -> Tensor:
    """(B, T, d), (B, T) -> (B, d): the state at each sequence's last real position (END)."""
    last = (mask.long().sum(-1) - 1).clamp_min(0)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


#: the ids of START / END in every task that wraps its sequences (bench/tasks/listops.py, logic.py, lra/,
#: pathfinder.py): the rows of the embedding that stand for the code's learned START / END vectors
START, END = 1, 2


class UT(DepthRecurrent, Backbone):
    """Universal Transformer with token-level halting; GUT below only changes defaults."""

    supports_streaming = True
    recurrence = "depth"
    host_reads = "halting (mode halt): the depth loop ends once every position has halted"
    #: model.faithful=reference: the code's halting rules (length cap, crossing step undone), its head
    #: (Linear - ReLU on the pooled state and every position) and S_L with no final LayerNorm
    reference_options = {"halt_rules": "reference", "classifier": "mlp", "final_norm": False}

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
        halt_rules: str = "paper",
        pool: str = "mean",
        final_norm: bool = True,
        classifier: str = "linear",
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
            d_model,
            max_layers,
            global_halt=global_halt,
            transition=transition,
            causal=causal,
            mode=mode,
            threshold=threshold,
            bias_init=halt_bias_init,
            rules=halt_rules,
        )
        # Alg. 1 (token-level) attends to the mixture S_{l-1}; Alg. 3 (global) to H_{l-1}.
        self.attend_to_mixture = not global_halt
        self.beta = beta
        self.pool = pool
        # final_norm=False: S_L as the code returns it (UniversalTransformerEncoder.py lines 273-291: no norm)
        self.ln_out = nn.LayerNorm(d_model) if final_norm else nn.Identity()
        self.classifier = head_mlp(d_model, classifier)  # Linear - ReLU before the task's Linear, or None

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        key_mask = None if (self.causal or mask is None) else mask.bool()  # no sync to skip an all-real mask
        mask = self.full_mask(tokens, mask)  # (B, T)
        positions = positions_from_mask(mask)  # (B, T)
        rope = None if self.rotary is None else self.rotary.tables(positions)  # once, for every iteration
        shared = BlockIteration(self.block, self.attend_to_mixture, self.causal, rope, key_mask, mask=mask)
        res = self.iterate_block(self.embed(tokens, positions), mask, shared)  # S_L (B, T, d) [Alg. 1 / 3]
        return self.outputs(res.output, mask, res.ponder, res.depth, shared.gates)

    def reference_forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        """Alg. 1 (UT) / Alg. 3 (GUT) as the paper prints them, eval mode: H_0, then the depth loop over
        the whole batch (``reference_depth``: lines 1-13, eqs. 5-8, 12-17) with the block written out
        (``reference_block``: lines 4-5, eqs. 3-4, 9-11), then the output; ``forward`` (early exit,
        the compiled iteration) and ``step`` are tested equal to it (tests/test_universal.py)."""
        if self.training:
            raise RuntimeError("reference_forward is the eval-mode forward (no dropout): call model.eval() first")
        mask = self.full_mask(tokens, mask)  # (B, T)
        positions = positions_from_mask(mask)
        rope = None if self.rotary is None else self.rotary.tables(positions)
        key_mask = None if self.causal else mask

        def block(h: Tensor, s: Tensor) -> Tensor:  # lines 4-5: H_l from H_{l-1} and S_{l-1}
            return self.reference_block(h, s, rope=rope, key_mask=key_mask)

        h0 = self.embed(tokens, positions)  # H_0: token embeddings (+ absolute positions, if any)
        s_last, ponder, depth = self.reference_depth(h0, mask, block)  # S_L, eqs. 7 / 16
        return self.outputs(s_last, mask, ponder, depth, [])

    def outputs(self, s_last: Tensor, mask: Tensor, ponder: Tensor, depth: Tensor, gates: list) -> BackboneOutput:
        """S_L (B, T, d) -> the backbone's output: final LN, the pooled state (END or the mean, through
        ``classifier``), the per-token head input, halt_depth / gate_mean, the ACT loss beta * mean ponder."""
        hidden = self.ln_out(s_last)  # (B, T, d)
        stats: dict = {"halt_depth": depth.detach()}
        if gates:
            stats["gate_mean"] = mean_over_iterations(gates)
        pooled = last_real_state(hidden, mask) if (self.pool == "end" and not self.causal) else None
        if self.classifier is not None and not self.causal:
            if pooled is None:  # the mean over real positions, as the task's head would take it
                mf = mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mf).sum(1) / mf.sum(1).clamp_min(1.0)
            pooled = self.classifier(pooled)  # (B, d)
        hidden = self.head_input(hidden)  # per-token tasks' head input, after pooling read S_L
        aux = self.beta * ponder.mean() if self.beta else self.zero_aux(hidden)
        return BackboneOutput(hidden=hidden, aux_loss=aux, stats=stats, pooled=pooled)

    def head_input(self, hidden: Tensor) -> Tensor:
        """The per-token outputs (B, T, d) as a per-token task's head reads them: through ``classifier``'s
        Linear - ReLU (``model.classifier=mlp``: the code's ``flipflop_framework.py`` lines 31-35, 57), or
        as they are."""
        return hidden if self.classifier is None else self.classifier(hidden)

    def family_reference_init(self) -> None:
        """``model.init=reference-full``'s UT / GUT part: bidirectional, the START / END rows of the
        embedding N(0, 1), the code's ``nn.Parameter(T.randn(hidden_size))`` START / END vectors
        (``models/encoders/UniversalTransformerEncoder.py`` lines 17-18)."""
        embedding = self.embed.embed
        if not self.causal and embedding.num_embeddings > END:
            nn.init.normal_(embedding.weight[START : END + 1], std=1.0)

    def compile(self, *args, **kwargs) -> None:
        """``train.compile`` / ``bench cost --compile`` (in place): compiles one depth iteration
        (``DepthRecurrent.compile_iteration``) instead of the whole forward."""
        self.compile_iteration(*args, **kwargs)

    # ---- streaming -----------------------------------------------------------------------
    def init_state(self, batch_size: int, device=None) -> dict:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        return self.init_depth_state(batch_size, device)

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        t = tokens.shape[1]
        n = state["n"]
        h0 = self.embed.continuing(tokens, n)  # H_0 (B, t, d)
        rope, key_scale = (None, None) if self.rotary is None else self.rotary.continuing(n, t, tokens.device)
        gates: list[tuple[Tensor, Tensor]] = []
        res, state = self.stream_block(h0, state, rope=rope, key_scale=key_scale, gates=gates)
        hidden = self.head_input(self.ln_out(res.output))  # (B, t, d)
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
