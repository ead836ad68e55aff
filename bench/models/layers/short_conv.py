"""A short causal depthwise convolution over time (DeltaNet, Gated DeltaNet, Mamba-2's conv1d):

    y_t[c] = bias[c] + sum_{j=0}^{K-1} w[c, j] x_{t-K+1+j}[c]          (x_{<1} = 0, or the stream's past)

Streaming: the state is the last K-1 inputs (B, K-1, channels); a forward from it continues the
sequence, so pieces of any size give the full forward's outputs.
"""
from __future__ import annotations

import torch
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
        T = x.shape[1]
        w = self.conv.weight[:, 0, :].t()  # (K, c): w[j] multiplies x_{t-K+1+j}
        # the K shifted products summed, channels last: the same sum as F.conv1d(full^T, weight, groups=c), with no
        # transposes and an elementwise backward (the depthwise convolution's backward is ~2x slower on the CPU)
        y = self.conv.bias + full[:, :T] * w[0]  # (B, T, c)
        for j in range(1, K):
            y = y + full[:, j:j + T] * w[j]
        return y, full[:, full.shape[1] - (K - 1):]
