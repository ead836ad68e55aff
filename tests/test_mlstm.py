"""The mLSTM (bench/models/mlstm.py) against loops written from the xLSTM paper's equations, not from
the mechanism: the stabilised recurrence (m_t, C'_t, n'_t, the bound exp(-m_t)) step by step in
float64, the plain one (exp(i~) unscaled, the bound 1) where exp does not overflow, a case computed by
hand, every input's gradient, and the whole block. (Streaming = forward: test_streaming.py; state
bytes flat in the context: test_linear_families.py; every task and causality: test_models.py.)
Run with ``-s`` to see each largest difference."""

import math

import pytest
import torch
import torch.nn.functional as F

import bench
from bench.models.mlstm import MLSTM, mlstm_cell

pytestmark = pytest.mark.usefixtures("one_thread")


def paper_loop(q, k, v, i_pre, f_pre, C=None, n=None, m=None):
    """The stabilised mLSTM step by step [xLSTM §2.3], in the paper's orientation C (dv, dk):
    m_t = max(log f_t + m_{t-1}, i~_t); f'_t = exp(log f_t + m_{t-1} - m_t), i'_t = exp(i~_t - m_t);
    C_t = f' C_{t-1} + i' v_t k_t^T; n_t = f' n_{t-1} + i' k_t; h~_t = C_t q_t / max(|n_t^T q_t|, exp(-m_t)).
    q, k (B, H, T, dk), k scaled already; v (B, H, T, dv); gates (B, H, T). -> (h~, C, n, m)."""
    B, H, T, dk = q.shape
    dv = v.shape[-1]
    C = q.new_zeros(B, H, dv, dk) if C is None else C
    n = q.new_zeros(B, H, dk) if n is None else n
    m = q.new_zeros(B, H) if m is None else m
    hs = []
    for t in range(T):
        log_f = F.logsigmoid(f_pre[:, :, t])
        m_new = torch.maximum(log_f + m, i_pre[:, :, t])
        f_s, i_s = torch.exp(log_f + m - m_new), torch.exp(i_pre[:, :, t] - m_new)  # (B, H)
        C = f_s[..., None, None] * C + i_s[..., None, None] * (v[:, :, t, :, None] * k[:, :, t, None, :])
        n = f_s[..., None] * n + i_s[..., None] * k[:, :, t]
        num = (C @ q[:, :, t, :, None])[..., 0]  # (B, H, dv)
        den = torch.maximum((n * q[:, :, t]).sum(-1).abs(), torch.exp(-m_new))  # (B, H)
        hs.append(num / den[..., None])
        m = m_new
    return torch.stack(hs, dim=2), C, n, m


def plain_loop(q, k, v, i_pre, f_pre):
    """Eq. (1)-(4) unstabilised: i = exp(i~), f = sigmoid(f~), h~ = C q / max(|n^T q|, 1). -> (h~, |n^T q|)."""
    B, H, T, dk = q.shape
    C, n, hs, nq = q.new_zeros(B, H, v.shape[-1], dk), q.new_zeros(B, H, dk), [], []
    for t in range(T):
        f, i = torch.sigmoid(f_pre[:, :, t])[..., None], torch.exp(i_pre[:, :, t])[..., None]
        C = f[..., None] * C + i[..., None] * (v[:, :, t, :, None] * k[:, :, t, None, :])
        n = f * n + i * k[:, :, t]
        nq.append((n * q[:, :, t]).sum(-1, keepdim=True).abs())
        hs.append((C @ q[:, :, t, :, None])[..., 0] / torch.clamp_min(nq[-1], 1.0))
    return torch.stack(hs, dim=2), torch.stack(nq, dim=2)


def inputs(T=37, dk=4, dv=3, i_scale=3.0, f_scale=3.0, f_shift=0.0, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, 3, T, dk, generator=g, dtype=dtype) for _ in range(2))
    v = torch.randn(2, 3, T, dv, generator=g, dtype=dtype)
    i_pre = i_scale * torch.randn(2, 3, T, generator=g, dtype=dtype)
    f_pre = f_shift + f_scale * torch.randn(2, 3, T, generator=g, dtype=dtype)
    return q, k / math.sqrt(dk), v, i_pre, f_pre


def state_of(C, n):
    """The paper's (C (dv, dk), n (dk)) as the mechanism's S = [C^T | n] (dk, dv + 1)."""
    return torch.cat((C.mT, n[..., None]), dim=-1)


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1.0)).item()


# gates: moderate; exponential input gates far beyond exp's float32 range; forget gates near 0 and near 1
GATES = {
    "moderate": dict(i_scale=3.0, f_scale=3.0),
    "huge input gates": dict(i_scale=150.0, f_scale=3.0),
    "forgetting fast": dict(i_scale=10.0, f_scale=2.0, f_shift=-8.0),
    "remembering": dict(i_scale=10.0, f_scale=1.0, f_shift=8.0),
}


