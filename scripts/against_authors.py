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
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import importlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench.config import parse_overrides, resolve_model  # noqa: E402
from bench.models.layers.init import END, START  # noqa: E402
from bench.registry import Registry  # noqa: E402
from bench.runner.build import instantiate_model  # noqa: E402
from bench.runner.module import Head  # noqa: E402
from bench.tasks.flipflop import VOCAB as FLIPFLOP_VOCAB  # noqa: E402
from bench.tasks.flipflop import FlipFlop, flipflop_batch  # noqa: E402

MIRROR = "/work/.mirror/JRC1995+InvestigatingRecurrentTransformers/repo"
COMMIT = "58026b2"  # the commit docs/depth_recurrence.md cites
TOL = 1e-5
VOCAB, CLASSES, PAD = 16, 10, 0  # token ids 3..15 are ordinary tokens; 1, 2 are bench's START / END
SEED = 0

# ---- their code, patched and shimmed --------------------------------------------------------------

#: (file, their line, what replaces it, why): exact text, each found exactly once or the run stops
PATCHES = [
    ("models/modules/FlashMHA.py", "q = q.to(T.float16)", "q = q  # float16 cast removed by bench's scripts/against_authors.py",
     "FlashMHA.flash casts the queries to float16 for the flash kernel (which takes float16 / bfloat16 only); "
     "removed so that attention runs in the compared dtype (kept, attention would read its inputs rounded to float16)"),
    ("models/modules/FlashMHA.py", "kv = kv.to(T.float16)", "kv = kv  # float16 cast removed by bench's scripts/against_authors.py",
     "the same for the keys / values"),
]

FLASH_ATTN_SHIM = '''"""CPU stand-in for flash_attn 2.x (written by bench's scripts/against_authors.py): the one function
the authors' FlashMHA calls, computing what the kernel computes: exact softmax attention over each
sequence of the packed (unpadded) batch, here in the inputs' dtype."""
import torch


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p=0.0, softmax_scale=None, causal=False, **unused):
    """q (total_q, heads, d), kv (total_k, 2, heads, d), sequence b = rows cu[b]:cu[b + 1] -> (total_q, heads, d)."""
    if dropout_p:
        raise NotImplementedError("the stand-in is for evaluation: dropout_p must be 0")
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    out = torch.zeros_like(q)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        k0, k1 = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        scores = torch.einsum("qhd,khd->hqk", q[q0:q1], kv[k0:k1, 0]) * scale
        if causal:  # bottom-right aligned, as flash-attn >= 2.1: query i sees key j <= i + n_k - n_q
            i = torch.arange(q1 - q0).unsqueeze(1)
            j = torch.arange(k1 - k0).unsqueeze(0)
            scores = scores.masked_fill(j > i + (k1 - k0) - (q1 - q0), float("-inf"))
        probs = scores.softmax(-1).nan_to_num(0.0)  # a query that sees no key: output 0, as flash-attn 2.1's readme says
        out[q0:q1] = torch.einsum("hqk,khd->qhd", probs, kv[k0:k1, 1])
    return out
'''

#: module -> (source, why): what the temporary folder's shims/ holds, first on sys.path
SHIMS = {
    "flash_attn": (FLASH_ATTN_SHIM,
                   "flash_attn_varlen_kvpacked_func (CUDA only) -> exact softmax attention per sequence of the packed "
                   "batch on the CPU, in the inputs' dtype; causal masks bottom-right aligned as flash-attn >= 2.1, a query "
                   "that sees no key giving 0"),
}


def git(mirror: str, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, stdout=subprocess.PIPE).stdout


def extract_their_code(mirror: str, folder: Path) -> str:
    """Their models/ and configs/ at COMMIT into ``folder``, PATCHES applied, SHIMS written to
    folder/shims; both first on sys.path. -> the full commit hash."""
    full = git(mirror, "rev-parse", f"{COMMIT}^{{commit}}").decode().strip()
    with tarfile.open(fileobj=io.BytesIO(git(mirror, "archive", full, "models", "configs"))) as tar:
        tar.extractall(folder, filter="data")
    for name, old, new, _ in PATCHES:
        path = folder / name
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"patch target {old!r} occurs {text.count(old)} times in {name} at {full}, not once")
        path.write_text(text.replace(old, new))
    for module, (source, _) in SHIMS.items():
        (folder / "shims" / module).mkdir(parents=True)
        (folder / "shims" / module / "__init__.py").write_text(source)
    sys.path[:0] = [str(folder / "shims"), str(folder)]
    return full


