"""RSA attention [RSA eq. 4] and its registry hosts: recurrence reproduction, gating,
non-square REMs, padding, causality, and learning a REM's decay from data."""

from __future__ import annotations

import pytest
import torch
from conformance import MODELS, REG

import bench
from bench.models.layers.attention import MultiHeadAttention

torch.set_num_threads(1)

RSA_HOSTS = [m for m in MODELS if REG.model_entry(m)["params"].get("rsa")]  # every entry that turns RSA on


def step_by_step(v, kinds_per_head, decay, theta, dil):
    """Each head's linear recurrence, one step at a time: z_t = a (z_{t-d} + v_{t-d}), a = lambda or
    gamma e^{i theta}; output Re z (regular, cos) or Im z (sin) [RSA Prop. 1-2, 4]."""
    B, H, T, hd = v.shape
    out = torch.zeros_like(v)
    for h in range(H):
        a = decay[h] * (torch.exp(1j * theta[h]) if kinds_per_head[h] else 1.0)
        z = [torch.zeros(B, hd, dtype=torch.complex128)] * T
        for t in range(dil[h], T):
            z[t] = a * (z[t - dil[h]] + v[:, h, t - dil[h]])
        part = torch.imag if kinds_per_head[h] == 2 else torch.real
        out[:, h] = torch.stack([part(zt) for zt in z], dim=1)
    return out


def test_gate_one_zero_qk_reproduces_linear_recurrence():
    kinds = [1, 1, 1, 1, 1, 1]
    mha = MultiHeadAttention(24, 6, rsa={"kinds": kinds, "dilations": [2, 3, 2], "lag_cap": 10_000}).double()
    with torch.no_grad():
        mha.q_proj.weight.zero_()
        mha.k_proj.weight.zero_()
        mha.rsa.mu.fill_(60.0)  # sigmoid(60) == 1 in float64 up to 1e-26
    x = torch.randn(2, 19, 24, dtype=torch.float64)
    decay, theta, kind = mha.rsa.rem.head_params()
    v = mha.split_heads(mha.v_proj(x))
    want = mha.o_proj(mha.merge_heads(step_by_step(v, kind.tolist(), decay.detach(), theta.detach(), mha.rsa.rem.dil_of)))
    torch.testing.assert_close(mha(x, causal=True), want)


def test_gate_mixes_softmax_and_rem_per_eq4():
    mha = MultiHeadAttention(16, 4, rsa={"kinds": [2, 1, 1, 0, 0, 0], "mu_init": 0.3}).double()
    plain = MultiHeadAttention(16, 4).double()
    plain.load_state_dict({k: v for k, v in mha.state_dict().items() if "proj" in k})
    x = torch.randn(2, 11, 16, dtype=torch.float64)
    s = torch.sigmoid(torch.tensor(0.3, dtype=torch.float64))
    v = mha.split_heads(mha.v_proj(x))
    rem = mha.merge_heads(mha.rsa.rem(v, causal=True))
    # o_proj is linear and bias-free, so the mixture commutes with it.
    torch.testing.assert_close(mha(x, causal=True), (1 - s) * plain(x, causal=True) + s * mha.o_proj(rem))
    assert mha.rsa.learned()["gate"] == pytest.approx(float(s))


