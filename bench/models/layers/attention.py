"""One attention function for every model, with three backends.

* ``sdpa`` (default): torch.nn.functional.scaled_dot_product_attention; flash / memory-
  efficient kernels on GPU, the fused kernel on CPU.
* ``math``: the textbook computation; the reference the tests compare against.
* ``xformers``: xformers.ops.memory_efficient_attention, CUDA only and optional.

Shapes: q (B, H, Tq, hd), k and v (B, H, Tk, hd). ``key_mask`` (B, Tk) is True for keys that
may be attended. ``causal`` aligns queries to the *end* of the keys: query i sees key j iff
j <= i + (Tk - Tq), so "memory + new tokens" attention is causal over the new tokens.
``bias`` is an additive float tensor broadcastable to (B, H, Tq, Tk) (relative positions).

Streaming (``MultiHeadAttention.init_cache`` / ``step``): a KV cache of every earlier position,
the keys stored rotated but not xPos-scaled (a position's angle never changes; the xPos scale is
relative to a center that moves with the stream, so the step rescales the cache); RSA carries its
REM recurrences beside it (``RSA.step``).
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .positional import RotaryTables, _rotate_half, apply_rotary, rotate
from .rsa import RSA

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


def additive_mask(B: int, Tq: int, Tk: int, causal: bool, key_mask: Tensor | None, device, dtype=torch.float32) -> Tensor | None:
    """The allowed pairs as an additive score bias (B|1, 1, Tq, Tk): 0 where allowed, -inf
    elsewhere; None when everything is allowed. Hosts that add their own bias (XL's relative
    positions) build it once per segment and fold it into that bias, one pass per layer."""
    allowed = _allowed(B, Tq, Tk, causal, key_mask, device)
    if allowed is None:
        return None
    return torch.zeros(allowed.shape, device=device, dtype=dtype).masked_fill_(~allowed, float("-inf"))


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
        if dropout_p > 0 and q.device.type == "cpu":  # sdpa's math path: the same, in fewer kernels
            return _attend_cpu_dropout(q, k, v, causal, key_mask, bias, dropout_p)
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


def _attend_cpu_dropout(q, k, v, causal: bool, key_mask, bias, dropout_p: float) -> Tensor:
    """What ``F.scaled_dot_product_attention`` computes on the CPU when it drops attention weights (its
    math path): softmax(q k^T / sqrt(hd) + mask), dropout, then @ v, in about half its kernel launches:
    the scale applied to q alone (sdpa scales q and k by its square root each), the mask
    applied by one masked_fill (sdpa builds a float copy and adds it), one dropout kernel
    (``torch.native_dropout``: the mask F.dropout draws from the same generator state). The values
    are sdpa's to float rounding; evaluation (no dropout) never comes here."""
    B, H, Tq, hd = q.shape
    Tk = k.shape[2]
    scores = (q * (1.0 / math.sqrt(hd))) @ k.transpose(-2, -1)  # (B, H, Tq, Tk)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    if causal and key_mask is None and Tq == Tk:  # every query sees itself: no empty row to repair
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril()
    else:
        allowed = _allowed(B, Tq, Tk, causal, key_mask, q.device)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.native_dropout(scores.softmax(-1), dropout_p, True)[0]
    return probs @ v  # (B, H, Tq, hd)


@functools.cache
def xformers_unusable() -> str | None:
    """Why the xformers backend cannot run here, or None when it can.

    Importing is not enough: a wheel built for another torch / CUDA imports, then finds no kernel
    ("xFormers can't load C++/CUDA extensions"). So one tiny bf16 causal call is tried as well.
    """
    try:
        import xformers.ops as xops
    except Exception:
        return "needs the xformers package (pip install xformers, built for your CUDA torch)"
    if not torch.cuda.is_available():
        return "runs on CUDA only and torch sees no CUDA device"
    q = torch.zeros(1, 8, 1, 16, device="cuda", dtype=torch.bfloat16)
    try:
        xops.memory_efficient_attention(q, q, q, attn_bias=xops.LowerTriangularMask())
    except Exception as e:  # NotImplementedError: "No operator found ... wasn't build with CUDA support"
        return (
            f"finds no kernel in the installed xformers ({type(e).__name__}; it was likely built for another "
            f"torch than {torch.__version__}: reinstall xformers to match your torch)"
        )
    return None


