"""Bench's UT, GUT (and its three ablations), TLB and GUTLB with ``model.faithful=reference`` against
the [HALT] authors' own encoders (JRC1995/InvestigatingRecurrentTransformers at ``58026b2``), with the
authors' weights copied into bench's modules.

    .venv/bin/python scripts/against_authors.py                          # writes results/against_authors.md
    .venv/bin/python scripts/against_authors.py --out /tmp/x.md --mirror PATH/TO/BARE/REPO

The algorithm:

    code <- their files at COMMIT (``git archive`` of the bare mirror) in a temporary folder; PATCHES
            applied to it, SHIMS written beside it, both first on sys.path (their code is never copied
            into this repository: it is read from the mirror at every run and imported from there)
    for each pair (their config class, bench's registry model) in PAIRS, halting mode, dtype, regime:
        theirs <- their classifier_framework built from the config the paper's model name selects
                  (configs/listopsc2_configs.py, as their configs/configLoader.py loads it) at SIZES;
                  every parameter moved by seeded noise, the halting unit's output bias the regime's
        ours   <- bench's registry model with model.faithful=reference at the same sizes
        copy theirs -> ours by the pair's explicit name map (``weight_map``); a parameter of either side
                  that no rule accounts for stops the run
        diff   <- max |theirs - ours| over the per-token states (real positions), the pooled state
                  through the head's Linear - ReLU, and the ACT loss
    controls <- the same with bench's halt_rules set back to each value that drops one rule
    equal    <- the chunk models with as many memory slots as chunk tokens (their attention's causal quirk)
    per token, for each pair whose config class configs/flipflop_configs.py has (UT, GUT, TLB, GUTLB):
        theirs <- their flipflop_framework (classifier_block on every position) from that class, causal,
                  at SIZES but its own bound and update layers; classes_num = bench's flipflop vocabulary
        ours   <- bench's registry model with model.faithful=reference and bench's task head for flipflop
                  (bench/runner/module.py: Head, the LM output layer), their classifier_block[2] copied into it
        diff   <- max |theirs - ours| over the per-token states, the logits at every position, the ACT loss,
                  on flip-flop sequences from bench's generator; controls: classifier=linear, final_norm=true
    results/against_authors.md: the table of diff per model x regime x dtype, pass where <= TOL

Their classifier_framework's own forward is not called (it casts the embeddings to float16, for their
mixed-precision GPU runs); its modules are called in its order: word_embedding, (dropout: identity in
eval), encoder, classifier_block. The regimes are the ones where bench's reference options change
bench's outputs: halting early (the crossing step undone), sequences shorter than the bound (the length
cap), chunks with one real token (GUTLB's cap per chunk; TLB's padding rule), and all of it causal.
Exit status 1 if a row differs by more than TOL.

The parts, one job a module, in scripts/against_authors_parts/: their_code (the mirror's code, patched
and shimmed), pairs (the models compared, their sizes), weight_map, regimes, comparison (one row of
differences), report; this file runs them all and writes the report.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench.runner.build import instantiate_model  # noqa: E402
from bench.runner.module import Head  # noqa: E402
from bench.tasks.flipflop import FlipFlop  # noqa: E402
from scripts.against_authors_parts.comparison import (  # noqa: E402
    CONTROL_DTYPE,
    CONTROL_MODE,
    CONTROL_RULES,
    TOKEN_CONTROLS,
    TOL,
    compare,
    compare_per_token,
)
from scripts.against_authors_parts.pairs import (  # noqa: E402
    CHUNK,
    CONFIG_FLAGS,
    FF_VOCAB,
    PAIRS,
    VOCAB,
    D,
    flipflop_classes,
    flipflop_config,
    our_spec,
    their_config,
)
from scripts.against_authors_parts.regimes import FLIPFLOP, family, length_caps, regimes  # noqa: E402
from scripts.against_authors_parts.report import fmt, report  # noqa: E402
from scripts.against_authors_parts.their_code import MIRROR, extract_their_code, find_einops  # noqa: E402
from scripts.against_authors_parts.weight_map import weight_map  # noqa: E402


def main() -> None:
    """Every pair compared in every mode, dtype and regime, the controls, the per-token runs -> the report."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirror", default=MIRROR, help="the bare git repository of the authors' code")
    ap.add_argument("--out", default="results/against_authors.md")
    ap.add_argument("--models", default=",".join(p.ours for p in PAIRS), help="bench models to compare (default: all)")
    args = ap.parse_args()
    pairs = [p for p in PAIRS if p.ours in args.models.split(",")]
    if not os.path.isdir(args.mirror):
        raise SystemExit(f"no mirror of the authors' code at {args.mirror}")
    torch.set_num_threads(1)
    rows, controls, families, token_rows, token_controls = [], {}, set(), [], {}
    meta = {
        "command": " ".join(["python", *sys.argv]),
        "counts": {},
        "configs": [],
        "regimes": [],
        "flipflop": {},
        "token_configs": [],
        "token_counts": {},
        "no_flipflop": [],
    }
    with tempfile.TemporaryDirectory(prefix="halt-authors-") as folder:
        meta["einops"] = find_einops()
        meta["commit"] = extract_their_code(args.mirror, Path(folder))
        importlib.invalidate_caches()
        unmapped = {}
        for pair in pairs:
            config = their_config(pair)
            spec = our_spec(pair, "halt" if pair.halting else None, config)
            meta["counts"][pair.paper] = [0, sum(1 for _ in instantiate_model(spec, VOCAB).parameters())]
            switched = ", ".join(f"`{k}={v}`" for k, v in spec.params.items() if spec.sources.get(k, "").startswith("model.faithful"))
            flags = ", ".join(f"`{k}={config[k]}`" for k in CONFIG_FLAGS if k in config)
            meta["configs"].append(f"| {pair.paper} | `{pair.theirs}_config` | {flags} | `{pair.ours}` | {switched} |")
            if family(pair) not in families:
                families.add(family(pair))
                bound = config["layers"] if pair.halting else "—"
                meta["regimes"] += [
                    f"| {family(pair)} | {r.name} | {', '.join(map(str, r.lengths))} | {r.padded} | "
                    + (f"{r.halt_bias:+g} ({torch.sigmoid(torch.tensor(r.halt_bias)).item():.2f})" if pair.halting else "—")
                    + f" | {length_caps(pair, r)} | {bound} |"
                    for r in regimes(pair)
                ]
            rules, their_only, bench_only = weight_map(pair, config, spec.params)
            unmapped.update({("theirs", k, v): None for k, v in their_only.items()})
            unmapped.update({("bench", k, v): None for k, v in bench_only.items()})
            for mode in ("halt", "upperbound") if pair.halting else (None,):
                for dtype in (torch.float32, torch.float64):
                    for regime in regimes(pair):
                        row, copied = compare(pair, mode, regime, dtype)
                        rows.append(row)
                        meta["counts"][pair.paper][0] = max(copied, meta["counts"][pair.paper][0])  # causal: no START / END
                        print(
                            f"{pair.ours:20s} {mode or '-':10s} {row.dtype:8s} {regime.name:24s} depth {row.depth:22s} "
                            f"states {fmt(row.states)} pooled {fmt(row.pooled)} act {fmt(row.act)}",
                            flush=True,
                        )
            for regime in regimes(pair) if pair.halting else ():
                for rules in CONTROL_RULES:
                    dtype = getattr(torch, CONTROL_DTYPE)
                    controls[pair, regime.name, rules] = compare(pair, CONTROL_MODE, regime, dtype, rules)[0].worst
                print(
                    f"{pair.ours:20s} controls {regime.name:24s} "
                    + " ".join(f"{rules} {fmt(controls[pair, regime.name, rules])}" for rules in CONTROL_RULES),
                    flush=True,
                )
            if not pair.flipflop:
                meta["no_flipflop"].append(pair)
                continue
            config = flipflop_config(pair)
            spec = our_spec(pair, "halt" if pair.halting else None, config)
            head = Head(FlipFlop.kind, D, FF_VOCAB, 0, 0)
            _, their_only, bench_only = weight_map(pair, config, spec.params, per_token=True)
            unmapped.update({("theirs (per token)", k, v): None for k, v in their_only.items()})
            unmapped.update({("bench (per token)", k, v): None for k, v in bench_only.items()})
            n_ours = sum(1 for _ in instantiate_model(spec, FF_VOCAB).parameters()) + sum(1 for _ in head.parameters())
            committed = their_config(pair, dataset="flipflop", small=False)
            structure = [
                ", ".join(
                    f"`{k}={c[k]}`"
                    for k in ("layers", "update_layers", "model_chunk_size", "memory_size", "hidden_size")
                    if k in c and (pair.chunked or k in ("layers", "hidden_size"))
                )
                for c in (committed, config)
            ]
            switched = ", ".join(
                f"`{k}={v}`"
                for k, v in spec.params.items()
                if k in ("classifier", "final_norm") and spec.sources.get(k, "").startswith("model.faithful")
            )
            meta["token_configs"].append(
                f"| {pair.paper} | `{pair.theirs}_config` | `{config['encoder_type']}`, `{config['block']}` | "
                f"{structure[0]} | {structure[1]} | `{pair.ours}` | {switched} |"
            )
            for mode in ("halt", "upperbound") if pair.halting else (None,):
                for dtype in (torch.float32, torch.float64):
                    row, copied = compare_per_token(pair, mode, dtype)
                    token_rows.append(row)
                    meta["token_counts"][pair.paper] = (copied, n_ours)
                    print(
                        f"{pair.ours:20s} {mode or '-':10s} {row.dtype:8s} {FLIPFLOP.name:24s} depth {row.depth:22s} "
                        f"states {fmt(row.states)} logits {fmt(row.logits)} act {fmt(row.act)}",
                        flush=True,
                    )
            for name, options in TOKEN_CONTROLS.items():
                mode = CONTROL_MODE if pair.halting else None
                token_controls[pair, name] = compare_per_token(pair, mode, getattr(torch, CONTROL_DTYPE), options)[0].logits
            print(
                f"{pair.ours:20s} per-token controls " + " ".join(f"{name} {fmt(token_controls[pair, name])}" for name in TOKEN_CONTROLS),
                flush=True,
            )
        equal_lengths = {}
        for pair in (p for p in pairs if p.chunked):
            mode, dtype = CONTROL_MODE if pair.halting else None, getattr(torch, CONTROL_DTYPE)
            equal_lengths[pair] = tuple(
                compare(pair, mode, regime, dtype, slots=CHUNK)[0].worst
                for name in ("causal", "one-token chunks")
                for regime in regimes(pair)
                if regime.name == name
            )
            meta["flipflop"][pair] = their_config(pair, dataset="flipflop", small=False)
            print(
                f"{pair.ours:20s} memory_size = chunk size: causal {fmt(equal_lengths[pair][0])}, "
                f"bidirectional {fmt(equal_lengths[pair][1])}",
                flush=True,
            )
        meta["unmapped"] = list(unmapped)
        meta["flipflop_classes"] = flipflop_classes()
    text = report(rows, meta, controls, equal_lengths, token_rows, token_controls)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(
        f"\n{sum(r.worst <= TOL for r in rows)} of {len(rows)} rows within {TOL:g}, per token "
        f"{sum(r.worst <= TOL for r in token_rows)} of {len(token_rows)}; written to {args.out}"
    )
    if any(r.worst > TOL for r in rows + token_rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
