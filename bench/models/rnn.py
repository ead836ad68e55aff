"""LSTM / GRU baselines.

Causal: a unidirectional stack, h_t depends on x_1..x_t only. Bidirectional: forward and
backward stacks of d/2 units each, concatenated, for classification tasks.

Streaming (causal): the state is the stack's last hidden state h (GRU) or (h, c) (LSTM),
(n_layers, B, d) each.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .base import Backbone, BackboneOutput, StreamingUnsupported

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}


class RNN(Backbone):
    supports_streaming = True
    recurrence = "rnn"
    bounded_state = True  # the cell's (h, c) of every layer
    host_reads = "bidirectional with padding: the packed sequence's lengths live on the host"

    def __init__(
        self,
        vocab_size: int,
        causal: bool,
        d_model: int = 128,
        n_layers: int = 1,
        cell: str = "lstm",
        dropout: float = 0.1,
    ):
        super().__init__(vocab_size, causal, d_model)
        if cell not in CELLS:
            raise ValueError(f"unknown cell {cell!r}; choose one of {', '.join(CELLS)}")
        if not causal and d_model % 2:
            raise ValueError(f"a bidirectional RNN needs an even d_model, got {d_model}")
        self.embed = nn.Embedding(vocab_size, d_model)
        self.rnn = CELLS[cell](
            d_model,
            d_model if causal else d_model // 2,
            num_layers=n_layers,
            batch_first=True,
            bidirectional=not causal,
            dropout=dropout if n_layers > 1 else 0.0,
        )
        self.drop = nn.Dropout(dropout)
        self.ln_out = nn.LayerNorm(d_model)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        x = self.drop(self.embed(tokens))  # (B, T, d)
        if self.causal or mask is None or bool(mask.all()):
            h, _ = self.rnn(x)  # (B, T, d); causal stacks never read ahead, pads included
        else:
            # The backward direction must start at each sequence's last real token.
            lengths = mask.long().sum(-1).clamp_min(1).cpu()
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            h, _ = self.rnn(packed)
            h, _ = pad_packed_sequence(h, batch_first=True, total_length=tokens.shape[1])
        return BackboneOutput(hidden=self.ln_out(h), aux_loss=self.zero_aux(h))

    def init_state(self, batch_size: int, device=None):
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        w = self.embed.weight
        h = w.new_zeros(self.rnn.num_layers, batch_size, self.d_model, device=device)  # what the forward starts from
        return (h, h.clone()) if isinstance(self.rnn, nn.LSTM) else h

    def step(self, tokens: Tensor, state) -> tuple[BackboneOutput, object]:
        if not self.causal:
            raise StreamingUnsupported(self.streaming_refusal())
        h, state = self.rnn(self.drop(self.embed(tokens)), state)  # (B, t, d)
        return BackboneOutput(hidden=self.ln_out(h), aux_loss=self.zero_aux(h)), state
