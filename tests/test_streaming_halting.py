"""Streaming depth recurrence: every family that declares recurrence "depth" (UT, GUT and its ablations, GUTLB), with halting
that actually happens.

Every halting mode streams while positions (and, for early exit, whole sequences) halt unevenly,
and the stream equals the forward's states and per-sequence halting statistics; ``halt`` mode's
early exit gives ``upperbound``'s outputs; a position that halted stays frozen in the caches that
later positions attend to. Run with ``-s`` to see the largest difference of every entry and mode.
"""

import random

import pytest
import torch
from conformance import model_class, models
from streaming_helpers import TOL, T, build, random_sizes, stream, tokens_for

from bench.models.chunked import ChunkRecurrent

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- depth recurrence (UT, GUT and its ablations) with halting that actually happens -------------

DEPTH_ALL = models(recurrence="depth", supports_streaming=True)  # UT, GUT and its ablations, GUTLB
DEPTH = [m for m in DEPTH_ALL if not issubclass(model_class(m), ChunkRecurrent)]  # halting per position
DEPTH_CHUNKED = [m for m in DEPTH_ALL if issubclass(model_class(m), ChunkRecurrent)]  # halting per chunk (GUTLB)
MAX_LAYERS = 5
# halting bias b2 and the halting unit's weight scales (fc1, fc2) that spread the depths of this fixture
# over 1..MAX_LAYERS, for every family (the tests assert the spread)
SPREAD = (0.5, 1.0, 1.5)


def halting_model(name, mode, **over):
    bias, std1, std2 = SPREAD
    model = build(name, max_layers=MAX_LAYERS, mode=mode, halt_bias_init=bias, **over)
    if model.halting.unit is not None:  # no-halt has none
        torch.manual_seed(1)
        torch.nn.init.normal_(model.halting.unit.fc1.weight, std=std1)
        torch.nn.init.normal_(model.halting.unit.fc2.weight, std=std2)
    return model


@pytest.mark.parametrize("mode", ["halt", "upperbound", "no-halt"])
@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", DEPTH)
def test_depth_recurrence_streams_in_every_mode_while_positions_halt(name, mode):
    """Every halting mode streams; some positions halt after a few iterations and others run to the
    bound (asserted, so the equality is not vacuous), and per-position depth and ponder of the
    stream average to the forward's per-sequence statistics."""
    model = halting_model(name, mode)
    tokens = tokens_for(8, batch=3)
    rng = random.Random(name + mode)
    with torch.no_grad():
        full = model(tokens)
        worst = 0.0
        for sizes in ([1] * T, [T], [5, 1, 9, 8], random_sizes(T, rng)):
            hidden, _ = stream(model, tokens, sizes)
            worst = max(worst, (hidden - full.hidden).abs().max().item())
        out, _ = model.step(tokens, model.init_state(3))
    print(f"\n{name} {mode}: largest |step - forward| = {worst:.2e}")
    assert worst < TOL
    depth = out.stats["halt_depth"]  # (B, T) iterations each position received
    torch.testing.assert_close(depth.mean(-1), full.stats["halt_depth"])
    if mode == "no-halt":
        assert torch.all(depth == MAX_LAYERS)
        return
    assert depth.min() < MAX_LAYERS and depth.max() == MAX_LAYERS, depth  # halting really happens, unevenly
    torch.testing.assert_close(model.beta * out.stats["ponder"].mean(), full.aux_loss)


