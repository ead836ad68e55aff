"""Streaming inference (issue 26): ``init_state`` / ``step`` against the full forward.

Parametrised over the registry: every causal entry whose class sets ``supports_streaming`` is
built small and causal, and fed through ``step`` token by token and in random pieces; the
per-position states must equal one full ``forward`` (eval mode, fp32, max abs diff < 1e-5).
Also: a state carried across calls equals the state rebuilt from the prefix in one call; state
of memory-bounded families stops growing; ``torch.save`` of a state round-trips; the REM
recurrence equals the REM for every kind, dilation and lag cap; which entries stream; UT / GUT
and the ablations in every halting mode with positions (and whole sequences) halting unevenly.
Run with ``-s`` to see the largest difference of every entry.
"""
import io
import random

import pytest
import torch

import bench
from bench.registry import Registry, constructor_params, import_target
from bench.models.base import StreamingUnsupported
from bench.models.brt import BlockRecurrentTransformer
from bench.models.layers.rem import REM
from bench.models.r_transformer import RTransformer
from bench.models.rnn import RNN
from bench.models.tlb import TLB
from bench.models.transformer import Transformer
from bench.models.xl import TransformerXL

REG = Registry()
T = 23  # crosses several XL segments / BRT blocks of 5 and LocalRNN windows of 4
TOL = 1e-5


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models stepped token by token: a second thread only adds synchronisation."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def model_class(name):
    return import_target(REG.model_entry(name)["target"], name)


CAUSAL = [m for m in REG.model_names() if model_class(m).supports_causal]
STREAMING = [m for m in CAUSAL if model_class(m).supports_streaming]

# Every causal family streams;
# TLB-FR cannot stream by definition (its chunk length depends on the whole input's length).
OWN = {"transformer", "nope", "transformer-star", "rsa-transformer", "rsa-transformer-I", "rsa-transformer-II",
       "rsa-transformer-III", "rsa-transformer-IV", "xl", "rsa-xl", "brt", "brt-lstm-gate", "rsa-brt",
       "lstm", "gru", "r-transformer", "tlb", "rsa-tlb", "ut", "gut", "gut-no-global-halt", "gut-no-gate",
       "gut-no-transition", "gutlb"}
OTHERS: set = set()
CANNOT = {"tlb-fr"}


def small(name) -> dict:
    """Tiny sizes, and windows short enough that T crosses several of them (unless the entry
    fixes its own, e.g. transformer-star's single segment)."""
    accepted = constructor_params(model_class(name))
    fixed = REG.model_entry(name)["params"]
    n_heads = fixed.get("n_heads", accepted.get("n_heads", 4))
    want = {"d_model": 4 * n_heads, "d_ff": 32, "dropout": 0.0, "segment_len": 5, "mem_len": 7, "block_size": 5,
            "n_state": 3, "window": 4, "chunk_size": 5, "memory_slots": 3}
    return {k: v for k, v in want.items() if k in accepted and k not in fixed}


def build(name, **over):
    torch.manual_seed(0)
    return bench.build_model(name, vocab_size=11, causal=True, **{**small(name), **over}).eval()


def stream(model, tokens, sizes, state=None):
    """Feed tokens through step in pieces of the given sizes -> (hidden (B, T, d), state)."""
    state = model.init_state(tokens.shape[0]) if state is None else state
    outs, start = [], 0
    for size in sizes:
        out, state = model.step(tokens[:, start : start + size], state)
        assert out.hidden.shape[:2] == (tokens.shape[0], min(size, tokens.shape[1] - start))
        outs.append(out.hidden)
        start += size
    assert start == tokens.shape[1]
    return torch.cat(outs, dim=1), state


def random_sizes(total, rng, largest=9):
    sizes = []
    while sum(sizes) < total:
        sizes.append(min(rng.randint(1, largest), total - sum(sizes)))
    return sizes