def find_einops() -> str:
    """einops (their code's one third-party import besides torch, numpy and flash_attn): the installed
    package, else the pure-Python wheel on this machine's local package store, imported from the zip
    (nothing is installed or downloaded). -> where it came from."""
    with contextlib.suppress(ImportError):
        import einops
        return f"einops {einops.__version__} (installed)"
    wheels = sorted(glob.glob("/opt/pypi/files/einops-*-py3-none-any.whl"))
    if not wheels:
        raise SystemExit("their code imports einops: install it (pip install einops) or put its wheel in /opt/pypi/files")
    sys.path.insert(0, wheels[-1])
    import einops
    return f"einops {einops.__version__} (the real package, imported from the wheel {os.path.basename(wheels[-1])})"


# ---- the models compared ------------------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    paper: str  # the paper's name
    theirs: str  # their config class (readme.md: "Model Nomenclature", codebase name == paper name)
    ours: str  # bench's registry model
    flipflop: bool = False  # configs/flipflop_configs.py has the class (flip-flop, [HALT] Table 3)

    @property
    def chunked(self) -> bool:
        return self.ours in ("tlb", "gutlb")

    @property
    def halting(self) -> bool:
        return self.ours != "tlb"


PAIRS = [
    Pair("UT", "UT", "ut", flipflop=True),
    Pair("GUT", "GUT_end", "gut", flipflop=True),
    Pair("GUT - Global Halt", "GUT_token_end", "gut-no-global-halt"),
    Pair("GUT - Gate", "GUT_nogate_end", "gut-no-gate"),
    Pair("GUT - Transition", "GUT_notrans_end", "gut-no-transition"),
    Pair("TLB", "TLB", "tlb", flipflop=True),
    Pair("GUTLB", "GUTLB", "gutlb", flipflop=True),
]

D, HEADS, FFN, CHUNK, SLOTS = 32, 2, 64, 4, 3
#: their config keys that say which encoder, block and halting a model is (reported per model)
CONFIG_FLAGS = ("encoder_type", "block", "global_halt", "mean_based_halt", "transition_based_halt", "attn_based_halt",
                "ex_halt", "pooling", "layers", "update_layers", "penalty_gamma")
BOUND = {"depth": 8, "gutlb": 4}  # the halting bound: max_layers (bench), layers (theirs)
#: their config keys set at the small sizes (the rest as the config class sets them)
SIZES = dict(hidden_size=D, embd_dim=D, heads=HEADS, head_dim=D // HEADS, ffn_dim=FFN, ffn_gate_dim=FFN,
             dropout=0.0, attn_dropout=0.0, causal=False, model_chunk_size=CHUNK, memory_size=SLOTS)


def their_config(pair: Pair, causal: bool = False, slots: int = SLOTS, dataset: str = "listopsc2", small: bool = True) -> dict:
    """Their config dict for ``pair`` as their configs/configLoader.py builds it (ListOps, classifier),
    then (``small``) SIZES, the bound, ``causal`` and the memory's ``slots``."""
    from configs.configLoader import load_config

    config = load_config(types.SimpleNamespace(dataset=dataset, model=pair.theirs, model_type="classifier"))
    if not small:
        return config
    config.update(SIZES, causal=causal, memory_size=slots)
    if pair.halting:
        config["layers"] = BOUND["gutlb" if pair.chunked else "depth"]
    return config


def their_model(pair: Pair, causal: bool = False, slots: int = SLOTS) -> nn.Module:
    from models.classifier_framework import classifier_framework

    data = {"classes_num": CLASSES, "PAD_id": PAD, "UNK_id": 3, "vocab_len": VOCAB}
    return classifier_framework(data, their_config(pair, causal, slots))


