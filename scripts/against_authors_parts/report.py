"""The report: results/against_authors.md written from the rows, the controls and what the run
recorded of the models, their parameters and configs (``meta``)."""

from __future__ import annotations

import torch

from .comparison import CONTROL_DTYPE, CONTROL_MODE, CONTROL_RULES, TOKEN_CONTROLS, TOL, Row
from .pairs import CHUNK, FF_CHUNK, FF_VOCAB, SIZES, SLOTS
from .regimes import FF_P_I, FLIPFLOP, HALT_WEIGHT_SCALE, NOISE, REGIME_PURPOSE
from .their_code import PATCHES, SHIMS


def passed(worst: float) -> str:
    """A row's verdict cell: its largest difference within TOL or not."""
    return "pass" if worst <= TOL else "**FAIL**"


def fmt(x: float | None) -> str:
    """A difference as the report prints it; None (no such quantity) as a dash."""
    return "—" if x is None else f"{x:.1e}"


def token_report(token_rows: list[Row], meta: dict, token_controls: dict) -> list[str]:
    """The per-token (flip-flop) section of the report."""
    ok = sum(r.worst <= TOL for r in token_rows)
    regime = FLIPFLOP
    lines = [
        "",
        "## Per-token heads: flip-flop",
        "",
        "For per-token tasks their code runs `flipflop_framework` (`--model_type flipflop`, readme.md; `train.py:47` builds "
        "`{model_type}_framework`), which puts the same `classifier_block` = Linear(d, d) - ReLU - Linear(d, classes) on "
        "every position of the encoder's `sequence` (`models/flipflop_framework.py:31-35`, `:57`); their encoders "
        "return that `sequence` with no final LayerNorm (UT / GUT: the mixture, `UniversalTransformerEncoder.py:273`, "
        "`:291`; TLB: the chunk outputs concatenated, `TLBEncoder.py:150`, `:158`, `:174`; GUTLB: `UTLBEncoder.py:300`, "
        "`:308`, `:325`). bench's options for both, in `model.faithful=reference`: `classifier=mlp` (the Linear - ReLU "
        "on every per-token output too: `bench/models/layers/feedforward.py: head_mlp`) and `final_norm=false` (UT / GUT "
        "before; now TLB / GUTLB too: `ln_out` the identity).",
        "",
        "Their models: `flipflop_framework` with the flip-flop config classes (`configs/flipflop_configs.py`, the names "
        "readme.md's model nomenclature gives), `causal=True` as there, set to the small sizes above except "
        f"`model_chunk_size={FF_CHUNK}` (at least their bound - 1, as theirs, so GUTLB's per-chunk length cap, chunk + 1 "
        f"iterations, does not bind) and `memory_size={SLOTS}` (not equal to the chunk size, as theirs); their bounds "
        "(`layers`) and update layers as the classes set them (the table: committed, and as set here). `classes_num` is "
        f"bench's flipflop vocabulary size ({FF_VOCAB}), so their last Linear has the shape of bench's LM output layer, "
        f"the task head bench's harness puts on "
        "`hidden` (`bench/runner/module.py: Head` of the flipflop task's kind `lm`), into which it is copied. bench's "
        "models: the registry entries with `model.faithful=reference` at the same sizes.",
        "",
        "| paper | their config | encoder, block | committed | as set here | bench | per-token options set by `model.faithful=reference` |",
        "|---|---|---|---|---|---|---|",
        *meta["token_configs"],
        "",
        *(
            [
                "Not compared per token: "
                + ", ".join(f"{pair.paper} (`{pair.theirs}`)" for pair in meta["no_flipflop"])
                + ": `configs/flipflop_configs.py` has no config class for them (its classes: "
                + ", ".join(f"`{name}`" for name in meta["flipflop_classes"])
                + "), so their code does not run them on flip-flop ([HALT] Table 3 has none).",
                "",
            ]
            if meta["no_flipflop"]
            else []
        ),
        f"Input: {len(regime.lengths)} flip-flop sequences of {regime.padded} tokens from bench's generator "
        f"(`bench/tasks/flipflop.py: flipflop_batch`, p(ignore) = {FF_P_I:g}), no padding (all sequences of a flip-flop "
        f"batch are equally long in both codes); the halting unit's output bias {regime.halt_bias:+g} "
        f"(sigmoid {torch.sigmoid(torch.tensor(regime.halt_bias)).item():.2f}), its weights scaled by {HALT_WEIGHT_SCALE:g}, "
        f"every parameter moved by N(0, {NOISE:g}^2) noise before the copy. Compared: the per-token states (bench: the input "
        "of `ln_out`), the logits at every position (theirs: `classifier_block(sequence)`; bench: `Head(hidden)`), and the "
        "ACT loss. Eval mode.",
        "",
        "| model | their parameters copied (head included) | bench's parameters (head included) |",
        "|---|---|---|",
        *(f"| {m} | {n} | {k} |" for m, (n, k) in meta["token_counts"].items()),
        "",
        f"### Results: {ok} of {len(token_rows)} rows within {TOL:g}",
        "",
        f"| model | mode | dtype | bench depth | max \\|logit\\| | states | logits | ACT loss | <= {TOL:g} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in token_rows:
        verdict = passed(r.worst)
        lines.append(
            f"| {r.pair.paper} | {r.mode or '—'} | {r.dtype} | {r.depth} | {r.scale:.3g} | {fmt(r.states)} | "
            f"{fmt(r.logits)} | {fmt(r.act)} | {verdict} |"
        )
    lines += [
        "",
        "### Each option is needed: controls",
        "",
        f"The same comparison (mode `{CONTROL_MODE}` where the model halts, {CONTROL_DTYPE}) with one of bench's options set "
        "back to its default under the switch: `classifier=linear` (bench's head one Linear on the states; their "
        "last Linear copied into it, their first left out) or `final_norm=true` (bench's `ln_out`, a LayerNorm at its "
        "init, on the per-token outputs): the largest |theirs - bench| over the logits.",
        "",
        "| model | " + " | ".join(f"`{name}`" for name in TOKEN_CONTROLS) + " | both as the switch sets them |",
        "|---|" + "---|" * (len(TOKEN_CONTROLS) + 1),
    ]
    for pair in dict.fromkeys(r.pair for r in token_rows):
        reference = max(r.logits for r in token_rows if r.pair == pair and r.dtype == CONTROL_DTYPE and r.mode in (CONTROL_MODE, None))
        lines.append(
            f"| {pair.paper} | " + " | ".join(fmt(token_controls[pair, name]) for name in TOKEN_CONTROLS) + f" | {fmt(reference)} |"
        )
    lines += [
        "",
        "Still different on flip-flop, and not an option: their output layer has `classes_num = 2` outputs, hence 1 "
        '(`flipflop_framework.py:15`; `labels2idx = {"0": 0, "1": 1}`, `preprocess/process_flipflop.py:30`) trained '
        "with a sigmoid / binary cross-entropy on the read positions (`agents/flipflop_agent.py:35-56`), where bench's "
        f"flipflop task is a language model over its {FF_VOCAB} tokens with a softmax cross-entropy at the same positions "
        "(the rows above use their `classes_num` at bench's width to compare the heads' layers).",
    ]
    return lines


def report(rows: list[Row], meta: dict, controls: dict, equal_lengths: dict, token_rows: list[Row], token_controls: dict) -> str:
    """The whole report (Markdown): models, shims, weight map, regimes, results, controls, per token."""
    ok = sum(r.worst <= TOL for r in rows)
    lines = [
        "# bench against the [HALT] authors' encoders",
        "",
        f"Generated by `{meta['command']}` (torch {torch.__version__}); every number below is from that run.",
        "",
        f"Their code: JRC1995/InvestigatingRecurrentTransformers at `{meta['commit']}`, `models/` and `configs/` read "
        "from the bare mirror into a temporary folder and imported from there. Their model: `classifier_framework` "
        "with the config class that readme.md's model nomenclature gives for the paper's name, from "
        "`configs/listopsc2_configs.py` (ListOps) as their `configs/configLoader.py` loads it, then set to small sizes: "
        f"{', '.join(f'`{k}={v}`' for k, v in SIZES.items())}, and `layers` (the halting bound) as below. bench's "
        "model: the registry entry with `model.faithful=reference` and the same sizes (`bench.build_model`'s path: "
        "`resolve_model`, `instantiate_model`).",
        "",
        "| paper | their config | their encoder, block and flags | bench | set by `model.faithful=reference` |",
        "|---|---|---|---|---|",
        *meta["configs"],
        "",
        f"einops: {meta['einops']}.",
        "",
        "## Shims and patches",
        "",
        "| what | where | why |",
        "|---|---|---|",
        *(f"| shim `{module}` | the temporary folder's `shims/`, first on sys.path | {why} |" for module, (_, why) in SHIMS.items()),
        *(f"| patch `{old}` -> `{new.split('  #')[0]}` | `{name}` | {why} |" for name, old, new, why in PATCHES),
        "| not called: `classifier_framework.forward` | `models/classifier_framework.py` | it casts the embeddings to "
        "float16 (their mixed-precision runs); its modules are called in its order instead: `word_embedding`, "
        "dropout (identity in eval), `encoder`, `classifier_block` |",
        "",
        "Nothing else is replaced: their encoders, blocks, xPos (`xpos_relative_position.py`), FlashMHA's projections, "
        "unpadding (`bert_padding.py`) and halting loops run as committed.",
        "",
        "## Weight map",
        "",
        "Every parameter of their model is copied into bench's by an explicit name map (`weight_map` in the script; "
        "the query / key projections that feed xPos have each head's rows reordered from xPos's interleaved pairs to "
        "bench's rotate-half layout, the same rotation and scale per pair). The run stops if any parameter of either "
        "side is left unmapped, except:",
        "",
        *(f"- {who} `{name}`: {why}" for who, name, why in meta["unmapped"]),
        "",
        "| model | their parameters copied | bench's parameters |",
        "|---|---|---|",
        *(f"| {m} | {n} | {k} |" for m, (n, k) in meta["counts"].items()),
        "",
        "## Regimes",
        "",
        *(f"- **{name}**: {purpose}" for name, purpose in REGIME_PURPOSE.items()),
        "",
        "| family | regime | real lengths | padded to | halting bias (sigmoid) | length caps | bound |",
        "|---|---|---|---|---|---|---|",
        *meta["regimes"],
        "",
        "Inputs: random tokens, padded in one batch (bidirectional UT / GUT: bench's input wrapped in START / END, which "
        f"their encoder adds itself); every parameter of theirs moved by N(0, {NOISE:g}^2) noise (seeded) before the copy, the halting "
        f"unit's output weights scaled by {HALT_WEIGHT_SCALE:g} and its bias set to the regime's. Compared: "
        "the per-token states at real positions (UT / GUT: S_L, START / END included; TLB / GUTLB: the chunk outputs "
        "C_L; on bench's side the input of `ln_out`, the identity under `final_norm=false`), the pooled state through the "
        "head's Linear - ReLU (GUT: END; UT: mean; TLB / GUTLB: mean over slots of LN(memory)), and the ACT loss (beta "
        "times the mean ponder cost). Both in eval mode.",
        "",
        f"## Results: {ok} of {len(rows)} rows within {TOL:g}",
        "",
        "Largest |theirs - bench| per model and regime (over halting modes and the three quantities):",
        "",
        f"| model | regime | float32 | float64 | <= {TOL:g} |",
        "|---|---|---|---|---|",
    ]
    keys = list(dict.fromkeys((r.pair, r.regime.name) for r in rows))
    for pair, regime in keys:
        group = [r for r in rows if r.pair == pair and r.regime.name == regime]
        worst = {dt: max(r.worst for r in group if r.dtype == dt) for dt in ("float32", "float64")}
        verdict = passed(max(worst.values()))
        lines.append(f"| {pair.paper} (`{pair.ours}`) | {regime} | {fmt(worst['float32'])} | {fmt(worst['float64'])} | {verdict} |")
    lines += [
        "",
        "The float64 rows stop short of float64 rounding: both sides build xPos's tables from constants computed in "
        "float32 (their `xpos_relative_position.py`: `inv_freq` at every call, then `.float()`, and the `scale` buffer; "
        "bench's `Rotary` buffers `inv_freq` and `zeta`), the frequencies by different formulas.",
        "",
        "Every row: bench's halting depth per sequence (`halt_depth`: iterations, the mean over positions for "
        "token-level units, over chunks with a real token for GUTLB) shows the regime is reached.",
        "",
        f"| model | mode | regime | dtype | bench depth | max \\|state\\| | states | pooled | ACT loss | <= {TOL:g} |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = passed(r.worst)
        lines.append(
            f"| {r.pair.paper} | {r.mode or '—'} | {r.regime.name} | {r.dtype} | {r.depth} | {r.scale:.3g} | {fmt(r.states)} | "
            f"{fmt(r.pooled)} | {fmt(r.act)} | {verdict} |"
        )
    lines += [
        "",
        "## Controls: each regime needs the rule it is meant to exercise",
        "",
        f"The same comparison (mode `{CONTROL_MODE}`, {CONTROL_DTYPE}) with bench's `model.halt_rules` set apart from the switch's "
        "`reference` (both rules) to `paper` (neither), `length-cap` (the cap alone) or `undo-crossing` (the undo "
        "alone): the largest |theirs - bench| over the three quantities. A rule a regime exercises shows as a "
        f"difference above {TOL:g} where it is left out.",
        "",
        "| model | regime | " + " | ".join(f"`{rules}`" for rules in CONTROL_RULES) + " | `reference` |",
        "|---|---|" + "---|" * (len(CONTROL_RULES) + 1),
    ]
    for pair, regime in keys:
        if (pair, regime, CONTROL_RULES[0]) not in controls:
            continue
        reference = max(
            r.worst for r in rows if r.pair == pair and r.regime.name == regime and r.mode == CONTROL_MODE and r.dtype == CONTROL_DTYPE
        )
        cells = " | ".join(fmt(controls[pair, regime, rules]) for rules in CONTROL_RULES)
        lines.append(f"| {pair.paper} | {regime} | {cells} | {fmt(reference)} |")
    if equal_lengths:
        lines += [
            "",
            "## A difference found: their attention is causal wherever queries and keys are equally long",
            "",
            'Their `FlashMHA.flash` takes `causal = config["causal"]` whenever the queries and the keys have the same '
            "padded length, cross-attention included. A causal TLB / GUTLB whose memory has as many slots as a chunk has "
            "tokens therefore masks its memory read (tokens -> slots) and its memory update (slots -> tokens) causally "
            "(bottom-right aligned); bench's memory layers never mask. The causal and the one-token-chunks regimes with "
            f"`memory_size = model_chunk_size = {CHUNK}` on both sides ({CONTROL_DTYPE}; every other row above has "
            f"{SLOTS} slots): max |theirs - bench|",
            "",
            "| model | causal | bidirectional (one-token chunks) |",
            "|---|---|---|",
            *(f"| {pair.paper} | {fmt(causal)} | {fmt(bidirectional)} |" for pair, (causal, bidirectional) in equal_lengths.items()),
            "",
            "Their causal runs (flip-flop, `configs/flipflop_configs.py`) never meet it: "
            + "; ".join(
                f"`{pair.theirs}_config`: `model_chunk_size={c['model_chunk_size']}`, `memory_size={c['memory_size']}`"
                for pair, c in meta["flipflop"].items()
            )
            + ". bench does not copy this behaviour.",
        ]
    lines += token_report(token_rows, meta, token_controls)
    lines += [
        "",
        "## Not compared here",
        "",
        "- Training: dropout and gradients (dropout's placement: tests/test_faithful.py).",
        "- Padded lengths that are not a multiple of the chunk size: their `torch.chunk(sequence, ceil(S / g))` then "
        "cuts chunks of ceil(S / ceil(S / g)) tokens, bench fixed chunks of g (docs/chunk_recurrence.md); every batch "
        "here is padded to a multiple of g.",
    ]
    return "\n".join(lines) + "\n"