def xformers_available() -> bool:
    return xformers_unusable() is None


def _attend_xformers(q, k, v, causal, key_mask, bias, dropout_p):
    if not q.is_cuda:
        raise RuntimeError("the xformers backend runs on CUDA only; use model.attn_backend=sdpa on CPU")
    if (why := xformers_unusable()) is not None:
        raise RuntimeError(f"the xformers backend {why}; use model.attn_backend=sdpa")
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


@contextlib.contextmanager
def stacked_qkv_weights(attentions):
    """Within: each of these self-attentions projects with ONE [W_q; W_k; W_v] (3 H hd, d) stacked on
    entry, instead of stacking it at every call. For the models that call a self-attention once per
    chunk or per iteration (TLB, GUTLB): one stacked weight, saved once for backward (a fresh stack per
    call is saved per call: 3 d^2 floats each, GBs at the paper widths), one cat, and its gradient
    accumulated in one tensor (split back to W_q, W_k, W_v once). Eager only: a compiled step stacks
    inside its graph."""
    attentions = list(attentions)
    for a in attentions:
        a.stacked_qkv = torch.cat((a.q_proj.weight, a.k_proj.weight, a.v_proj.weight))
    try:
        yield
    finally:
        for a in attentions:
            a.stacked_qkv = None


def append_rows(caches: tuple[Tensor, ...], new: tuple[Tensor, ...], filled: list | None) -> tuple[tuple[Tensor, ...], list]:
    """A KV cache's append in amortised O(t) instead of a copy of all n rows per step: each cache
    (B, H, n, hd) is a view into a buffer with room for more rows, and the t new rows (B, H, t, hd)
    are written after the n visible ones. ``filled`` ([rows written into the buffers], shared by
    every state that views them) says whether this view is the buffers' furthest: when another
    stream already continued from the same state (a fork), or the buffers are full, the rows go to
    fresh buffers instead (room for twice the rows after a small append; exactly n + t after a
    prefill), so no state ever sees another's rows. With autograd recording, plain concatenation.
    -> (the caches with the new rows (B, H, n+t, hd), the ``filled`` to keep beside them)."""
    n, t = caches[0].shape[2], new[0].shape[2]
    if torch.is_grad_enabled() and any(c.requires_grad or x.requires_grad for c, x in zip(caches, new)):
        return tuple(torch.cat((c, x), dim=2) for c, x in zip(caches, new)), [n + t]

    def room(c: Tensor) -> int:  # rows the view's buffer holds, 0 unless laid out as (B, H, C, hd) from row 0
        B, H, _, hd = c.shape
        C = c.stride(1) // hd if hd else 0
        ok = c.storage_offset() == 0 and c.stride()[2:] == (hd, 1) and c.stride(0) == H * C * hd
        ok = ok and c.untyped_storage().nbytes() >= B * H * C * hd * c.element_size()
        ok = ok and (torch.is_inference_mode_enabled() or not c.is_inference())
        return C if ok else 0

    if filled is not None and filled[0] == n and all(room(c) >= n + t for c in caches):
        filled[0] = n + t
        out = tuple(c.as_strided((*c.shape[:2], n + t, c.shape[3]), c.stride()) for c in caches)
    else:
        capacity = max(n + t, 2 * n, 16) if t < n else n + t
        out = []
        for c in caches:
            buf = c.new_empty(*c.shape[:2], capacity, c.shape[3])
            buf[:, :, :n] = c
            out.append(buf[:, :, : n + t])
        out, filled = tuple(out), [n + t]
    for c, x in zip(out, new):
        c[:, :, n:] = x
    return out, filled


