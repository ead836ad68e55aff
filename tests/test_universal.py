"""UT / GUT (and GUTLB when TLB's memory layers exist): halting behaviour, modes, causality, learning."""

import pytest
import torch
from conformance import MODELS, REG, model_class

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


# ---- the fast executor against the algorithm as printed (``reference_forward``) ------------------

# every registry entry of UT's class (UT, GUT and GUT's ablations): its class and the settings its entry fixes
VARIANTS = {m: (model_class(m), REG.model_entry(m)["params"]) for m in MODELS if issubclass(model_class(m), UT)}
LENGTHS = [11, 7, 2, 1]  # padding, and sequences short enough for the length cap to bind at max_layers 6


def reference_case(cls, causal, seed, **kw):
    """A float64 model whose halting units spread their depths over 1..max_layers, and a padded batch."""
    torch.manual_seed(seed)
    model = cls(20, causal, max_layers=6, halt_bias_init=0.5, **{**SMALL, **kw}).eval().double()
    if model.halting.unit is not None:
        torch.nn.init.normal_(model.halting.unit.fc1.weight, std=1.0)
        torch.nn.init.normal_(model.halting.unit.fc2.weight, std=1.5)
    g = torch.Generator().manual_seed(seed)
    mask = torch.arange(11) < torch.tensor(LENGTHS).unsqueeze(1)
    return model, torch.randint(3, 20, (len(LENGTHS), 11), generator=g) * mask, mask


def assert_equal_outputs(got, want, mask, tol=1e-12):
    """hidden at the real positions, pooled, the ACT loss and halt_depth of two outputs agree to ``tol``."""
    real = mask.unsqueeze(-1)
    torch.testing.assert_close(torch.where(real, got.hidden, 0), torch.where(real, want.hidden, 0), atol=tol, rtol=0)
    if want.pooled is not None:
        torch.testing.assert_close(got.pooled, want.pooled, atol=tol, rtol=0)
    # (no-halt's forward reports its zero ponder and fixed depth in the default dtype)
    torch.testing.assert_close(got.aux_loss, want.aux_loss, atol=tol, rtol=0, check_dtype=False)
    torch.testing.assert_close(got.stats["halt_depth"], want.stats["halt_depth"], atol=tol, rtol=0, check_dtype=False)


