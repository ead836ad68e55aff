"""Recurrence Encoding Matrices (REMs) [RSA §2-3, App. C-D].

A REM ``P`` is a Toeplitz matrix whose entry depends only on the lag ``l = i - j`` between
query i and key j. With the power ``p`` of an entry (``p = l`` or, for a head dilated by d,
``p = l / d`` when ``l mod d == 0``, else the entry is 0):

    regular        f(p) = lambda^p                  lambda = tanh(eta)        [RSA eq. 3, §3]
    cyclical cos   f(p) = gamma^p cos(p theta)       gamma = sigmoid(nu)
    cyclical sin   f(p) = gamma^p sin(p theta)

    masked   (causal)        P[i, j] = f(i - j) for i > j, else 0           [RSA eq. 3]
    unmasked (bidirectional) P = P_mask + P_mask^T, i.e. f(|i - j|), 0 on the diagonal
    powers above the cap K (paper: 200) are set to 0                         [RSA App. D.1]
    non-square (memory + new tokens): lag = i - j + offset                   [RSA App. D.2]

Why ``P V`` is cheap: P is a (truncated) Toeplitz matrix, so ``P V`` is a 1-D convolution of
the values with the kernel ``f(1..K)`` along time; a regular REM is exactly the linear
recurrence ``h_t = lambda (h_{t-1} + v_{t-1})`` with its kernel cut at K [RSA Prop. 1-2].
The default path computes that convolution with an FFT, O(T log T) time and O(T hd) memory
per head; a dilated head is the same convolution on the d interleaved sub-sequences
(t = q d + r, lag multiple of d  <=>  same residue r, power = q_i - q_j) [RSA Prop. 4].
``dense`` builds the T x T matrices (the paper's App. D.1 construction) and is the reference
the tests compare against.

Streaming (``init_state`` / ``step``), O(1) per head and token for every kind [RSA Prop. 1-2]:
with z = lambda (regular) or z = gamma e^{i theta} (cyclical; cos = Re, sin = Im), the term of
query position a is Re|Im h_a, h_a = sum_{p=1..K} z^p v_{a - p d}, and

    h_a = z (h_{a-d} + v_{a-d}) - z^{K+1} v_{a-(K+1)d}                 (v_{<0} = 0)

the last term removing the value that leaves the lag cap (read from the caller's V cache). The
state keeps the last D = max dilation h's per head (complex), so a dilated head reads h_{a-d}.

Choice: the cap K applies to the *power* (App. D.1: "mask the entries that have power larger
than K"; with dilation "substitute L with L_d, the remaining operations are unchanged"), so a
head dilated by d reaches lags up to K d.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

REM_PATHS = ("fft", "dense")


def _fast_len(n: int) -> int:
    """Smallest 2^a, 3 * 2^a or 9 * 2^a >= n: the FFT sizes pocketfft handles fastest. Sizes with
    factors 5 or 3^3 are smaller but slower on the CPU, so the search skips them."""
    best = 1 << max(0, (n - 1).bit_length())
    for odd in (3, 9):
        m = odd
        while m < n:
            m *= 2
        best = min(best, m)
    return best


def _spread(n: int, lo: float, hi: float) -> Tensor:
    return torch.linspace(lo, hi, n) if n > 1 else torch.full((n,), (lo + hi) / 2)


def _spread_eta(n: int) -> Tensor:
    """eta spread over [-2,-1] U [1,2] across heads [RSA §3 Initialization]: evenly along the
    union, so both decaying (lambda > 0) and alternating (lambda < 0) patterns are present."""
    if n == 1:
        return torch.ones(1)
    s = torch.linspace(0.0, 2.0, n)
    return torch.where(s <= 1.0, s - 2.0, s)


def _init_values(value, n: int, name: str, what: str) -> Tensor:
    """One float for every head, or a list of one float per head."""
    values = [float(v) for v in value] if isinstance(value, (list, tuple)) else [float(value)] * n
    if len(values) != n:
        raise ValueError(f"rsa {name} lists {len(values)} values but the layer has {n} {what} heads; give one value or {n}")
    return torch.tensor(values)


def _time_last_padded(x: Tensor, n: int) -> Tensor:
    """(B, G, N, hd) -> (B, G, hd, n) contiguous, zero past N: the layout the FFT runs fastest on,
    made in one copy (zeroing only the tail, not the whole buffer as F.pad would)."""
    B, G, N, hd = x.shape
    out = x.new_empty(B, G, hd, n)
    out[..., :N].copy_(x.transpose(2, 3))
    out[..., N:].zero_()
    return out


class _FFTConv(torch.autograd.Function):
    """y[t] = sum_m k[m] v[(t - m) mod n], v zero-padded from N to n, first N outputs kept.

    v (B, G, N, hd), k (G, n) -> (B, G, N, hd). A hand-written backward because autograd's
    rfft backward goes through a full complex FFT and dominated the step time (~6x the forward):
    the adjoint of a circular convolution is the circular correlation, so both gradients are
    one more rfft / irfft pair. Measured choices (CPU, B=8, T=512): the kernel gradient sums
    over batch, then head_dim (3x faster than one two-axis sum); the value gradient reuses the
    spectrum buffer of dy in place.
    """

    @staticmethod
    def forward(ctx, v: Tensor, k: Tensor) -> Tensor:
        N, n = v.shape[2], k.shape[1]
        kf = torch.fft.rfft(k)[:, None, :]  # (G, 1, n//2+1)
        vf = torch.fft.rfft(_time_last_padded(v, n))  # (B, G, hd, n//2+1)
        ctx.save_for_backward(vf, kf)
        ctx.N, ctx.n = N, n
        return torch.fft.irfft(vf * kf, n=n)[..., :N].transpose(2, 3)

    @staticmethod
    def backward(ctx, gy: Tensor):
        vf, kf = ctx.saved_tensors
        gyf = torch.fft.rfft(_time_last_padded(gy, ctx.n))  # (B, G, hd, n//2+1)
        gv = gk = None
        if ctx.needs_input_grad[1]:  # sum_b,c gy (*) v  <=>  conj(vf) gyf, summed before the irfft
            cross = (vf.conj() * gyf).sum(0).sum(1)  # (G, n//2+1)
            gk = torch.fft.irfft(cross, n=ctx.n)  # (G, n)
        if ctx.needs_input_grad[0]:
            gv = torch.fft.irfft(gyf.mul_(kf.conj().resolve_conj()), n=ctx.n)[..., : ctx.N].transpose(2, 3)
        return gv, gk


class REM(nn.Module):
    """The REMs of one attention layer: one per head, heads assigned kinds in order.

    ``kinds``: counts (k1..k6) of regular, cos, sin, dilated regular, dilated cos, dilated sin
    heads. ``dilations``: one factor per dilated head (k4 + k5 + k6 of them, in head order), or
    one int for all. ``forward(v, n_queries, offset, causal)`` returns ``P V``.
    """

    def __init__(self, n_heads: int, kinds, dilations=None, lag_cap: int = 200, path: str = "fft", eta_init=None, theta_init=None):
        super().__init__()
        kinds = [int(k) for k in kinds]
        if len(kinds) != 6 or min(kinds) < 0:
            raise ValueError(f"rsa kinds must be 6 non-negative counts (k1..k6), got {kinds}")
        if sum(kinds) != n_heads:
            raise ValueError(f"rsa kinds {kinds} sum to {sum(kinds)} but the layer has n_heads={n_heads}")
        if path not in REM_PATHS:
            raise ValueError(f"unknown REM path {path!r}; choose one of {', '.join(REM_PATHS)}")
        if lag_cap < 1:
            raise ValueError(f"lag_cap must be >= 1, got {lag_cap}")
        n_dil = sum(kinds[3:])
        if dilations is None:
            dilations = []
        if isinstance(dilations, int):
            dilations = [dilations] * n_dil
        dilations = [int(d) for d in dilations]
        if len(dilations) != n_dil or any(d < 1 for d in dilations):
            raise ValueError(f"rsa dilations must list {n_dil} factors >= 1 (one per dilated head, k4+k5+k6), got {dilations}")
        # Per-head kind (0 regular, 1 cos, 2 sin) and dilation factor (1 for undilated kinds).
        kind_of = []
        for kind, count in enumerate(kinds):
            kind_of += [kind % 3] * count
        dil_of = [1] * sum(kinds[:3]) + dilations
        self.n_heads, self.kinds, self.lag_cap, self.path = n_heads, kinds, int(lag_cap), path
        self.register_buffer("kind_of", torch.tensor(kind_of, dtype=torch.long), persistent=False)
        self.dil_of = dil_of
        self.reg_heads = [h for h, k in enumerate(kind_of) if k == 0]
        self.cyc_heads = [h for h, k in enumerate(kind_of) if k != 0]
        # Parameters are stored [regular heads; cyclical heads]; `order` puts them in head order.
        order = torch.argsort(torch.tensor(self.reg_heads + self.cyc_heads))
        self.register_buffer("order", order, persistent=False)
        self.in_head_order = bool((order == torch.arange(n_heads)).all())  # skip the gather (and its backward)
        self.register_buffer("is_cos", torch.tensor([kind_of[h] == 1 for h in self.cyc_heads], dtype=torch.bool), persistent=False)
        self.register_buffer("dilation", torch.tensor(dil_of, dtype=torch.long), persistent=False)
        # Heads grouped by dilation factor; the head indices are buffers, so they live on the device.
        self.group_dilations = sorted(set(dil_of))
        for i, d in enumerate(self.group_dilations):
            self.register_buffer(f"group_heads_{i}", torch.tensor([h for h in range(n_heads) if dil_of[h] == d]), persistent=False)
        # Paper init [RSA §3]: eta over [-2,-1] U [1,2], nu over [1,2], theta = pi/4. ``eta_init`` /
        # ``theta_init`` (one value, or one per regular / cyclical head) replace it, for ablations.
        self.eta = nn.Parameter(
            _init_values(eta_init, len(self.reg_heads), "eta_init", "regular") if eta_init is not None else _spread_eta(len(self.reg_heads))
        )
        nu = torch.empty(len(self.cyc_heads))
        for kind in (1, 2):  # spread within each cyclical kind, so cos and sin heads both cover [1,2]
            idx = [i for i, h in enumerate(self.cyc_heads) if kind_of[h] == kind]
            nu[idx] = _spread(len(idx), 1.0, 2.0)
        self.nu = nn.Parameter(nu)
        self.theta = nn.Parameter(
            _init_values(math.pi / 4 if theta_init is None else theta_init, len(self.cyc_heads), "theta_init", "cyclical")
        )
        self._power_cache: dict = {}

    # ---- kernel values ------------------------------------------------------------------
    def head_params(self) -> tuple[Tensor, Tensor, Tensor]:
        """Per-head (decay, theta, kind): decay = lambda for regular heads, gamma for cyclical."""
        decay = torch.cat((torch.tanh(self.eta), torch.sigmoid(self.nu)))[self.order]
        theta = torch.cat((self.theta.new_zeros(len(self.reg_heads)), self.theta))[self.order]
        return decay, theta, self.kind_of

    def kernel(self, n_powers: int, scale: Tensor | None = None) -> Tensor:
        """(H, n_powers + 1): scale * f_h(p) for p = 0..n_powers, with f(0) = 0 (the diagonal,
        eq. 3) and f(p) = 0 for p > K (App. D.1). A handful of batched ops: this runs every step.
        ``scale`` (a scalar tensor, e.g. RSA's gate sigmoid(mu)) folds into the kernel here,
        which costs H x K flops instead of a pass over the (B, H, T, hd) output."""
        p, keep = self._powers(n_powers, self.eta.device, self.eta.dtype)
        parts = []
        if self.reg_heads:
            parts.append(torch.tanh(self.eta)[:, None] ** p)  # lambda^p; pow is exact for lambda < 0
        if self.cyc_heads:
            angle = p * self.theta[:, None]
            trig = torch.where(self.is_cos[:, None], torch.cos(angle), torch.sin(angle))
            parts.append(torch.sigmoid(self.nu)[:, None] ** p * trig)  # gamma^p cos|sin(p theta)
        f = torch.cat(parts) if len(parts) > 1 else parts[0]
        if not self.in_head_order:
            f = f[self.order]
        f = f * (keep if scale is None else keep * scale)  # (H, n_powers)
        return torch.nn.functional.pad(f, (1, 0))

    def _powers(self, n_powers: int, device, dtype) -> tuple[Tensor, Tensor]:
        """Powers 1..n_powers with those above the cap K set to 0 (keeps huge powers out of
        pow), and the 0/1 mask of the kept ones; cached, since a run uses few lengths."""
        key = (n_powers, device, dtype)
        if key not in self._power_cache:
            p = torch.arange(1, n_powers + 1, device=device, dtype=dtype)
            keep = (p <= self.lag_cap).to(dtype)
            self._power_cache[key] = (p * keep, keep)
        return self._power_cache[key]

    # ---- P V ----------------------------------------------------------------------------
    def forward(self, v: Tensor, n_queries: int | None = None, offset: int = 0, causal: bool = True, scale: Tensor | None = None) -> Tensor:
        """v: (B, H, Tk, hd) -> (B, H, Tq, hd), out[i] = scale * sum_j P[i, j] v[j], lag i - j + offset."""
        Tq = v.shape[2] if n_queries is None else n_queries
        if self.path == "dense":
            P = self.matrix(Tq, v.shape[2], offset, causal)
            return (P if scale is None else P * scale).to(v.dtype) @ v
        # Put queries and keys on one timeline (key j at j, query i at i + offset), padding the
        # values with zeros where the timeline extends past the keys (App. D.2 shapes).
        left, right = max(0, -offset), max(0, Tq + offset - v.shape[2])
        vt = torch.nn.functional.pad(v, (0, 0, left, right)) if left or right else v  # (B, H, N, hd)
        N = vt.shape[2]
        kern = self.kernel(min(self.lag_cap, N - 1), scale)  # (H, K'+1), shared by every dilation group
        if len(self.group_dilations) == 1:  # every head has the same dilation: no gather / scatter
            out = self._conv_dilated(vt, kern, self.group_dilations[0], causal)
        else:
            out = torch.empty_like(vt)
            for i, d in enumerate(self.group_dilations):
                idx = getattr(self, f"group_heads_{i}")  # (heads with dilation d,)
                out = out.index_copy(1, idx, self._conv_dilated(vt.index_select(1, idx), kern[idx], d, causal))
        start = offset + left
        return out[:, :, start : start + Tq]

    def _conv_dilated(self, v: Tensor, kern: Tensor, d: int, causal: bool) -> Tensor:
        """Dilation d = the undilated convolution on the d interleaved sub-sequences [Prop. 4]."""
        if d == 1:
            return self._conv(v, kern, causal)
        B, H, N, hd = v.shape
        M = -(-N // d)
        vp = torch.nn.functional.pad(v, (0, 0, 0, M * d - N))  # (B, H, M d, hd)
        sub = vp.view(B, H, M, d, hd).transpose(2, 3)  # (B, H, d, M, hd): sub[.., r, q] = v[q d + r]
        y = self._conv(sub.reshape(B, H * d, M, hd), kern.repeat_interleave(d, dim=0), causal)
        return y.view(B, H, d, M, hd).transpose(2, 3).reshape(B, H, M * d, hd)[:, :, :N]

    def _conv(self, v: Tensor, kern: Tensor, causal: bool) -> Tensor:
        """Toeplitz convolution along time, v (B, G, N, hd) by kern (G, >=1) lags 0.., via FFT."""
        B, G, N, hd = v.shape
        K = min(kern.shape[1] - 1, N - 1)
        if K < 1:
            return torch.zeros_like(v)
        n = _fast_len(N + K)  # no wrap-around: outputs 0..N-1 only read v[-K .. N-1+K]
        dtype = torch.float64 if v.dtype == torch.float64 else torch.float32  # FFT in full precision
        k = kern[:, : K + 1].to(dtype)
        if not causal:  # P + P^T: lag -l sits at index n - l
            k = torch.cat((k, k.new_zeros(G, n - 2 * K - 1), k[:, 1:].flip(-1)), dim=1)
        else:
            k = torch.nn.functional.pad(k, (0, n - K - 1))
        return _FFTConv.apply(v.to(dtype), k).to(v.dtype)  # (B, G, N, hd)

    # ---- streaming (causal): the recurrence of the docstring ----------------------------
    def init_state(self, batch_size: int, head_dim: int, device=None) -> Tensor:
        """h of the last D = max dilation positions, all zero before the stream: (B, H, D, hd) complex."""
        dtype = torch.complex128 if self.eta.dtype == torch.float64 else torch.complex64
        return torch.zeros(
            batch_size, self.n_heads, max(self.dil_of), head_dim, dtype=dtype, device=self.eta.device if device is None else device
        )

    def step(self, v: Tensor, hist: Tensor, n_new: int) -> tuple[Tensor, Tensor]:
        """v (B, H, n + t, hd): the values of every position so far, the last t = ``n_new`` new;
        hist: ``init_state`` or the last step's. Returns (P V of the t new queries (B, H, t, hd),
        unscaled, and the new state), one recurrence step per new position."""
        B, H, N, hd = v.shape
        D, K = hist.shape[2], self.lag_cap
        decay, theta, kind = self.head_params()  # (H,) each; theta = 0 for regular heads
        z = torch.complex(decay * torch.cos(theta), decay * torch.sin(theta)).to(hist.dtype)  # (H,)
        zK = decay ** (K + 1)
        z_out = torch.complex(zK * torch.cos((K + 1) * theta), zK * torch.sin((K + 1) * theta)).to(hist.dtype)
        z, z_out = z.view(1, H, 1), z_out.view(1, H, 1)
        dil = self.dilation  # (H,)
        heads = torch.arange(H, device=v.device)
        prev_slot = (D - dil).view(1, H, 1, 1).expand(B, H, 1, hd)  # where h_{a-d} sits in hist
        vc = v.to(hist.dtype)

        def value_at(idx: Tensor) -> Tensor:  # (H,) positions -> v (B, H, hd), zero before the stream
            return vc[:, heads, idx.clamp_min(0)] * (idx >= 0).view(1, H, 1)

        outs = []
        for a in range(N - n_new, N):
            h_prev = hist.gather(2, prev_slot).squeeze(2)  # (B, H, hd)
            h = z * (h_prev + value_at(a - dil)) - z_out * value_at(a - (K + 1) * dil)
            hist = torch.cat((hist[:, :, 1:], h.unsqueeze(2)), dim=2)
            outs.append(h)
        h = torch.stack(outs, dim=2)  # (B, H, t, hd)
        out = torch.where((kind == 2).view(1, H, 1, 1), h.imag, h.real)  # sin heads: Im; regular, cos: Re
        return out.to(v.dtype), hist

    def matrix(self, Tq: int, Tk: int, offset: int = 0, causal: bool = True) -> Tensor:
        """Dense reference REMs (H, Tq, Tk), built entry by entry as in App. D.1-D.2."""
        dev = self.eta.device  # built where it is used: an H x T x T index pass on the CPU costs seconds
        i = torch.arange(Tq, device=dev).unsqueeze(1)
        j = torch.arange(Tk, device=dev).unsqueeze(0)
        lag = i - j + offset  # (Tq, Tk)
        if not causal:
            lag = lag.abs()  # P_mask + P_mask^T
        lag = lag.clamp_min(0)  # masked: lags <= 0 map to power 0, which is 0
        dil = self.dilation.view(-1, 1, 1)  # (H, 1, 1)
        power = torch.where(lag % dil == 0, lag // dil, torch.zeros_like(lag))  # (H, Tq, Tk), L_d of App. D.1
        # the largest lag bounds the largest power, from the shapes alone (no host sync)
        max_lag = max(Tq - 1 + offset, 0 if causal else Tk - 1 - offset)
        f = self.kernel(max(1, max_lag))  # (H, max_lag + 1), zero at power 0 and above K
        return torch.gather(f, 1, power.flatten(1)).view(power.shape)

    def extra_repr(self) -> str:
        return f"kinds={self.kinds}, dilations={self.dil_of}, lag_cap={self.lag_cap}, path={self.path}"