def leaves(state):
    """The tensors and ints of a state, in order (plain containers only)."""
    if isinstance(state, torch.Tensor) or isinstance(state, int):
        return [state]
    if isinstance(state, dict):
        return [x for k in sorted(state) for x in leaves(state[k])]
    if isinstance(state, (list, tuple)):
        return [x for s in state for x in leaves(s)]
    if state is None:
        return []
    raise AssertionError(f"a state holds only tensors, ints, None and lists/dicts/tuples of them; got {type(state).__name__}")


def numel(state) -> int:
    return sum(x.numel() for x in leaves(state) if isinstance(x, torch.Tensor))


def tokens_for(seed=0, batch=2, length=T):
    return torch.randint(0, 11, (batch, length), generator=torch.Generator().manual_seed(seed))


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


def bounded_part(model, state):
    """The part of a state that must stay bounded, or None for families whose state grows
    (attention over the whole prefix: Transformer, NoPE, Transformer*)."""
    if isinstance(model, RNN | BlockRecurrentTransformer | TLB):  # TLB: memory slots + one chunk's caches
        return state
    if isinstance(model, TransformerXL) and model.segment_len < T:
        return state
    if isinstance(model, RTransformer):
        return [layer["rnn"] for layer in state]  # the LocalRNN windows; its attention caches grow
    return None


@pytest.mark.parametrize("name", STREAMING)
def test_memory_bounded_state_stops_growing(name):
    model = build(name)
    tokens = tokens_for(3, length=60)
    with torch.no_grad():
        _, short = stream(model, tokens[:, :30], [3] * 10)
        _, long = stream(model, tokens, [7] * 8 + [4])
    if bounded_part(model, short) is None:
        pytest.skip(f"{name}: attention over the whole prefix; its cache grows by design")
    # 30 and 60 tokens are the same phase of segments / blocks of 5: the same size
    assert numel(bounded_part(model, long)) == numel(bounded_part(model, short))
    if isinstance(model, TransformerXL):  # memory plus at most one segment per layer
        per_position = (2 * 2 + 1) * model.d_model  # k and v of batch 2, and the distance's projection
        assert numel(long) <= len(model.layers) * per_position * (model.mem_len + model.segment_len)


@pytest.mark.parametrize("name", ["tlb", "rsa-tlb"])
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


@pytest.mark.parametrize("name", ["tlb", "rsa-tlb"])
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


@pytest.mark.parametrize("name", ["tlb", "gutlb"])
def test_tlb_step_pools_only_when_read(name):
    """A step's ``pooled`` is computed on demand: token-by-token steps update the memory only at chunk
    boundaries; the first read of ``pooled`` (here outside the inference mode the step ran in) adds the
    one partial-chunk update and gives forward's value on the prefix."""
    model = build(name)
    g = model.chunk_size
    tokens = tokens_for(9, length=2 * g + 2)
    calls = []
    update = model.update_memory
    model.update_memory = lambda *a, **k: (calls.append(1), update(*a, **k))[1]
    with torch.inference_mode():
        state = model.init_state(2)
        for start in range(tokens.shape[1]):
            out, state = model.step(tokens[:, start : start + 1], state)
        full = model(tokens)
    assert len(calls) == 2  # the two completed chunks
    assert (out.pooled - full.pooled).abs().max().item() < TOL
    assert len(calls) == 3 and out.pooled is out.pooled  # computed once


def test_every_causal_entry_streams_except_tlb_fr():
    """The streaming set is every causal entry but TLB-FR. Entries another branch streams are
    skipped while their class lacks ``supports_streaming`` (so after the merge this is a full check)."""
    assert OWN | OTHERS | CANNOT == set(CAUSAL), "a causal registry entry is missing from the streaming plan"
    missing_own = sorted(OWN - set(STREAMING))
    assert not missing_own, f"these entries do not stream: {missing_own}"
    pending = sorted(OTHERS - set(STREAMING))
    assert set(STREAMING) == OWN | (OTHERS - set(pending))
    for name in CANNOT:
        model = bench.build_model(name, vocab_size=11, causal=True, **small(name))
        assert not model.supports_streaming
        with pytest.raises(StreamingUnsupported):
            model.init_state(1)
    if pending:
        pytest.skip(f"not streaming on this branch yet (another branch streams them): {', '.join(pending)}")


