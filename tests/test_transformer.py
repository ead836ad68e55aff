"""Attention backends, positional encodings and the NoPE properties [NOPE]."""

import pytest
import torch

from bench.models.layers.attention import attend, xformers_unusable
from bench.models.layers.block import PostLNBlock, TransformerBlock
from bench.models.layers.positional import Rotary
from bench.models.transformer import NoPE, Transformer


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tq,tk", [(7, 7), (5, 9)])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_sdpa_matches_math_reference(causal, tq, tk, with_mask, with_bias):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, tq, 8), torch.randn(2, 3, tk, 8), torch.randn(2, 3, tk, 8)
    key_mask = torch.ones(2, tk, dtype=torch.bool)
    key_mask[1, -2:] = False
    bias = torch.randn(1, 3, tq, tk) if with_bias else None
    kw = dict(causal=causal, key_mask=key_mask if with_mask else None, bias=bias)
    torch.testing.assert_close(attend(q, k, v, backend="sdpa", **kw), attend(q, k, v, backend="math", **kw), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_matches_torch_encoder_layer_pre_and_post_ln(norm_first):
    """Our block against torch.nn.TransformerEncoderLayer (GELU, no biases, causal) with the same
    weights: pre-LN x + Attn(LN x), then + FFN(LN .); post-LN LN(x + Attn x), then LN(. + FFN .)."""
    torch.manual_seed(0)
    d, h, ff = 16, 4, 32
    ours = (TransformerBlock if norm_first else PostLNBlock)(d, h, ff).eval()
    ref = torch.nn.TransformerEncoderLayer(
        d, h, ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first, bias=False
    ).eval()
    with torch.no_grad():
        for ln in (ours.ln_attn, ours.ln_ffn):  # torch's bias-free LayerNorm: scale only
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.zero_()
        ours.ffn.up.bias.zero_()
        ours.ffn.down.bias.zero_()
        a = ours.attn
        ref.self_attn.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
        ref.self_attn.out_proj.weight.copy_(a.o_proj.weight)
        ref.linear1.weight.copy_(ours.ffn.up.weight)
        ref.linear2.weight.copy_(ours.ffn.down.weight)
        ref.norm1.weight.copy_(ours.ln_attn.weight)
        ref.norm2.weight.copy_(ours.ln_ffn.weight)
    x = torch.randn(2, 7, d)
    want = ref(x, src_mask=torch.nn.Transformer.generate_square_subsequent_mask(7), is_causal=True)
    torch.testing.assert_close(ours(x, causal=True), want, atol=1e-5, rtol=1e-4)


def test_post_ln_transformer_has_no_final_norm_and_differs_from_pre_ln():
    torch.manual_seed(0)
    pre = Transformer(11, causal=True, d_model=16, n_heads=4, n_layers=2, d_ff=32, dropout=0.0)
    post = Transformer(11, causal=True, d_model=16, n_heads=4, n_layers=2, d_ff=32, dropout=0.0, norm_first=False)
    assert isinstance(post.ln_out, torch.nn.Identity)
    post.load_state_dict({k: v for k, v in pre.state_dict().items() if not k.startswith("ln_out")})
    tokens = torch.randint(1, 11, (2, 9))
    h = post(tokens).hidden
    # each post-LN block ends in a LayerNorm (unit scale, zero shift at init): every position is normalised
    torch.testing.assert_close(h.mean(-1), torch.zeros(2, 9), atol=1e-5, rtol=0)
    assert not torch.allclose(h, pre(tokens).hidden, atol=1e-3)


def test_causal_non_square_is_aligned_to_the_end():
    """Queries are the last Tq of Tk keys: query i sees keys up to i + (Tk - Tq)."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4)
    out = attend(q, k, v, causal=True, backend="math")
    v2 = v.clone()
    v2[..., 3, :] += 10  # key 3 is visible to query 1 and 2 only
    out2 = attend(q, k, v2, causal=True, backend="math")
    assert torch.allclose(out[..., 0, :], out2[..., 0, :])
    assert not torch.allclose(out[..., 1, :], out2[..., 1, :])


def test_xformers_backend_refuses_cpu_with_a_clear_message():
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises((RuntimeError, ImportError)):
        attend(q, q, q, backend="xformers")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_xformers_matches_sdpa_on_gpu():
    if (why := xformers_unusable()) is not None:
        pytest.skip(f"the xformers backend {why}")
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 33, 64, device="cuda") for _ in range(3))
    key_mask = torch.ones(2, 33, dtype=torch.bool, device="cuda")
    key_mask[0, -5:] = False
    for kw in (dict(causal=True), dict(key_mask=key_mask), dict(causal=True, key_mask=key_mask)):
        torch.testing.assert_close(attend(q, k, v, backend="xformers", **kw), attend(q, k, v, backend="sdpa", **kw), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("use_xpos", [False, True])
def test_rotary_scores_depend_only_on_relative_position(use_xpos):
    torch.manual_seed(0)
    rot = Rotary(16, use_xpos=use_xpos)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)

    def score(m, n, shift=0):
        pq, pk = torch.tensor([m + shift]), torch.tensor([n + shift])
        qr, kr = rot(q, k, pq, pk)
        return (qr * kr).sum()

    torch.testing.assert_close(score(7, 3), score(7, 3, shift=50), atol=1e-4, rtol=1e-4)


def _model(cls, **kw):
    torch.manual_seed(0)
    return cls(vocab_size=10, causal=True, d_model=32, n_heads=4, d_ff=64, dropout=0.0, **kw).eval()


def test_nope_one_layer_last_position_ignores_prefix_order():
    model = _model(NoPE, n_layers=1)
    tokens = torch.tensor([[3, 5, 7, 2, 9, 4]])
    perm = torch.tensor([[7, 3, 9, 5, 2, 4]])  # same multiset of prefix tokens, same last token
    with torch.no_grad():
        a, b = model(tokens).hidden[:, -1], model(perm).hidden[:, -1]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_nope_two_layers_are_position_sensitive():
    model = _model(NoPE, n_layers=2)
    tokens = torch.tensor([[3, 5, 7, 2, 9, 4]])
    perm = torch.tensor([[7, 3, 9, 5, 2, 4]])
    with torch.no_grad():
        a, b = model(tokens).hidden[:, -1], model(perm).hidden[:, -1]
    assert not torch.allclose(a, b, atol=1e-4)


def test_bidirectional_without_pe_is_permutation_equivariant():
    torch.manual_seed(0)
    model = Transformer(10, causal=False, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, pos_encoding="none").eval()
    tokens = torch.tensor([[3, 5, 7, 2, 9, 4]])
    perm = torch.tensor([4, 0, 5, 1, 3, 2])
    with torch.no_grad():
        a = model(tokens).hidden[:, perm]
        b = model(tokens[:, perm]).hidden
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_nope_refuses_a_positional_encoding():
    with pytest.raises(ValueError, match="no positional encoding"):
        NoPE(10, pos_encoding="xpos")
