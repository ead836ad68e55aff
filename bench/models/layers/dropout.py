"""Dropout in one kernel launch per call, on every device.

``nn.Dropout`` on the CPU runs ``F.dropout``'s composite path: bernoulli_, div_ and mul forward
(three kernels), mul backward. ``torch.native_dropout`` is one kernel forward and one backward
(CUDA's ``F.dropout`` already takes it). It draws the same mask from the same generator state, so
a seeded run drops the same units; the kept values are x * mask * 1/(1-p) instead of
x * (mask / (1-p)): bitwise equal at p = 0.1 (every [HALT] preset), within one float ulp at some
other p. The chunk- and depth-recurrent families call dropout tens of times per chunk.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Dropout(nn.Dropout):
    """``nn.Dropout`` (same arguments, no state) through ``torch.native_dropout``."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p >= 1.0 or self.inplace:  # all dropped / in place: nn.Dropout's own path
            return super().forward(x)
        return torch.native_dropout(x, self.p, True)[0]
