"""RWKV-7 (bench/models/rwkv7.py) against a step-by-step loop written from its eq. (1)-(10) in the
paper's orientation (the state S (N_v, N_k) times the transition: S_t = S_{t-1} (diag(w_t) -
kappa^_t^T (a_t * kappa^_t)) + v_t^T k~_t, read S_t r_t), independent of the chunked mechanism; the
value residual's first-layer values; the decay's range and the authors' initial values; bad settings.
(Streaming = forward and state bytes: test_streaming.py, test_linear_families.py; the mechanism:
test_dplr_recurrence.py.)"""

import math

import pytest
import torch
import torch.nn.functional as F

import bench
from bench.models.rwkv7 import TimeMix

pytestmark = pytest.mark.usefixtures("one_thread")


def time_mix(layer=1, d=16, H=2):
    torch.manual_seed(layer)
    mix = TimeMix(d, H, layer, n_layers=3, lora_rank=4, chunk_size=8).double()
    with torch.no_grad():  # the zero-initialised parts made non-zero, so every term is exercised
        for p in (mix.output.weight, mix.w1, mix.a1, mix.g1, *((mix.v1,) if layer else ())):
            p.normal_(0, 0.5)
    return mix


def loop(mix: TimeMix, x: torch.Tensor, v_first: torch.Tensor | None) -> torch.Tensor:
    """Eq. (1)-(10), one position at a time, one head at a time, in the paper's orientation."""
    B, T, d = x.shape
    H = mix.n_heads
    N = d // H
    S = torch.zeros(B, H, N, N, dtype=x.dtype)  # (value, key)
    prev = torch.zeros(B, d, dtype=x.dtype)
    outs = []
    for t in range(T):
        xt = x[:, t]
        xr, xw, xk, xv, xa, xg = (xt + (prev - xt) * mu for mu in mix.mu)
        prev = xt
        r, k, v = mix.receptance(xr), mix.key(xk), mix.value(xv)
        w = torch.exp(-math.exp(-0.5) * torch.sigmoid(mix.w0 + torch.tanh(xw @ mix.w1) @ mix.w2))
        if v_first is not None:
            v = v + (v_first[:, t] - v) * torch.sigmoid(mix.v0 + xv @ mix.v1 @ mix.v2)
        a = torch.sigmoid(mix.a0 + xa @ mix.a1 @ mix.a2)
        g = torch.sigmoid(xg @ mix.g1) @ mix.g2
        kk = k * mix.xi
        k_t = k * (1 + (a - 1) * mix.alpha)
        p = []
        for h in range(H):
            sl = slice(h * N, (h + 1) * N)
            kap = kk[:, sl] / kk[:, sl].norm(dim=-1, keepdim=True)  # (B, N)
            transition = torch.diag_embed(w[:, sl]) - kap[:, :, None] * (a[:, sl] * kap)[:, None, :]  # kappa^T (a kappa)
            S[:, h] = S[:, h] @ transition + v[:, sl, None] * k_t[:, None, sl]  # + v^T k~
            read = (S[:, h] @ r[:, sl, None])[..., 0]  # (B, N)
            normed = F.group_norm(read, 1, mix.ln_x.weight[sl], mix.ln_x.bias[sl], eps=mix.ln_x.eps)
            bonus = (r[:, sl] * mix.rho[h] * k_t[:, sl]).sum(-1, keepdim=True) * v[:, sl]
            p.append(normed + bonus)
        outs.append(mix.output(g * torch.cat(p, dim=-1)))
    return torch.stack(outs, dim=1)


@pytest.mark.parametrize("layer", [0, 1])
def test_time_mix_equals_its_equations_step_by_step(layer):
    mix = time_mix(layer)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 19, 16, generator=g, dtype=torch.float64)
    v_first = None if layer == 0 else torch.randn(2, 19, 16, generator=g, dtype=torch.float64)
    with torch.no_grad():
        got, v_out, _ = mix(x, v_first)
        expect = loop(mix, x, v_first)
    torch.testing.assert_close(got, expect, atol=1e-10, rtol=0)
    if layer == 0:  # layer 1 hands its own values on (eq. 4's v_1)
        xv = x + (F.pad(x, (0, 0, 1, 0))[:, :-1] - x) * mix.mu[3]
        torch.testing.assert_close(v_out, mix.value(xv))
    else:
        assert v_out is v_first


def test_the_decay_stays_in_its_range_and_starts_as_the_authors():
    """w = exp(-e^{-1/2} sigmoid(.)) in (exp(-e^{-1/2}), 1) = (0.545, 1); mu_r = 1 - (i/d)^(0.2 (1 - l/L))."""
    mix = TimeMix(16, 2, layer=1, n_layers=4)
    x = 100 * torch.randn(3, 11, 16)
    log_w = -math.exp(-0.5) * torch.sigmoid(mix.w0 + torch.tanh(x @ mix.w1) @ mix.w2)
    assert (log_w < 0).all() and (log_w > -math.exp(-0.5)).all()
    i = torch.arange(16.0)
    torch.testing.assert_close(mix.mu[0].detach(), 1 - (i / 16) ** (0.2 * (1 - 1 / 4)))
    assert (mix.output.weight == 0).all() and (mix.w1 == 0).all()
    torch.testing.assert_close(mix.alpha.detach(), torch.full((16,), 1.02))


@pytest.mark.parametrize("bad,says", [({"d_model": 15}, "divisible by n_heads"), ({"d_ff": 0}, "d_ff=0: must be >= 1")])
def test_bad_settings_say_what_would_be_right(bad, says):
    params = {"d_model": 16, "n_heads": 2, "n_layers": 2, "d_ff": 32, **bad}
    with pytest.raises(Exception, match=says):
        bench.build_model("rwkv7", vocab_size=11, causal=True, **params)
