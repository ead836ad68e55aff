"""``model.halt_rules``: the [HALT] authors' code's halting rules (length cap, crossing step undone)
against hand-worked cases and against the code's loop written out here independently
(docs/depth_recurrence.md cites the lines of ``models/encoders/UniversalTransformerEncoder.py`` /
``UTLBEncoder.py`` it follows)."""

import pytest
import torch
from conformance import model_class, models

from bench.models.chunked import ChunkRecurrent
from bench.models.layers.halting import HALT_RULES, DepthHalting

torch.set_num_threads(1)

# the registry's depth-recurrent families, by what their classes declare (tests/conformance.py)
DEPTH_ALL = models(recurrence="depth", supports_bidirectional=True)  # UT, GUT and its ablations, GUTLB
DEPTH = [m for m in DEPTH_ALL if not issubclass(model_class(m), ChunkRecurrent)]  # halting per position
DEPTH_CHUNKED = [m for m in DEPTH_ALL if issubclass(model_class(m), ChunkRecurrent)]  # halting per chunk (GUTLB)
#: the first entry of each depth-recurrent class (UT, GUT, GUTLB): what compiles is the class's code (a compile costs ~1 s)
DEPTH_CLASSES = [m for i, m in enumerate(DEPTH_ALL) if model_class(m) not in {model_class(n) for n in DEPTH_ALL[:i]}]


def constant_unit(halting: DepthHalting, p: float) -> None:
    """Make the halting unit output the constant probability ``p`` (weights 0, bias logit(p))."""
    with torch.no_grad():
        for lin in (halting.unit.fc1, halting.unit.fc2):
            lin.weight.zero_()
            lin.bias.zero_()
        halting.unit.fc2.bias.fill_(torch.logit(torch.tensor(p)).item())


def counting_step(h, s, rows):  # H_l = H_{l-1} + e_0: H_l = H_0 + l e_0
    e0 = torch.zeros(h.shape[-1])
    e0[0] = 1.0
    return h + e0


@pytest.mark.parametrize("mode", ["halt", "upperbound", "no-halt"])
@pytest.mark.parametrize("global_halt", [False, True])
def test_a_two_token_sequence_stops_at_length_plus_one(mode, global_halt):
    """Real length 2 (START / END counted as the mask counts them) -> 3 iterations at most, whatever
    max_iters; a unit that never halts then outputs H_3 (all weight on the last state)."""
    d, L = 4, 6
    h0 = torch.zeros(2, 5, d)
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    out = {}
    for rules in ("paper", "reference", "length-cap"):
        halting = DepthHalting(d, L, global_halt=global_halt, transition=True, causal=False, mode=mode, rules=rules)
        if halting.unit is not None:
            constant_unit(halting, 1e-7)  # never halts within L
        with torch.no_grad():
            out[rules] = halting(counting_step, h0, mask)
    for rules in ("reference", "length-cap"):
        res = out[rules]
        # sequence 0: capped after iteration 3 = length + 1; H_3 = 3 e_0 (weights 1e-7 * l: within 1e-5)
        torch.testing.assert_close(res.output[0, :2, 0], torch.full((2,), 3.0), atol=1e-5, rtol=0)
        assert res.depth[0].item() == pytest.approx(3.0)
        # sequence 1: length 5, cap 6 = L: not binding, the paper's outputs
        torch.testing.assert_close(res.output[1], out["paper"].output[1])
        assert res.depth[1].item() == pytest.approx(L)
    torch.testing.assert_close(out["paper"].output[0, :2, 0], torch.full((2,), float(L)), atol=1e-5, rtol=0)
    if mode != "no-halt":  # ponder = remainder (1 - ~0) * 3 iterations
        assert out["reference"].ponder[0].item() == pytest.approx(3.0, abs=1e-4)


