"""Streaming TLB's loop over chunks (every streaming family built on it: ``CHUNKED``): the chunk bookkeeping
of ``step`` against the full forward.

A piece that crosses several chunk boundaries (or ends on one) gives token-by-token streaming's
states; a step's ``pooled`` is forward's on the prefix, mid-chunk and on a boundary, and is
computed only when read; ``TransformerBlock.step`` (with and without the TLB memory read) equals
the block's forward. The generic streamed == forward checks are in ``test_streaming.py``.
"""

import pytest
import torch
from conformance import model_class, models
from streaming_helpers import TOL, T, build, stream, tokens_for

from bench.models.chunked import ChunkRecurrent

pytestmark = pytest.mark.usefixtures("one_thread")

#: every streaming family built on TLB's loop over fixed chunks (bench/models/chunked.py): TLB, its RSA host, GUTLB
CHUNKED = [m for m in models(supports_streaming=True) if issubclass(model_class(m), ChunkRecurrent)]


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", CHUNKED)
def test_tlb_piece_across_several_chunks_equals_token_by_token(name):
    """One step whose piece crosses three chunk boundaries (chunks of 5: positions 2..16) gives
    the states of token-by-token streaming; so does a piece ending exactly on a boundary."""
    model = build(name)
    tokens = tokens_for(8)
    with torch.no_grad():
        one_by_one, _ = stream(model, tokens, [1] * T)
        across, _ = stream(model, tokens, [2, 14, 7])
        on_boundary, _ = stream(model, tokens, [3, 12, 8])
    assert (across - one_by_one).abs().max().item() < TOL
    assert (on_boundary - one_by_one).abs().max().item() < TOL


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", CHUNKED)
@pytest.mark.parametrize("length", [12, 15])
def test_tlb_step_pools_as_forward_on_the_prefix(name, length):
    """A step's ``pooled`` is forward's on the whole prefix: mid-chunk (12), the partial chunk
    updates the memory as in forward (the state keeps the memory of completed chunks); on a
    boundary (15), the memory of the completed chunks."""
    model = build(name)
    tokens = tokens_for(9, length=length)
    with torch.no_grad():
        state, out = model.init_state(2), None
        for start in range(0, length, 4):
            out, state = model.step(tokens[:, start : start + 4], state)
        full = model(tokens)
    assert state["pos"] == length % model.chunk_size
    assert (out.pooled - full.pooled).abs().max().item() < TOL


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", CHUNKED)
def test_tlb_step_pools_only_when_read(name):
    """A step's ``pooled`` is computed on demand: token-by-token steps update the memory only at chunk
    boundaries; the first read of ``pooled`` (here outside the inference mode the step ran in) adds the
    one partial-chunk update and gives forward's value on the prefix."""
    model = build(name)
    g = model.chunk_size
    tokens = tokens_for(9, length=2 * g + 2)
    with torch.inference_mode():
        full = model(tokens)
    calls = []
    update = model.update_memory
    model.update_memory = lambda *a, **k: (calls.append(1), update(*a, **k))[1]
    with torch.inference_mode():
        state = model.init_state(2)
        for start in range(tokens.shape[1]):
            out, state = model.step(tokens[:, start : start + 1], state)
    assert len(calls) == 2  # the two completed chunks
    assert (out.pooled - full.pooled).abs().max().item() < TOL
    assert len(calls) == 3 and out.pooled is out.pooled  # computed once


@pytest.mark.parametrize("read", [False, True])
def test_block_step_equals_block_forward(read):
    """TransformerBlock.step (with the TLB memory read when the block has one) against the block's
    forward over the whole chunk, with rotary positions."""
    from bench.models.layers import Rotary, TransformerBlock

    torch.manual_seed(0)
    block = TransformerBlock(16, 2, 32, read=read).eval()
    rotary = Rotary(8, use_xpos=False)
    x, memory = torch.randn(2, 13, 16), torch.randn(2, 3, 16)
    with torch.no_grad():
        full = block(x, rope=rotary.tables(torch.arange(13)), causal=True, memory=memory)
        cache, outs, n = block.init_cache(2), [], 0
        for t in (1, 5, 7):
            y, cache = block.step(x[:, n : n + t], cache, rope=rotary.tables(torch.arange(n, n + t)), memory=memory)
            outs.append(y)
            n += t
    assert (torch.cat(outs, dim=1) - full).abs().max().item() < TOL
