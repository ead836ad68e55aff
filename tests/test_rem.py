"""REMs [RSA §2-3, App. C-D]: the FFT path against the dense reference, the dense reference
against the paper's formulas entry by entry, and REMs against the recurrences they encode."""

from __future__ import annotations

import math

import pytest
import torch

from bench.models.layers.rem import REM

torch.set_num_threads(1)

ALL_KINDS = [1, 1, 1, 1, 1, 1]
ALL_DILATIONS = [2, 3, 5]


def random_rem(kinds=ALL_KINDS, dilations=ALL_DILATIONS, lag_cap=7, seed=0) -> REM:
    torch.manual_seed(seed)
    rem = REM(sum(kinds), kinds, dilations, lag_cap=lag_cap).double()
    with torch.no_grad():  # away from the init, negative lambdas included
        rem.eta.uniform_(-2, 2)
        rem.nu.uniform_(-1, 2)
        rem.theta.uniform_(0.1, 3.0)
    return rem


def run(rem: REM, path: str, v, Tq, offset, causal):
    rem.path = path
    out = rem(v, n_queries=Tq, offset=offset, causal=causal)
    if not out.requires_grad:  # T = 1: no lag >= 1 exists, P = 0 and nothing to differentiate
        return out, [torch.zeros_like(p) for p in (v, *rem.parameters())]
    w = torch.randn_like(out, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad((out * w).sum(), [v, *rem.parameters()], allow_unused=True, materialize_grads=True)
    return out, grads


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T", [1, 2, 7, 13, 41])  # 7, 13, 41: not multiples of the dilations 2, 3, 5
def test_fft_matches_dense_all_kinds(T, causal):
    rem = random_rem()
    for Tq, offset in [(T, 0), (max(1, T - 3), 3), (T + 2, -1), (3, T)]:  # square, memory + new, and wider
        v = torch.randn(2, 6, T, 4, dtype=torch.float64, requires_grad=True)
        fast, g_fast = run(rem, "fft", v, Tq, offset, causal)
        ref, g_ref = run(rem, "dense", v, Tq, offset, causal)
        torch.testing.assert_close(fast, ref, rtol=1e-9, atol=1e-10)
        for a, b in zip(g_fast, g_ref):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_fft_matches_dense_with_cap_shorter_than_sequence_float32():
    rem = REM(4, [1, 1, 1, 0, 0, 1], [4], lag_cap=5)
    v = torch.randn(3, 4, 50, 8)
    for causal in (True, False):
        rem.path = "fft"
        fast = rem(v, causal=causal)
        rem.path = "dense"
        torch.testing.assert_close(fast, rem(v, causal=causal), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
def test_scale_folded_into_the_kernel_is_a_scaled_rem(causal):
    """RSA passes its gate sigmoid(mu) as ``scale``: values and the scale's gradient must equal
    those of scale * (P V), on both paths."""
    rem = random_rem()
    v = torch.randn(2, 6, 23, 4, dtype=torch.float64)
    w = torch.randn(2, 6, 23, 4, dtype=torch.float64)
    grads = {}
    for path in ("fft", "dense"):
        rem.path = path
        s = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
        out = rem(v, causal=causal, scale=s)
        torch.testing.assert_close(out, s.detach() * rem(v, causal=causal).detach(), rtol=1e-10, atol=1e-12)
        (grads[path],) = torch.autograd.grad((out * w).sum(), [s])
        torch.testing.assert_close(grads[path], (rem(v, causal=causal) * w).sum().detach(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grads["fft"], grads["dense"], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 5, 50, 712, 1000, 2248, 8392])
def test_fft_length_is_a_fast_size_at_least_n(n):
    from bench.models.layers.rem import _fast_len

    m = _fast_len(n)
    assert m >= n
    odd = m
    while odd % 2 == 0:
        odd //= 2
    assert odd in (1, 3, 9)
    assert m < 2 * n or n <= 2  # never more than one doubling past n


def paper_entry(kind: int, decay: float, theta: float, lag: int, d: int, K: int, causal: bool) -> float:
    """One REM entry written straight from [RSA eq. 3, §3 and App. D.1]."""
    if not causal:
        lag = abs(lag)
    if lag <= 0 or lag % d:
        return 0.0
    p = lag // d
    if p > K:  # capped powers are 0, not lambda^0
        return 0.0
    if kind == 0:
        return decay**p
    return decay**p * (math.cos(p * theta) if kind == 1 else math.sin(p * theta))


@pytest.mark.parametrize("causal", [True, False])
def test_dense_matrix_is_the_papers_rem(causal):
    rem = random_rem(lag_cap=4)
    T, offset = 12, 2
    P = rem.matrix(T - offset, T, offset=offset, causal=causal).detach()  # (H, Tq, Tk)
    with torch.no_grad():
        decay, theta, kind = rem.head_params()
    for h in range(6):
        for i in range(T - offset):
            for j in range(T):
                want = paper_entry(int(kind[h]), float(decay[h]), float(theta[h]), i - j + offset, rem.dil_of[h], 4, causal)
                assert abs(float(P[h, i, j]) - want) < 1e-12, (h, i, j)


def test_unmasked_is_mask_plus_transpose_with_zero_diagonal():
    rem = random_rem()
    Pm = rem.matrix(9, 9, causal=True)
    Pu = rem.matrix(9, 9, causal=False)
    torch.testing.assert_close(Pu, Pm + Pm.transpose(1, 2))
    assert torch.all(torch.diagonal(Pu, dim1=1, dim2=2) == 0)


def test_regular_rem_is_the_truncated_linear_recurrence():
    """P_mask(lambda) V = h with h_t = lambda (h_{t-1} + v_{t-1}) [Prop. 1-2]; the cap K removes
    the input of K+1 steps ago: h_t = lambda h_{t-1} + lambda v_{t-1} - lambda^(K+1) v_{t-K-1}."""
    rem = REM(2, [2, 0, 0, 0, 0, 0], lag_cap=6).double()
    lam = torch.tanh(rem.eta.detach())
    v = torch.randn(1, 2, 30, 3, dtype=torch.float64)
    out = rem(v, causal=True)
    for h in range(2):
        state = torch.zeros(3, dtype=torch.float64)
        for t in range(30):
            if t >= 1:
                state = lam[h] * (state + v[0, h, t - 1])
            if t >= 7:
                state = state - lam[h] ** 7 * v[0, h, t - 7]
            torch.testing.assert_close(out[0, h, t], state)


@pytest.mark.parametrize("d", [1, 3])
def test_cyclical_rems_are_a_complex_recurrence(d):
    """cos / sin REMs = real / imaginary part of z_t = gamma e^{i theta} (z_{t-d} + v_{t-d}); d > 1 is the
    dilated RNN h_t = W h_{t-d} + ... [Prop. 4]. Cap above the length, so nothing is truncated."""
    kinds = [0, 1, 1, 0, 0, 0] if d == 1 else [0, 0, 0, 0, 1, 1]
    rem = REM(2, kinds, [d, d] if d > 1 else None, lag_cap=1000).double()
    with torch.no_grad():
        rem.theta.copy_(torch.tensor([0.7, 0.7]))
        rem.nu.copy_(torch.tensor([0.5, 0.5]))
    gamma = torch.sigmoid(torch.tensor(0.5, dtype=torch.float64))
    z_step = gamma * torch.exp(1j * torch.tensor(0.7, dtype=torch.float64))
    T = 25
    v = torch.randn(1, 2, T, 3, dtype=torch.float64)
    out = rem(v, causal=True)
    for h, part in ((0, torch.real), (1, torch.imag)):
        z = [torch.zeros(3, dtype=torch.complex128)] * T
        for t in range(d, T):
            z[t] = z_step * (z[t - d] + v[0, h, t - d])
        torch.testing.assert_close(out[0, h], torch.stack([part(zt) for zt in z]))


def test_non_square_rem_is_the_bottom_rows_of_the_full_rem():
    """App. D.2: queries = the last Tq of [memory; segment], lag i - j + offset."""
    rem = random_rem()
    v = torch.randn(2, 6, 17, 4, dtype=torch.float64)
    for causal in (True, False):
        full = rem(v, causal=causal)
        torch.testing.assert_close(rem(v, n_queries=5, offset=12, causal=causal), full[:, :, 12:])


def test_fft_path_memory_is_linear_in_T():
    """No T x T tensor is kept for backward on the default path (the dense one keeps H x T x T)."""

    def saved_numel(path: str, T: int) -> int:
        rem = REM(4, [1, 1, 1, 1, 0, 0], [3], path=path)
        sizes = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel()) or t, lambda t: t):
            rem(torch.randn(1, 4, T, 8, requires_grad=True)).sum()
        return max(sizes)

    assert saved_numel("fft", 1024) < 1024 * 1024 // 8
    assert saved_numel("fft", 2048) <= 2.5 * saved_numel("fft", 1024)
    assert saved_numel("dense", 1024) >= 4 * 1024 * 1024