@pytest.mark.parametrize("mode", ["halt", "upperbound", "no-halt"])
@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", DEPTH_CHUNKED)
def test_chunked_depth_recurrence_streams_in_every_mode_while_positions_halt(name, mode):
    """GUTLB (every family with depth recurrence inside chunks): TLB's chunks around GUT's depth loop; the
    halting state restarts with every chunk of 5 (prefix means within the chunk). Positions halt unevenly (asserted on the forward's per-chunk
    depth), and pieces that cross chunk boundaries give the forward's states."""
    model = halting_model(name, mode)
    tokens = tokens_for(8, batch=3)
    with torch.no_grad():
        full = model(tokens)
        worst = max(
            (stream(model, tokens, sizes)[0] - full.hidden).abs().max().item() for sizes in ([1] * T, [T], [5, 1, 9, 8], [7, 3, 13])
        )
    print(f"\n{name} {mode}: largest |step - forward| = {worst:.2e}")
    assert worst < TOL
    depth = full.stats["halt_depth"]  # (B,) mean iterations per chunk
    if mode == "no-halt":
        assert torch.all(depth == MAX_LAYERS)
    else:
        assert depth.min() < MAX_LAYERS, depth  # halting really happens


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", DEPTH)
def test_early_exit_drops_sequences_and_the_stream_still_equals_it(name):
    """Causal per-position units: ``halt`` mode's early exit (a sequence leaves the batch once all
    its positions halted) gives ``upperbound``'s outputs, and the stream (which steps every
    position to max_layers, frozen once halted) gives both. The fixture makes whole sequences
    halt at different depths, so the forward really drops some rows before others."""
    outs, rows = {}, {}
    for mode in ("halt", "upperbound"):
        model = build(name, max_layers=MAX_LAYERS, mode=mode, halt_bias_init=2.5)
        torch.manual_seed(1)
        torch.nn.init.normal_(model.halting.unit.fc1.weight, std=0.1)
        torch.nn.init.normal_(model.halting.unit.fc2.weight, std=0.5)
        seen = []
        hook = model.block.register_forward_hook(lambda module, args, out, seen=seen: seen.append(out[0].shape[0]))
        tokens = tokens_for(8, batch=6)
        with torch.no_grad():
            outs[mode] = model(tokens)
            hook.remove()
            streamed, _ = stream(model, tokens, [6, 1, 12, 4])
            last, _ = model.step(tokens, model.init_state(6))
        rows[mode] = seen
        assert (streamed - outs[mode].hidden).abs().max().item() < TOL
    exits = last.stats["halt_depth"].max(-1).values  # (B,) the iteration after which each sequence is done
    assert exits.min() < exits.max() <= MAX_LAYERS, exits  # sequences leave at different depths
    assert sum(rows["halt"]) < sum(rows["upperbound"]) == 6 * MAX_LAYERS and rows["halt"][-1] < 6
    a, b = outs["halt"], outs["upperbound"]
    torch.testing.assert_close(a.hidden, b.hidden, atol=TOL, rtol=0)
    torch.testing.assert_close(a.aux_loss, b.aux_loss)
    torch.testing.assert_close(a.stats["halt_depth"], b.stats["halt_depth"])


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", DEPTH)
def test_streamed_halted_positions_stay_frozen_for_later_ones(name):
    """A position that halted after k iterations is frozen: from depth k on, every iteration's cache
    holds the same keys and values for it (its H, or S for UT, as frozen in ``forward``), and later
    positions still running attend to that frozen state (checked against ``forward`` above)."""
    model = halting_model(name, "upperbound")
    tokens = tokens_for(8, batch=3)
    state, depths, start = model.init_state(3), [], 0
    with torch.no_grad():
        for size in (4, 1, 7, 11):  # frozen across calls too
            out, state = model.step(tokens[:, start : start + size], state)
            depths.append(out.stats["halt_depth"])
            start += size
    depth = torch.cat(depths, 1).long()  # (B, T)
    caches = state["caches"]  # iteration l reads caches[l - 1]: K, V of S_{l-1} (UT) / H_{l-1} (GUT)
    frozen_before_later_live = 0
    for b in range(depth.shape[0]):
        for p in range(T):
            k = int(depth[b, p])
            for i in range(k, MAX_LAYERS - 1):
                for key in ("k", "v"):
                    torch.testing.assert_close(caches[i + 1][key][b, :, p], caches[k][key][b, :, p], atol=0, rtol=0)
            frozen_before_later_live += int(k < MAX_LAYERS and bool((depth[b, p + 1 :] > k).any()))
    assert frozen_before_later_live > 0  # some later position was still running over a frozen one


# ---- the reference code's halting rules (model.halt_rules) ---------------------------------------


@pytest.mark.parametrize("mode", ["halt", "upperbound", "no-halt"])
@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", DEPTH_ALL)
def test_reference_halt_rules_stream_as_the_forward(name, mode):
    """``halt_rules=reference`` streams: the undone crossing step is per position, so the stream
    takes it back as ``forward`` does; the length cap (real length + 1, per chunk for GUTLB) needs the
    whole length, which a stream does not know, so the fixture is long enough for it not to bind
    (25 tokens, chunks of 5 all full: caps 26 and 6 > 5 iterations). Halting happens unevenly, and
    the rules change the outputs here (asserted: the equality is not the paper's)."""
    tokens = tokens_for(8, batch=3, length=25)
    model = halting_model(name, mode, halt_rules="reference")
    with torch.no_grad():
        full = model(tokens)
        worst = max(
            (stream(model, tokens, sizes)[0] - full.hidden).abs().max().item() for sizes in ([1] * 25, [25], [5, 1, 9, 10], [7, 3, 13, 2])
        )
        paper = halting_model(name, mode)(tokens)
    print(f"\n{name} {mode} reference rules: largest |step - forward| = {worst:.2e}")
    assert worst < TOL
    if mode != "no-halt":  # no-halt has no unit: the cap alone acts, and it does not bind here
        assert (paper.hidden - full.hidden).abs().max() > 1e-4
        assert full.stats["halt_depth"].min() < MAX_LAYERS
