"""A sequence's outputs do not depend on its batch: every bidirectional registry family, built
tiny, gives the same per-token states (and pooled summary) for a short sequence alone and for the
same sequence right-padded in a batch beside a longer one (eval mode, to 1e-5).

TLB-FR chunked the whole batch by its longest sequence (ceil(longest / 5) tokens per chunk), so a
short sequence's chunks, and its outputs, changed with its neighbours; it now cuts each sequence
into its own 5 chunks (bench/models/tlb_fr.py). Parametrised over the registry: a new entry is tested
the moment it is added."""

import pytest
import torch

import bench
from bench.registry import Registry, constructor_params
from bench.targets import import_target

torch.set_num_threads(1)
REG = Registry()
V, SHORT, LONG = 13, 7, 19  # TLB-FR: chunks of 2 tokens alone, 4 beside the long one under batch-wide chunking
TINY = dict(
    d_model=40,
    d_ff=32,
    dropout=0.0,
    n_layers=2,
    max_layers=3,
    chunk_size=4,
    memory_slots=2,
    update_layers=1,
    segment_len=4,
    mem_len=4,
    block_size=4,
    n_state=2,
)


def model_class(name):
    return import_target(REG.model_entry(name)["target"], name)


BIDIRECTIONAL = [m for m in REG.model_names() if model_class(m).supports_bidirectional]


def tiny(name):
    accepted = constructor_params(model_class(name))
    torch.manual_seed(0)
    params = {k: v for k, v in TINY.items() if k in accepted}
    return bench.build_model(name, vocab_size=V, causal=False, **params).eval()


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", BIDIRECTIONAL)
def test_outputs_do_not_depend_on_the_batch(name):
    model = tiny(name)
    gen = torch.Generator().manual_seed(1)
    short = torch.randint(1, V, (1, SHORT), generator=gen)
    long = torch.randint(1, V, (1, LONG), generator=gen)
    batch = torch.cat((torch.cat((short, torch.zeros(1, LONG - SHORT, dtype=torch.long)), 1), long))  # (2, LONG)
    with torch.no_grad():
        alone = model(short, torch.ones_like(short, dtype=torch.bool))
        beside = model(batch, batch != 0)
    torch.testing.assert_close(beside.hidden[:1, :SHORT], alone.hidden, atol=1e-5, rtol=1e-5)
    if alone.pooled is not None:
        torch.testing.assert_close(beside.pooled[:1], alone.pooled, atol=1e-5, rtol=1e-5)


def test_tlb_fr_cuts_each_sequence_into_its_own_five_chunks():
    """Chunk t of a length-n sequence holds its tokens t*g .. t*g+g-1, g = ceil(n / 5) (torch.chunk's cut)."""
    model = tiny("tlb-fr")
    lengths = torch.tensor([7, 19, 3])
    pos, valid, G = model.chunk_index(lengths, 19)
    assert G == 4  # ceil(19 / 5)
    for b, n in enumerate(lengths.tolist()):
        chunks = [pos[b, t][valid[b, t]].tolist() for t in range(5)]
        expected = [list(c) for c in torch.arange(n).chunk(5)]  # torch.chunk leaves trailing chunks out
        assert chunks == expected + [[]] * (5 - len(expected)), (n, chunks)
