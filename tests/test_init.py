"""``model.init``: the reference code's initialisation ([HALT] presets) against hand-computed bounds,
the default left bitwise alone, and the setting's path through presets, --set and records."""

import math

import pytest
import torch
from conformance import MODELS, declared, model_class

from bench.config import parse_overrides, resolve_model, resolve_task
from bench.errors import UserError
from bench.models.layers import FeedForward, MultiHeadAttention
from bench.records import config_changes
from bench.registry import BACKBONE_SETTINGS, Registry, constructor_params
from bench.runner.build import build_model, instantiate_model


def xavier_bound(linear, gain=1.0):  # torch's xavier_uniform_: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))
    fan_out, fan_in = linear.weight.shape
    return gain * math.sqrt(6 / (fan_in + fan_out))


def sizes(model: str) -> dict:
    """d_model 64 (16 per head where the entry fixes its heads) and d_ff 256, where the entry takes them."""
    accepted, fixed = constructor_params(model_class(model)), Registry().model_entry(model)["params"]
    want = {"d_model": 16 * fixed.get("n_heads", 4), "d_ff": 256}
    return {k: v for k, v in want.items() if k in accepted and k not in fixed}


@pytest.mark.conformance(family="model")
@pytest.mark.parametrize("model", MODELS)
def test_reference_init_matches_the_reference_codes_distributions(model):
    """Every family's embeddings, attention and feed-forwards (the modules every family shares) take the
    code's distributions; a family that attends (its recurrence neither "rnn" nor "linear") has both."""
    torch.manual_seed(0)
    causal = not declared(model, "supports_bidirectional")
    net = build_model(model, vocab_size=500, causal=causal, preset="smoke", init="reference", **sizes(model))
    embeddings = [m for m in net.modules() if isinstance(m, torch.nn.Embedding)]
    attention = [m for m in net.modules() if isinstance(m, MultiHeadAttention)]
    ffns = [m for m in net.modules() if isinstance(m, FeedForward)]
    assert embeddings
    if declared(model, "recurrence") not in ("rnn", "linear"):
        assert attention and ffns
    token = max(embeddings, key=lambda e: e.weight.numel())
    assert token.weight.std().item() == pytest.approx(0.02, rel=0.05)  # N(0, 0.02): 32k draws
    for att in attention:
        for proj, gain in ((att.q_proj, 2**-0.5), (att.k_proj, 2**-0.5), (att.v_proj, 2**-0.5), (att.o_proj, 1.0)):
            a = xavier_bound(proj, gain)
            w = proj.weight.abs().max().item()
            assert 0.95 * a < w <= a  # uniform up to the bound (4096 draws reach within 5% of it)
            assert proj.weight.std().item() == pytest.approx(a / math.sqrt(3), rel=0.08)  # U(-a, a): std a / sqrt 3
    for ffn in ffns:
        for lin in (ffn.up, ffn.down):
            assert lin.weight.abs().max().item() <= xavier_bound(lin)
            assert lin.bias.abs().max().item() < 1e-5  # N(0, 1e-6)


def test_default_init_is_the_modules_own():
    torch.manual_seed(0)
    built = build_model("transformer", vocab_size=50, causal=False, preset="smoke")
    torch.manual_seed(0)
    spec = resolve_model(Registry(), "transformer", None, parse_overrides({}))
    assert spec.params["init"] == "default"
    direct = spec.cls(50, False, **{k: v for k, v in spec.params.items() if k not in BACKBONE_SETTINGS})
    for (name, a), (_, b) in zip(built.state_dict().items(), direct.state_dict().items()):
        assert torch.equal(a, b), name
    token = built.embed.embed if hasattr(built.embed, "embed") else built.embed
    assert token.weight.std().item() > 0.5  # nn.Embedding's N(0, 1), not 0.02


def test_halt_paper_presets_use_the_reference_init_and_a_bad_value_is_one_line():
    reg = Registry()
    for task in ("listops", "logic", "flipflop"):
        spec = resolve_model(reg, "gut", resolve_task(reg, task, "paper", {}), parse_overrides({}))
        assert spec.params["init"] == "reference", task
        assert "paper" in spec.sources["init"]
    small = resolve_model(reg, "gut", resolve_task(reg, "listops", "small", {}), parse_overrides({}))
    assert small.params["init"] == "default"
    with pytest.raises(UserError, match="model.init='xavier'.*choose one of default, reference"):
        resolve_model(reg, "gut", None, parse_overrides({"model.init": "xavier"}))


def test_a_record_without_init_was_made_with_the_default():
    made = {"model": {"params": {"d_model": 64}}, "task": {"params": {}}, "train": {}}
    now = {"model": {"params": {"d_model": 64, "init": "default"}}, "task": {"params": {}}, "train": made["train"]}
    assert config_changes(made, now) is None or "init" not in config_changes(made, now)
    now["model"]["params"]["init"] = "reference"
    assert "model.init 'default' -> 'reference'" in config_changes(made, now)


def test_instantiate_model_applies_the_spec_init():
    reg = Registry()
    spec = resolve_model(reg, "ut", None, parse_overrides({"model.init": "reference", "model.d_model": 32}))
    net = instantiate_model(spec, 1000)
    token = max((m for m in net.modules() if isinstance(m, torch.nn.Embedding)), key=lambda e: e.weight.numel())
    assert token.weight.std().item() == pytest.approx(0.02, rel=0.1)
