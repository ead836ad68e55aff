"""The shared block iterated in depth by UT, GUT and GUTLB [HALT §3, §5.1, Alg. 1, 3, 4].

    A       = Q + MHA(LN Q, LN K, LN V)                      (eq. 3; K = V = context, else Q)
    A       = read(A)                                        (Alg. 4 only: chunk -> memory, Attention2)
    H_inter = A + FFN(LN A)                                  (eqs. 4, 9)
    G       = sigmoid(W_g2 GELU(W_g1 LN(A) + b_g1) + b_g2)   (eq. 10; gate width d_gff = d_ff)
    H_l     = G * H_inter + (1 - G) * H_{l-1}                (eq. 11)

With ``gate=False`` it is the plain pre-LN block of UT (H_l = H_inter): the first two lines
are ``TransformerBlock.mix``. UT's Alg. 1 attends from H_{l-1} to the halting mixture S_{l-1},
hence the ``context`` argument.

Streaming (``step``): the same block on t new positions of one iteration, ``mix_step`` reading and
extending that iteration's cache: keys / values of LN(S_{l-1}) of every earlier position for UT
(``context``), of LN(H_{l-1}) for GUT; eqs. 9-11 are shared with ``forward`` (``update``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .block import TransformerBlock
from .feedforward import FeedForward


class RecurrentBlock(TransformerBlock):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        gate: bool = True,
        d_gate: int | None = None,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        backend: str = "sdpa",
        read: bool = False,
    ):
        super().__init__(d_model, n_heads, d_ff, dropout=dropout, attn_dropout=attn_dropout, backend=backend, read=read)
        # The gate is a second FFN (same shape as eq. 4's) squashed by a sigmoid.
        self.gate = FeedForward(d_model, d_gate or d_ff, dropout) if gate else None
        # dropout on the gate's logits (``model.dropout_at=reference``: the reference code's FFN_gate ends
        # Linear, Dropout, Sigmoid, models/modules/GatedTransformerBlock.py lines 34-39)
        self.gate_logit_dropout = False

    def forward(self, x: Tensor, **kw) -> tuple[Tensor, Tensor | None]:
        """H_{l-1} (b, T, d) -> (H_l, the gate G (b, T, d), detached, for statistics; None ungated).
        ``kw``: ``TransformerBlock.mix``'s (context, memory) and the attention's (rope, key_mask, causal)."""
        return self.update(x, self.mix(x, **kw))

    def step(self, x: Tensor, cache: dict, **kw) -> tuple[Tensor, dict]:
        h, _, cache = self.iterate_step(x, cache, **kw)
        return h, cache

    def iterate_step(self, x: Tensor, cache: dict, **kw) -> tuple[Tensor, Tensor | None, dict]:
        """Streaming: H_{l-1} of t new positions x (B, t, d) and this iteration's attention cache ->
        (H_l (B, t, d), the gate or None, the cache with them appended). ``kw``: ``TransformerBlock.mix_step``'s
        (context: UT's S_{l-1} of the new positions, so the cache holds LN(S_{l-1}) keys / values;
        memory; rope / key_scale)."""
        a, cache = self.mix_step(x, cache, **kw)
        h, g = self.update(x, a)
        return h, g, cache

    def update(self, x: Tensor, a: Tensor) -> tuple[Tensor, Tensor | None]:
        """(H_l, G) from H_{l-1} = x and A (b, T, d): eq. 9, then the gate (eqs. 10-11) if any."""
        z = self.ln_ffn(a)
        h_inter = a + self.drop(self.ffn(z))  # eq. 9
        if self.gate is None:
            return h_inter, None
        logits = self.gate(z)
        g = torch.sigmoid(self.drop(logits) if self.gate_logit_dropout else logits)  # eq. 10
        return g * h_inter + (1 - g) * x, g.detach()  # eq. 11


def gate_mean(gate: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Mean gate value over the real positions of one iteration, and whether there were any:
    gate (b, T, d), mask (b, T) -> two 0-dim tensors, kept on the device (no sync per step)."""
    return gate_mean_of(gate, *gate_parts(mask, gate.dtype, gate.shape[-1]))


def gate_parts(mask: Tensor, dtype: torch.dtype, width: int) -> tuple[Tensor, Tensor, Tensor]:
    """``gate_mean``'s mask-only parts, once per mask: (mask (b, T, 1) as ``dtype``, the number of
    real gate values clamped to >= 1, whether there is any)."""
    m = mask.unsqueeze(-1).to(dtype)  # (b, T, 1)
    n = m.sum() * width
    return m, n.clamp_min(1.0), n > 0


def gate_mean_of(gate: Tensor, m: Tensor, n: Tensor, seen: Tensor) -> tuple[Tensor, Tensor]:
    """``gate_mean`` from ``gate_parts``."""
    return (gate * m).sum() / n, seen


def mean_over_iterations(means: list[tuple[Tensor, Tensor]]) -> Tensor:
    """Average of the per-iteration means of ``gate_mean``, over iterations that saw real tokens."""
    value, seen = (torch.stack(x) for x in zip(*means))
    seen = seen.to(value.dtype)
    return (value * seen).sum() / seen.sum().clamp_min(1.0)