@pytest.mark.parametrize("name", ["transformer", "xl", "brt", "lstm", "r-transformer"])
def test_bidirectional_instances_refuse(name):
    model = bench.build_model(name, vocab_size=11, causal=False, **small(name))
    with pytest.raises(StreamingUnsupported, match="bidirectional"):
        model.init_state(1)
    with pytest.raises(StreamingUnsupported):
        model.step(torch.zeros(1, 1, dtype=torch.long), None)


@pytest.mark.parametrize("pos_encoding,norm_first", [("xpos", True), ("rope", True), ("sinusoidal", True),
                                                      ("learned", True), ("none", True), ("xpos", False)])
def test_transformer_positions_continue(pos_encoding, norm_first):
    """Every positional encoding, and post-LN: the stream's positions continue across steps."""
    torch.manual_seed(0)
    model = Transformer(11, True, d_model=16, n_heads=2, d_ff=32, dropout=0.0, pos_encoding=pos_encoding,
                        norm_first=norm_first, max_len=64).eval()
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


# ---- the harness: bench eval --stream and bench generate ---------------------------------------

@pytest.fixture(scope="module")
def copy_run(tmp_path_factory):
    """A tiny copy smoke run (transformer), trained once for the harness tests."""
    out = tmp_path_factory.mktemp("stream-run")
    small_data = ["train.max_epochs=1", "data.n_train=64", "data.n_val=16", "data.n_test=16", "data.max_len=24",
                  "data.test_lengths=[24]"]
    rec = bench.run(model="transformer", task="copy", preset="smoke", seed=0, out=out, progress=False, overrides=small_data)
    assert rec["status"] == "ok"
    from bench.records import record_path

    return record_path(out, "transformer", "copy", "smoke", 0, small_data)


def test_eval_stream_gives_the_batched_metrics(copy_run):
    import json

    from bench.cli import main

    assert main(["eval", str(copy_run)]) == 0
    assert main(["eval", str(copy_run), "--stream"]) == 0
    from bench.records import run_folder

    batched = json.loads((run_folder(copy_run) / "eval.json").read_text())
    streamed = json.loads((run_folder(copy_run) / "eval-stream.json").read_text())
    assert streamed["streamed"] and set(streamed["metrics"]) == {"val", "len24"}
    for split, metrics in batched["metrics"].items():
        got = streamed["metrics"][split]
        assert set(got) == set(metrics) - {"stats"}  # n, acc, token_acc, last_acc (by_length where binned)
        for key in got:
            assert got[key] == metrics[key], (split, key)


def test_generate_is_greedy_decoding_of_the_forward(copy_run, capsys):
    """bench.generate (streaming) against greedy decoding that reruns the full forward on the
    whole prefix for every new token; the CLI prints the same continuation."""
    from bench.cli import main
    from bench.generate import load_tested

    prompt = "s3 s7 s1 s2 s5 s0 s9 s4 s4 s8 <sep> s3"
    result = bench.generate(copy_run, prompt=prompt, tokens=8)
    _, task, _, module = load_tested(copy_run, [], REG)
    ids = [task.vocab.index(s) for s in prompt.split()]
    with torch.no_grad():
        for _ in range(8):
            logits = module.head.out(module.backbone(torch.tensor([ids])).hidden[:, -1])
            ids.append(int(logits.argmax(-1)))
    assert result["generated"] == [task.vocab[i] for i in ids[-8:]]
    assert main(["generate", str(copy_run), "--prompt", prompt, "--tokens", "8"]) == 0
    assert capsys.readouterr().out.strip() == f"{prompt} => {' '.join(result['generated'])}"


