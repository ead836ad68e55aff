"""Issue 25 (the chunk- and depth-recurrent families at the Transformer's pace): the cheaper code
paths compute what the plain ones did."""

import pytest
import torch
from torch import nn

from bench.cost import OpCounter
from bench.models.gutlb import GUTLB
from bench.models.layers.attention import MultiHeadAttention
from bench.models.layers.dropout import Dropout
from bench.models.layers.positional import Rotary, apply_rotary


def test_native_dropout_draws_nn_dropouts_mask():
    """One kernel per call: the mask nn.Dropout draws from the same generator state, the kept values
    within an ulp, the input itself in eval mode."""
    x = torch.randn(3, 7, 33)
    for p in (0.1, 0.15, 0.5):
        torch.manual_seed(1)
        a = nn.Dropout(p).train()(x)
        torch.manual_seed(1)
        b = Dropout(p).train()(x)
        assert torch.equal(a == 0, b == 0)
        torch.testing.assert_close(a, b, rtol=1e-6, atol=0)
    assert Dropout(0.1).eval()(x) is x


def test_fused_self_attention_projections_match_three_linears():
    """One matmul against [W_q; W_k; W_v] and q, k rotated together = three projections + apply_rotary."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(32, 4)
    x = torch.randn(2, 9, 32)
    rope = Rotary(8, use_xpos=True).tables(torch.arange(9).expand(2, 9))
    q, k, v = attn.self_qkv(x, rope)
    q0, k0 = apply_rotary(attn.split_heads(attn.q_proj(x)), attn.split_heads(attn.k_proj(x)), rope)
    torch.testing.assert_close(q, q0, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k, k0, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(v, attn.split_heads(attn.v_proj(x)), rtol=1e-6, atol=1e-6)


def _gutlb(mode: str) -> GUTLB:
    torch.manual_seed(0)
    return GUTLB(11, causal=True, d_model=32, n_heads=4, d_ff=64, max_layers=4, chunk_size=5, memory_slots=4, mode=mode).eval()


def test_gutlb_halt_freezes_with_one_sync_per_chunk():
    """halt mode = upperbound's outputs (halted units frozen), with at most one host sync per chunk;
    upperbound and no-halt none at all."""
    tokens = torch.randint(1, 11, (2, 23))  # 5 chunks, the last one 3 tokens long
    mask = torch.ones(2, 23, dtype=torch.bool)
    mask[1, 17:] = False
    outs = {}
    for mode in ("halt", "upperbound", "no-halt"):
        model = _gutlb(mode)
        if model.halting.unit is not None:
            model.halting.unit.fc2.bias.data.fill_(4.0)  # alpha_hat ~ 0.98: every unit halts after 2 iterations
        with torch.no_grad(), OpCounter() as counter:
            outs[mode] = model(tokens, mask)
        assert counter.syncs <= (5 if mode == "halt" else 0), (mode, counter.sync_names)
    assert torch.equal(outs["halt"].hidden, outs["upperbound"].hidden)
    assert torch.equal(outs["halt"].stats["halt_depth"], outs["upperbound"].stats["halt_depth"])
    assert float(outs["halt"].stats["halt_depth"].max()) < 4  # the early-exit check had something to stop


def test_compiled_chunk_step_compiles_once_for_every_length():
    """TLB.compile compiles the chunk step, not the forward: chunks padded to g share one graph, so
    a new length compiles nothing; the outputs are the eager ones (to float rounding)."""
    import torch._dynamo as dynamo

    import bench

    torch.manual_seed(0)
    model = bench.build_model(
        "tlb", vocab_size=11, causal=True, d_model=16, d_ff=24, dropout=0.0, n_layers=1, chunk_size=5, memory_slots=3
    ).eval()
    batches = eager_batches_then_compile(model)
    for tokens, mask, ref in batches:
        out = model(tokens, mask)
        torch.testing.assert_close(out.hidden, ref.hidden, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out.pooled, ref.pooled, rtol=1e-5, atol=1e-5)
    assert dynamo.utils.counters["stats"]["unique_graphs"] == 1


def test_gutlb_compiles_one_depth_iteration_for_every_iteration_chunk_and_length():
    """GUTLB.compile (here by aot_eager: dynamo and AOTAutograd's graphs without inductor's codegen,
    which the TLB test above runs) compiles one depth iteration (block + halting update) and the
    memory update, each once: every iteration of every chunk of every length reuses them (the depth
    loop and halt mode's exit check run in Python between calls); the outputs are the eager ones (to
    float rounding; the padding positions of the last chunk excepted: compiled, it is padded to g)."""
    import torch._dynamo as dynamo

    for mode, causal in (("halt", True), ("upperbound", False)):  # per-position units; one per sequence (pool carried)
        torch.manual_seed(0)
        model = GUTLB(
            11, causal=causal, d_model=16, n_heads=4, d_ff=24, max_layers=4, chunk_size=5, memory_slots=3, dropout=0.0, mode=mode
        ).eval()
        batches = eager_batches_then_compile(model, backend="aot_eager")
        for tokens, mask, ref in batches:
            out = model(tokens, mask)  # grad enabled: the carry requires grad from iteration 1 on, as later
            torch.testing.assert_close(out.hidden[mask], ref.hidden[mask], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out.pooled, ref.pooled, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out.aux_loss, ref.aux_loss, rtol=1e-5, atol=1e-5)
            for k in ("halt_depth", "gate_mean"):
                torch.testing.assert_close(out.stats[k], ref.stats[k], rtol=1e-5, atol=1e-5)
        assert dynamo.utils.counters["stats"]["unique_graphs"] == 2, (mode, dict(dynamo.utils.counters["stats"]))


@pytest.mark.slow
def test_ut_gut_compile_one_depth_iteration():
    """UT / GUT .compile (here by aot_eager, as the GUTLB test) compiles one depth iteration, reused by
    every iteration and batch of a length (one graph); in halt mode, a batch that drops finished
    rows compiles it once more (dynamic batch size); the outputs are the eager ones (to float
    rounding)."""
    import torch._dynamo as dynamo

    import bench

    for name, mode, causal, graphs in (("ut", "halt", False, 2), ("gut", "upperbound", True, 1)):
        torch.manual_seed(0)
        model = bench.build_model(name, vocab_size=11, causal=causal, d_model=16, d_ff=24, dropout=0.0, max_layers=4, mode=mode).eval()
        model.halting.unit.fc2.weight.data *= 20  # halting probabilities far apart: rows finish at different depths
        model.halting.unit.fc2.bias.data.fill_(4.0)
        batches = []
        for seed in (1, 2):  # halt: the one-token row 2 finishes after iteration 2 in both, the others run on
            g = torch.Generator().manual_seed(seed)
            tokens, mask = torch.randint(1, 11, (3, 12), generator=g), torch.ones(3, 12, dtype=torch.bool)
            mask[1, 9:] = False
            mask[2, 1:] = False
            batches.append((tokens, mask, model(tokens, mask)))
        dynamo.reset()
        dynamo.utils.counters.clear()
        model.compile(backend="aot_eager")
        for tokens, mask, ref in batches:
            out = model(tokens, mask)
            torch.testing.assert_close(out.hidden[mask], ref.hidden[mask], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out.aux_loss, ref.aux_loss, rtol=1e-5, atol=1e-5)
            for k in ref.stats:
                torch.testing.assert_close(out.stats[k], ref.stats[k], rtol=1e-5, atol=1e-5)
        assert dynamo.utils.counters["stats"]["unique_graphs"] == graphs, (name, dict(dynamo.utils.counters["stats"]))


def test_cpu_dropout_attention_is_sdpas():
    """attend's CPU path with attention dropout = F.scaled_dot_product_attention (same dropout mask
    from the same generator state), outputs and gradients, causal or not, with and without a key mask."""
    import torch.nn.functional as F

    from bench.models.layers.attention import _allowed, attend

    torch.manual_seed(0)
    for causal in (True, False):
        for Tq, Tk, padded in ((10, 10, False), (7, 10, False), (10, 10, True)):
            q, k, v = (torch.randn(2, 4, T, 16, requires_grad=True) for T in (Tq, Tk, Tk))
            key_mask = torch.arange(Tk).expand(2, Tk) < torch.tensor([[Tk], [Tk - 3]]) if padded else None
            torch.manual_seed(1)
            a = attend(q, k, v, causal=causal, key_mask=key_mask, dropout_p=0.1)
            torch.manual_seed(1)
            if key_mask is None and (not causal or Tq == Tk):
                b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=causal)
            else:
                b = F.scaled_dot_product_attention(q, k, v, attn_mask=_allowed(2, Tq, Tk, causal, key_mask, q.device), dropout_p=0.1)
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
            for ga, gb in zip(torch.autograd.grad(a.square().sum(), (q, k, v)), torch.autograd.grad(b.square().sum(), (q, k, v))):
                torch.testing.assert_close(ga, gb, rtol=1e-5, atol=1e-6)


def eager_batches_then_compile(model, backend="inductor"):
    """(tokens, mask, eager output) at two lengths (the second row padded), then a fresh compile
    of ``model`` by ``backend`` with dynamo's graph counter cleared of other tests' graphs."""
    import torch._dynamo as dynamo

    batches = []
    for T in (12, 14):
        tokens, mask = torch.randint(1, 11, (2, T)), torch.ones(2, T, dtype=torch.bool)
        mask[1, T - 3 :] = False
        batches.append((tokens, mask, model(tokens, mask)))
    dynamo.reset()
    dynamo.utils.counters.clear()
    model.compile(backend=backend)
    return batches