def test_init_follows_the_paper():
    rem = REM(8, [2, 1, 1, 2, 1, 1], [2, 2, 3, 3])
    assert torch.all((rem.eta.abs() >= 1) & (rem.eta.abs() <= 2))
    assert (rem.eta < 0).any() and (rem.eta > 0).any()
    assert torch.all((rem.nu >= 1) & (rem.nu <= 2))
    torch.testing.assert_close(rem.theta.detach(), torch.full((4,), math.pi / 4))


@pytest.mark.parametrize(
    "kinds,dilations,match",
    [([2, 1, 1, 0, 0, 0], None, "sum to 4"), ([3, 0, 0, 2, 0, 0], [2], "2 factors"), ([1, 1, 1], None, "6 non-negative")],
)
def test_bad_configs_raise(kinds, dilations, match):
    with pytest.raises(ValueError, match=match):
        REM(5, kinds, dilations)


def test_init_overrides_set_lambda_and_theta():
    """eta_init / theta_init (ablations): one value for every head or one per head, in head
    order within each kind; the kernel then starts at tanh(eta)^p and gamma^p cos(p theta)."""
    rem = REM(5, [3, 1, 1, 0, 0, 0], eta_init=[-2.0, -1.0, 0.5], theta_init=math.pi)
    torch.testing.assert_close(rem.eta.detach(), torch.tensor([-2.0, -1.0, 0.5]))
    torch.testing.assert_close(rem.theta.detach(), torch.full((2,), math.pi))
    k = rem.kernel(4).detach()  # (H, 5): p = 0..4
    torch.testing.assert_close(k[1, 1:], torch.tanh(torch.tensor(-1.0)) ** torch.arange(1.0, 5.0))
    gamma = torch.sigmoid(rem.nu.detach()[0])
    torch.testing.assert_close(k[3, 1:], gamma ** torch.arange(1.0, 5.0) * torch.tensor([-1.0, 1.0, -1.0, 1.0]), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="3 regular heads"):
        REM(5, [3, 1, 1, 0, 0, 0], eta_init=[1.0, 2.0])