@pytest.mark.parametrize("mode", ["halt", "upperbound"])
@pytest.mark.parametrize("global_halt,causal", [(False, False), (True, False), (True, True)])
def test_the_step_crossing_the_threshold_is_undone(mode, global_halt, causal):
    """alpha_hat = 0.95 at every iteration: totals 0.95, 0.9975, 0.999875 -> iteration 3 crosses
    0.999. paper keeps it: S_3 = .95 H_0 + .0475 H_1 + .002375 H_2 + .000125 H_3, ponder
    .95 + .095 + .007125 + .000125 * 3 = 1.0525, depth 3. reference undoes it: S_2 = .95 H_0 + .0475 H_1
    + .0025 H_2 = (.0475 + .005) e_0, ponder .95 + .095 + .0025 * 2 = 1.05, depth 2."""
    d = 4
    h0 = torch.zeros(1, 3, d)
    mask = torch.ones(1, 3, dtype=torch.bool)
    expect = {
        "paper": (0.0475 + 2 * 0.002375 + 3 * 0.000125, 1.0525, 3.0),
        "reference": (0.0475 + 2 * 0.0025, 1.05, 2.0),
        "undo-crossing": (0.0475 + 2 * 0.0025, 1.05, 2.0),
    }
    for rules, (s0, ponder, depth) in expect.items():
        halting = DepthHalting(d, 8, global_halt=global_halt, transition=False, causal=causal, mode=mode, rules=rules)
        constant_unit(halting, 0.95)
        with torch.no_grad():
            res = halting(counting_step, h0, mask)
        torch.testing.assert_close(res.output[0, :, 0], torch.full((3,), s0), atol=1e-6, rtol=0)
        assert res.ponder.item() == pytest.approx(ponder, abs=1e-6)
        assert res.depth.item() == pytest.approx(depth)


def code_loop(unit, step, h0, mask, L, *, global_halt, causal, transition, threshold=0.999):
    """The authors' depth loop (UniversalTransformerEncoder.forward lines 121-278, UTLBEncoder's inner
    loop alike), written out independently: every iteration computed tentatively, then a unit whose
    total reached ``threshold`` or whose iteration index (from 0) reached its length + 1 takes its
    state, mixture and ponder back from before the iteration. -> (S (B, T, d), ponder (B,))."""
    N, S, D = h0.shape
    m = mask.to(h0.dtype)
    lengths = m.sum(1)
    pooled = global_halt and not causal
    X = 1 if pooled else S
    seq, nxt = h0, h0
    not_halted, acc = torch.ones(N, X), torch.zeros(N, S, D)
    total, pen, slack = torch.zeros(N, X), torch.zeros(N, X), torch.zeros(N, X)

    def summary(x):  # what the halting unit reads of a state
        if not global_halt:
            return x
        if causal:
            return (x * m.unsqueeze(-1)).cumsum(1) / m.cumsum(1).clamp_min(1).unsqueeze(-1)
        return ((x * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True)).unsqueeze(1)

    for l in range(min(L, S + 1)):
        seq0, nxt0, pen0, slack0 = seq, nxt, pen, slack
        seq = step(seq0, nxt0, None)  # kv: nxt0 (the mixture) for token-level units, seq0 for global ones
        x = torch.cat([summary(seq0), summary(seq)], -1) if transition else summary(seq0)
        p = unit(x)  # (N, X)
        cur = not_halted * p
        acc = cur.unsqueeze(-1) * seq0 + acc
        total = total + cur
        not_halted = not_halted * (1 - p)
        pen = cur * (l + 1) + pen
        slack = (1 - total) * (l + 1)
        nxt = (1 - total).unsqueeze(-1) * seq + acc
        upd = (total < threshold) & (l < lengths + 1).unsqueeze(-1)
        if not pooled:
            upd = upd & mask
        pen, slack = torch.where(upd, pen, pen0), torch.where(upd, slack, slack0)
        seq, nxt = torch.where(upd.unsqueeze(-1), seq, seq0), torch.where(upd.unsqueeze(-1), nxt, nxt0)
        if not upd.any():
            break
    ponder = pen + slack
    if not pooled:
        ponder = (ponder * m).sum(1) / m.sum(1)
    return nxt, ponder.reshape(N)