def flipflop_config(pair: Pair) -> dict:
    """Their flip-flop config for ``pair`` (configs/flipflop_configs.py, as configLoader.py loads it for
    ``--dataset flipflop --model_type flipflop``), then SIZES, the chunk models' FF_CHUNK and SLOTS; their
    bounds (``layers``) and update layers as the class sets them."""
    config = their_config(pair, dataset="flipflop", small=False)
    config.update(SIZES, causal=True, model_chunk_size=FF_CHUNK, memory_size=SLOTS)
    return config


def flipflop_classes() -> list[str]:
    """The model names configs/flipflop_configs.py defines (``<name>_config`` classes, less the base ones)."""
    import configs.flipflop_configs as module

    return [name.removesuffix("_config") for name, value in vars(module).items() if name.endswith("_config")
            and isinstance(value, type) and name not in ("optimizer_config", "base_config")]


def their_flipflop_model(pair: Pair) -> nn.Module:
    """Their ``flipflop_framework`` (train.py line 47: ``{model_type}_framework``) on flip-flop sized data:
    the vocabulary of bench's flipflop task, and ``classes_num`` that many, so that their classifier_block's
    last Linear has the shape of bench's LM output layer (their own data has 2 classes, hence 1 output:
    flipflop_framework.py line 15)."""
    from models.flipflop_framework import flipflop_framework

    data = {"classes_num": FF_VOCAB, "PAD_id": PAD, "UNK_id": None, "vocab_len": FF_VOCAB}
    return flipflop_framework(data, flipflop_config(pair))


def our_spec(pair: Pair, mode: str | None, config: dict, halt_rules: str | None = None, **options):
    """bench's registry model with model.faithful=reference at the sizes of their ``config`` (``bench.build_model``'s
    path): its causality, chunk size, memory slots, update layers, TLB's layers and the halting bound;
    ``halt_rules`` and ``options`` (e.g. ``classifier``, ``final_norm``): set apart from the switch (the controls)."""
    sets = dict(d_model=D, n_heads=HEADS, d_ff=FFN, dropout=0.0, attn_dropout=0.0, faithful="reference", causal=config["causal"])
    if halt_rules is not None:
        sets["halt_rules"] = halt_rules
    if pair.chunked:
        sets.update(chunk_size=config["model_chunk_size"], memory_slots=config["memory_size"], update_layers=config["update_layers"])
    if pair.ours == "tlb":
        sets["n_layers"] = config["layers"]  # TLB_config.layers
    if pair.halting:
        sets.update(max_layers=config["layers"], mode=mode)
    sets.update(options)
    return resolve_model(Registry(), pair.ours, None, parse_overrides({f"model.{k}": v for k, v in sets.items()}))


# ---- the weight map -----------------------------------------------------------------------------

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
    qk = "xpos" if xpos else "same"
    return [Rule(f"{theirs}.q_proj", f"{ours}.q_proj", qk), Rule(f"{theirs}.k_proj", f"{ours}.k_proj", qk),
            Rule(f"{theirs}.v_proj", f"{ours}.v_proj"), Rule(f"{theirs}.out_proj", f"{ours}.o_proj")]


def feedforward_rules(theirs: str, ours: str) -> list[Rule]:  # nn.Sequential(Linear, Dropout, GELU, Linear, Dropout[, Sigmoid])
    return [Rule(f"{theirs}.0", f"{ours}.up"), Rule(f"{theirs}.3", f"{ours}.down")]


def memory_rules(config: dict) -> list[Rule]:
    """TLBEncoder / UTLBEncoder's memory, its update layers (CrossTransformerBlock) and the memory LN."""
    rules = [Rule("encoder.memory", "memory0"), Rule("encoder.LN", "ln_mem")]
    for u in range(config["update_layers"]):
        theirs, ours = f"encoder.update_layers.{u}", f"updates.{u}"
        rules += [Rule(f"{theirs}.LN11", f"{ours}.ln_mem"), Rule(f"{theirs}.LN12", f"{ours}.ln_chunk"),
                  *attention_rules(f"{theirs}.attention", f"{ours}.attn", xpos=False),
                  Rule(f"{theirs}.LN2", f"{ours}.ln_ffn"), *feedforward_rules(f"{theirs}.FFN", f"{ours}.ffn")]
    return rules


