"""UT / GUT (and GUTLB when TLB's memory layers exist): halting behaviour, modes, causality, learning."""

import pytest
import torch

from bench.models.universal import GUT, UT

torch.set_num_threads(1)
SMALL = dict(d_model=32, n_heads=4, d_ff=64, dropout=0.0)


def batch(B=4, T=12, vocab=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, vocab, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 8:] = False
    mask[2, 4:] = False
    return tokens * mask, mask


def assert_causal(model, T=12, k=7):
    tokens, _ = batch(T=T)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    changed = tokens.clone()
    changed[:, k:] = (changed[:, k:] % 19) + 1
    with torch.no_grad():
        a = model(tokens, mask).hidden
        b = model(changed, mask).hidden
    torch.testing.assert_close(a[:, :k], b[:, :k], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(a[:, k:], b[:, k:])


@pytest.mark.parametrize("bias,expected", [(30.0, 1.0), (-30.0, 9.0)])
def test_ut_halting_bias_forces_one_iteration_or_the_upper_bound(bias, expected):
    torch.manual_seed(0)
    model = UT(20, False, max_layers=9, halt_bias_init=bias, **SMALL).eval()
    for p in model.halting.unit.fc2.parameters():  # make the bias dominate the untrained scorer
        if p.dim() == 2:
            torch.nn.init.zeros_(p)
    calls = []
    model.block.register_forward_hook(lambda *a: calls.append(1))
    tokens, mask = batch()
    with torch.no_grad():
        out = model(tokens, mask)
    assert len(calls) == expected
    torch.testing.assert_close(out.stats["halt_depth"], torch.full((4,), expected))


@pytest.mark.parametrize("cls,causal", [(UT, False), (UT, True), (GUT, False), (GUT, True)])
def test_upperbound_mode_gives_the_same_outputs_as_early_exit(cls, causal):
    outs = {}
    for mode in ("halt", "upperbound"):
        torch.manual_seed(0)
        model = cls(20, causal, max_layers=10, mode=mode, halt_bias_init=1.0, **SMALL).eval()
        torch.nn.init.normal_(model.halting.unit.fc1.weight, std=0.5)  # spread halting depths
        with torch.no_grad():
            outs[mode] = model(*batch(B=6))
    a, b = outs["halt"], outs["upperbound"]
    torch.testing.assert_close(a.hidden, b.hidden, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.aux_loss, b.aux_loss)
    torch.testing.assert_close(a.stats["halt_depth"], b.stats["halt_depth"])
    assert a.stats["halt_depth"].max() < 10  # it did halt before the upper bound


def test_global_halting_gives_integer_depth_per_sequence_and_gut_pools_end():
    torch.manual_seed(0)
    model = GUT(20, False, max_layers=10, **SMALL).eval()
    tokens, mask = batch()
    with torch.no_grad():
        out = model(tokens, mask)
    depth = out.stats["halt_depth"]
    torch.testing.assert_close(depth, depth.round())
    assert 0.0 < out.stats["gate_mean"] < 1.0
    last = mask.sum(-1) - 1
    torch.testing.assert_close(out.pooled, out.hidden[torch.arange(4), last])


def test_no_halt_mode_has_fixed_depth_and_no_aux_loss():
    model = GUT(20, False, max_layers=4, mode="no-halt", **SMALL).eval()
    with torch.no_grad():
        out = model(*batch())
    assert torch.all(out.stats["halt_depth"] == 4) and float(out.aux_loss) == 0.0


@pytest.mark.parametrize("cls,kw", [(GUT, {}), (UT, {}), (GUT, {"global_halt": False}), (GUT, {"mode": "upperbound"})])
def test_causal_models_never_see_the_future(cls, kw):
    torch.manual_seed(0)
    model = cls(20, True, max_layers=8, halt_bias_init=0.5, **SMALL, **kw).eval()
    torch.nn.init.normal_(model.halting.unit.fc1.weight, std=0.5)
    assert_causal(model)


@pytest.mark.slow
def test_gut_learns_a_counting_task():
    # Label = whether token 1 occurs more often than token 2 (needs attention over the whole input).
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, 4, (512, 10), generator=g)
    labels = ((tokens == 1).sum(-1) > (tokens == 2).sum(-1)).long()
    model = GUT(5, False, max_layers=4, beta=0.01, pool="mean", **SMALL)
    head = torch.nn.Linear(32, 2)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=3e-3)
    for _ in range(150):
        idx = torch.randint(0, 384, (64,), generator=g)
        out = model(tokens[idx])
        loss = torch.nn.functional.cross_entropy(head(out.hidden.mean(1)), labels[idx]) + out.aux_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        acc = (head(model(tokens[384:]).hidden.mean(1)).argmax(-1) == labels[384:]).float().mean()
    assert acc > 0.85, acc


def gutlb(causal, **kw):
    from bench.models.gutlb import GUTLB

    torch.manual_seed(0)
    model = GUTLB(20, causal, chunk_size=4, memory_slots=3, max_layers=6, halt_bias_init=0.5, **SMALL, **kw).eval()
    torch.nn.init.normal_(model.halting.unit.fc1.weight, std=0.5)
    return model


@pytest.mark.parametrize("kw", [{}, {"global_halt": False}])
def test_causal_gutlb_never_sees_the_future(kw):
    assert_causal(gutlb(True, **kw), T=13, k=6)  # k inside a chunk: tests chunk, memory and halting


def test_gutlb_upperbound_equals_early_exit_and_reports_depth_per_chunk():
    tokens, mask = batch(B=6, T=12)
    with torch.no_grad():
        a = gutlb(False)(tokens, mask)
        b = gutlb(False, mode="upperbound")(tokens, mask)
    torch.testing.assert_close(a.hidden, b.hidden, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.stats["halt_depth"], b.stats["halt_depth"])
    assert torch.all(a.stats["halt_depth"] <= 6) and float(a.aux_loss) > 0
    # a 4-token sequence has one real chunk, a 12-token one has three
    assert a.stats["total_depth"][2] <= 6 < a.stats["total_depth"][0]