@pytest.mark.parametrize("argv,message", [
    (["--prompt", "s3 bogus"], "not in the task's vocabulary"),
    (["--prompt", " "], "prompt is empty"),
    (["--prompt", "s3", "--tokens", "-1"], "--tokens must be >= 0"),
])
def test_generate_refuses_bad_input(copy_run, capsys, argv, message):
    from bench.cli import main

    assert main(["generate", str(copy_run), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_readme_add_a_model_example_streams(tmp_path, monkeypatch):
    """The README's worked example carries the optional streaming part; it meets the contract."""
    import sys

    from conftest import readme_example

    readme_example(tmp_path, monkeypatch, "highway.py", "models", "readme_stream_models")
    from readme_stream_models.highway import Highway

    torch.manual_seed(0)
    model = Highway(11, True, d_model=16).eval()
    tokens = tokens_for(7)
    with torch.no_grad():
        hidden, _ = stream(model, tokens, [1, 5, 17])
        assert (hidden - model(tokens).hidden).abs().max().item() < TOL
    sys.modules.pop("readme_stream_models.highway", None)


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


# ---- depth recurrence (UT, GUT and its ablations) with halting that actually happens -------------

DEPTH = ["ut", "gut", "gut-no-global-halt", "gut-no-gate", "gut-no-transition"]
MAX_LAYERS = 5
# halting bias b2 and the halting unit's weight scales (fc1, fc2) that spread the depths of this fixture
# over 1..MAX_LAYERS (the ungated block's states grow, so its unit needs a lower bias)
SPREAD = {"gut-no-gate": (-2.0, 0.5, 0.5)}


def halting_model(name, mode):
    bias, std1, std2 = SPREAD.get(name, (0.5, 1.0, 1.5))
    model = build(name, max_layers=MAX_LAYERS, mode=mode, halt_bias_init=bias)
    if model.halting.unit is not None:  # no-halt has none
        torch.manual_seed(1)
        torch.nn.init.normal_(model.halting.unit.fc1.weight, std=std1)
        torch.nn.init.normal_(model.halting.unit.fc2.weight, std=std2)
    return model


@pytest.mark.parametrize("mode", ["halt", "upperbound", "no-halt"])
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
def test_gutlb_streams_in_every_mode_while_positions_halt(mode):
    """GUTLB: TLB's chunks around GUT's depth loop; the halting state restarts with every chunk of 5
    (prefix means within the chunk). Positions halt unevenly (asserted on the forward's per-chunk
    depth), and pieces that cross chunk boundaries give the forward's states."""
    model = halting_model("gutlb", mode)
    tokens = tokens_for(8, batch=3)
    with torch.no_grad():
        full = model(tokens)
        worst = max((stream(model, tokens, sizes)[0] - full.hidden).abs().max().item()
                    for sizes in ([1] * T, [T], [5, 1, 9, 8], [7, 3, 13]))
    print(f"\ngutlb {mode}: largest |step - forward| = {worst:.2e}")
    assert worst < TOL
    depth = full.stats["halt_depth"]  # (B,) mean iterations per chunk
    if mode == "no-halt":
        assert torch.all(depth == MAX_LAYERS)
    else:
        assert depth.min() < MAX_LAYERS, depth  # halting really happens


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
        hook = model.block.register_forward_hook(lambda module, args, out, seen=seen: seen.append(out.shape[0]))
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


@pytest.mark.parametrize("name", ["ut", "gut"])
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


def test_bench_list_shows_which_models_stream(capsys):
    from bench.cli import main

    assert main(["list", "models"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:] if line.strip()}
    for name in CAUSAL:
        assert ("yes" in rows[name]) == (name in STREAMING), name
    assert "no" in rows["tlb-fr"]


@pytest.mark.parametrize("name", ["transformer", "ut", "r-transformer"])
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
