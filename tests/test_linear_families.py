"""The matrix-state families (every registry entry whose class declares ``recurrence = "linear"``: their
state bytes flat in the context where they declare ``bounded_state``, growing where a layer attends) and
some of them against forms written independently of the shared mechanism: the linear Transformer as normalised kernel attention [Katharopoulos eq. 4-6], RetNet's parallel form
[Sun eq. 5], Mamba-2's scan of eq. (5) step by step, with and without negative transitions; the
state bytes flat in the context; the beta range; bad settings. (Streaming = forward: test_streaming.py;
forward / backward on every task and causality: test_models.py; the mLSTM against the xLSTM paper's
loops: test_mlstm.py; RWKV-7 against its equations: test_rwkv7.py.)"""

import math

import pytest
import torch
import torch.nn.functional as F
from conformance import model_class, models

import bench
from bench.models.layers.short_conv import ShortConv
from bench.models.linear_recurrent import head_norm, heads, merge
from bench.registry import constructor_params
from bench.runner.stream_state import stream_state_bytes

pytestmark = pytest.mark.usefixtures("one_thread")

LINEAR = models(recurrence="linear")


def build(name, **kw):
    """Tiny sizes, and chunks of 8 where the family takes a chunk size (a hybrid's mixers keep their own)."""
    torch.manual_seed(0)
    params = {"d_model": 16, "n_heads": 2, "n_layers": 2, "d_ff": 32, "dropout": 0.0, "chunk_size": 8, **kw}
    accepted = constructor_params(model_class(name))
    return bench.build_model(name, vocab_size=11, causal=True, **{k: v for k, v in params.items() if k in accepted or k in kw}).eval()


def mixer_input(T=21, d=16, seed=0):
    return torch.randn(2, T, d, generator=torch.Generator().manual_seed(seed))


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", LINEAR)
def test_state_bytes_do_not_grow_with_the_context(name):
    """The bytes `bench cost` reports for a stream's state, after 50 and after 700 tokens: equal where the
    family declares a bounded state (every layer a matrix state), more where a layer attends (a hybrid)."""
    model = build(name)
    short, long = stream_state_bytes(model, 50), stream_state_bytes(model, 700)
    assert short > 0
    assert (long == short) if model.bounded_state else (long > short)


def test_linear_transformer_is_normalised_kernel_attention():
    """y_t = sum_{s<=t} phi(q_t).phi(k_s) v_s / sum_{s<=t} phi(q_t).phi(k_s), phi = elu + 1 [Katharopoulos eq. 6]."""
    mixer = build("linear-transformer").blocks[0].mixer
    x = mixer_input()
    q, k, v = (heads(t, 2) for t in mixer.qkv(x).chunk(3, dim=-1))
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    sim = (phi_q @ phi_k.mT).tril()  # (B, H, T, T)
    expect = mixer.out(merge((sim @ v) / sim.sum(-1, keepdim=True)))
    with torch.no_grad():
        got, _ = mixer(x)
    torch.testing.assert_close(got, expect.detach(), atol=1e-5, rtol=1e-5)


def test_retnet_equals_its_parallel_form():
    """Retention(X) = (Q K^T * D) V, D_nm = gamma^{n-m} (n >= m), gamma_h = 1 - 2^{-5-h} [Sun eq. 5]."""
    mixer = build("retnet").blocks[0].mixer
    x = mixer_input(T=30)
    B, T, _ = x.shape
    q, k, v = (heads(t, 2) for t in mixer.qkv(x).chunk(3, dim=-1))
    pos = torch.arange(T)
    tables = mixer.rotary.tables(pos)
    from bench.models.layers.positional import rotate

    q, k = rotate(q, tables), rotate(k, tables) / math.sqrt(q.shape[-1])
    gamma = 1 - 2.0 ** (-5.0 - torch.arange(2.0))
    D = (gamma[:, None, None] ** (pos[:, None] - pos[None, :]).clamp_min(0)) * (pos[:, None] >= pos[None, :])
    o = (q @ k.mT * D) @ v  # (B, H, T, hd)
    o = F.group_norm(merge(o).reshape(B * T, -1), 2).view(B, T, -1)
    expect = mixer.out(F.silu(mixer.gate(x)) * o)
    with torch.no_grad():
        got, _ = mixer(x)
    torch.testing.assert_close(got, expect.detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["mamba2", "mamba2-neg"])
def test_mamba2_equals_its_scan(name):
    """Eq. (1)-(6) of bench/models/mamba2.py run step by step: h_t = a_t h_{t-1} + B_t (Delta_t x_t)^T,
    y_t = h_t^T C_t + D x_t, a_t = exp(Delta_t A) or 2 exp(Delta_t A) - 1."""
    mixer = build(name).blocks[0].mixer
    x_in = mixer_input(T=19, seed=1)
    with torch.no_grad():
        mixer.dt_bias.copy_(torch.tensor([-3.0, 0.5]))  # one slow head, one fast (transitions near -1 with signs)
        z, xBC, dt = mixer.in_proj(x_in).split((mixer.d_inner, mixer.d_inner + 2 * mixer.d_state, mixer.n_heads), dim=-1)
        K = mixer.conv.kernel_size
        padded = F.pad(xBC, (0, 0, K - 1, 0))
        w = mixer.conv.conv.weight[:, 0]  # (c, K)
        conv = torch.stack([(padded[:, t : t + K] * w.T).sum(1) for t in range(xBC.shape[1])], 1) + mixer.conv.conv.bias
        x, Bm, Cm = F.silu(conv).split((mixer.d_inner, mixer.d_state, mixer.d_state), dim=-1)
        delta = F.softplus(dt + mixer.dt_bias)  # (B, T, H)
        a = torch.exp(delta * -mixer.A_log.exp())
        if name == "mamba2-neg":
            a = 2 * a - 1
        xh = x.view(*x.shape[:2], mixer.n_heads, -1)  # (B, T, H, P)
        h = torch.zeros(x.shape[0], mixer.n_heads, mixer.d_state, xh.shape[-1])
        ys = []
        for t in range(x.shape[1]):
            h = a[:, t, :, None, None] * h + Bm[:, t, None, :, None] * (delta[:, t, :, None] * xh[:, t])[:, :, None, :]
            ys.append(torch.einsum("bn,bhnp->bhp", Cm[:, t], h) + mixer.D[:, None] * xh[:, t])
        y = torch.stack(ys, 1).reshape(x.shape[0], x.shape[1], -1)
        expect = mixer.out_proj(mixer.norm(y * F.silu(z)))
        got, _ = mixer(x_in)
    if name == "mamba2-neg":
        assert (a < 0).any(), "no negative transition was exercised"
    torch.testing.assert_close(got, expect, atol=1e-5, rtol=1e-5)