@pytest.mark.parametrize("mode", ["halt", "upperbound"])
@pytest.mark.parametrize(
    "global_halt,causal,transition", [(False, False, False), (True, False, True), (True, True, True), (True, False, False)]
)
@pytest.mark.parametrize("bias", [-3.0, 0.0, 2.0])  # late, middle and early halting
def test_reference_rules_agree_with_the_code_loop(mode, global_halt, causal, transition, bias):
    """Outputs and ponder of ``rules="reference"`` = the code's loop, <= 1e-5, on a step that mixes
    positions (a frozen unit changes what the others see), sequences shorter than the bound (the cap
    binds: lengths 1, 2, 4 with max_iters 8) and units halting early."""
    torch.manual_seed(3)
    d, T, B, L = 8, 7, 4, 8
    lin, mix = torch.nn.Linear(d, d), torch.nn.Linear(d, d)

    def step(h, s, rows):  # H_l from H_{l-1} and the context's mean (every position reads every other);
        ctx = h if global_halt else s  # the context: S_{l-1} for token-level units (Alg. 1), else H_{l-1}
        return torch.tanh(lin(h) + mix(ctx.mean(1, keepdim=True)))

    h0 = torch.randn(B, T, d)
    lengths = torch.tensor([1, 2, 4, 7])
    mask = torch.arange(T) < lengths.unsqueeze(1)
    halting = DepthHalting(
        d, L, global_halt=global_halt, transition=transition, causal=causal, mode=mode, bias_init=bias, rules="reference"
    )
    with torch.no_grad():
        res = halting(step, h0, mask)
        want, ponder = code_loop(halting.unit, step, h0, mask, L, global_halt=global_halt, causal=causal, transition=transition)
    real = mask.unsqueeze(-1)
    torch.testing.assert_close(torch.where(real, res.output, 0), torch.where(real, want, 0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(res.ponder, ponder, atol=1e-5, rtol=1e-5)
    if bias == 0.0 and not causal:  # the rules bind here: the paper's outputs differ
        paper = DepthHalting(d, L, global_halt=global_halt, transition=transition, causal=causal, mode=mode, rules="paper")
        paper.load_state_dict(halting.state_dict())
        with torch.no_grad():
            assert (paper(step, h0, mask).output - res.output).abs().max() > 1e-3


def test_rules_are_checked():
    with pytest.raises(ValueError, match="unknown halting rules 'code'; choose one of paper, reference"):
        DepthHalting(4, 3, global_halt=True, transition=True, causal=False, rules="code")
    assert list(HALT_RULES)[0] == "paper" and HALT_RULES["reference"] == (True, True)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", DEPTH)
@pytest.mark.parametrize("mode", ["halt", "upperbound"])
def test_models_under_the_reference_rules_agree_with_the_code_loop(name, mode):
    """The registry's UT / GUT (and ablations), bidirectional, halt_rules=reference and no final norm
    (the code returns S_L itself): their output = the code's loop (``code_loop``) run with the model's
    own block, <= 1e-5, on sequences of 1, 2 and 3 real tokens under a bound of 8 (the cap binds)
    and a longer one, with a halting bias that makes some units halt early."""
    import bench
    from bench.models.depth import BlockIteration
    from bench.models.layers import positions_from_mask

    torch.manual_seed(0)
    model = bench.build_model(
        name,
        vocab_size=16,
        causal=False,
        d_model=16,
        n_heads=4,
        d_ff=32,
        dropout=0.0,
        max_layers=8,
        mode=mode,
        halt_bias_init=-0.5,
        halt_rules="reference",
        final_norm=False,
    ).eval()
    torch.nn.init.normal_(model.halting.unit.fc2.weight, std=1.0)
    tokens = torch.randint(3, 16, (4, 9))
    mask = torch.arange(9) < torch.tensor([1, 2, 3, 9]).unsqueeze(1)
    with torch.no_grad():
        got = model(tokens, mask)
        positions = positions_from_mask(mask)
        rope = None if model.rotary is None else model.rotary.tables(positions)
        step = BlockIteration(model.block, model.attend_to_mixture, False, rope, mask, mask=mask)
        h0 = model.embed(tokens, positions)
        h = model.halting
        want, ponder = code_loop(h.unit, step, h0, mask, h.max_iters, global_halt=h.global_halt, causal=False, transition=h.transition)
    real = mask.unsqueeze(-1)
    torch.testing.assert_close(torch.where(real, got.hidden, 0), torch.where(real, want, 0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.aux_loss, model.beta * ponder.mean(), atol=1e-6, rtol=1e-5)
    assert got.stats["halt_depth"][:3].max() <= 4  # lengths 1, 2, 3: at most n + 1 iterations


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", DEPTH_CHUNKED)
@pytest.mark.parametrize("mode", ["halt", "upperbound"])
def test_chunked_depth_under_the_reference_rules_caps_each_chunk_as_the_code(name, mode):
    """GUTLB (every family with depth recurrence inside chunks), bidirectional, halt_rules=reference: each
    chunk's depth loop = the code's loop (UTLBEncoder.py's inner loop: ``code_loop`` with the chunk's real
    length) run with the model's own block and memory read, chunk after chunk, the memory updated in between; chunks of 4 with
    4, 1 (one real token: capped at 2 iterations) and 3 real tokens, a bound of 5."""
    import bench
    from bench.models.depth import BlockIteration
    from bench.models.layers.positional import RotaryTables

    torch.manual_seed(0)
    model = bench.build_model(
        name,
        vocab_size=16,
        causal=False,
        d_model=16,
        n_heads=4,
        d_ff=32,
        dropout=0.0,
        max_layers=5,
        mode=mode,
        halt_bias_init=-1.0,
        halt_rules="reference",
        chunk_size=4,
        memory_slots=3,
    ).eval()
    tokens = torch.randint(3, 16, (3, 5))
    mask = torch.arange(5) < torch.tensor([5, 1, 3]).unsqueeze(1)
    h = model.halting
    with torch.no_grad():
        got = model(tokens, mask)
        chunks, masks, tables = model.split(tokens, mask)
        memory, outs = model.initial_memory(3), []
        for t, w in enumerate([4, 1]):
            rope = RotaryTables(*(None if x is None else x[t, :, :w].unsqueeze(1) for x in tables))
            m_t = masks[t, :, :w]
            step = BlockIteration(model.block, model.attend_to_mixture, False, rope, m_t, model.block.read.keys_values(memory), m_t)
            s_l, _ = code_loop(h.unit, step, chunks[t, :, :w], m_t, h.max_iters, global_halt=True, causal=False, transition=True)
            outs.append(s_l)
            memory = model.update_memory(memory, s_l, m_t, m_t.any(-1))
        want = model.ln_out(torch.cat(outs, 1))
    real = mask.unsqueeze(-1)
    torch.testing.assert_close(torch.where(real, got.hidden, 0), torch.where(real, want, 0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.pooled, model.summary(memory), atol=1e-5, rtol=1e-5)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", DEPTH_CLASSES)
def test_the_compiled_iteration_keeps_the_reference_rules(name):
    """``model.compile`` (one compiled depth iteration, here dynamo with the eager backend) gives the
    eager forward's outputs under halt_rules=reference: the carry's length cap travels with it."""
    import bench

    torch.manual_seed(0)
    kw = dict(
        vocab_size=16, causal=False, d_model=16, n_heads=4, d_ff=32, dropout=0.0, max_layers=6, halt_bias_init=-1.0, halt_rules="reference"
    )
    model = bench.build_model(name, chunk_size=4, **kw) if name in DEPTH_CHUNKED else bench.build_model(name, **kw)
    model.eval()
    tokens = torch.randint(3, 16, (3, 7))
    mask = torch.arange(7) < torch.tensor([7, 2, 5]).unsqueeze(1)
    with torch.no_grad():
        eager = model(tokens, mask)
        torch._dynamo.reset()
        model.compile(backend="eager")
        compiled = model(tokens, mask)
    real = mask.unsqueeze(-1)  # padding positions are not defined alike (compiled chunks are padded to g)
    torch.testing.assert_close(torch.where(real, compiled.hidden, 0), torch.where(real, eager.hidden, 0), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(compiled.stats["halt_depth"], eager.stats["halt_depth"])
    torch.testing.assert_close(compiled.aux_loss, eager.aux_loss)
