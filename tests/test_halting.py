"""Halting layer [HALT Alg. 1, 3]: probabilities, mixture weights, modes, early exit."""

import pytest
import torch

from bench.models.layers.halting import DepthHalting

torch.set_num_threads(1)


def halting_input(h, mask, per_position, global_pool):
    """The state the halting unit scores, written out: h (token-level), the prefix mean over real
    positions (causal global units) or the mean over real positions (eq. 14)."""
    if not global_pool:
        return h
    m = mask.unsqueeze(-1).to(h.dtype)
    if per_position:
        return (h * m).cumsum(1) / m.cumsum(1).clamp_min(1.0)
    return (h * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp_min(1.0)


def reference_alg1(unit, step, h0, max_iters, threshold, transition, per_position, global_pool, mask):
    """Literal Alg. 1/3 over the whole batch (no early exit), returning S and every alpha."""
    B, T, _ = h0.shape
    P = T if per_position else 1
    states = [h0]
    alphas = []
    remain = torch.ones(B, P)
    frozen = torch.zeros(B, P, dtype=torch.bool)
    h = h0
    for _ in range(max_iters):
        h_new = step(h, None, torch.arange(B))
        x = halting_input(h, mask, per_position, global_pool)
        if transition:
            x = torch.cat([x, halting_input(h_new, mask, per_position, global_pool)], -1)
        a_hat = unit(x)
        alpha = torch.where(frozen, torch.zeros_like(a_hat), remain * a_hat)
        remain = torch.where(frozen, remain, remain * (1 - a_hat))
        alphas.append(alpha)
        h = torch.where(frozen.unsqueeze(-1), h, h_new)
        states.append(h)
        frozen = frozen | (torch.stack(alphas).sum(0) >= threshold)
    alphas = torch.stack(alphas)  # (L, B, P)
    weights = torch.cat([alphas, (1 - alphas.sum(0, keepdim=True))], 0)  # H_0..H_{L-1}, then H_L
    S = sum(w.unsqueeze(-1) * s for w, s in zip(weights, states))
    return S, alphas, weights


@pytest.mark.parametrize(
    "global_halt,causal,transition", [(False, False, False), (True, False, True), (True, True, True), (True, False, False)]
)
def test_probabilities_and_mixture_match_reference(global_halt, causal, transition):
    torch.manual_seed(0)
    d, T, B = 8, 6, 3
    lin = torch.nn.Linear(d, d)
    halting = DepthHalting(d, 7, global_halt=global_halt, transition=transition, causal=causal, mode="upperbound")
    step = lambda h, s, rows: torch.tanh(lin(h))  # noqa: E731
    h0 = torch.randn(B, T, d)
    mask = torch.ones(B, T, dtype=torch.bool)
    with torch.no_grad():
        out = halting(step, h0, mask)
        S, alphas, weights = reference_alg1(halting.unit, step, h0, 7, 0.999, transition, halting.per_position, global_halt, mask)
    assert torch.all(alphas >= 0)
    assert torch.all(alphas.sum(0) <= 1 + 1e-6)  # unconditional halting probabilities sum to <= 1
    assert torch.all(weights >= 0)
    torch.testing.assert_close(weights.sum(0), torch.ones_like(weights[0]))  # mixture weights: a distribution
    torch.testing.assert_close(out.output, S, atol=1e-5, rtol=1e-5)


def test_mixture_weights_form_a_distribution_in_the_output():
    # H_l = H_0 + l e_0: coordinates 1.. stay at H_0, so S[1:] = (sum of weights) * H_0[1:].
    torch.manual_seed(1)
    d = 4
    e0 = torch.zeros(d)
    e0[0] = 1.0
    h0 = torch.randn(2, 5, d)
    h0[..., 0] = 0
    for global_halt in (False, True):
        halting = DepthHalting(d, 6, global_halt=global_halt, transition=True, causal=False, bias_init=-1.0)
        with torch.no_grad():
            out = halting(lambda h, s, rows: h + e0, h0, torch.ones(2, 5, dtype=torch.bool))
        torch.testing.assert_close(out.output[..., 1:], h0[..., 1:])
        assert torch.all(out.output[..., 0] >= 0) and torch.all(out.output[..., 0] <= 6)


@pytest.mark.parametrize("global_halt", [False, True])
def test_upperbound_equals_early_exit_and_early_exit_computes_fewer_rows(global_halt):
    torch.manual_seed(2)
    d, B, T = 8, 6, 5
    lin = torch.nn.Linear(d, d)
    rows_seen = {"halt": 0, "upperbound": 0}
    results = {}
    h0 = torch.randn(B, T, d) * torch.linspace(0.1, 3, B).view(B, 1, 1)  # sequences halt at different depths
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[0, 3:] = False
    for mode in ("halt", "upperbound"):
        torch.manual_seed(3)
        halting = DepthHalting(d, 12, global_halt=global_halt, transition=True, causal=False, mode=mode)
        torch.nn.init.normal_(halting.unit.fc1.weight, std=1.0)

        def step(h, s, rows, mode=mode):
            rows_seen[mode] += h.shape[0]
            return torch.tanh(lin(h))

        with torch.no_grad():
            results[mode] = halting(step, h0, mask)
    a, b = results["halt"], results["upperbound"]
    torch.testing.assert_close(a.output, b.output)
    torch.testing.assert_close(a.ponder, b.ponder)
    torch.testing.assert_close(a.depth, b.depth)
    assert rows_seen["upperbound"] == B * 12
    assert a.depth.min() < a.depth.max()  # some sequences halted earlier than others...
    assert rows_seen["halt"] < rows_seen["upperbound"]  # ...and were not computed any further


@pytest.mark.parametrize("halts_by_half", [True, False])
def test_freeze_exit_equals_upperbound_and_stops_only_where_all_halted_by_half(halts_by_half):
    """``exit="freeze"``: every sequence keeps running (no row dropped), halted units frozen, and one
    check after iteration ceil(L / 2) = 4 of 8 stops the loop where every unit has halted by then."""
    d, B, T, L = 8, 3, 5, 8
    h0 = torch.randn(B, T, d, generator=torch.Generator().manual_seed(4))
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[2, 2:] = False
    lin = torch.nn.Linear(d, d)
    results, calls = {}, {}
    for mode, exit in (("halt", "freeze"), ("upperbound", "freeze"), ("halt", "drop")):
        halting = DepthHalting(
            d, L, global_halt=True, transition=True, causal=False, mode=mode, exit=exit, bias_init=3.0 if halts_by_half else -3.0
        )
        torch.nn.init.zeros_(halting.unit.fc2.weight)  # alpha_hat = sigmoid(+-3): all halt at l = 3, or never
        rows = calls[mode, exit] = []
        with torch.no_grad():
            step = lambda h, s, r, rows=rows: rows.append(h.shape[0]) or torch.tanh(lin(h))
            results[mode, exit] = halting(step, h0, mask)
    frozen, upper, dropped = results["halt", "freeze"], results["upperbound", "freeze"], results["halt", "drop"]
    for other in (upper, dropped):
        assert torch.equal(frozen.output, other.output) and torch.equal(frozen.depth, other.depth)
        assert torch.equal(frozen.ponder, other.ponder)
    assert calls["halt", "freeze"] == [B] * (4 if halts_by_half else L)  # all rows, stopped at the check or run to L
    assert calls["upperbound", "freeze"] == [B] * L
    assert torch.equal(frozen.depth, torch.full((B,), 3.0 if halts_by_half else float(L)))


def test_exit_strategy_is_checked():
    with pytest.raises(ValueError, match="exit must be"):
        DepthHalting(4, 3, global_halt=True, transition=True, causal=False, exit="sometimes")


def test_no_halt_runs_fixed_depth_without_halting_unit():
    halting = DepthHalting(4, 5, global_halt=True, transition=True, causal=False, mode="no-halt")
    assert halting.unit is None
    calls = []
    out = halting(lambda h, s, rows: calls.append(1) or h + 1, torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool))
    assert len(calls) == 5
    torch.testing.assert_close(out.output, torch.full((2, 3, 4), 5.0))
    assert torch.all(out.depth == 5) and torch.all(out.ponder == 0)


def test_ponder_cost_matches_formula_for_constant_halting():
    # alpha_hat = 1/2 every layer: alpha_j = 2^-(j+1); after n = 3 layers (no threshold hit)
    # ponder = sum_j alpha_j (j+1) + (1 - sum alpha) * 3 = 1/2 + 2/4 + 3/8 + 3/8 = 1.75
    halting = DepthHalting(4, 3, global_halt=True, transition=False, causal=False)
    for p in halting.unit.parameters():
        torch.nn.init.zeros_(p)
    with torch.no_grad():
        out = halting(lambda h, s, rows: h + 1, torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool))
    torch.testing.assert_close(out.ponder, torch.full((2,), 1.75))
    # S_3 = alpha_0 H_0 + alpha_1 H_1 + alpha_2 H_2 + (1/8) H_3 with H_l = l
    torch.testing.assert_close(out.output, torch.full((2, 3, 4), 0 / 2 + 1 / 4 + 2 / 8 + 3 / 8))
