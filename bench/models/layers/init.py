"""Parameter initialisation a backbone is built with: the registry's ``model.init``, and the
post-build setting ``model.dropout_at``.

``default``: each module's own (PyTorch's: ``nn.Embedding`` N(0, 1), ``nn.Linear`` Kaiming-uniform).

``reference``: what the [HALT] authors' code does where the paper is silent
(JRC1995/InvestigatingRecurrentTransformers), for the modules every family shares:

- token embeddings N(0, 0.02) (``models/classifier_framework.py``, ``flipflop_framework.py``:
  ``nn.init.normal_(self.word_embedding.weight, std=0.02)``); here every ``nn.Embedding``;
- attention: Q, K, V projections Xavier-uniform with gain 1/sqrt(2), the output projection
  Xavier-uniform (``models/modules/FlashMHA.py``, ``reset_parameters``);
- feed-forward: both weights Xavier-uniform, both biases N(0, 1e-6)
  (``models/modules/TransformerBlock.py``).

Everything else (LayerNorms, halting units, gates, memory slots, REMs) keeps its own init. The
committed tables to date ran under this one.

``reference-full``: ``reference`` completed where the code differs per family (docs/depth_recurrence.md
and docs/chunk_recurrence.md cite the lines): here the halting unit's output bias at torch's default,
U(+-1/sqrt(d)) (the encoders' ``nn.Linear(hidden_size, 1)`` of ``halt_layers``), instead of
``halt_bias_init``; the rest is the family's own part, its ``family_reference_init``
(``bench/models/base.py``): START / END N(0, 1) for the bidirectional UT / GUT
(``bench/models/universal.py``), M^0 zero and the feed-forwards at torch's default for the chunk models
(``bench/models/chunked.py``).

Applied once, after the backbone is built (``bench/runner/build.py``), so a model file holds only its
own part; with pre-LN the small embeddings start the residual stream at the scale of each
layer's update instead of ~50x above it.
"""

from __future__ import annotations

import math

from torch import nn

from .attention import MultiHeadAttention
from .feedforward import FeedForward
from .gated import RecurrentBlock
from .halting import HaltingUnit

INITS = ("default", "reference", "reference-full")  # bench/registry.py:MODEL_INITS offers the same names
DROPOUT_PLACES = ("bench", "reference")  # bench/registry.py:DROPOUT_PLACES likewise


def reference_init(model: nn.Module) -> nn.Module:
    """Re-initialise ``model``'s embeddings, attention and FFN projections in place (see above)."""
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
            if module.padding_idx is not None:  # nn.Embedding's contract: the padding row stays 0
                nn.init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, MultiHeadAttention):
            for proj in (module.q_proj, module.k_proj, module.v_proj):
                nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
            nn.init.xavier_uniform_(module.o_proj.weight)
        elif isinstance(module, FeedForward):
            for linear in (module.up, module.down):
                nn.init.xavier_uniform_(linear.weight)
                nn.init.normal_(linear.bias, std=1e-6)
    return model


def reference_full_init(model: nn.Module) -> nn.Module:
    """``reference``, then the family's own part of the code's init (``family_reference_init``) and the
    halting units' output biases (see above), in place."""
    reference_init(model)
    model.family_reference_init()
    for module in model.modules():
        if isinstance(module, HaltingUnit):
            bound = 1 / math.sqrt(module.fc2.in_features)
            nn.init.uniform_(module.fc2.bias, -bound, bound)
    return model


def initialise(model: nn.Module, init: str) -> nn.Module:
    """``model`` under the scheme ``init`` (one of INITS)."""
    if init not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)}, not {init!r}")
    if init == "reference-full":
        return reference_full_init(model)
    return reference_init(model) if init == "reference" else model


def place_dropout(model: nn.Module, where: str) -> nn.Module:
    """``model.dropout_at``: ``bench`` leaves every feed-forward's dropout after its activation and none
    on the gate; ``reference`` puts it before the activation and on the gate's logits, as the code's
    ``nn.Sequential(Linear, Dropout, GELU, Linear, Dropout[, Sigmoid])`` (``GatedTransformerBlock.py``
    lines 34-45; ``TLBBlock.py``, ``CrossTransformerBlock.py`` alike). Training only: eval is the same."""
    if where not in DROPOUT_PLACES:
        raise ValueError(f"dropout_at must be one of {', '.join(DROPOUT_PLACES)}, not {where!r}")
    for module in model.modules():
        if isinstance(module, FeedForward):
            module.drop_first = where == "reference"
        elif isinstance(module, RecurrentBlock):
            module.gate_logit_dropout = where == "reference" and module.gate is not None
    return model
