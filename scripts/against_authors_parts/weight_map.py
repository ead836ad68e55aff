"""The weight map: their parameters -> bench's, as explicit name rules per model family (xPos's
query / key rows reordered to bench's rotate-half layout, their START / END vectors into rows of
bench's embedding), and the copy that applies them and stops on any parameter left unmapped."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from bench.models.universal import END, START

from .pairs import HEADS, Pair


@dataclass(frozen=True)
class Rule:
    """Their module or parameter ``theirs`` -> bench's ``ours`` (the same suffixes below it). ``how``:
    ``same``, or ``xpos`` (a query / key projection feeding xPos: the output rows of each head reordered
    from their interleaved pairs (2i, 2i+1) to bench's halves (i, i + hd/2), which rotate and scale
    alike); ``row``: their vector is row ``row`` of bench's matrix."""

    theirs: str
    ours: str
    how: str = "same"
    row: int | None = None


def attention_rules(theirs: str, ours: str, xpos: bool) -> list[Rule]:
    """Their FlashMHA's four projections -> bench's attention's (``xpos``: the query / key rows reordered)."""
    qk = "xpos" if xpos else "same"
    return [
        Rule(f"{theirs}.q_proj", f"{ours}.q_proj", qk),
        Rule(f"{theirs}.k_proj", f"{ours}.k_proj", qk),
        Rule(f"{theirs}.v_proj", f"{ours}.v_proj"),
        Rule(f"{theirs}.out_proj", f"{ours}.o_proj"),
    ]


def feedforward_rules(theirs: str, ours: str) -> list[Rule]:  # nn.Sequential(Linear, Dropout, GELU, Linear, Dropout[, Sigmoid])
    return [Rule(f"{theirs}.0", f"{ours}.up"), Rule(f"{theirs}.3", f"{ours}.down")]


def memory_rules(config: dict) -> list[Rule]:
    """TLBEncoder / UTLBEncoder's memory, its update layers (CrossTransformerBlock) and the memory LN."""
    rules = [Rule("encoder.memory", "memory0"), Rule("encoder.LN", "ln_mem")]
    for u in range(config["update_layers"]):
        theirs, ours = f"encoder.update_layers.{u}", f"updates.{u}"
        rules += [
            Rule(f"{theirs}.LN11", f"{ours}.ln_mem"),
            Rule(f"{theirs}.LN12", f"{ours}.ln_chunk"),
            *attention_rules(f"{theirs}.attention", f"{ours}.attn", xpos=False),
            Rule(f"{theirs}.LN2", f"{ours}.ln_ffn"),
            *feedforward_rules(f"{theirs}.FFN", f"{ours}.ffn"),
        ]
    return rules


def tlb_block_rules(theirs: str, ours: str, gated: bool) -> list[Rule]:
    """TLBBlock / GatedTLBBlock -> TransformerBlock(read=True) / RecurrentBlock(read=True)."""
    rules = [
        Rule(f"{theirs}.LN0", f"{ours}.ln_attn"),
        *attention_rules(f"{theirs}.attention", f"{ours}.attn", xpos=True),
        Rule(f"{theirs}.LN11", f"{ours}.read.ln_x"),
        Rule(f"{theirs}.LN12", f"{ours}.read.ln_mem"),
        *attention_rules(f"{theirs}.cross_attention", f"{ours}.read.attn", xpos=False),
        Rule(f"{theirs}.LN2", f"{ours}.ln_ffn"),
        *feedforward_rules(f"{theirs}.FFN", f"{ours}.ffn"),
    ]
    return rules + (feedforward_rules(f"{theirs}.FFN_gate", f"{ours}.gate") if gated else [])


