"""One comparison: their model and bench's built for a pair, the weights copied, both run on a
regime's batch, and the row of largest differences (per-token states, pooled state or logits, ACT
loss) against TOL; the controls' settings (bench's halting rules and per-token options set back)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from bench.runner.build import instantiate_model
from bench.runner.module import Head
from bench.tasks.flipflop import FlipFlop

from .pairs import FF_VOCAB, SLOTS, VOCAB, Pair, flipflop_config, our_spec, their_config, their_flipflop_model, their_model
from .regimes import FLIPFLOP, HALT_WEIGHT_SCALE, NOISE, SEED, Regime, batch, flipflop_tokens
from .weight_map import copy_weights, weight_map

TOL = 1e-5  # a row passes where its largest difference is at most this
#: the controls: bench's halt_rules set back from ``reference`` to each value that drops one of its rules
CONTROL_RULES = ("paper", "length-cap", "undo-crossing")
CONTROL_MODE, CONTROL_DTYPE = "halt", "float32"
#: bench's options that the regime needs, each set back to its default (the per-token controls)
TOKEN_CONTROLS = {"classifier=linear": {"classifier": "linear"}, "final_norm=true": {"final_norm": True}}


@dataclass
class Row:
    """One comparison's largest |theirs - bench| per quantity (None where one side has no such output)."""

    pair: Pair
    mode: str | None
    regime: Regime
    dtype: str
    states: float
    pooled: float | None  # None: bench's model has no pooled state (causal UT / GUT)
    act: float | None
    depth: str  # bench's halt_depth per sequence
    scale: float  # max |their per-token state| at real positions: what the differences compare to
    logits: float | None = None  # the per-token regime: every position through the head (theirs: classifier_block)

    @property
    def worst(self) -> float:
        return max(self.states, self.pooled or 0.0, self.act or 0.0, self.logits or 0.0)


