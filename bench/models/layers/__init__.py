"""Parts shared by the model families: attention dispatch, positions, FFN, blocks, RSA."""

from .attention import ATTENTION_BACKENDS, MultiHeadAttention, additive_mask, attend, xformers_available, xformers_unusable
from .block import PostLNBlock, RelativeBlock, TransformerBlock
from .feedforward import FeedForward
from .positional import (
    POSITIONAL_ENCODINGS,
    AbsolutePositionalEmbedding,
    Rotary,
    RotaryTables,
    TokenEmbedding,
    make_rotary,
    positions_from_mask,
)
from .relative import RelativeAttention, project_relative
from .rsa import RSA, rsa_gate_stats

__all__ = [
    "ATTENTION_BACKENDS",
    "POSITIONAL_ENCODINGS",
    "PostLNBlock",
    "RSA",
    "AbsolutePositionalEmbedding",
    "FeedForward",
    "MultiHeadAttention",
    "RelativeAttention",
    "RelativeBlock",
    "Rotary",
    "RotaryTables",
    "TokenEmbedding",
    "TransformerBlock",
    "additive_mask",
    "attend",
    "make_rotary",
    "positions_from_mask",
    "project_relative",
    "rsa_gate_stats",
    "xformers_available",
    "xformers_unusable",
]
