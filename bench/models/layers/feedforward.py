"""Position-wise feed-forward network: Linear(d, ff) - GELU - Linear(ff, d) [HALT §3]
(ReLU for the R-Transformer [RT eq. 7]).

Its inner dropout sits after the activation; ``drop_first`` (set by ``model.dropout_at=reference``,
``bench/models/layers/init.py``) moves it before, as the [HALT] authors' code's
``nn.Sequential(Linear, Dropout, GELU, Linear, Dropout)`` does (``models/modules/TransformerBlock.py``
lines 34-38): the same function in eval mode."""

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
        self.drop_first = False  # dropout before the activation (the reference code's placement)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, d) -> (B, T, d)
        if self.drop_first:
            return self.down(self.act(self.drop(self.up(x))))
        return self.down(self.drop(self.act(self.up(x))))


CLASSIFIERS = ("linear", "mlp")  # model.classifier


def head_mlp(d_model: int, classifier: str) -> nn.Module | None:
    """``model.classifier``: ``linear`` (None: the task's Linear reads the backbone's outputs as they are)
    or ``mlp``: Linear(d, d) - ReLU, which the backbone applies to what the task's head reads, so that
    with the task's Linear the head is the [HALT] authors' ``classifier_block`` = Linear - ReLU - Linear:
    the pooled state (``models/classifier_framework.py`` lines 36-40, on ``global_state``: line 65) and
    every position's output (``models/flipflop_framework.py`` lines 31-35, on ``sequence``: line 57;
    ``models/seqlabel_framework.py`` lines 30-34, 56). One module for both: a task reads one of them,
    as each of the code's frameworks has one ``classifier_block``."""
    if classifier not in CLASSIFIERS:
        raise ValueError(f"classifier must be one of {', '.join(CLASSIFIERS)}, not {classifier!r}")
    return nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU()) if classifier == "mlp" else None
