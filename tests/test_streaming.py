"""Streaming inference: ``init_state`` / ``step`` against the full forward, for every family.

Conformance checks, parametrised over the registry by what each class declares (tests/conformance.py):
every causal entry whose class sets ``supports_streaming`` is built small and causal, and fed through
``step`` token by token and in random pieces; the per-position states must equal one full ``forward``
(eval mode, fp32, max abs diff < 1e-5). Also: a state carried across calls equals the state rebuilt
from the prefix in one call; ``torch.save`` of a state round-trips; what a family declares bounded
(``bounded_state`` / ``bounded_state_part``) stops growing and what it declares growing grows; a
growing state continued two ways gives two independent streams; a causal family that does not
stream says why in its own words; bidirectional instances refuse. Beside them: the REM recurrence
equals the REM for every kind, dilation and lag cap; the Transformer's positions continue across
steps. Run with ``-s`` to see the largest difference of every entry.

Elsewhere: TLB's chunk bookkeeping in ``test_streaming_chunks.py``; UT / GUT, the ablations and
GUTLB with positions halting unevenly in ``test_streaming_halting.py``; ``bench eval --stream``,
``bench generate``, ``bench list`` and the docs/adding-a-model.md example in ``test_streaming_cli.py``.
"""

import io
import random

import pytest
import torch
from conformance import declared
from streaming_helpers import CAUSAL, STREAMING, TOL, T, build, leaves, model_class, numel, random_sizes, small, stream, tokens_for

import bench
from bench.models.base import Backbone, StreamingUnsupported
from bench.models.layers.rem import REM
from bench.models.transformer import Transformer
from bench.models.xl import TransformerXL

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", STREAMING)
def test_streaming_equals_forward(name):
    model = build(name)
    tokens = tokens_for()
    rng = random.Random(name)
    with torch.no_grad():
        full = model(tokens).hidden  # (B, T, d)
        worst = 0.0
        for sizes in ([1] * T, [T], random_sizes(T, rng), random_sizes(T, rng, largest=4)):
            hidden, _ = stream(model, tokens, sizes)
            worst = max(worst, (hidden - full).abs().max().item())
    print(f"\n{name}: largest |step - forward| = {worst:.2e}")
    assert worst < TOL


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", STREAMING)
def test_carried_state_equals_state_rebuilt_from_prefix(name):
    model = build(name)
    tokens = tokens_for(1)
    with torch.no_grad():
        _, carried = stream(model, tokens[:, :17], [3, 1, 6, 2, 5])
        _, rebuilt = stream(model, tokens[:, :17], [17])
        a, b = leaves(carried), leaves(rebuilt)
        assert len(a) == len(b)
        for x, y in zip(a, b):
            if isinstance(x, int):
                assert x == y
            else:
                assert x.shape == y.shape
                torch.testing.assert_close(x, y, atol=TOL, rtol=0)
        # either state continues the stream the same way
        cont_a, _ = stream(model, tokens[:, 17:], [6], carried)
        cont_b, _ = stream(model, tokens[:, 17:], [2, 4], rebuilt)
    torch.testing.assert_close(cont_a, cont_b, atol=TOL, rtol=0)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", STREAMING)
def test_state_round_trips_through_torch_save(name):
    model = build(name)
    tokens = tokens_for(2)
    with torch.no_grad():
        _, state = stream(model, tokens[:, :11], [4, 7])
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        loaded = torch.load(buf)  # weights_only: a state is plain data
        a, _ = stream(model, tokens[:, 11:], [5, 7], state)
        b, _ = stream(model, tokens[:, 11:], [5, 7], loaded)
    assert torch.equal(a, b)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", STREAMING)
def test_state_stops_growing_where_declared_bounded(name):
    """What ``bounded_state_part`` names (all of the state where the family declares ``bounded_state``)
    has the same size after 30 and 60 tokens; a state declared to grow does grow."""
    model = build(name)
    tokens = tokens_for(3, length=60)
    with torch.no_grad():
        _, short = stream(model, tokens[:, :30], [3] * 10)
        _, long = stream(model, tokens, [7] * 8 + [4])
    bounded = model.bounded_state_part(short)
    if bounded is None:  # attention over the whole prefix: its cache grows by design
        assert numel(long) > numel(short), f"{name} declares a growing state (bounded_state False), but it did not grow"
        return
    # 30 and 60 tokens are the same phase of segments / blocks / chunks of 5: the same size
    assert numel(model.bounded_state_part(long)) == numel(bounded) > 0
    if isinstance(model, TransformerXL):  # memory plus at most one segment per layer
        per_position = (2 * 2 + 1) * model.d_model  # k and v of batch 2, and the distance's projection
        assert numel(long) <= len(model.layers) * per_position * (model.mem_len + model.segment_len)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", [m for m in CAUSAL if m not in STREAMING])