@pytest.mark.parametrize("gates", list(GATES))
@pytest.mark.parametrize("chunk_size", [1, 8, 64])
def test_cell_equals_the_papers_stabilised_loop_float64(gates, chunk_size):
    """Outputs, final states (C' = e^{-m} C, n', m) to 1e-10 in float64, from zeros and carried across
    two calls (T = 37, not a multiple of the chunk)."""
    q, k, v, i_pre, f_pre = inputs(**GATES[gates])
    h_ref, C_ref, n_ref, m_ref = paper_loop(q, k, v, i_pre, f_pre)
    h, S, m = mlstm_cell(q, k, v, i_pre, f_pre, chunk_size=chunk_size)
    a = slice(0, 20)
    b = slice(20, None)
    h1, S1, m1 = mlstm_cell(q[:, :, a], k[:, :, a], v[:, :, a], i_pre[..., a], f_pre[..., a], chunk_size=chunk_size)
    h2, S2, m2 = mlstm_cell(q[:, :, b], k[:, :, b], v[:, :, b], i_pre[..., b], f_pre[..., b], S=S1, m=m1, chunk_size=chunk_size)
    worst = max(
        rel(h, h_ref),
        rel(torch.cat((h1, h2), 2), h_ref),
        rel(S, state_of(C_ref, n_ref)),
        rel(S2, state_of(C_ref, n_ref)),
        rel(m, m_ref),
        rel(m2, m_ref),
    )
    print(f"\n{gates}, chunk {chunk_size}: largest relative difference {worst:.1e}")
    assert worst < 1e-10


def test_the_stabiliser_changes_nothing_where_exp_does_not_overflow():
    """In float64 with |i~| <= ~10 the plain eq. (1)-(4) (no m_t, the bound 1) is computable: the cell
    equals it to 1e-10, the bound 1 of (3) being the bound exp(-m_t) of (13) in scaled units."""
    q, k, v, i_pre, f_pre = inputs(i_scale=3.0)
    q = q * 0.2  # small queries: |n^T q| < 1 at many steps, so the bound binds there
    ref, nq = plain_loop(q, k, v, i_pre, f_pre)
    assert (nq < 1).any() and (nq > 1).any()  # the bound binds at some steps, not at others
    h, _, _ = mlstm_cell(q, k, v, i_pre, f_pre, chunk_size=8)
    print(f"\nplain eq. (1)-(4) against the cell: {rel(h, ref):.1e}")
    assert rel(h, ref) < 1e-10


@pytest.mark.parametrize("gates", list(GATES))
def test_cell_float32_against_the_float64_loop(gates):
    """float32 cell (chunks of 64, T = 300) against the float64 paper loop: as close as the paper loop
    itself run in float32 (within 3x its error + 1e-4 relative; h~ divides by n^T q, which random
    signs bring near its bound, so float32 alone loses ~1e-5..5e-4 here), and finite with input-gate
    pre-activations of several hundred (exp overflows float32 beyond 88)."""
    q, k, v, i_pre, f_pre = inputs(T=300, dk=8, dv=8, **GATES[gates])
    h_ref, _, _, _ = paper_loop(q, k, v, i_pre, f_pre)
    h32 = [x.float() for x in (q, k, v, i_pre, f_pre)]
    h_loop32, _, _, _ = paper_loop(*h32)
    h, S, m = mlstm_cell(*h32, chunk_size=64)
    assert torch.isfinite(h).all() and torch.isfinite(S).all()
    cell, loop = rel(h.double(), h_ref), rel(h_loop32.double(), h_ref)
    print(f"\n{gates}: float32 against float64, cell {cell:.1e}, the paper loop in float32 {loop:.1e}")
    assert cell < 3 * loop + 1e-4
    if gates == "huge input gates":
        assert i_pre.max() > 88 and not torch.isfinite(torch.exp(i_pre.float())).all()  # why the stabiliser


