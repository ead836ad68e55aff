"""A short causal depthwise convolution over time (DeltaNet, Gated DeltaNet, Mamba-2's conv1d, the mLSTM):

    y_t[c] = bias[c] + sum_{j=0}^{K-1} w[c, j] x_{t-K+1+j}[c]          (x_{<1} = 0, or the stream's past)

computed channels-last as K shifted products of the padded sequence, with its backward written out
(``_ShiftedSum``): the same function as ``F.conv1d(x^T, weight, bias, groups=channels)`` over the
left-padded sequence (tests/test_linear_families.py compares values and gradients), without the two
transposes and without autograd through the slices (each slice's backward would fill a zero tensor of
the whole sequence). Why, measured: docs/linear_recurrence.md, "Speed".

Streaming: the state is the last K-1 inputs (B, K-1, channels); a forward from it continues the
sequence, so pieces of any size give the full forward's outputs.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class _ShiftedSum(torch.autograd.Function):
    """y = bias + sum_j full[:, j:j+T] * w[j]; full (B, T+K-1, c), w (K, c), bias (c) -> y (B, T, c)."""

    @staticmethod
    def forward(ctx, full: Tensor, w: Tensor, bias: Tensor) -> Tensor:
        K, T = w.shape[0], full.shape[1] - w.shape[0] + 1
        y = torch.addcmul(bias, full[:, :T], w[0])  # (B, T, c)
        for j in range(1, K):
            y.addcmul_(full[:, j : j + T], w[j])
        ctx.save_for_backward(full, w)
        return y

    @staticmethod
    def backward(ctx, grad: Tensor):
        full, w = ctx.saved_tensors
        K, T = w.shape[0], grad.shape[1]
        grad_full = grad_w = grad_bias = None
        if ctx.needs_input_grad[0]:  # d full[:, i] = sum_j grad[:, i - j] w[j]: each shift added in place
            grad_full = torch.zeros_like(full)
            for j in range(K):
                grad_full[:, j : j + T].addcmul_(grad, w[j])
        if ctx.needs_input_grad[1]:
            grad_w = torch.stack([(grad * full[:, j : j + T]).sum((0, 1)) for j in range(K)])  # (K, c)
        if ctx.needs_input_grad[2]:
            grad_bias = grad.sum((0, 1))
        return grad_full, grad_w, grad_bias


class ShortConv(nn.Module):
    def __init__(self, channels: int, kernel_size: int = 4):
        super().__init__()
        if kernel_size < 1:
            raise ValueError(f"conv kernel_size must be >= 1; got {kernel_size}")
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels)  # holds weight (c, 1, K) and bias (c)

    def init_state(self, batch_size: int, device=None, dtype=None) -> Tensor:
        return self.conv.weight.new_zeros(batch_size, self.kernel_size - 1, self.conv.in_channels, device=device, dtype=dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B, T, c), state (B, K-1, c) or None (zeros) -> (y (B, T, c), the last K-1 inputs)."""
        K = self.kernel_size
        past = x.new_zeros(x.shape[0], K - 1, x.shape[2]) if state is None else state.to(x.dtype)
        full = torch.cat((past, x), dim=1)  # (B, K-1+T, c)
        w = self.conv.weight[:, 0, :].t()  # (K, c): w[j] multiplies x_{t-K+1+j}
        return _ShiftedSum.apply(full, w.to(x.dtype), self.conv.bias.to(x.dtype)), full[:, full.shape[1] - (K - 1) :]