def randomise(model: nn.Module, generator: torch.Generator) -> None:
    """Every parameter += N(0, NOISE^2), so that no two LayerNorms, slots or biases are alike and a
    mis-mapped parameter shows (their init leaves every LayerNorm at 1 / 0 and the memory at 0)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(NOISE * torch.randn(p.shape, generator=generator))


def set_halting(theirs: nn.Module, pair: Pair, regime: Regime) -> None:
    """Their halting unit's output layer set to the regime's probability (before the copy, so bench's gets it too)."""
    if pair.halting:
        with torch.no_grad():
            theirs.encoder.halt_layers[2].weight.mul_(HALT_WEIGHT_SCALE)  # the bias sets the probability, the states move it
            theirs.encoder.halt_layers[2].bias.fill_(regime.halt_bias)


def run_ours(ours: nn.Module, tokens: Tensor, mask: Tensor):
    """bench's forward -> (its output, the per-token states before ``ln_out``: S_L / C_L, as the code returns
    them; ``ln_out`` is the identity under final_norm=false, a LayerNorm in the control)."""
    captured = {}
    hook = ours.ln_out.register_forward_hook(lambda m, args, y: captured.update(states=args[0]))
    res = ours(tokens, mask)
    hook.remove()
    return res, captured["states"]


def depth_of(res) -> str:
    """bench's halting depth per sequence (``halt_depth``), as the report prints it."""
    depth = res.stats.get("halt_depth")
    return "—" if depth is None else ", ".join(f"{d:g}" for d in depth.double().round(decimals=2).tolist())


def compare(
    pair: Pair, mode: str | None, regime: Regime, dtype: torch.dtype, halt_rules: str | None = None, slots: int = SLOTS
) -> tuple[Row, int]:
    """Both models built, weights copied, run on the regime's batch -> (the row of differences, the
    number of their parameters copied). ``halt_rules``, ``slots``: bench's rules and both memories' slots
    set apart (the controls, the equal-length case)."""
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    theirs = their_model(pair, regime.causal, slots)
    randomise(theirs, generator)
    set_halting(theirs, pair, regime)
    config = their_config(pair, regime.causal, slots)
    spec = our_spec(pair, mode, config, halt_rules)
    ours = instantiate_model(spec, VOCAB)
    rules, their_only, bench_only = weight_map(pair, config, spec.params)
    copied = copy_weights(theirs, ours, rules, their_only, bench_only)
    theirs, ours = theirs.to(dtype).eval(), ours.to(dtype).eval()
    their_tokens, their_mask, our_tokens, our_mask = batch(pair, regime, generator)

    with torch.no_grad():
        out = theirs.encoder(theirs.word_embedding(their_tokens), their_mask.to(dtype))  # classifier_framework.forward's order
        their_pooled = theirs.classifier_block[1](theirs.classifier_block[0](out["global_state"]))
        their_act = None if out["aux_loss"] is None else out["aux_loss"].mean()
        res, our_states = run_ours(ours, our_tokens, our_mask)
    real = our_mask.unsqueeze(-1)  # padding positions are never read (keys masked, pooled over real ones)
    their_states = torch.where(real, out["sequence"], 0)
    states = (their_states - torch.where(real, our_states, 0)).abs().max().item()
    pooled = None if res.pooled is None else (their_pooled - res.pooled).abs().max().item()
    act = None if their_act is None else (their_act - res.aux_loss).abs().item()
    scale = their_states.abs().max().item()
    return Row(pair, mode, regime, str(dtype).removeprefix("torch."), states, pooled, act, depth_of(res), scale), copied


def compare_per_token(pair: Pair, mode: str | None, dtype: torch.dtype, options: dict | None = None) -> tuple[Row, int]:
    """Their ``flipflop_framework`` (encoder, then ``classifier_block`` on every position) beside bench's registry
    model with model.faithful=reference and bench's task head for flipflop (``Head`` of the task's kind, as
    bench/runner/module.py builds it: the LM output layer on ``hidden``) -> (the row of differences: the
    per-token states before bench's ``ln_out``, the logits at every position, the ACT loss; the number of
    their parameters copied). ``options``: bench's options set apart from the switch (the controls)."""
    regime = FLIPFLOP
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    theirs = their_flipflop_model(pair)
    randomise(theirs, generator)
    set_halting(theirs, pair, regime)
    config = flipflop_config(pair)
    spec = our_spec(pair, mode, config, **(options or {}))
    ours = instantiate_model(spec, FF_VOCAB)
    head = Head(FlipFlop.kind, ours.d_model, FF_VOCAB, 0, 0)
    rules, their_only, bench_only = weight_map(pair, config, spec.params, per_token=True)
    copied = copy_weights(theirs, ours, rules, their_only, bench_only, head)
    theirs, ours, head = theirs.to(dtype).eval(), ours.to(dtype).eval(), head.to(dtype).eval()
    tokens = flipflop_tokens(regime)
    mask = torch.ones_like(tokens, dtype=torch.bool)

    with torch.no_grad():  # flipflop_framework.forward's order (lines 44-57), its float16 cast left out
        out = theirs.encoder(theirs.word_embedding(tokens), mask.to(dtype))
        their_logits = theirs.classifier_block(out["sequence"])  # (B, T, FF_VOCAB)
        their_act = None if out["aux_loss"] is None else out["aux_loss"].mean()
        res, our_states = run_ours(ours, tokens, mask)
        logits = head(res, mask)  # (B, T, FF_VOCAB)
    states = (out["sequence"] - our_states).abs().max().item()
    act = None if their_act is None else (their_act - res.aux_loss).abs().item()
    scale = their_logits.abs().max().item()
    row = Row(
        pair,
        mode,
        regime,
        str(dtype).removeprefix("torch."),
        states,
        None,
        act,
        depth_of(res),
        scale,
        logits=(their_logits - logits).abs().max().item(),
    )
    return row, copied
