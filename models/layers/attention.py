"""One attention function for every model, with three backends.

* ``sdpa`` (default): torch.nn.functional.scaled_dot_product_attention; flash / memory-
  efficient kernels on GPU, the fused kernel on CPU.
* ``math``: the textbook computation; the reference the tests compare against.
* ``xformers``: xformers.ops.memory_efficient_attention, CUDA only and optional.

Shapes: q (B, H, Tq, hd), k and v (B, H, Tk, hd). ``key_mask`` (B, Tk) is True for keys that
may be attended. ``causal`` aligns queries to the *end* of the keys: query i sees key j iff
j <= i + (Tk - Tq), so "memory + new tokens" attention is causal over the new tokens.
``bias`` is an additive float tensor broadcastable to (B, H, Tq, Tk) (relative positions).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .positional import Rotary
from .rem import REM

ATTENTION_BACKENDS = ("sdpa", "math", "xformers")


def _allowed(B: int, Tq: int, Tk: int, causal: bool, key_mask: Tensor | None, device) -> Tensor | None:
    """Boolean (B|1, 1, Tq, Tk) mask of allowed pairs, or None when everything is allowed."""
    allowed = None
    if causal:
        i = torch.arange(Tq, device=device).unsqueeze(1)
        j = torch.arange(Tk, device=device).unsqueeze(0)
        allowed = (j <= i + (Tk - Tq)).view(1, 1, Tq, Tk)
    if key_mask is not None:
        km = key_mask.bool().view(B, 1, 1, Tk)
        allowed = km if allowed is None else allowed & km
    if allowed is not None:
        # A query with no visible key (a padded segment) would give NaN; let it see all keys.
        # Such rows are padding, never read, and never reach a real position.
        allowed = allowed | ~allowed.any(-1, keepdim=True)
    return allowed


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = False,
    key_mask: Tensor | None = None,
    bias: Tensor | None = None,
    backend: str = "sdpa",
    dropout_p: float = 0.0,
) -> Tensor:
    B, H, Tq, hd = q.shape
    Tk = k.shape[2]
    if backend == "xformers":
        return _attend_xformers(q, k, v, causal, key_mask, bias, dropout_p)
    if backend == "sdpa":
        if bias is None and key_mask is None and (not causal or Tq == Tk):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal)
        allowed = _allowed(B, Tq, Tk, causal, key_mask, q.device)
        if bias is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)
        mask = bias.to(q.dtype)
        if allowed is not None:
            mask = mask.masked_fill(~allowed, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    if backend == "math":
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)  # (B, H, Tq, Tk)
        if bias is not None:
            scores = scores + bias
        allowed = _allowed(B, Tq, Tk, causal, key_mask, q.device)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        probs = scores.softmax(-1)
        if dropout_p > 0:
            probs = F.dropout(probs, dropout_p)
        return probs @ v
    raise ValueError(f"unknown attention backend {backend!r}; choose one of {', '.join(ATTENTION_BACKENDS)}")


def xformers_available() -> bool:
    try:
        import xformers.ops  # noqa: F401
    except Exception:
        return False
    return torch.cuda.is_available()


def _attend_xformers(q, k, v, causal, key_mask, bias, dropout_p):
    if not q.is_cuda:
        raise RuntimeError("the xformers backend runs on CUDA only; use model.attn_backend=sdpa on CPU")
    import xformers.ops as xops

    B, H, Tq, hd = q.shape
    Tk = k.shape[2]
    q_, k_, v_ = (t.transpose(1, 2) for t in (q, k, v))  # xformers wants (B, T, H, hd)
    if bias is None and key_mask is None:
        attn_bias = None
        if causal:
            attn_bias = xops.LowerTriangularFromBottomRightMask() if Tq != Tk else xops.LowerTriangularMask()
    else:
        # A tensor bias must be allocated with its last dim padded to a multiple of 8, then sliced.
        pad_k = (Tk + 7) // 8 * 8
        full = torch.zeros(B, H, Tq, pad_k, device=q.device, dtype=q.dtype)[..., :Tk]
        if bias is not None:
            full.copy_(bias.expand(B, H, Tq, Tk))
        allowed = _allowed(B, Tq, Tk, causal, key_mask, q.device)
        if allowed is not None:
            full.masked_fill_(~allowed.expand(B, H, Tq, Tk), float("-inf"))
        attn_bias = full
    out = xops.memory_efficient_attention(q_, k_, v_, attn_bias=attn_bias, p=dropout_p)
    return out.transpose(1, 2)


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


class MultiHeadAttention(nn.Module):
    """Multi-head attention with bias-free Q/K/V/O projections (as in the [HALT] reference code).

    Self-attention when ``context`` is None; otherwise queries come from ``x`` and keys/values
    from ``context`` (memory, or memory + x). Rotary/xPos is applied only when positions are
    given, so cross-attention to memories stays position-free.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        rotary: str | None = None,
        backend: str = "sdpa",
        dropout: float = 0.0,
        head_dim: int | None = None,
        rsa: dict | None = None,
    ):
        super().__init__()
        if backend not in ATTENTION_BACKENDS:
            raise ValueError(f"unknown attention backend {backend!r}; choose one of {', '.join(ATTENTION_BACKENDS)}")
        self.n_heads = n_heads
        self.head_dim = head_dim or d_model // n_heads
        if head_dim is None and d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        inner = self.n_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, inner, bias=False)
        self.k_proj = nn.Linear(d_model, inner, bias=False)
        self.v_proj = nn.Linear(d_model, inner, bias=False)
        self.o_proj = nn.Linear(inner, d_model, bias=False)
        self.rotary = Rotary(self.head_dim, use_xpos=(rotary == "xpos")) if rotary in ("xpos", "rope") else None
        self.backend = backend
        self.dropout = dropout
        # RSA [RSA eq. 4]: per head {(1 - sigmoid(mu)) softmax(QK^T) + sigmoid(mu) P} V, with one
        # gate mu per layer and one REM P per head (models/layers/rem.py). The first sum(kinds)
        # heads are RSA heads; any others stay plain attention heads, as in [RSA Table 7]
        # ("n_RSA_heads" of n_heads), so an entry's kinds fit every preset with enough heads.
        self.rem = None
        if rsa:
            known = {"kinds", "dilations", "mu_init", "lag_cap", "path"}
            if set(rsa) - known:
                raise ValueError(f"unknown rsa keys {sorted(set(rsa) - known)}; known: {sorted(known)}")
            if "kinds" not in rsa:
                raise ValueError("rsa needs 'kinds': six head counts (k1..k6) summing to at most n_heads")
            n_rsa = sum(int(k) for k in rsa["kinds"])
            if n_rsa > self.n_heads:
                raise ValueError(f"rsa kinds {list(rsa['kinds'])} sum to {n_rsa} but the layer has only n_heads={self.n_heads}")
            self.rem = REM(
                n_rsa, rsa["kinds"], rsa.get("dilations"), lag_cap=rsa.get("lag_cap", 200), path=rsa.get("path", "fft")
            )
            self.rsa_mu = nn.Parameter(torch.tensor(float(rsa.get("mu_init", 1.0))))

    def rsa_mix(self, attn_out: Tensor, v: Tensor, *, key_mask: Tensor | None, causal: bool, rem_offset: int = 0) -> Tensor:
        """RSA [eq. 4] per head: (1 - s) attn_out + s P V, s = sigmoid(mu). attn_out (B, H, Tq, hd) is
        any attention's softmax(.) V (hosts with their own scores, e.g. XL's relative ones, call this)."""
        if key_mask is not None:  # padded keys contribute nothing to P V, in either direction
            v = v * key_mask.view(key_mask.shape[0], 1, -1, 1).to(v.dtype)
        k = self.rem.n_heads  # RSA heads come first; the rest stay plain
        # s folds into the REM kernel (H x K flops) and 1 - s = sigmoid(-mu) into one fused
        # multiply-add, so the mix costs a single pass over the output (and one in backward).
        s_pv = self.rem(v if k == self.n_heads else v[:, :k], n_queries=attn_out.shape[2], offset=rem_offset,
                        causal=causal, scale=torch.sigmoid(self.rsa_mu))  # (B, k, Tq, hd)
        return _GatedMix.apply(s_pv, attn_out, torch.sigmoid(-self.rsa_mu))

    def rsa_gate(self) -> float:
        """sigmoid(mu): the share of P V in every head's output (RSA only)."""
        return float(torch.sigmoid(self.rsa_mu.detach()))

    def rsa_stats(self) -> dict:
        """Gate sigmoid(mu) and per-head lambda / gamma / theta, as floats (empty without RSA)."""
        if self.rem is None:
            return {}
        stats = {"gate": self.rsa_gate()}
        with torch.no_grad():
            decay, theta, kind = self.rem.head_params()
        for h in range(self.rem.n_heads):
            name = "lambda" if int(kind[h]) == 0 else "gamma"
            stats[f"{name}_h{h}"] = float(decay[h])
            if int(kind[h]):
                stats[f"theta_h{h}"] = float(theta[h])
        return stats

    def split_heads(self, x: Tensor) -> Tensor:  # (B, T, H*hd) -> (B, H, T, hd)
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:  # (B, H, T, hd) -> (B, T, H*hd)
        B, H, T, hd = x.shape
        return x.transpose(1, 2).reshape(B, T, H * hd)

    def forward(
        self,
        x: Tensor,
        *,
        context: Tensor | None = None,
        pos_q: Tensor | None = None,
        pos_k: Tensor | None = None,
        key_mask: Tensor | None = None,
        causal: bool = False,
        bias: Tensor | None = None,
        rem_offset: int = 0,
    ) -> Tensor:
        """``rem_offset``: with RSA, the REM lag between query i and key j is i - j + rem_offset
        (keys = [rem_offset memory keys; current segment], App. D.2); masked REM when causal."""
        ctx = x if context is None else context
        q = self.split_heads(self.q_proj(x))  # (B, H, Tq, hd)
        k = self.split_heads(self.k_proj(ctx))  # (B, H, Tk, hd)
        v = self.split_heads(self.v_proj(ctx))
        if self.rotary is not None and pos_q is not None:
            q, k = self.rotary(q, k, pos_q, pos_k if pos_k is not None else pos_q)
        out = attend(
            q, k, v, causal=causal, key_mask=key_mask, bias=bias, backend=self.backend,
            dropout_p=self.dropout if self.training else 0.0,
        )  # (B, H, Tq, hd)
        if self.rem is not None:
            out = self.rsa_mix(out, v, key_mask=key_mask, causal=causal, rem_offset=rem_offset)
        return self.o_proj(self.merge_heads(out))