def tlb_block_rules(theirs: str, ours: str, gated: bool) -> list[Rule]:
    """TLBBlock / GatedTLBBlock -> TransformerBlock(read=True) / RecurrentBlock(read=True)."""
    rules = [Rule(f"{theirs}.LN0", f"{ours}.ln_attn"), *attention_rules(f"{theirs}.attention", f"{ours}.attn", xpos=True),
             Rule(f"{theirs}.LN11", f"{ours}.read.ln_x"), Rule(f"{theirs}.LN12", f"{ours}.read.ln_mem"),
             *attention_rules(f"{theirs}.cross_attention", f"{ours}.read.attn", xpos=False),
             Rule(f"{theirs}.LN2", f"{ours}.ln_ffn"), *feedforward_rules(f"{theirs}.FFN", f"{ours}.ffn")]
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
        their_only["classifier_block.2"] = ("the head's last Linear: the task's output layer in bench, outside the backbone "
                                            "(compared: the pooled state through classifier_block[:2])")
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
        rules += [Rule(f"{block}.LN1", "block.ln_attn"), *attention_rules(f"{block}.attention", "block.attn", xpos=True),
                 Rule(f"{block}.LN2", "block.ln_ffn"), *feedforward_rules(f"{block}.FFN", "block.ffn")]
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


def copy_weights(theirs: nn.Module, ours: nn.Module, rules: list[Rule], their_only: dict, bench_only: dict,
                 head: nn.Module | None = None) -> int:
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
        target = rule.ours + name[len(rule.theirs):]
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


# ---- the regimes --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Regime:
    name: str
    lengths: tuple[int, ...]  # real tokens per sequence (bench adds START / END for UT / GUT)
    padded: int  # the batch's padded length (chunk models: a multiple of the chunk size)
    halt_bias: float  # the halting unit's output bias: sigmoid(bias) about the halting probability
    causal: bool = False  # causal models on both sides (their flip-flop setting)