def test_a_case_computed_by_hand():
    """d = 1, T = 3; q = (1/2, 1, 1), k = 1, v = (1, 3, -2), i = (1, 2, 1/4), f = 1/2 throughout:
    C = (1, 6.5, 2.75), n = (1, 2.5, 1.5), n q = (1/2, 2.5, 1.5): h~ = (1/2 (the bound 1), 2.6, 11/6);
    m = (0, log 2, 0), so the final scaled state is C'_3 = 2.75, n'_3 = 1.5."""
    q = torch.tensor([0.5, 1.0, 1.0], dtype=torch.float64).view(1, 1, 3, 1)
    k = torch.ones(1, 1, 3, 1, dtype=torch.float64)
    v = torch.tensor([1.0, 3.0, -2.0], dtype=torch.float64).view(1, 1, 3, 1)
    i_pre = torch.tensor([0.0, math.log(2), math.log(0.25)], dtype=torch.float64).view(1, 1, 3)
    f_pre = torch.zeros(1, 1, 3, dtype=torch.float64)  # sigmoid(0) = 1/2
    for chunk_size in (1, 2, 64):
        h, S, m = mlstm_cell(q, k, v, i_pre, f_pre, chunk_size=chunk_size)
        torch.testing.assert_close(h.flatten(), torch.tensor([0.5, 2.6, 11 / 6], dtype=torch.float64), atol=1e-12, rtol=0)
        torch.testing.assert_close(S.flatten(), torch.tensor([2.75, 1.5], dtype=torch.float64), atol=1e-12, rtol=0)
        assert abs(m.item()) < 1e-12
    h_ref, _, _, _ = paper_loop(q, k, v, i_pre, f_pre)
    torch.testing.assert_close(h_ref.flatten(), torch.tensor([0.5, 2.6, 11 / 6], dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("gates", ["moderate", "huge input gates"])
def test_gradients_equal_the_loops(gates):
    """m is detached in the cell (the output does not depend on it): every input's gradient still
    equals the float64 loop's, whose m carries gradient, to 1e-10."""
    leaves = [x.requires_grad_() for x in inputs(T=29, **GATES[gates])]
    w = torch.randn(2, 3, 29, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    h_ref, _, _, _ = paper_loop(*leaves)
    ref = torch.autograd.grad((h_ref * w).sum(), leaves)
    h, _, _ = mlstm_cell(*leaves, chunk_size=8)
    got = torch.autograd.grad((h * w).sum(), leaves)
    worst = max(rel(g, r) for g, r in zip(got, ref))
    print(f"\n{gates}: gradients, largest relative difference {worst:.1e}")
    assert worst < 1e-10


def test_the_block_equals_its_equations_written_out():
    """Eq. (5)-(10) of bench/models/mlstm.py written out around the paper loop (float64 loop, float32 model)."""
    torch.manual_seed(0)
    model = bench.build_model(
        "mlstm", vocab_size=11, causal=True, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, chunk_size=8
    ).eval()
    layer = model.blocks[0].mixer
    with torch.no_grad():
        layer.igate.weight.normal_(std=0.5)  # data-dependent gates (initialised constant)
        layer.fgate.weight.normal_(std=0.5)
        x = torch.randn(2, 21, 16, generator=torch.Generator().manual_seed(1))
        got, _ = layer(x)
        d = layer.d_inner
        u, z = (x @ layer.up.weight.T).split(d, dim=-1)
        Kc = layer.conv.kernel_size
        pad = F.pad(u, (0, 0, Kc - 1, 0))
        w = layer.conv.conv.weight[:, 0]  # (d, K)
        c = torch.stack([(pad[:, t : t + Kc] * w.T).sum(1) for t in range(u.shape[1])], 1) + layer.conv.conv.bias
        c = F.silu(c)

        def blockdiag(mod, y):
            W = torch.block_diag(*mod.weight)  # (d, d): out x in
            return y @ W.T

        q, k, v = blockdiag(layer.q, c), blockdiag(layer.k, c), blockdiag(layer.v, u)
        gates_in = torch.cat((q, k, v), -1)
        i_pre = (gates_in @ layer.igate.weight.T + layer.igate.bias).transpose(1, 2).double()
        f_pre = (gates_in @ layer.fgate.weight.T + layer.fgate.bias).transpose(1, 2).double()
        split = lambda y: y.view(2, 21, 2, -1).transpose(1, 2).double()  # noqa: E731
        hd = d // 2
        h, _, _, _ = paper_loop(split(q), split(k) / math.sqrt(hd), split(v), i_pre, f_pre)
        h = h.float().transpose(1, 2)  # (B, T, H, hd)
        h = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, unbiased=False, keepdim=True) + 1e-5)
        h = h.reshape(2, 21, d) * layer.norm_weight
        expect = ((h + layer.skip * c) * F.silu(z)) @ layer.down.weight.T
    print(f"\nblock: largest difference {(got - expect).abs().max().item():.1e}")
    torch.testing.assert_close(got, expect, atol=1e-5, rtol=1e-5)


def test_gate_initialisation_and_bad_settings():
    model = MLSTM(11, d_model=16, n_heads=4, n_layers=1, d_ff=0)
    layer = model.blocks[0].mixer
    torch.testing.assert_close(layer.fgate.bias.detach(), torch.linspace(3.0, 6.0, 4))
    assert layer.fgate.weight.abs().sum() == 0 and layer.igate.weight.abs().sum() == 0
    assert model.blocks[0].ffn is None  # d_ff 0: the xLSTM[1:0] stack of mLSTM blocks alone
    with pytest.raises(Exception, match="divisible by n_heads"):
        bench.build_model("mlstm", vocab_size=11, causal=True, d_model=10, n_heads=3)
    with pytest.raises(Exception, match="qkv_block"):
        bench.build_model("mlstm", vocab_size=11, causal=True, d_model=5, n_heads=1, qkv_block=4)
