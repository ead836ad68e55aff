"""The models compared: each pair of their config class and bench's registry model, the small sizes
both sides are built at, their model (``classifier_framework``, ``flipflop_framework``) from their
own config loader, and bench's model spec with ``model.faithful=reference`` at the same sizes."""

from __future__ import annotations

import types
from dataclasses import dataclass

from torch import nn

from bench.config import parse_overrides, resolve_model
from bench.registry import Registry
from bench.tasks.flipflop import VOCAB as FLIPFLOP_VOCAB

VOCAB, CLASSES, PAD = 16, 10, 0  # token ids 3..15 are ordinary tokens; 1, 2 are bench's START / END
FF_VOCAB = len(FLIPFLOP_VOCAB)  # bench's flipflop task's tokens: <pad> w r i 0 1
FF_CHUNK = 10  # >= their flip-flop bounds - 1, as their chunk of 100 is: GUTLB's per-chunk length cap does not bind


@dataclass(frozen=True)
class Pair:
    """One model of the paper: their config class beside bench's registry model."""

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

D, HEADS, FFN, CHUNK, SLOTS = 32, 2, 64, 4, 3  # the small sizes both sides are built at
#: their config keys that say which encoder, block and halting a model is (reported per model)
CONFIG_FLAGS = (
    "encoder_type",
    "block",
    "global_halt",
    "mean_based_halt",
    "transition_based_halt",
    "attn_based_halt",
    "ex_halt",
    "pooling",
    "layers",
    "update_layers",
    "penalty_gamma",
)
BOUND = {"depth": 8, "gutlb": 4}  # the halting bound: max_layers (bench), layers (theirs)
#: their config keys set at the small sizes (the rest as the config class sets them)
SIZES = dict(
    hidden_size=D,
    embd_dim=D,
    heads=HEADS,
    head_dim=D // HEADS,
    ffn_dim=FFN,
    ffn_gate_dim=FFN,
    dropout=0.0,
    attn_dropout=0.0,
    causal=False,
    model_chunk_size=CHUNK,
    memory_size=SLOTS,
)


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
    """Their ``classifier_framework`` from ``their_config``, on data of VOCAB tokens and CLASSES classes."""
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

    return [
        name.removesuffix("_config")
        for name, value in vars(module).items()
        if name.endswith("_config") and isinstance(value, type) and name not in ("optimizer_config", "base_config")
    ]


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