def test_a_causal_family_that_does_not_stream_says_why(name):
    """A causal family streams, or its class says why it cannot by its definition (its own
    ``streaming_refusal``, e.g. TLB-FR's chunk length needs the whole input): the base class's
    "no streaming path" is no reason."""
    model = bench.build_model(name, vocab_size=11, causal=True, **small(name))
    assert type(model).streaming_refusal is not Backbone.streaming_refusal, f"{name} neither streams nor says why it cannot"
    with pytest.raises(StreamingUnsupported, match=type(model).__name__):
        model.init_state(1)
    with pytest.raises(StreamingUnsupported):
        model.step(torch.zeros(1, 1, dtype=torch.long), None)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", [m for m in STREAMING if model_class(m).supports_bidirectional])
def test_bidirectional_instances_refuse(name):
    model = bench.build_model(name, vocab_size=11, causal=False, **small(name))
    with pytest.raises(StreamingUnsupported, match="bidirectional"):
        model.init_state(1)
    with pytest.raises(StreamingUnsupported):
        model.step(torch.zeros(1, 1, dtype=torch.long), None)


@pytest.mark.parametrize(
    "pos_encoding,norm_first", [("xpos", True), ("rope", True), ("sinusoidal", True), ("learned", True), ("none", True), ("xpos", False)]
)
def test_transformer_positions_continue(pos_encoding, norm_first):
    """Every positional encoding, and post-LN: the stream's positions continue across steps."""
    torch.manual_seed(0)
    model = Transformer(
        11, True, d_model=16, n_heads=2, d_ff=32, dropout=0.0, pos_encoding=pos_encoding, norm_first=norm_first, max_len=64
    ).eval()
    tokens = tokens_for(4)
    with torch.no_grad():
        full = model(tokens).hidden
        hidden, _ = stream(model, tokens, [2, 1, 9, 5, 6])
    assert (hidden - full).abs().max().item() < TOL
    if pos_encoding == "learned":
        with pytest.raises(ValueError, match="max_len"):
            stream(model, tokens_for(5, length=65), [65])


ALL_KINDS = dict(kinds=[1, 1, 1, 2, 1, 2], dilations=[2, 3, 2, 2, 3])


@pytest.mark.parametrize("path", ["fft", "dense"])
@pytest.mark.parametrize("lag_cap", [1, 3, 200])
def test_rem_recurrence_equals_rem(path, lag_cap):
    """[RSA Prop. 1-2] h_a = z (h_{a-d} + v_{a-d}) - z^{K+1} v_{a-(K+1)d} reproduces P V for
    regular, cyclical cos / sin and their dilated kinds, with the lag cap inside the sequence."""
    torch.manual_seed(0)
    rem = REM(8, ALL_KINDS["kinds"], ALL_KINDS["dilations"], lag_cap=lag_cap, path=path)
    with torch.no_grad():
        rem.eta.normal_()
        rem.nu.normal_()
        rem.theta.normal_()
        v = torch.randn(2, 8, 29, 4)
        full = rem(v, causal=True)
        state, outs, n = rem.init_state(2, 4), [], 0
        for t in (1, 2, 7, 1, 11, 7):
            out, state = rem.step(v[:, :, : n + t], state, t)
            outs.append(out)
            n += t
    assert (torch.cat(outs, dim=2) - full).abs().max().item() < TOL
    assert state.shape[2] == 3  # the last max-dilation h's, whatever the stream's length


@pytest.mark.parametrize("lag_cap", [2, 200])
def test_rsa_transformer_every_rem_kind_streams(lag_cap):
    torch.manual_seed(0)
    rsa = dict(ALL_KINDS, mu_init=0.0, lag_cap=lag_cap)
    model = Transformer(11, True, d_model=32, n_heads=8, d_ff=32, dropout=0.0, rsa=rsa).eval()
    tokens = tokens_for(6)
    with torch.no_grad():
        full = model(tokens).hidden
        hidden, _ = stream(model, tokens, [1, 4, 1, 9, 8])
    assert (hidden - full).abs().max().item() < TOL


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", [m for m in STREAMING if not declared(m, "bounded_state")])
def test_a_state_continued_twice_is_two_independent_streams(name):
    """KV caches grow in place (``append_rows``): continuing one state two ways (a fork, as beam
    search does) gives each continuation its own rows, and the first stream goes on undisturbed."""
    model = build(name)
    a = tokens_for(4, length=30)
    b = torch.cat((a[:, :11], tokens_for(5, length=19)), dim=1)  # the same 11-token prefix, then different
    with torch.no_grad():
        _, state = stream(model, a[:, :11], [10, 1])  # one small append: buffers with room from here on
        first_a, state_a = stream(model, a[:, 11:20], [1] * 9, state)  # written in place after the prefix
        first_b, state_b = stream(model, b[:, 11:20], [1] * 9, state)  # a fork of the same state
        rest_a, _ = stream(model, a[:, 20:], [2] * 5, state_a)  # the first stream after the fork
        rest_b, _ = stream(model, b[:, 20:], [10], state_b)
        full_a, full_b = model(a).hidden, model(b).hidden
    torch.testing.assert_close(torch.cat((first_a, rest_a), 1), full_a[:, 11:], atol=TOL, rtol=0)
    torch.testing.assert_close(torch.cat((first_b, rest_b), 1), full_b[:, 11:], atol=TOL, rtol=0)
