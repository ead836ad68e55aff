"""The stack of bench/models/linear_recurrent.py, its mixers as data: each layer's mixer built from
``{target, params}`` with its ``layer_idx`` and ``n_layers``; the per-layer rule ``mixers: {every, mixer}``;
the hybrid registry entry ``gla-attention`` (GLA with causal softmax attention in every 2nd layer):
its layout, its causality, streaming equal to its forward with a state that grows (declared); a
family's records hold no mixer key; bad specs refused in one line."""

import pytest
import torch
from torch import nn

import bench
from bench.models.gla import GLA, GatedLinearAttention
from bench.models.linear_recurrent import CausalSelfAttention, LinearRecurrent
from bench.runner.stream_state import stream_state_bytes
from bench.signature import constructor_params

pytestmark = pytest.mark.usefixtures("one_thread")


class PlaceRecorder(nn.Module):
    """A mixer that keeps what the stack told it (its output: x scaled by its layer's number)."""

    def __init__(self, d_model: int, layer_idx: int, n_layers: int, scale: float = 1.0):
        super().__init__()
        self.place, self.scale = (layer_idx, n_layers), scale

    def forward(self, x, state=None):
        return x * self.scale * self.place[0], state


def test_each_layer_is_built_with_its_place():
    model = LinearRecurrent(11, d_model=8, n_layers=5, d_ff=0, dropout=0.0, mixer={"target": PlaceRecorder, "params": {"scale": 0.5}})
    assert [block.mixer.place for block in model.blocks] == [(k, 5) for k in range(5)]
    assert {block.mixer.scale for block in model.blocks} == {0.5}


def test_a_mixer_given_as_a_string_equals_the_family():
    torch.manual_seed(0)
    family = GLA(11, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0).eval()
    torch.manual_seed(0)
    spec = {"target": "bench.models.gla:GatedLinearAttention", "params": {"chunk_size": 64, "expand_k": 0.5}}
    stack = LinearRecurrent(11, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, mixer=spec).eval()
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(family(tokens).hidden, stack(tokens).hidden)


def test_families_state_their_own_mixer():
    """The mixer is the family's: no ``mixer`` parameter, so its records are what they were."""
    assert "mixer" not in constructor_params(GLA) and "mixers" not in constructor_params(GLA)
    assert "mixer" in constructor_params(LinearRecurrent)


def hybrid(n_layers=4):
    torch.manual_seed(0)
    sizes = {"d_model": 16, "n_heads": 2, "n_layers": n_layers, "d_ff": 32, "dropout": 0.0}
    return bench.build_model("gla-attention", vocab_size=11, causal=True, **sizes).eval()


def test_hybrid_entry_puts_attention_in_every_second_layer():
    model = hybrid(5)
    kinds = [type(block.mixer) for block in model.blocks]
    assert kinds == [GatedLinearAttention, CausalSelfAttention, GatedLinearAttention, CausalSelfAttention, GatedLinearAttention]
    assert not model.bounded_state and bench.build_model("gla", vocab_size=11, causal=True).bounded_state


def test_hybrid_is_causal():
    model = hybrid()
    tokens = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 11
    with torch.no_grad():
        a, b = model(tokens).hidden, model(changed).hidden
    torch.testing.assert_close(a[:, :7], b[:, :7], atol=1e-6, rtol=0)
    assert (a[:, 7:] - b[:, 7:]).abs().max() > 1e-3


def test_hybrid_streams_as_its_forward_and_its_state_grows():
    model = hybrid()
    tokens = torch.randint(0, 11, (2, 17), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(tokens).hidden
        state, pieces, start = model.init_state(2), [], 0
        for size in (1, 4, 1, 7, 4):
            out, state = model.step(tokens[:, start : start + size], state)
            pieces.append(out.hidden)
            start += size
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=0)
    assert stream_state_bytes(model, 60) > stream_state_bytes(model, 30)  # the attention layers' KV caches


@pytest.mark.parametrize(
    "mixer, mixers, message",
    [
        ({"target": "bench.models.gla:NoSuchMixer"}, None, "cannot be imported"),
        ({"target": "GatedLinearAttention"}, None, "must look like 'package.module:ClassName'"),
        ({"target": GatedLinearAttention, "params": {"expand_q": 1.0}}, None, "expand_q not accepted by GatedLinearAttention"),
        ({"target": GatedLinearAttention, "params": {"d_model": 8}}, None, "d_model set by the stack"),
        ({"target": GatedLinearAttention, "kwargs": {}}, None, "a mixer is"),
        ({"target": GatedLinearAttention}, {"every": 0, "mixer": {"target": CausalSelfAttention}}, "every: k >= 1"),
    ],
)
def test_bad_mixer_specs_are_refused_in_one_line(mixer, mixers, message):
    with pytest.raises(ValueError, match=message) as info:
        LinearRecurrent(11, d_model=16, n_heads=2, mixer=mixer, mixers=mixers)
    assert "\n" not in str(info.value)


def test_a_bad_spec_from_the_command_line_is_a_user_error():
    with pytest.raises(bench.UserError, match="expand_q not accepted"):
        bench.build_model(
            "gla-attention",
            vocab_size=11,
            causal=True,
            mixer={"target": "bench.models.gla:GatedLinearAttention", "params": {"expand_q": 1}},
        )