def test_memory_plus_segment_uses_shifted_lags():
    """rem_offset = number of memory keys: the segment's REM rows are the bottom rows of the
    REM over [memory; segment] (App. D.2), with the softmax part causal to the end of the keys."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, rsa={"kinds": [1, 1, 1, 1, 0, 0], "dilations": [3]}).double()
    seq = torch.randn(2, 13, 16, dtype=torch.float64)
    full = mha(seq, causal=True)
    seg = seq[:, 8:]
    torch.testing.assert_close(mha(seg, context=seq, causal=True, rem_offset=8), full[:, 8:])


def test_bad_kinds_raise_clear_errors():
    with pytest.raises(ValueError, match="sum to 6 but the layer has only n_heads=5"):
        MultiHeadAttention(20, 5, rsa={"kinds": [3, 2, 1, 0, 0, 0]})
    with pytest.raises(ValueError, match="unknown rsa keys"):
        MultiHeadAttention(20, 5, rsa={"kinds": [5, 0, 0, 0, 0, 0], "gate": 1})


def test_heads_beyond_the_kinds_stay_plain_attention():
    """[RSA Table 7]: only n_RSA_heads of the heads carry a REM; the others are plain softmax heads."""
    torch.manual_seed(0)
    rsa = MultiHeadAttention(16, 4, rsa={"kinds": [1, 1, 0, 0, 0, 0]}).double()
    plain = MultiHeadAttention(16, 4).double()
    plain.load_state_dict({k: v for k, v in rsa.state_dict().items() if k.endswith("proj.weight")})
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    with torch.no_grad():
        rsa.o_proj.weight.zero_()
        rsa.o_proj.weight[:, 8:] = torch.eye(16, dtype=torch.float64)[:, 8:]  # read heads 2 and 3 only
        plain.o_proj.weight.copy_(rsa.o_proj.weight)
    torch.testing.assert_close(rsa(x, causal=True), plain(x, causal=True))
    with torch.no_grad():
        rsa.o_proj.weight.zero_()
        rsa.o_proj.weight[:, :8] = torch.eye(16, dtype=torch.float64)[:, :8]  # heads 0 and 1 carry the REM
        plain.o_proj.weight.copy_(rsa.o_proj.weight)
    assert not torch.allclose(rsa(x, causal=True), plain(x, causal=True))


@pytest.mark.parametrize("name", RSA_HOSTS)
def test_registry_hosts_are_causal(name):
    torch.manual_seed(0)
    d_model = 4 * REG.model_entry(name)["params"].get("n_heads", 4)  # head dim 4 with the entry's heads
    model = bench.build_model(name, vocab_size=11, causal=True, d_model=d_model, n_layers=2, d_ff=32, dropout=0.0).eval()
    tokens = torch.randint(1, 11, (2, 23))
    base = model(tokens).hidden
    for t in (0, 9, 22):
        changed = tokens.clone()
        changed[:, t:] = (changed[:, t:] % 10) + 1  # every position >= t differs
        out = model(changed).hidden
        torch.testing.assert_close(out[:, :t], base[:, :t])
        assert not torch.allclose(out[:, t], base[:, t])
    assert any(k.startswith("rsa_gate_l") for k in model(tokens).stats)


def test_bidirectional_rsa_ignores_padding():
    torch.manual_seed(0)
    model = bench.build_model("rsa-transformer", vocab_size=11, causal=False, d_model=16, n_layers=2, d_ff=32, dropout=0.0).eval()
    tokens = torch.randint(1, 11, (1, 9))
    mask = torch.ones(1, 9, dtype=torch.bool)
    padded = torch.cat([tokens, torch.randint(1, 11, (1, 6))], 1)
    pmask = torch.cat([mask, torch.zeros(1, 6, dtype=torch.bool)], 1)
    torch.testing.assert_close(model(padded, pmask).hidden[:, :9], model(tokens, mask).hidden, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_rem_decay_is_learned_from_data():
    """A 1-head REM (gate 1, zero Q/K) fitted by Adam recovers the decay of the recurrence that
    generated its targets: gradients reach eta through the FFT path."""
    torch.manual_seed(0)
    teacher = MultiHeadAttention(4, 1, rsa={"kinds": [1, 0, 0, 0, 0, 0]})
    student = MultiHeadAttention(4, 1, rsa={"kinds": [1, 0, 0, 0, 0, 0]})
    with torch.no_grad():
        for m in (teacher, student):
            m.rsa.mu.fill_(30.0)
            m.q_proj.weight.zero_()
            m.k_proj.weight.zero_()
            for p in ("v_proj", "o_proj"):
                getattr(m, p).weight.copy_(torch.eye(4))
        teacher.rsa.rem.eta.fill_(0.9)  # lambda = 0.716
        student.rsa.rem.eta.fill_(-1.0)  # lambda = -0.762: the wrong sign to start with
    opt = torch.optim.Adam([student.rsa.rem.eta], lr=0.05)
    for _ in range(150):
        x = torch.randn(8, 40, 4)
        loss = torch.nn.functional.mse_loss(student(x, causal=True), teacher(x, causal=True).detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(torch.tanh(student.rsa.rem.eta.detach())) == pytest.approx(float(torch.tanh(torch.tensor(0.9))), abs=0.02)


@pytest.mark.parametrize("n_heads", [4, 6])
def test_gated_mix_gradients_match_finite_differences(n_heads):
    check_gated_mix_gradients(n_heads)


def check_gated_mix_gradients(n_heads: int = 6, device: str = "cpu"):
    """The hand-written mix (RSA heads first, the rest plain) against torch.autograd.gradcheck,
    with attention in (B, T, H, hd) memory and P V time-last as the FFT leaves it."""
    from bench.models.layers.rsa import _GatedMix

    torch.manual_seed(0)
    B, T, hd, k = 2, 5, 3, 4
    f64 = dict(dtype=torch.float64, device=device)
    s_pv = torch.randn(B, k, hd, T + 2, **f64)[..., :T].transpose(2, 3).requires_grad_()
    attn = torch.randn(B, T, n_heads, hd, **f64).transpose(1, 2).requires_grad_()
    c = torch.tensor(0.3, **f64, requires_grad=True)
    out = _GatedMix.apply(s_pv, attn, c)
    torch.testing.assert_close(out[:, :k], s_pv + c * attn[:, :k])
    torch.testing.assert_close(out[:, k:], attn[:, k:])
    assert out.transpose(1, 2).is_contiguous()  # merging heads afterwards is a view, not a copy
    assert torch.autograd.gradcheck(_GatedMix.apply, (s_pv, attn, c))
