"""A short causal depthwise convolution over time (DeltaNet, Gated DeltaNet, Mamba-2's conv1d):

    y_t[c] = bias[c] + sum_{j=0}^{K-1} w[c, j] x_{t-K+1+j}[c]          (x_{<1} = 0, or the stream's past)

Streaming: the state is the last K-1 inputs (B, K-1, channels); a forward from it continues the
sequence, so pieces of any size give the full forward's outputs.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ShortConv(nn.Module):
    def __init__(self, channels: int, kernel_size: int = 4):
        super().__init__()
        if kernel_size < 1:
            raise ValueError(f"conv kernel_size must be >= 1; got {kernel_size}")
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels)

    def init_state(self, batch_size: int, device=None, dtype=None) -> Tensor:
        return self.conv.weight.new_zeros(batch_size, self.kernel_size - 1, self.conv.in_channels, device=device, dtype=dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B, T, c), state (B, K-1, c) or None (zeros) -> (y (B, T, c), the last K-1 inputs)."""
        K = self.kernel_size
        past = x.new_zeros(x.shape[0], K - 1, x.shape[2]) if state is None else state.to(x.dtype)
        full = torch.cat((past, x), dim=1)  # (B, K-1+T, c)
        y = F.conv1d(full.transpose(1, 2), self.conv.weight, self.conv.bias, groups=self.conv.groups)  # (B, c, T)
        return y.transpose(1, 2), full[:, full.shape[1] - (K - 1):]
