"""LocalRNN [RT §3.1]: a shared GRU/LSTM run over the window of M positions ending at each t.

    h_t = RNN(x_{t-M+1}, ..., x_t)[last]          (eq. 2)

The input is left-padded with M-1 zero vectors so every position has a full window and never
sees the future. Windows come from ``Tensor.unfold`` (a strided view: no index table, any
length, any device), then all B*T windows run through the RNN as one batch of length M.
Memory is O(B T M d), which is why M stays small (the paper uses M <= ~10).

Streaming (``step``): the state is the last M-1 inputs (zeros before the stream, the same left
padding), so new positions get the windows ``forward`` gives them; bounded by M-1 vectors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CELLS = {"gru": nn.GRU, "lstm": nn.LSTM}


class LocalRNN(nn.Module):
    def __init__(self, d_model: int, window: int, cell: str = "gru"):
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"unknown LocalRNN cell {cell!r}; choose one of {', '.join(CELLS)}")
        if window < 1:
            raise ValueError(f"LocalRNN window must be >= 1, got {window}")
        self.window = window
        self.rnn = CELLS[cell](d_model, d_model, batch_first=True)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, d) -> (B, T, d)
        return self.run_windows(F.pad(x, (0, 0, self.window - 1, 0)))  # M-1 zeros before the start

    def init_state(self, batch_size: int, d_model: int, device=None, dtype=None) -> Tensor:
        return torch.zeros(batch_size, self.window - 1, d_model, device=device, dtype=dtype)  # the left padding

    def step(self, x: Tensor, prev: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, t, d) new inputs, prev (B, M-1, d) the inputs before them -> (out (B, t, d), last M-1 inputs)."""
        padded = torch.cat((prev, x), dim=1)  # (B, t+M-1, d)
        return self.run_windows(padded), padded[:, padded.shape[1] - (self.window - 1) :]

    def run_windows(self, padded: Tensor) -> Tensor:  # (B, T+M-1, d) -> (B, T, d)
        M = self.window
        B, T, d = padded.shape[0], padded.shape[1] - (M - 1), padded.shape[2]
        windows = padded.unfold(1, M, 1)  # (B, T, d, M): window ending at t
        windows = windows.permute(0, 1, 3, 2).reshape(B * T, M, d)  # (B*T, M, d)
        out, _ = self.rnn(windows)  # (B*T, M, d)
        return out[:, -1].reshape(B, T, d)  # last hidden state of each window
