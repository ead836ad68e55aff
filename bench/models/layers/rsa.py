"""Recurrent self-attention (RSA) [RSA eq. 4]: the gate that mixes a REM into attention.

Per head h of one layer, with one gate mu per layer and the head's REM P_h (``rem.py``):

    RSA_h(X) = {(1 - sigmoid(mu)) softmax(Q_h K_h^T) + sigmoid(mu) P_h} V_h          (eq. 4)

The first sum(kinds) heads are RSA heads; any others stay plain attention heads, as in
[RSA Table 7] ("n_RSA_heads" of n_heads), so an entry's kinds fit every preset with enough
heads. Hosts (the Transformer's ``MultiHeadAttention``, XL's ``RelativeAttention``) compute
their own softmax(.) V and hand it to ``RSA.forward`` with V.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .rem import REM

RSA_KEYS = {"kinds", "dilations", "mu_init", "lag_cap", "path", "eta_init", "theta_init"}


class _GatedMix(torch.autograd.Function):
    """out = attn with its first k heads replaced by s_pv + c * attn (RSA eq. 4, s folded into s_pv).

    s_pv (B, k, Tq, hd), attn (B, H, Tq, hd), c a 0-dim tensor -> (B, H, Tq, hd) laid out like
    ``attn``. Why a Function: ``addcmul`` lays its output out like s_pv, which the FFT leaves
    time-last, so merging heads for the output projection cost a transposing copy forward and
    backward; here the output keeps attention's own memory order (merging heads then costs what it
    costs without RSA: nothing when attention returns (B, T, H, hd) memory) and the backward is
    one multiply and one dot product. Measured at B = 8, T = 512 on CPU: the mix alone, forward
    and backward, ~20% less than addcmul + cat; a whole training step ~3%.
    """

    @staticmethod
    def forward(ctx, s_pv: Tensor, attn: Tensor, c: Tensor) -> Tensor:
        k = s_pv.shape[1]
        out = torch.empty_like(attn)
        torch.addcmul(s_pv, attn[:, :k], c, out=out[:, :k])
        if k < attn.shape[1]:
            out[:, k:].copy_(attn[:, k:])
        ctx.save_for_backward(attn, c)
        ctx.k = k
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        attn, c = ctx.saved_tensors
        k = ctx.k
        g_mixed = grad[:, :k]
        g_attn = grad.clone() if k < grad.shape[1] else torch.empty_like(grad)
        torch.mul(g_mixed, c, out=g_attn[:, :k])
        g_c = (g_mixed * attn[:, :k]).sum() if ctx.needs_input_grad[2] else None
        return g_mixed, g_attn, g_c


def gated_mix(s_pv: Tensor, attn: Tensor, c: Tensor) -> Tensor:
    """s_pv + c * attn on the first k heads, attn on the rest. Under torch.compile the plain
    expression (inductor fuses it, and the Function's ``out=`` writes into strided views would
    break the graph); in eager mode the Function above."""
    if torch.compiler.is_compiling():
        k = s_pv.shape[1]
        return torch.cat((torch.addcmul(s_pv, attn[:, :k], c), attn[:, k:]), dim=1)
    return _GatedMix.apply(s_pv, attn, c)


class RSA(nn.Module):
    """The REMs and the gate mu of one attention layer; ``config`` is the registry's ``rsa`` dict:
    kinds (k1..k6, summing to at most n_heads), dilations, mu_init, lag_cap, path, and optionally
    eta_init / theta_init (replacing the paper's initialisation of lambda = tanh(eta) and theta)."""

    def __init__(self, n_heads: int, config: dict):
        super().__init__()
        if set(config) - RSA_KEYS:
            raise ValueError(f"unknown rsa keys {sorted(set(config) - RSA_KEYS)}; known: {sorted(RSA_KEYS)}")
        if "kinds" not in config:
            raise ValueError("rsa needs 'kinds': six head counts (k1..k6) summing to at most n_heads")
        n_rsa = sum(int(k) for k in config["kinds"])
        if n_rsa > n_heads:
            raise ValueError(f"rsa kinds {list(config['kinds'])} sum to {n_rsa} but the layer has only n_heads={n_heads}")
        self.rem = REM(
            n_rsa,
            config["kinds"],
            config.get("dilations"),
            lag_cap=config.get("lag_cap", 200),
            path=config.get("path", "fft"),
            eta_init=config.get("eta_init"),
            theta_init=config.get("theta_init"),
        )
        self.mu = nn.Parameter(torch.tensor(float(config.get("mu_init", 1.0))))

    def forward(self, attn_out: Tensor, v: Tensor, *, key_mask: Tensor | None, causal: bool, offset: int = 0) -> Tensor:
        """attn_out (B, H, Tq, hd) = softmax(.) V of every head, v (B, H, Tk, hd) -> eq. 4 per head.
        ``offset``: the REM lag between query i and key j is i - j + offset (keys = [offset memory
        keys; current segment], [RSA App. D.2]); masked REM when causal."""
        if key_mask is not None:  # padded keys contribute nothing to P V, in either direction
            v = v * key_mask.view(key_mask.shape[0], 1, -1, 1).to(v.dtype)
        k = self.rem.n_heads  # RSA heads come first; the rest stay plain
        # s folds into the REM kernel (H x K flops) and 1 - s = sigmoid(-mu) into one fused
        # multiply-add, so the mix costs a single pass over the output (and one in backward).
        s_pv = self.rem(
            v if k == v.shape[1] else v[:, :k], n_queries=attn_out.shape[2], offset=offset, causal=causal, scale=torch.sigmoid(self.mu)
        )  # (B, k, Tq, hd)
        return gated_mix(s_pv, attn_out, torch.sigmoid(-self.mu))

    def step(self, attn_out: Tensor, v: Tensor, rem_state: Tensor) -> tuple[Tensor, Tensor]:
        """Streaming eq. 4 (causal): attn_out (B, H, t, hd) of the t new queries, v (B, H, n+t, hd)
        the values of every position so far; the REM term comes from the O(1) recurrence
        (``REM.step``). Returns (mixed output, new REM state)."""
        k = self.rem.n_heads
        pv, rem_state = self.rem.step(v if k == v.shape[1] else v[:, :k], rem_state, attn_out.shape[2])
        return gated_mix(pv * torch.sigmoid(self.mu), attn_out, torch.sigmoid(-self.mu)), rem_state

    def gate(self) -> Tensor:
        """sigmoid(mu), detached, on the device: the share of P V in every RSA head's output."""
        return torch.sigmoid(self.mu.detach())

    def learned(self) -> dict:
        """Gate sigmoid(mu) and per-head lambda / gamma / theta, as floats (for records, not per step)."""
        stats = {"gate": float(self.gate())}
        with torch.no_grad():
            decay, theta, kind = self.rem.head_params()
        for h in range(self.rem.n_heads):
            name = "lambda" if int(kind[h]) == 0 else "gamma"
            stats[f"{name}_h{h}"] = float(decay[h])
            if int(kind[h]):
                stats[f"theta_h{h}"] = float(theta[h])
        return stats


def fit_kinds(kinds: list, dilations: list | None, n_heads: int) -> tuple[list, list | None] | None:
    """REM kinds (k1..k6) and dilations fitted to ``n_heads`` where they sum to more (the layer
    would refuse them), else None: kinds that fit stay, their first heads RSA heads and the rest
    plain ([RSA Table 7]). A sum that is a multiple of n_heads scales down when every count and the
    dilated heads' factors divide by it (8 heads (4, 2, 2) -> 4 heads (2, 1, 1)); otherwise regular
    heads (k1) go, the excess of them ([RSA Table 2]'s 5-head cases at 4 heads: (3, 1, 1) -> (2, 1, 1),
    (5, 0, ...) -> (4, 0, ...)); None when neither fits (the layer refuses them, naming the sum)."""
    kinds = [int(k) for k in kinds]
    total = sum(kinds)
    if total <= n_heads or n_heads < 1:
        return None
    factor = total // n_heads
    if total % n_heads == 0 and all(k % factor == 0 for k in kinds):
        scaled = [k // factor for k in kinds]
        if not isinstance(dilations, list):  # none, or one factor for every dilated head
            return scaled, dilations
        if len(set(dilations)) <= 1:  # one factor for every dilated head: as many as are kept
            return scaled, dilations[: sum(scaled[3:])]
    if kinds[0] >= total - n_heads:
        return [kinds[0] - (total - n_heads), *kinds[1:]], dilations
    return None


def adapt_rsa(params: dict) -> list:
    """A host's ``Backbone.adapt`` for its ``rsa`` param: the kinds fitted to its n_heads (``fit_kinds``),
    as one ``Adaptation``; none when there is no ``rsa`` or its kinds fit."""
    from ..base import Adaptation

    rsa, n_heads = params.get("rsa"), params.get("n_heads")
    if not isinstance(rsa, dict) or not isinstance(rsa.get("kinds"), list) or not isinstance(n_heads, int):
        return []
    fitted = fit_kinds(rsa["kinds"], rsa.get("dilations"), n_heads)
    if fitted is None:
        return []
    kinds, dilations = fitted
    values = {"kinds": kinds} if dilations == rsa.get("dilations") else {"kinds": kinds, "dilations": dilations}
    return [Adaptation({"rsa": values}, f"n_heads={n_heads}")]


def rsa_gate_stats(model: nn.Module) -> dict:
    """sigmoid(mu) of every RSA layer in ``model`` (empty without RSA), in module order, as 0-dim
    device tensors: run records read them [RSA Fig. 3: the share of recurrence]."""
    gates = [m.gate() for m in model.modules() if isinstance(m, RSA)]
    return {f"rsa_gate_l{i}": g for i, g in enumerate(gates)}
