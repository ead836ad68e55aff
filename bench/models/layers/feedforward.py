"""Position-wise feed-forward network: Linear(d, ff) - GELU - Linear(ff, d) [HALT §3]
(ReLU for the R-Transformer [RT eq. 7])."""
from torch import Tensor, nn

from .dropout import Dropout

ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "gelu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
        self.up = nn.Linear(d_model, d_ff)
        self.act = ACTIVATIONS[activation]()
        self.down = nn.Linear(d_ff, d_model)
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, d) -> (B, T, d)
        return self.down(self.drop(self.act(self.up(x))))