#: what each regime exercises (numbers: from the Regime values, in the report)
REGIME_PURPOSE = {
    "early halting": "units halt by probability after a few iterations: the iteration that takes the total past the "
                     "threshold is undone",
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
    if not pair.chunked:
        return [Regime("early halting", (9, 7, 6, 5), 9, 2.4), Regime("shorter than the bound", (1, 2, 3, 9), 9, -3.0),
                Regime("causal", (9, 6, 2, 1), 9, 1.5, causal=True)]
    out = [Regime("shorter than the bound", (1, 2, 3, 8), 8, -3.0), Regime("one-token chunks", (5, 1, 9, 12), 12, -1.0),
           Regime("causal", (12, 9, 5, 2), 12, 1.5, causal=True)]
    return ([Regime("early halting", (12, 12, 11, 10), 12, 2.4)] if pair.halting else []) + out


def family(pair: Pair) -> str:
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


# ---- one comparison -----------------------------------------------------------------------------

@dataclass
class Row:
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
    depth = res.stats.get("halt_depth")
    return "—" if depth is None else ", ".join(f"{d:g}" for d in depth.double().round(decimals=2).tolist())


def compare(pair: Pair, mode: str | None, regime: Regime, dtype: torch.dtype, halt_rules: str | None = None,
            slots: int = SLOTS) -> tuple[Row, int]:
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


# ---- the per-token regime: flip-flop ------------------------------------------------------------

FF_VOCAB = len(FLIPFLOP_VOCAB)  # bench's flipflop task's tokens: <pad> w r i 0 1
FF_CHUNK = 10  # >= their flip-flop bounds - 1, as their chunk of 100 is: GUTLB's per-chunk length cap does not bind
FF_P_I = 0.8  # the probability of an ignore instruction: bench's (and the paper's) training distribution
FLIPFLOP = Regime("flip-flop (per token)", (40, 40, 40), 40, 1.5, causal=True)
#: bench's options that the regime needs, each set back to its default (the per-token controls)
TOKEN_CONTROLS = {"classifier=linear": {"classifier": "linear"}, "final_norm=true": {"final_norm": True}}


def flipflop_tokens(regime: Regime) -> Tensor:
    """Flip-flop sequences from bench's own generator (bench/tasks/flipflop.py: w / r / i instructions and
    their bits, the first a write, the last a read), all of the regime's length: no padding, as in both codes."""
    tokens, _ = flipflop_batch(np.random.default_rng(SEED), len(regime.lengths), regime.padded, FF_P_I)
    return torch.from_numpy(tokens).long()


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
    row = Row(pair, mode, regime, str(dtype).removeprefix("torch."), states, None, act, depth_of(res), scale,
              logits=(their_logits - logits).abs().max().item())
    return row, copied


# ---- the report ---------------------------------------------------------------------------------

def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


#: the controls: bench's halt_rules set back from ``reference`` to each value that drops one of its rules
CONTROL_RULES = ("paper", "length-cap", "undo-crossing")
CONTROL_MODE, CONTROL_DTYPE = "halt", "float32"


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
        *(["Not compared per token: " + ", ".join(f"{pair.paper} (`{pair.theirs}`)" for pair in meta["no_flipflop"])
           + ": `configs/flipflop_configs.py` has no config class for them (its classes: "
           + ", ".join(f"`{name}`" for name in meta["flipflop_classes"])
           + "), so their code does not run them on flip-flop ([HALT] Table 3 has none).", ""] if meta["no_flipflop"] else []),
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
        verdict = "pass" if r.worst <= TOL else "**FAIL**"
        lines.append(f"| {r.pair.paper} | {r.mode or '—'} | {r.dtype} | {r.depth} | {r.scale:.3g} | {fmt(r.states)} | "
                     f"{fmt(r.logits)} | {fmt(r.act)} | {verdict} |")
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
        reference = max(r.logits for r in token_rows if r.pair == pair and r.dtype == CONTROL_DTYPE
                        and r.mode in (CONTROL_MODE, None))
        lines.append(f"| {pair.paper} | " + " | ".join(fmt(token_controls[pair, name]) for name in TOKEN_CONTROLS)
                     + f" | {fmt(reference)} |")
    lines += [
        "",
        "Still different on flip-flop, and not an option: their output layer has `classes_num = 2` outputs, hence 1 "
        "(`flipflop_framework.py:15`; `labels2idx = {\"0\": 0, \"1\": 1}`, `preprocess/process_flipflop.py:30`) trained "
        "with a sigmoid / binary cross-entropy on the read positions (`agents/flipflop_agent.py:35-56`), where bench's "
        f"flipflop task is a language model over its {FF_VOCAB} tokens with a softmax cross-entropy at the same positions "
        "(the rows above use their `classes_num` at bench's width to compare the heads' layers).",
    ]
    return lines


def report(rows: list[Row], meta: dict, controls: dict, equal_lengths: dict, token_rows: list[Row], token_controls: dict) -> str:
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
        verdict = "pass" if max(worst.values()) <= TOL else "**FAIL**"
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
        verdict = "pass" if r.worst <= TOL else "**FAIL**"
        lines.append(f"| {r.pair.paper} | {r.mode or '—'} | {r.regime.name} | {r.dtype} | {r.depth} | {r.scale:.3g} | {fmt(r.states)} | "
                     f"{fmt(r.pooled)} | {fmt(r.act)} | {verdict} |")
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
        reference = max(r.worst for r in rows if r.pair == pair and r.regime.name == regime and r.mode == CONTROL_MODE
                        and r.dtype == CONTROL_DTYPE)
        cells = " | ".join(fmt(controls[pair, regime, rules]) for rules in CONTROL_RULES)
        lines.append(f"| {pair.paper} | {regime} | {cells} | {fmt(reference)} |")
    if equal_lengths:
        lines += [
            "",
            "## A difference found: their attention is causal wherever queries and keys are equally long",
            "",
            "Their `FlashMHA.flash` takes `causal = config[\"causal\"]` whenever the queries and the keys have the same "
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
            + "; ".join(f"`{pair.theirs}_config`: `model_chunk_size={c['model_chunk_size']}`, `memory_size={c['memory_size']}`"
                        for pair, c in meta["flipflop"].items())
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


def main() -> None:
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
    meta = {"command": " ".join(["python", *sys.argv]), "counts": {}, "configs": [], "regimes": [], "flipflop": {},
            "token_configs": [], "token_counts": {}, "no_flipflop": []}
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
                    + f" | {length_caps(pair, r)} | {bound} |" for r in regimes(pair)]
            rules, their_only, bench_only = weight_map(pair, config, spec.params)
            unmapped.update({("theirs", k, v): None for k, v in their_only.items()})
            unmapped.update({("bench", k, v): None for k, v in bench_only.items()})
            for mode in ("halt", "upperbound") if pair.halting else (None,):
                for dtype in (torch.float32, torch.float64):
                    for regime in regimes(pair):
                        row, copied = compare(pair, mode, regime, dtype)
                        rows.append(row)
                        meta["counts"][pair.paper][0] = max(copied, meta["counts"][pair.paper][0])  # causal: no START / END
                        print(f"{pair.ours:20s} {mode or '-':10s} {row.dtype:8s} {regime.name:24s} depth {row.depth:22s} "
                              f"states {fmt(row.states)} pooled {fmt(row.pooled)} act {fmt(row.act)}", flush=True)
            for regime in regimes(pair) if pair.halting else ():
                for rules in CONTROL_RULES:
                    dtype = getattr(torch, CONTROL_DTYPE)
                    controls[pair, regime.name, rules] = compare(pair, CONTROL_MODE, regime, dtype, rules)[0].worst
                print(f"{pair.ours:20s} controls {regime.name:24s} "
                      + " ".join(f"{rules} {fmt(controls[pair, regime.name, rules])}" for rules in CONTROL_RULES), flush=True)
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
            structure = [", ".join(f"`{k}={c[k]}`" for k in ("layers", "update_layers", "model_chunk_size", "memory_size", "hidden_size")
                                   if k in c and (pair.chunked or k in ("layers", "hidden_size"))) for c in (committed, config)]
            switched = ", ".join(f"`{k}={v}`" for k, v in spec.params.items()
                                 if k in ("classifier", "final_norm") and spec.sources.get(k, "").startswith("model.faithful"))
            meta["token_configs"].append(f"| {pair.paper} | `{pair.theirs}_config` | `{config['encoder_type']}`, `{config['block']}` | "
                                         f"{structure[0]} | {structure[1]} | `{pair.ours}` | {switched} |")
            for mode in ("halt", "upperbound") if pair.halting else (None,):
                for dtype in (torch.float32, torch.float64):
                    row, copied = compare_per_token(pair, mode, dtype)
                    token_rows.append(row)
                    meta["token_counts"][pair.paper] = (copied, n_ours)
                    print(f"{pair.ours:20s} {mode or '-':10s} {row.dtype:8s} {FLIPFLOP.name:24s} depth {row.depth:22s} "
                          f"states {fmt(row.states)} logits {fmt(row.logits)} act {fmt(row.act)}", flush=True)
            for name, options in TOKEN_CONTROLS.items():
                mode = CONTROL_MODE if pair.halting else None
                token_controls[pair, name] = compare_per_token(pair, mode, getattr(torch, CONTROL_DTYPE), options)[0].logits
            print(f"{pair.ours:20s} per-token controls " + " ".join(f"{name} {fmt(token_controls[pair, name])}" for name in TOKEN_CONTROLS),
                  flush=True)
        equal_lengths = {}
        for pair in (p for p in pairs if p.chunked):
            mode, dtype = CONTROL_MODE if pair.halting else None, getattr(torch, CONTROL_DTYPE)
            equal_lengths[pair] = tuple(compare(pair, mode, regime, dtype, slots=CHUNK)[0].worst
                                        for name in ("causal", "one-token chunks") for regime in regimes(pair) if regime.name == name)
            meta["flipflop"][pair] = their_config(pair, dataset="flipflop", small=False)
            print(f"{pair.ours:20s} memory_size = chunk size: causal {fmt(equal_lengths[pair][0])}, "
                  f"bidirectional {fmt(equal_lengths[pair][1])}", flush=True)
        meta["unmapped"] = list(unmapped)
        meta["flipflop_classes"] = flipflop_classes()
    text = report(rows, meta, controls, equal_lengths, token_rows, token_controls)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(f"\n{sum(r.worst <= TOL for r in rows)} of {len(rows)} rows within {TOL:g}, per token "
          f"{sum(r.worst <= TOL for r in token_rows)} of {len(token_rows)}; written to {args.out}")
    if any(r.worst > TOL for r in rows + token_rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
