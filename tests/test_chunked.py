"""Chunk-recurrent families: every registry entry whose class declares ``recurrence = "chunk"``
(Transformer-XL, the Block-Recurrent Transformer, TLB / TLB-FR and their RSA hosts today).

What is checked: the relative attention equals a direct computation of Dai et al.'s four
terms; causal variants never read ahead; feeding a sequence segment by segment (carrying the
memory / state by hand) gives the whole-sequence outputs, and so do shorter prefixes cut at a
segment boundary; padding never changes real outputs or the memory; XL with an unbounded
memory is exactly a full causal relative-position Transformer; every family learns a task
that can only be solved through its cross-segment memory.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conformance import REG, model_class, models

import bench
from bench.models.brt import BlockRecurrentTransformer, FixedGate, LSTMGate
from bench.models.layers.relative import RelativeAttention, sinusoid
from bench.models.tlb import TLB
from bench.models.xl import TransformerXL
from bench.registry import constructor_params

torch.set_num_threads(1)
V = 12
SMALL = dict(d_model=32, n_heads=4, d_ff=64, dropout=0.0)
RSA = {"kinds": [2, 1, 1, 0, 0, 0], "mu_init": 0.0}
# the tiny sizes of any chunk family, for whichever of them it takes: windows of 5 tokens, so that
# the inputs below cross several
TINY = dict(SMALL, n_layers=2, segment_len=5, mem_len=5, block_size=5, n_state=4, chunk_size=5, memory_slots=4)
CHUNK = models(recurrence="chunk")
FIXED_CHUNKS = [m for m in CHUNK if model_class(m).supports_streaming]  # TLB-FR: its chunks follow the whole length


def build(name, causal, seed=0, **kw):
    """Registry entry ``name`` with the tiny sizes it takes (the entry's own values kept), eval mode."""
    torch.manual_seed(seed)
    accepted, fixed = constructor_params(model_class(name)), REG.model_entry(name)["params"]
    tiny = {k: v for k, v in TINY.items() if k in accepted and k not in fixed}
    return bench.build_model(name, vocab_size=V, causal=causal, **{**tiny, **kw}).eval()


def naive_relative_attention(att: RelativeAttention, x, ctx, causal, key_mask):
    """Dai et al. §3.3 term by term, with R_{i-j} built explicitly for every (i, j) pair."""
    mha = att.mha
    B, Tq, _ = x.shape
    Tk = ctx.shape[1]
    H, hd = mha.n_heads, mha.head_dim
    q = mha.split_heads(mha.q_proj(x))  # (B, H, Tq, hd)
    k, v = mha.split_heads(mha.k_proj(ctx)), mha.split_heads(mha.v_proj(ctx))
    i = torch.arange(Tq).view(Tq, 1) + (Tk - Tq)
    j = torch.arange(Tk).view(1, Tk)
    R = att.r_proj(sinusoid((i - j).flatten(), att.d_model)).view(Tq, Tk, H, hd).permute(2, 0, 1, 3)  # (H, Tq, Tk, hd)
    a = q @ k.transpose(-1, -2)
    b = torch.einsum("bhid,hijd->bhij", q, R)
    c = att.u @ k.transpose(-1, -2)  # (B, H, 1, Tk)
    d = torch.einsum("hxd,hijd->hij", att.v, R)
    scores = (a + b + c + d) / math.sqrt(hd)
    allowed = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
    if causal:
        allowed = allowed & (j <= i)
    if key_mask is not None:
        allowed = allowed & key_mask.view(B, 1, 1, Tk)
    out = scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v
    if mha.rsa is not None:  # RSA: (1 - s) softmax + s P with the non-square REM [RSA App. D.2]
        s = torch.sigmoid(mha.rsa.mu)
        vr = v if key_mask is None else v * key_mask.view(B, 1, Tk, 1)
        out = (1 - s) * out + s * (mha.rsa.rem.matrix(Tq, Tk, Tk - Tq, causal) @ vr)
    return mha.o_proj(mha.merge_heads(out))


@pytest.mark.parametrize("rsa", [None, RSA])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("backend", ["sdpa", "math"])
def test_relative_attention_matches_direct_computation(causal, backend, rsa):
    torch.manual_seed(0)
    att = RelativeAttention(32, 4, backend=backend, rsa=rsa).eval()
    x, mem = torch.randn(2, 6, 32), torch.randn(2, 4, 32)
    ctx = torch.cat((mem, x), 1)
    key_mask = torch.ones(2, 10, dtype=torch.bool)
    key_mask[1, 8:] = False
    got = att(x, ctx, causal=causal, key_mask=key_mask)
    want = naive_relative_attention(att, x, ctx, causal, key_mask)
    torch.testing.assert_close(got[:, :], want, atol=1e-5, rtol=1e-4)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", CHUNK)
def test_causal_models_never_read_ahead(name):
    model = build(name, causal=True)
    tokens = torch.randint(1, V, (2, 23))
    for p in (0, 4, 5, 11, 17):
        changed = tokens.clone()
        changed[:, p + 1 :] = torch.randint(1, V, changed[:, p + 1 :].shape)
        a, b = model(tokens).hidden, model(changed).hidden
        torch.testing.assert_close(a[:, : p + 1], b[:, : p + 1], atol=1e-5, rtol=1e-5)
        assert not torch.allclose(a[:, p + 1 :], b[:, p + 1 :], atol=1e-4)


def stream(model, tokens, size):
    """Feed ``tokens`` piece by piece through the family's one-step method, carrying state by hand."""
    B, outs = tokens.shape[0], []
    mask = torch.ones_like(tokens, dtype=torch.bool)
    state = {"xl": None}
    if isinstance(model, BlockRecurrentTransformer):
        state = model.initial_state(B)
    elif isinstance(model, TLB):
        state = model.initial_memory(B)
    for s in range(0, tokens.shape[1], size):
        piece, m = tokens[:, s : s + size], mask[:, s : s + size]
        if isinstance(model, TransformerXL):
            h, state = model.forward_segment(piece, m, None if isinstance(state, dict) else state)
        elif isinstance(model, BlockRecurrentTransformer):
            h, state = model.forward_block(piece, m, state)
        else:
            h, state = model.forward_chunk(piece, m, state)
        outs.append(h)
    return torch.cat(outs, 1)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", FIXED_CHUNKS)
def test_segment_by_segment_equals_whole_and_prefixes(name, causal):
    model = build(name, causal)
    tokens = torch.randint(1, V, (3, 22))
    whole = model(tokens).hidden
    torch.testing.assert_close(stream(model, tokens, 5), whole, atol=1e-5, rtol=1e-5)
    # Even a bidirectional model only reads earlier segments: cutting at a boundary changes nothing before it.
    for cut in (5, 10, 15):
        torch.testing.assert_close(model(tokens[:, :cut]).hidden, whole[:, :cut], atol=1e-5, rtol=1e-5)


def test_xl_with_unbounded_memory_is_a_full_causal_transformer():
    # Detached memory changes gradients, never values: segment_len 4 with all of the past in
    # memory computes exactly what one causal pass over the whole sequence computes.
    torch.manual_seed(0)
    seg = TransformerXL(V, True, n_layers=3, segment_len=4, mem_len=64, **SMALL).eval()
    full = TransformerXL(V, True, n_layers=3, segment_len=64, mem_len=64, **SMALL).eval()
    full.load_state_dict(seg.state_dict())
    tokens = torch.randint(1, V, (2, 19))
    torch.testing.assert_close(seg(tokens).hidden, full(tokens).hidden, atol=1e-5, rtol=1e-5)
    # ... and a short memory really forgets: the first token no longer reaches position 18.
    short = TransformerXL(V, True, n_layers=1, segment_len=4, mem_len=4, **SMALL).eval()
    changed = tokens.clone()
    changed[:, 0] = (changed[:, 0] % (V - 1)) + 1
    torch.testing.assert_close(short(tokens).hidden[:, 18], short(changed).hidden[:, 18])


def test_xl_memory_is_detached():
    model = build("xl", True)
    _, memory = model.forward_segment(torch.randint(1, V, (2, 5)), torch.ones(2, 5, dtype=torch.bool))
    assert all(not m.requires_grad for m in memory.mems)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", CHUNK)
def test_padding_changes_nothing_real(name, causal):
    model = build(name, causal)
    short = torch.randint(1, V, (1, 12))
    padded = torch.cat((short, torch.zeros(1, 8, dtype=torch.long)), 1)
    mask = padded != 0
    other = torch.randint(1, V, (1, 20))  # a full-length neighbour in the batch
    out = model(torch.cat((padded, other)), torch.cat((mask, torch.ones_like(mask))))
    ref = model(short)
    ref_hidden, ref_pooled = ref.hidden, ref.pooled
    torch.testing.assert_close(out.hidden[:1, :12], ref_hidden[:, :12], atol=1e-5, rtol=1e-5)
    if ref_pooled is not None:  # TLB: all-padding chunks never touch the memory
        torch.testing.assert_close(out.pooled[:1], ref_pooled, atol=1e-5, rtol=1e-5)


def test_tlb_memory_and_pooling():
    model = build("tlb", causal=False)
    tokens = torch.randint(1, V, (2, 12))
    out = model(tokens)
    memory = model.initial_memory(2)
    for s in range(0, 12, 5):
        _, memory = model.forward_chunk(tokens[:, s : s + 5], torch.ones(2, len(range(s, min(s + 5, 12))), dtype=torch.bool), memory)
    torch.testing.assert_close(out.pooled, model.ln_mem(memory).mean(1))
    assert out.stats["n_chunks"] == 3.0
    # TLB-FR always makes 5 chunks, whatever the length.
    fr = build("tlb-fr", causal=True)
    assert fr(torch.randint(1, V, (1, 23))).stats["n_chunks"] == 5.0
    assert fr(torch.randint(1, V, (1, 60))).stats["n_chunks"] == 5.0


def test_brt_gates_follow_their_equations():
    torch.manual_seed(0)
    c, h = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    fixed = FixedGate(8)
    g = torch.sigmoid(fixed.b_g)
    torch.testing.assert_close(fixed(c, h), c * g + fixed.z(h) * (1 - g))
    lstm = LSTMGate(8)
    z, i, f = lstm.proj(h).chunk(3, -1)
    torch.testing.assert_close(lstm(c, h), c * torch.sigmoid(f + 1) + torch.tanh(z) * torch.sigmoid(i - 1))


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, params, lr, steps, threshold",
    [
        ("xl", dict(n_layers=1), 3e-3, 150, 0.95),
        ("brt", dict(n_layers=2), 3e-3, 200, 0.95),
        # TLB must squeeze the chunk through 8 position-free slots: slower to learn; chance is 1/11.
        ("tlb", dict(memory_slots=8), 1e-2, 200, 0.6),
    ],
)
def test_learns_to_recall_the_previous_segment(name, params, lr, steps, threshold):
    """Causal LM on [a b c d e | a b c d e]: predicting the second half needs the first half,
    which sits in another segment/block/chunk, so only the carried memory can supply it."""
    torch.manual_seed(0)
    window = dict(segment_len=5, mem_len=5, n_layers=2, block_size=5, n_state=4, chunk_size=5, memory_slots=4)
    accepted = constructor_params(model_class(name))
    model = model_class(name)(V, True, **SMALL, **{k: v for k, v in {**window, **params}.items() if k in accepted})
    head = torch.nn.Linear(32, V)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=lr)

    def batch(n):
        first = torch.randint(1, V, (n, 5))
        seq = torch.cat((first, first), 1)  # (n, 10)
        return seq[:, :-1], seq[:, 1:]

    for _ in range(steps):
        x, y = batch(32)
        logits = head(model(x).hidden)
        loss = F.cross_entropy(logits[:, 5:].reshape(-1, V), y[:, 5:].reshape(-1))  # positions 5..8 read segment 1
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    x, y = batch(256)
    acc = (head(model(x).hidden)[:, 5:].argmax(-1) == y[:, 5:]).float().mean().item()
    assert acc > threshold, f"{name} recalled only {acc:.2f} of the previous segment"
