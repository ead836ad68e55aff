"""Halting layer [HALT Alg. 1, 3]: probabilities, mixture weights, modes, early exit."""

import pytest
import torch

from bench.models.layers.halting import DepthHalting
from bench.models.universal import UT

torch.set_num_threads(1)


@pytest.mark.parametrize("mode", ["halt", "upperbound"])
@pytest.mark.parametrize(
    "global_halt,causal,transition", [(False, False, False), (True, False, True), (True, True, True), (True, False, False)]
)
def test_the_halting_loop_equals_alg1_and_alg3_as_printed(global_halt, causal, transition, mode):
    """``DepthHalting`` with a toy step (H_l = tanh(W H_{l-1})) = the loop as the paper prints it, UT's
    ``reference_depth`` (bench/models/depth.py: Alg. 1 / 3 lines 1-13) with the same unit and step:
    S_L, ponder and depth, float64, on a padded batch whose units halt at different depths."""
    torch.manual_seed(0)
    d, T, B = 8, 6, 3
    host = UT(
        5,
        causal,
        d_model=d,
        n_heads=2,
        d_ff=16,
        max_layers=7,
        global_halt=global_halt,
        transition=transition,
        mode=mode,
        halt_bias_init=1.0,
    )
    host = host.eval().double()
    torch.nn.init.normal_(host.halting.unit.fc1.weight, std=3.0)
    lin = torch.nn.Linear(d, d).double()
    h0 = torch.randn(B, T, d, dtype=torch.float64) * torch.tensor([0.3, 1.0, 3.0], dtype=torch.float64).view(B, 1, 1)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 4:] = False
    with torch.no_grad():
        out = host.halting(lambda h, s, rows: torch.tanh(lin(h)), h0, mask)
        s_last, ponder, depth = host.reference_depth(h0, mask, lambda h, s: torch.tanh(lin(h)))
    real = mask.unsqueeze(-1)
    torch.testing.assert_close(torch.where(real, out.output, 0), torch.where(real, s_last, 0), atol=1e-12, rtol=0)
    torch.testing.assert_close(out.ponder, ponder, atol=1e-12, rtol=0)
    torch.testing.assert_close(out.depth, depth, atol=1e-12, rtol=0)
    assert depth.min() < 7  # some units halted before the bound


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
