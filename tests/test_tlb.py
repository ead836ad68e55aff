"""TLB, RSA-TLB and TLB-FR against Alg. 2 as printed (``ChunkRecurrent.reference_forward`` around
``TLB.reference_stack``; TLB-FR's per-sequence chunking): ``forward`` (layer 1's self-attention for
every chunk at once, stacked projections), the compiled chunk step and the stream, float64."""

import pytest
import torch
from conformance import MODELS, REG, model_class

from bench.models.tlb import TLB

torch.set_num_threads(1)
SMALL = dict(d_model=16, n_heads=4, d_ff=32, dropout=0.0, chunk_size=4, memory_slots=3, update_layers=2)
# every registry entry of TLB's class (TLB, RSA-TLB, TLB-FR): its class and the settings its entry fixes
VARIANTS = {m: (model_class(m), REG.model_entry(m)["params"]) for m in MODELS if issubclass(model_class(m), TLB)}
FIXED_CHUNKS = [m for m in VARIANTS if model_class(m).supports_streaming]  # TLB-FR: its chunks follow the whole length
LENGTHS = [11, 9, 5, 1]  # chunks of 4: a partial last chunk, a chunk of one real token, chunks of padding only


def case(name, causal, seed, lengths=LENGTHS):
    cls, kw = VARIANTS[name]
    torch.manual_seed(seed)
    model = cls(20, causal, **SMALL, **kw).eval().double()
    mask = torch.arange(max(lengths)) < torch.tensor(lengths).unsqueeze(1)
    tokens = torch.randint(3, 20, mask.shape, generator=torch.Generator().manual_seed(seed)) * mask
    return model, tokens, mask


def assert_equal_outputs(got, want, mask, tol=1e-12):
    real = mask.unsqueeze(-1)
    torch.testing.assert_close(torch.where(real, got.hidden, 0), torch.where(real, want.hidden, 0), atol=tol, rtol=0)
    torch.testing.assert_close(got.pooled, want.pooled, atol=tol, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", list(VARIANTS))
def test_forward_equals_alg2_as_printed(name, causal):
    """``forward`` = Alg. 2 written out chunk after chunk (lines 8-13 with each layer's parameters, the
    memory update lines 14-20), float64 to 1e-12, three seeds, padded batches."""
    for seed in range(3):
        model, tokens, mask = case(name, causal, seed)
        with torch.no_grad():
            assert_equal_outputs(model(tokens, mask), model.reference_forward(tokens, mask), mask)


def test_the_reference_chunks_by_g_and_reads_only_earlier_memory():
    """The reference is the algorithm, not a copy of the executor: changing a token of chunk 2 leaves
    chunk 1's outputs as they were (its memory is M^0 and M^1 only) and changes the final summary."""
    model, tokens, mask = case("tlb", False, 0, lengths=[12, 12])
    changed = tokens.clone()
    changed[:, 9] = (changed[:, 9] % 19) + 1
    with torch.no_grad():
        a, b = model.reference_forward(tokens, mask), model.reference_forward(changed, mask)
    torch.testing.assert_close(a.hidden[:, :8], b.hidden[:, :8], atol=0, rtol=0)
    assert (a.hidden[:, 8:] - b.hidden[:, 8:]).abs().max() > 1e-3 and (a.pooled - b.pooled).abs().max() > 1e-6


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", FIXED_CHUNKS)
def test_the_compiled_chunk_step_equals_alg2_as_printed(name):
    """``compile`` (the chunk step compiled once, every chunk padded to g, flat parameters) =
    ``reference_forward``, float64."""
    model, tokens, mask = case(name, False, 0)
    with torch.no_grad():
        want = model.reference_forward(tokens, mask)
        torch._dynamo.reset()
        model.compile(backend="eager")
        got = model(tokens, mask)
    assert_equal_outputs(got, want, mask)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", FIXED_CHUNKS)
def test_the_stream_equals_alg2_as_printed(name):
    """Causal ``step`` in pieces that cross chunk boundaries (1, 5, 2, 3 tokens over chunks of 4) =
    ``reference_forward`` on the whole sequences, float64; the last step's pooled summary too."""
    model, tokens, mask = case(name, True, 2, lengths=[11, 11])
    with torch.no_grad():
        want = model.reference_forward(tokens, mask)
        state, outs, start = model.init_state(2), [], 0
        for size in (1, 5, 2, 3):
            out, state = model.step(tokens[:, start : start + size], state)
            outs.append(out.hidden)
            start += size
    torch.testing.assert_close(torch.cat(outs, 1), want.hidden, atol=1e-12, rtol=0)
    torch.testing.assert_close(out.pooled, want.pooled, atol=1e-12, rtol=0)
