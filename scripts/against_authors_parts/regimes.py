"""The regimes compared: the batches (real lengths, padding, the halting unit's bias, causality) that
exercise bench's reference options, what each exercises, the length caps the report shows, the
inputs both sides read; and the per-token regime, flip-flop sequences from bench's generator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from bench.models.universal import END, START
from bench.tasks.flipflop import flipflop_batch

from .pairs import CHUNK, PAD, VOCAB, Pair

SEED = 0  # every comparison's seed: the noise on their parameters, the batch, the flip-flop sequences


@dataclass(frozen=True)
class Regime:
    """One batch both sides read, and the halting probability their halting unit is set to."""

    name: str
    lengths: tuple[int, ...]  # real tokens per sequence (bench adds START / END for UT / GUT)
    padded: int  # the batch's padded length (chunk models: a multiple of the chunk size)
    halt_bias: float  # the halting unit's output bias: sigmoid(bias) about the halting probability
    causal: bool = False  # causal models on both sides (their flip-flop setting)


#: what each regime exercises (numbers: from the Regime values, in the report)
REGIME_PURPOSE = {
    "early halting": "units halt by probability after a few iterations: the iteration that takes the total past the threshold is undone",
    "shorter than the bound": "short sequences beside a longer one in one batch, no unit halting by probability: the "
    "length cap (n + 1 iterations, n the real length; per chunk for GUTLB) binds",
    "one-token chunks": "chunks holding one real token (capped at 2 iterations in GUTLB) and chunks of padding only "
    "(memory and states kept)",
    "causal": "every model causal (their flip-flop setting; raw tokens, no START / END, on both sides): causal attention, "
    "one halting unit per position (prefix means for global halting), the cap at the whole sequence's "
    "length, early halting and short sequences together; per-token states and the ACT loss compared (bench's "
    "causal UT / GUT have no pooled state)",
}
HALT_WEIGHT_SCALE = 0.25  # the halting unit's output weights scaled so that its bias sets the probability
NOISE = 0.1  # the std of the noise added to every parameter of theirs before the copy


def regimes(pair: Pair) -> list[Regime]:
    """The regimes compared for ``pair``: three for UT / GUT, four for the chunk models (TLB, which does not
    halt, without early halting); the chunk models' batches padded to a multiple of CHUNK."""
    if not pair.chunked:
        return [
            Regime("early halting", (9, 7, 6, 5), 9, 2.4),
            Regime("shorter than the bound", (1, 2, 3, 9), 9, -3.0),
            Regime("causal", (9, 6, 2, 1), 9, 1.5, causal=True),
        ]
    out = [
        Regime("shorter than the bound", (1, 2, 3, 8), 8, -3.0),
        Regime("one-token chunks", (5, 1, 9, 12), 12, -1.0),
        Regime("causal", (12, 9, 5, 2), 12, 1.5, causal=True),
    ]
    return ([Regime("early halting", (12, 12, 11, 10), 12, 2.4)] if pair.halting else []) + out


def family(pair: Pair) -> str:
    """The group of models that share one set of regimes (one block of the report's regime table)."""
    return "GUTLB" if pair.ours == "gutlb" else "TLB" if pair.chunked else "UT / GUT"


def length_caps(pair: Pair, regime: Regime) -> str:
    """The code's length cap per sequence (n + 1, n the real length the mask counts: with START / END for
    UT / GUT); per chunk with a real token for GUTLB ("a/b"); none for TLB."""
    if pair.ours == "tlb":
        return "—"
    if not pair.chunked:
        return ", ".join(str(n + (0 if regime.causal else 2) + 1) for n in regime.lengths)
    per_chunk = [[min(CHUNK, n - s) + 1 for s in range(0, n, CHUNK)] for n in regime.lengths]
    return ", ".join("/".join(map(str, caps)) for caps in per_chunk)


def batch(pair: Pair, regime: Regime, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(their tokens, their mask (float), bench's tokens, bench's mask): the same random tokens; bench's
    UT / GUT input wraps them in START / END as bench's tasks do (the code adds learned START / END
    vectors inside its encoder); the chunk models and causal models read the raw tokens on both sides."""
    B, S = len(regime.lengths), regime.padded
    tokens = torch.randint(3, VOCAB, (B, S), generator=generator)
    real = torch.arange(S) < torch.tensor(regime.lengths).unsqueeze(1)
    tokens = torch.where(real, tokens, PAD)
    if pair.chunked or regime.causal:
        return tokens, real.float(), tokens, real
    wrapped = torch.full((B, S + 2), PAD)
    wrapped[:, 0] = START
    for b, n in enumerate(regime.lengths):
        wrapped[b, 1 : n + 1] = tokens[b, :n]
        wrapped[b, n + 1] = END
    return tokens, real.float(), wrapped, wrapped != PAD


# ---- the per-token regime: flip-flop ------------------------------------------------------------

FF_P_I = 0.8  # the probability of an ignore instruction: bench's (and the paper's) training distribution
FLIPFLOP = Regime("flip-flop (per token)", (40, 40, 40), 40, 1.5, causal=True)


def flipflop_tokens(regime: Regime) -> Tensor:
    """Flip-flop sequences from bench's own generator (bench/tasks/flipflop.py: w / r / i instructions and
    their bits, the first a write, the last a read), all of the regime's length: no padding, as in both codes."""
    tokens, _ = flipflop_batch(np.random.default_rng(SEED), len(regime.lengths), regime.padded, FF_P_I)
    return torch.from_numpy(tokens).long()
