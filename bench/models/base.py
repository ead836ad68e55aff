"""The backbone contract every model family implements.

A backbone maps ``tokens[B,T]`` (and an optional padding ``mask[B,T]``, True = real token)
to per-position states ``hidden[B,T,d]``. Heads (classification, tagging, LM) belong to the
harness, so any backbone runs on any task whose causality it supports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from ..schema import Domain


class StreamingUnsupported(RuntimeError):
    """A backbone asked to stream that cannot (bidirectional, or TLB-FR: chunks need the whole length)."""


@dataclass
class BackboneOutput:
    hidden: Tensor  # (B, T, d) what a per-token head reads: final-normalised (unless final_norm=false; classifier=mlp: + Linear - ReLU)
    aux_loss: Tensor  # scalar; 0 when the model has none (ACT/ponder cost otherwise)
    stats: dict = field(default_factory=dict)  # e.g. halting depth, gate values (floats or tensors)
    pooled: Tensor | None = None  # (B, d) a model's own sequence summary (TLB memory, GUT END), if any


class LazyPooled(BackboneOutput):
    """A ``BackboneOutput`` whose ``pooled`` is computed on its first read, by ``pool()``, not when the
    output is made: a streaming ``step`` whose summary costs extra work (TLB: a memory update on the
    partial chunk) pays it only where a caller reads it (e.g. after a sequence's last token, not at
    every decoded token). ``pool`` runs under the grad / inference mode of the step that made it, so
    reading it later gives the value the step would have given (the weights unchanged); it must read
    nothing the stream changes in place afterwards. Assigning ``pooled`` replaces it."""

    def __init__(self, hidden: Tensor, aux_loss: Tensor, stats: dict | None = None, *, pool: Callable[[], Tensor]):
        grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()

        def compute() -> Tensor:
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                return pool()

        self._pool: Callable[[], Tensor] | None = compute
        super().__init__(hidden, aux_loss, {} if stats is None else stats)

    @property
    def pooled(self) -> Tensor | None:
        if self._pool is not None:
            self._pooled, self._pool = self._pool(), None
        return self._pooled

    @pooled.setter
    def pooled(self, value: Tensor | None) -> None:  # the dataclass __init__ sets None: the pool stays
        if value is not None:
            self._pool = None
        self._pooled = value


class Adaptation(NamedTuple):
    """Values a family sets for itself from a preset's generic sizes (``Backbone.adapt``): ``values``
    (model params, nested like the registry's), ``to`` the sizes they follow (``"n_heads=4"``);
    `bench explain` shows their source as ``adapted to <to> by <Class>``."""

    values: dict
    to: str


#: the values of ``Backbone.recurrence``: what a family's state carries from one position to the next
RECURRENCES = {
    "none": "no recurrence: attention over the whole input (Transformer, NoPE, the RSA Transformer's REMs inside it)",
    "rnn": "a recurrent cell over every token (LSTM, GRU)",
    "local-rnn": "a recurrent cell over a short window of tokens before each position, under attention (R-Transformer)",
    "chunk": "a memory carried from one segment / block / chunk to the next (Transformer-XL, BRT, TLB)",
    "depth": "one layer applied again and again in depth, with halting (UT, GUT, GUTLB)",
    "linear": "a matrix state updated by each token, with a chunked parallel form (the linear recurrences)",
}


class Backbone(nn.Module):
    """Base class: token embedding size, causality flags and the output contract.

    Subclasses declare which causal modes they support; the harness refuses a task/model
    pairing whose causality does not fit before anything is built.
    """

    supports_causal: ClassVar[bool] = True
    supports_bidirectional: ClassVar[bool] = True
    #: how the family carries information along the sequence, one of ``RECURRENCES``; the conformance
    #: checks a family must pass follow from it (docs/adding-a-model.md: `make test-family NAME=...`)
    recurrence: ClassVar[str] = "none"
    #: whether the streaming state stops growing with the stream (a fixed size, or a memory plus at most
    #: one window: segment, block, chunk) rather than keeping every position seen (a KV cache); a family
    #: whose state has a bounded part beside a growing one names it in ``bounded_state_part``
    bounded_state: ClassVar[bool] = False
    #: why a forward / backward pass reads a device value on the host (one line; on a GPU each read waits
    #: for the device), or "" where it never does; a module inside (a mixer) declares its own the same way
    host_reads: ClassVar[str] = ""
    #: whether the [HALT] authors' code gives this family its tasks' START / END (``model.faithful=reference``
    #: turns ``data.start_end`` off where it is False: the chunk models, bench/models/chunked.py)
    reference_start_end: ClassVar[bool] = True
    #: ``model.faithful=reference``: this family's own options at the [HALT] authors' code's values
    #: (docs/depth_recurrence.md, docs/chunk_recurrence.md cite the lines), on top of the settings every
    #: backbone takes (bench/registry.py: REFERENCE_OPTIONS); bench/config.py: resolve_model reads it
    reference_options: ClassVar[dict] = {}
    #: the values this family's own settings may take (``model.d_state`` >= 1 ...), beside those of the
    #: settings families share (bench/config.py: ModelSettings); bench/config.py's resolve_model checks
    #: both before anything is built or written (one line naming the setting and where its value came from)
    setting_domains: ClassVar[dict[str, Domain]] = {}

    @classmethod
    def adapt(cls, params: dict, data: dict) -> list[Adaptation]:
        """The family's own settings mapped from the generic sizes, where its values would otherwise
        clash with them or be refused: ``params`` the model params resolved from every other source
        (d_model, n_heads, n_layers, d_ff, the family's own; --set included), ``data`` the task's
        resolved data params (its lengths; empty without a task). bench/config.py layers the result
        above the preset's ``model`` sizes and under its ``family`` values and ``--set``, so values a
        paper states stay explicit and win. Given its own result back, it returns nothing. The
        default: nothing to adapt."""
        return []

    def __init__(self, vocab_size: int, causal: bool, d_model: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.causal = causal
        self.d_model = d_model

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:  # pragma: no cover
        raise NotImplementedError

    def family_reference_init(self) -> None:
        """``model.init=reference-full``: the part of the authors' code's init that is this family's own,
        in place, after the part every family shares (bench/models/layers/init.py); none by default."""

    def learned(self) -> dict:
        """Interpretable learned scalars of every submodule that reports them (``learned()``, e.g.
        RSA's gate and REM lambda / gamma / theta), keyed by module path: run records keep them."""
        return {name: m.learned() for name, m in self.named_modules() if m is not self and callable(getattr(m, "learned", None))}

    # ---- streaming contract (optional; causal backbones only) -------------------------------
    # state = model.init_state(batch_size, device)        a plain object: tensors, ints, lists,
    #                                                      dicts and tuples of them; nothing kept
    #                                                      in module attributes, so one model serves
    #                                                      many streams and torch.save(state) works
    # out, state = model.step(tokens[B, t], state)        any t >= 1, calls of any sizes in any order;
    #                                                      out.hidden (B, t, d) for the t new positions
    # Feeding a sequence through ``step`` in pieces of any size gives the per-position states of
    # one full ``forward`` (eval mode; fp32 to ~1e-5). Streams have no padding: every token is real.
    # A family that cannot stream by its definition leaves ``supports_streaming`` False and
    # raises StreamingUnsupported naming itself.
    supports_streaming: ClassVar[bool] = False

    def init_state(self, batch_size: int, device: torch.device | str | None = None):
        raise StreamingUnsupported(self.streaming_refusal())

    def step(self, tokens: Tensor, state) -> tuple[BackboneOutput, object]:
        raise StreamingUnsupported(self.streaming_refusal())

    def bounded_state_part(self, state):
        """The part of a streaming ``state`` that stops growing with the stream: all of it where the
        family declares ``bounded_state``, else None (a family with a bounded part beside a growing
        one returns that part)."""
        return state if self.bounded_state else None

    def streaming_refusal(self) -> str:
        """Why this backbone cannot stream (one line); families override with their reason."""
        if not self.causal:
            return f"{type(self).__name__} is bidirectional here: only causal backbones stream"
        return f"{type(self).__name__} has no streaming path (init_state / step)"

    @staticmethod
    def zero_aux(ref: Tensor) -> Tensor:
        return ref.new_zeros(())

    @staticmethod
    def full_mask(tokens: Tensor, mask: Tensor | None) -> Tensor:
        return torch.ones_like(tokens, dtype=torch.bool) if mask is None else mask.bool()