class MultiHeadAttention(nn.Module):
    """Multi-head attention with bias-free Q/K/V/O projections (as in the [HALT] reference code;
    ``bias=True``: biased, as the R-Transformer's code).

    Self-attention when ``context`` is None; otherwise queries come from ``x`` and keys/values
    from ``context`` (memory, or memory + x). Rotary/xPos is applied only when the caller passes
    its position tables (``rope``, built once per forward by the model), so cross-attention to
    memories stays position-free. ``rsa``: the registry's RSA config (``rsa.py``), or None.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        backend: str = "sdpa",
        dropout: float = 0.0,
        head_dim: int | None = None,
        rsa: dict | None = None,
        bias: bool = False,
    ):
        super().__init__()
        if backend not in ATTENTION_BACKENDS:
            raise ValueError(f"unknown attention backend {backend!r}; choose one of {', '.join(ATTENTION_BACKENDS)}")
        self.n_heads = n_heads
        self.head_dim = head_dim or d_model // n_heads
        if head_dim is None and d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        inner = self.n_heads * self.head_dim
        # ``bias``: biased projections (R-Transformer's code, ``model.attn_bias``); bias-free otherwise
        self.q_proj = nn.Linear(d_model, inner, bias=bias)
        self.k_proj = nn.Linear(d_model, inner, bias=bias)
        self.v_proj = nn.Linear(d_model, inner, bias=bias)
        self.o_proj = nn.Linear(inner, d_model, bias=bias)
        self.backend = backend
        self.dropout = dropout
        self.rsa = RSA(self.n_heads, rsa) if rsa else None
        self.stacked_qkv: Tensor | None = None  # [W_q; W_k; W_v] while ``stacked_qkv_weights`` holds it

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
        rope: RotaryTables | None = None,
        key_mask: Tensor | None = None,
        causal: bool = False,
        bias: Tensor | None = None,
        rem_offset: int = 0,
        kv: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """``kv``: the keys and values (B, H, Tk, hd) of ``context``, projected beforehand
        (``keys_values``): GUTLB reads the same memory at every iteration of a chunk.
        ``rope``: rotary tables for the queries' positions, which the keys share (self-attention,
        or UT's attention to the halting mixture). ``rem_offset``: with RSA, the REM lag between
        query i and key j is i - j + rem_offset (keys = [rem_offset memory keys; current segment],
        App. D.2); masked REM when causal."""
        if kv is not None:  # cross-attention to keys / values projected once (position-free)
            q, (k, v) = self.split_heads(self.q_proj(x)), kv
        elif context is None:  # self-attention: Q, K and V in one matmul, q and k rotated together
            q, k, v = self.self_qkv(x, rope)  # (B, H, T, hd) each
        else:
            q = self.split_heads(self.q_proj(x))  # (B, H, Tq, hd)
            k = self.split_heads(self.k_proj(context))  # (B, H, Tk, hd)
            v = self.split_heads(self.v_proj(context))
            if rope is not None:
                q, k = apply_rotary(q, k, rope)
        out = attend(
            q,
            k,
            v,
            causal=causal,
            key_mask=key_mask,
            bias=bias,
            backend=self.backend,
            dropout_p=self.dropout if self.training else 0.0,
        )  # (B, H, Tq, hd)
        if self.rsa is not None:
            out = self.rsa(out, v, key_mask=key_mask, causal=causal, offset=rem_offset)
        return self.o_proj(self.merge_heads(out))

    def keys_values(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values (B, H, Tk, hd) of a position-free context (B, Tk, d), for ``forward(kv=)``."""
        return self.split_heads(self.k_proj(context)), self.split_heads(self.v_proj(context))

    def self_qkv(self, x: Tensor, rope: RotaryTables | None) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's q, k, v (B, H, T, hd) from x (B, T, d) with one matmul against the stacked
        [W_q; W_k; W_v] (the parameters stay three Linear layers: checkpoints keep their layout), and
        the rotary / xPos of q and k applied to both at once: the same values as three projections and
        ``apply_rotary`` (elementwise, bitwise), in fewer kernel launches forward and backward."""
        B, T, _ = x.shape
        w = self.stacked_qkv  # built once per forward by a recurrent model (``stacked_qkv_weights``)
        if w is None:
            w = torch.cat((self.q_proj.weight, self.k_proj.weight, self.v_proj.weight))  # (3 H hd, d)
        b = None if self.q_proj.bias is None else torch.cat((self.q_proj.bias, self.k_proj.bias, self.v_proj.bias))
        qkv = F.linear(x, w, b).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, H, T, hd)
        if self.training and self.dropout > 0 and x.device.type == "cpu":  # ``_attend_cpu_dropout``'s matmuls
            qkv = qkv.contiguous()  # (B, H, T, hd) operands: one copy here instead of one per operand there
        qk, v = qkv.split((2, 1))  # (2, B, H, T, hd), (1, B, H, T, hd)
        if rope is not None:
            qk = qk * rope.cos.to(qk.dtype) + _rotate_half(qk) * rope.sin.to(qk.dtype)
        q, k = qk.unbind(0)
        if rope is not None and rope.scale is not None:  # xPos: q scaled up, k down
            q, k = q * rope.scale.to(q.dtype), k / rope.scale.to(k.dtype)
        return q, k, v.squeeze(0)

    # ---- streaming: causal self-attention over a KV cache -----------------------------------
    def init_cache(self, batch_size: int, device=None) -> dict:
        """An empty cache: keys k and values v (B, H, 0, hd), and RSA's REM state (or None)."""
        w = self.q_proj.weight
        empty = w.new_zeros(batch_size, self.n_heads, 0, self.head_dim, device=device)
        rem = None if self.rsa is None else self.rsa.rem.init_state(batch_size, self.head_dim, device)
        return {"k": empty, "v": empty.clone(), "filled": [0], "rem": rem}

    def step(
        self,
        x: Tensor,
        cache: dict,
        *,
        rope: RotaryTables | None = None,
        key_scale: Tensor | None = None,
        context: Tensor | None = None,
    ) -> tuple[Tensor, dict]:
        """Causal self-attention of t new positions x (B, t, d) to every cached position and to
        themselves: (output (B, t, d), the cache with them appended). ``rope``: rotary tables of
        the new positions (xPos scale included); ``key_scale``: the xPos scale of all n + t key
        positions at the same center (None for RoPE / no rotary). The queries are the last t of
        n + t positions, so ``attend``'s end-aligned causal mask is the stream's. ``context``
        (B, t, d): the new positions' keys / values come from it instead of x (UT attends to its
        halting mixture at the queries' own positions, as ``forward`` does with ``context``)."""
        kv = x if context is None else context  # (B, t, d)
        q = self.split_heads(self.q_proj(x))  # (B, H, t, hd)
        k = self.split_heads(self.k_proj(kv))
        v = self.split_heads(self.v_proj(kv))
        if rope is not None:
            q, k = rotate(q, rope), rotate(k, rope)
            if rope.scale is not None:
                q = q * rope.scale.to(q.dtype)
        (k, v), filled = append_rows((cache["k"], cache["v"]), (k, v), cache.get("filled"))  # (B, H, n+t, hd) each
        keys = k if key_scale is None else k / key_scale.to(k.dtype)  # k: rotated, unscaled
        out = attend(q, keys, v, causal=True, backend=self.backend)  # (B, H, t, hd)
        rem = cache["rem"]
        if self.rsa is not None:
            out, rem = self.rsa.step(out, v, rem)
        return self.o_proj(self.merge_heads(out)), {"k": k, "v": v, "filled": filled, "rem": rem}
