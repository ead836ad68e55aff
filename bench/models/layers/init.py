"""Parameter initialisation a backbone is built with: the registry's ``model.init``.

``default``: each module's own (PyTorch's: ``nn.Embedding`` N(0, 1), ``nn.Linear`` Kaiming-uniform).

``reference``: what the [HALT] authors' code does where the paper is silent
(JRC1995/InvestigatingRecurrentTransformers):

- token embeddings N(0, 0.02) (``models/classifier_framework.py``, ``flipflop_framework.py``:
  ``nn.init.normal_(self.word_embedding.weight, std=0.02)``); here every ``nn.Embedding``;
- attention: Q, K, V projections Xavier-uniform with gain 1/sqrt(2), the output projection
  Xavier-uniform (``models/modules/FlashMHA.py``, ``reset_parameters``);
- feed-forward: both weights Xavier-uniform, both biases N(0, 1e-6)
  (``models/modules/TransformerBlock.py``).

Everything else (LayerNorms, halting units, gates, memory slots, REMs) keeps its own init, as in
the reference. Applied once, after the backbone is built (``bench/runner/build.py``), so a model
file needs no knowledge of it; with pre-LN the small embeddings start the residual stream at the
scale of each layer's update instead of ~50x above it.
"""
from __future__ import annotations

import math

from torch import nn

from .attention import MultiHeadAttention
from .feedforward import FeedForward

INITS = ("default", "reference")  # bench/registry.py:MODEL_INITS offers the same names to the registry


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


def initialise(model: nn.Module, init: str) -> nn.Module:
    """``model`` under the scheme ``init`` (one of INITS)."""
    if init not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)}, not {init!r}")
    return reference_init(model) if init == "reference" else model