def test_beta_range_two_reaches_past_one():
    """beta = r sigmoid(.): r = 2 doubles every beta, so transitions 1 - beta reach below 0."""
    x = mixer_input()
    one, two = build("deltanet").blocks[0].mixer, build("deltanet-neg").blocks[0].mixer
    b1, b2 = torch.sigmoid(one.beta(x)), two.beta_range * torch.sigmoid(two.beta(x))
    torch.testing.assert_close(b2, 2 * b1)
    assert two.beta_range == 2.0 and b2.max() > 1


@pytest.mark.parametrize(
    "name,bad,says",
    [
        ("deltanet", {"beta_range": 3.0}, r"model.beta_range=3.0: must be in \(0, 2\]"),
        ("linear-transformer", {"d_model": 15}, "divisible by n_heads"),
    ],
)
def test_bad_settings_say_what_would_be_right(name, bad, says):
    with pytest.raises(Exception, match=says):
        build(name, **bad)


def test_the_families_are_causal_only():
    with pytest.raises(Exception, match="causal-only"):
        bench.build_model("deltanet", vocab_size=11, causal=False)


def test_short_conv_is_the_causal_depthwise_sum_and_streams_in_pieces():
    """y_t[c] = bias[c] + sum_j w[c, j] x_{t-K+1+j}[c], x_{<1} = 0: written out by hand at t = 1 and t = 5, and
    at every t against torch's depthwise Conv1d over the left-padded sequence (float64), values and gradients
    (its written-out backward); pieces of 3, 1 and the rest from the carried window give the same outputs."""
    torch.manual_seed(0)
    conv = ShortConv(5, kernel_size=4).double()
    x = torch.randn(2, 11, 5, dtype=torch.float64)
    y, window = conv(x)
    w, b = conv.conv.weight[:, 0, :], conv.conv.bias  # (c, K), (c)
    assert torch.allclose(y[:, 0], b + w[:, 3] * x[:, 0], atol=1e-14)  # t = 1: only x_1 reaches it
    assert torch.allclose(y[:, 4], b + w[:, 0] * x[:, 1] + w[:, 1] * x[:, 2] + w[:, 2] * x[:, 3] + w[:, 3] * x[:, 4], atol=1e-14)
    ref = F.conv1d(F.pad(x.transpose(1, 2), (3, 0)), conv.conv.weight, b, groups=5).transpose(1, 2)
    assert (y - ref).abs().max() < 1e-14
    x.requires_grad_(True)  # gradients of the input, the weight and the bias against autograd through F.conv1d
    grad = torch.randn(2, 11, 5, dtype=torch.float64)
    params = (x, conv.conv.weight, conv.conv.bias)
    ours = torch.autograd.grad(conv(x)[0], params, grad)
    ref = F.conv1d(F.pad(x.transpose(1, 2), (3, 0)), conv.conv.weight, conv.conv.bias, groups=5).transpose(1, 2)
    for g, r in zip(ours, torch.autograd.grad(ref, params, grad)):
        assert (g - r).abs().max() < 1e-12
    assert torch.autograd.gradcheck(lambda x: conv(x)[0], (x[:, :6],))
    x = x.detach()
    assert torch.equal(window, x[:, -3:])
    outs, state = [], None
    for piece in x.split([3, 1, 7], dim=1):
        o, state = conv(piece, state)
        outs.append(o)
    assert (torch.cat(outs, 1) - y).abs().max() < 1e-14


def test_head_norm_is_group_norm_with_a_group_per_head():
    """The per-head norm of RetNet, the mLSTM and RWKV-7 equals torch's GroupNorm over (B * T, H * hd) with H
    groups, with and without the affine, at RWKV-7's eps (float64)."""
    x = torch.randn(2, 7, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 3 + 1
    weight, bias = torch.randn(12, dtype=torch.float64), torch.randn(12, dtype=torch.float64)
    flat = x.reshape(14, 12)
    assert (head_norm(x, 3) - F.group_norm(flat, 3).view(2, 7, 12)).abs().max() < 1e-12
    ref = F.group_norm(flat, 4, weight, bias, eps=64e-5).view(2, 7, 12)
    assert (head_norm(x, 4, weight, bias, eps=64e-5) - ref).abs().max() < 1e-12
    one_head = (x[..., :3] - x[..., :3].mean(-1, keepdim=True)) / (x[..., :3].var(-1, unbiased=False, keepdim=True) + 1e-5).sqrt()
    assert (head_norm(x, 4)[..., :3] - one_head).abs().max() < 1e-12  # by hand: head 1's three channels