def weight_map(pair: Pair, config: dict, params: dict, per_token: bool = False) -> tuple[list[Rule], dict, dict]:
    """(rules, their parameters with no counterpart -> why, bench's parameters with none -> why); ``params``:
    bench's resolved model params (its ``classifier`` and ``final_norm`` decide the head's and ``ln_out``'s
    rows); ``per_token``: bench's task head (``head.out``, the LM output layer) beside the backbone."""
    gated = config["block"].startswith("Gated")
    head, their_only, bench_only = [], {}, {}
    if params["classifier"] == "mlp":
        head.append(Rule("classifier_block.0", "classifier.0"))
    else:
        their_only["classifier_block.0"] = "the head's first Linear: bench's head has none under classifier=linear (a control)"
    if per_token:
        head.append(Rule("classifier_block.2", "head.out"))
    else:
        their_only["classifier_block.2"] = (
            "the head's last Linear: the task's output layer in bench, outside the backbone "
            "(compared: the pooled state through classifier_block[:2])"
        )
    if params.get("final_norm", True):
        bench_only["ln_out"] = "bench's LayerNorm of the per-token outputs at its init (weight 1, bias 0): final_norm=true (a control)"
    halting = [Rule("encoder.halt_layers.0", "halting.unit.fc1"), Rule("encoder.halt_layers.2", "halting.unit.fc2")]
    if not pair.chunked:  # UniversalTransformerEncoder with TransformerBlock / GatedTransformerBlock
        block = "encoder.TransformerLayer"
        rules = [Rule("word_embedding", "embed.embed")]
        if config["causal"]:  # their causal encoder adds no START / END: bench's rows 1, 2 are ordinary tokens (flip-flop's w, r)
            why = "their START / END vectors: the causal encoder never adds them (UniversalTransformerEncoder.py:112-113)"
            their_only.update(dict.fromkeys(("encoder.START", "encoder.END"), why))
        else:  # after word_embedding (their parameters' order), over bench's embedding rows of the tasks' START / END ids
            rules += [Rule("encoder.START", "embed.embed.weight", "row", START), Rule("encoder.END", "embed.embed.weight", "row", END)]
        rules += [
            Rule(f"{block}.LN1", "block.ln_attn"),
            *attention_rules(f"{block}.attention", "block.attn", xpos=True),
            Rule(f"{block}.LN2", "block.ln_ffn"),
            *feedforward_rules(f"{block}.FFN", "block.ffn"),
        ]
        rules += feedforward_rules(f"{block}.FFN_gate", "block.gate") if gated else []
        return rules + halting + head, their_only, bench_only
    rules = [Rule("word_embedding", "embed"), *memory_rules(config)]
    if pair.ours == "tlb":
        for layer in range(config["layers"]):
            rules += tlb_block_rules(f"encoder.TLBBlocks.{layer}", f"layers.{layer}", gated)
        return rules + head, their_only, bench_only
    return rules + tlb_block_rules("encoder.TLBBlocks", "block", gated) + halting + head, their_only, bench_only


def xpos_order(weight: Tensor, heads: int) -> Tensor:
    """(heads hd, d_in) rows in their xPos layout -> bench's: head dims (0, 2, 4, .., 1, 3, 5, ..)."""
    hd = weight.shape[0] // heads
    order = torch.cat((torch.arange(0, hd, 2), torch.arange(1, hd, 2)))
    return weight.view(heads, hd, -1)[:, order].reshape(weight.shape)


def copy_weights(
    theirs: nn.Module, ours: nn.Module, rules: list[Rule], their_only: dict, bench_only: dict, head: nn.Module | None = None
) -> int:
    """Every parameter of theirs into ours (and bench's task ``head``, its parameters named ``head.*``) by
    ``rules``; stops if a rule matches nothing, a parameter of theirs matches no rule (or two), or an
    element of a parameter of ours is written by none. -> the number of their parameters copied."""
    mine = dict(ours.named_parameters())
    if head is not None:
        mine.update((f"head.{name}", p) for name, p in head.named_parameters())
    written = {name: torch.zeros_like(p, dtype=torch.bool) for name, p in mine.items()}
    used, copied = set(), 0
    for name, value in theirs.named_parameters():
        if any(name == k or name.startswith(k + ".") for k in their_only):
            continue
        matches = [r for r in rules if name == r.theirs or name.startswith(r.theirs + ".")]
        if len(matches) != 1:
            raise SystemExit(f"their parameter {name} matches {len(matches)} rules of the weight map, not one")
        rule = matches[0]
        used.add(rule)
        target = rule.ours + name[len(rule.theirs) :]
        if target not in mine:
            raise SystemExit(f"their {name} -> bench's {target}, which bench's model does not have")
        value = value.detach()
        if rule.how == "xpos":
            value = xpos_order(value, HEADS)
        with torch.no_grad():
            dest, mark = (mine[target][rule.row], written[target][rule.row]) if rule.how == "row" else (mine[target], written[target])
            if dest.shape != value.shape:
                raise SystemExit(f"their {name} {tuple(value.shape)} -> bench's {target} {tuple(dest.shape)}: shapes differ")
            dest.copy_(value)
            mark.fill_(True)
        copied += 1
    if unused := [r.theirs for r in rules if r not in used]:
        raise SystemExit(f"weight-map rules matching no parameter of theirs: {unused}")
    for name, mark in written.items():
        if not mark.all() and not any(name == k or name.startswith(k + ".") for k in bench_only):
            raise SystemExit(f"bench's parameter {name}: {int((~mark).sum())} of {mark.numel()} elements not written by the map")
    return copied