@pytest.mark.parametrize("mode", ["halt", "upperbound", "no-halt"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", list(VARIANTS))
def test_forward_equals_the_algorithm_as_printed(name, causal, mode):
    """Alg. 1 / 3 as printed (``reference_forward``: every sequence at every iteration, S_l the mixture
    of the stored H_0..H_l, the block's equations written out) = ``forward`` (sequences leaving the
    batch as they halt, pool(H_{l-1}) carried over, the shared block), float64 to 1e-12, under every
    halting rule, three seeds; the depths spread (not every unit at 1 or at the bound) where halting runs."""
    cls, kw = VARIANTS[name]
    depths = set()
    for rules in ("paper", "reference", "length-cap", "undo-crossing"):
        for seed in range(3):
            model, tokens, mask = reference_case(cls, causal, seed, mode=mode, halt_rules=rules, **kw)
            with torch.no_grad():
                got, want = model(tokens, mask), model.reference_forward(tokens, mask)
            assert_equal_outputs(got, want, mask)
            depths |= set(got.stats["halt_depth"].tolist())
    if mode != "no-halt":
        assert min(depths) < 4 and max(depths) > 4, depths


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name,causal", [(m, i % 2 == 1) for i, m in enumerate(VARIANTS)])  # causal and not, alternately
def test_the_compiled_iteration_equals_the_algorithm_as_printed(name, causal):
    """``compile`` (one compiled depth iteration reused for every l, rows dropping as units halt) =
    ``reference_forward``, float64."""
    cls, kw = VARIANTS[name]
    model, tokens, mask = reference_case(cls, causal, 0, **kw)
    with torch.no_grad():
        want = model.reference_forward(tokens, mask)
        torch._dynamo.reset()
        model.compile(backend="eager")
        got = model(tokens, mask)
    assert_equal_outputs(got, want, mask)


@pytest.mark.parametrize("rules", ["paper", "undo-crossing"])
@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_stream_equals_the_algorithm_as_printed(name, rules):
    """Causal ``step`` fed in pieces of 1, 4 and 6 tokens = ``reference_forward`` on the whole (unpadded)
    sequences, float64 (the length cap needs the whole length: a stream applies the undo rule only)."""
    cls, kw = VARIANTS[name]
    model, tokens, _ = reference_case(cls, True, 1, halt_rules=rules, **kw)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    with torch.no_grad():
        want = model.reference_forward(tokens, mask)
        state, outs, start = model.init_state(tokens.shape[0]), [], 0
        for size in (1, 4, 6):
            out, state = model.step(tokens[:, start : start + size], state)
            outs.append(out.hidden)
            start += size
    torch.testing.assert_close(torch.cat(outs, 1), want.hidden, atol=1e-12, rtol=0)


def test_the_reference_forward_is_the_eval_mode_one():
    model = UT(20, False, **SMALL)  # training mode: dropout would make it another function
    with pytest.raises(RuntimeError, match=r"eval-mode forward .*model.eval\(\)"):
        model.reference_forward(*batch())


@pytest.mark.parametrize("mode", ["halt", "upperbound", "no-halt"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kw", [{}, {"global_halt": False}, {"transition": False}])
def test_gutlb_forward_equals_alg4_as_printed(kw, causal, mode):
    """GUTLB's Alg. 4 as printed (``ChunkRecurrent.reference_forward`` around ``GUTLB.reference_stack``:
    chunk after chunk, the depth loop on the chunk, the memory update written out) = ``forward``
    (halted units frozen with one exit check per chunk, memory keys / values once per chunk, layer
    statistics), float64 to 1e-12, under the paper's and the code's halting rules, chunks of 4 over
    11 tokens with padding (a chunk of one real token, chunks of padding only)."""
    from bench.models.gutlb import GUTLB

    for rules in ("paper", "reference"):
        for seed in range(2):
            torch.manual_seed(seed)
            model = GUTLB(20, causal, chunk_size=4, memory_slots=3, update_layers=2, max_layers=5, halt_bias_init=0.5, mode=mode,
                          halt_rules=rules, **SMALL, **kw).eval().double()  # fmt: skip
            if model.halting.unit is not None:
                torch.nn.init.normal_(model.halting.unit.fc1.weight, std=1.0)
            mask = torch.arange(11) < torch.tensor([11, 9, 5, 1]).unsqueeze(1)
            tokens = torch.randint(3, 20, (4, 11), generator=torch.Generator().manual_seed(seed)) * mask
            with torch.no_grad():
                got, want = model(tokens, mask), model.reference_forward(tokens, mask)
            assert_equal_outputs(got, want, mask)


def test_the_compiled_gutlb_equals_alg4_as_printed():
    """GUTLB's ``compile`` (one compiled depth iteration and memory update, every chunk padded to g) =
    ``reference_forward``, float64."""
    from bench.models.gutlb import GUTLB

    torch.manual_seed(0)
    model = GUTLB(20, False, chunk_size=4, memory_slots=3, max_layers=5, halt_bias_init=0.5, **SMALL).eval().double()
    torch.nn.init.normal_(model.halting.unit.fc1.weight, std=1.0)
    mask = torch.arange(11) < torch.tensor([11, 9, 5, 1]).unsqueeze(1)
    tokens = torch.randint(3, 20, (4, 11), generator=torch.Generator().manual_seed(0)) * mask
    with torch.no_grad():
        want = model.reference_forward(tokens, mask)
        torch._dynamo.reset()
        model.compile(backend="eager")
        got = model(tokens, mask)
    assert_equal_outputs(got, want, mask)
