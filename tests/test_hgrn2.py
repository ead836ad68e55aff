"""HGRN2 (bench/models/hgrn2.py) against its equations written here independently, one step at a
time in float64 (the forget gate's lower bound by the softmax over layers, the outer-product state,
the output gate reading it), in the chunked form and the step form; the lower-bound schedule; the
layer's structure against flash-linear-attention's HGRN2 layer (fla/layers/hgrn2.py and
fla/models/hgrn2/modeling_hgrn2.py, read, not run: the facts below are written from them)."""

import pytest
import torch

import bench
from bench.models.hgrn2 import HGRN2, HGRN2Layer
from bench.runner.stream_state import stream_state_bytes

pytestmark = pytest.mark.usefixtures("one_thread")

D, H, L = 8, 2, 3  # expand ratio n = D / H = 4


def build(**kw) -> HGRN2:
    torch.manual_seed(0)
    params = {"d_model": D, "n_heads": H, "n_layers": L, "d_ff": 16, "dropout": 0.0, "chunk_size": 4, **kw}
    return bench.build_model("hgrn2", vocab_size=11, causal=True, **params).eval()


def random_gamma(model: HGRN2, seed: int = 1) -> None:
    """Gamma away from its zero start, so that every layer's lower bound differs per channel."""
    with torch.no_grad():
        model.blocks[0].mixer.lower_bounds.gamma.copy_(torch.randn(L, D, generator=torch.Generator().manual_seed(seed)))


def paper_layer(mixer: HGRN2Layer, gamma: torch.Tensor, k: int, x: torch.Tensor) -> torch.Tensor:
    """HGRN2 layer k on x (B, T, d), literally, step by step, in float64."""
    Wf, Wi, Wo, Wout = (m.weight.double() for m in (mixer.forget_gate, mixer.input, mixer.output_gate, mixer.out))
    g = mixer.norm.weight.double()
    n = D // H
    e = gamma.double().exp()  # (L, d)
    bound = sum(e[i] for i in range(1, k + 1)) / e.sum(0) if k > 0 else torch.zeros(D, dtype=torch.float64)  # gamma^k
    B, T, _ = x.shape
    out = torch.zeros(B, T, D, dtype=torch.float64)
    for b in range(B):
        S = [torch.zeros(n, n, dtype=torch.float64) for _ in range(H)]
        for t in range(T):
            xt = x[b, t].double()
            f = bound + (1 - bound) / (1 + torch.exp(-(Wf @ xt)))  # lower-bounded forget gate
            z = Wi @ xt
            i = z / (1 + torch.exp(-z))  # SiLU
            o = 1 / (1 + torch.exp(-(Wo @ xt)))  # output gate
            y = []
            for h in range(H):
                sl = slice(h * n, (h + 1) * n)
                S[h] = torch.diag(f[sl]) @ S[h] + torch.outer(1 - f[sl], i[sl])  # Diag{f} S + (1 - f)^T i
                y.append(o[sl] @ S[h])  # o_t S_t
            y = torch.cat(y)
            rms = torch.sqrt((y * y).mean() + 1e-5)
            out[b, t] = Wout @ (y / rms * g)
    return out


@pytest.mark.parametrize("k", range(L))
def test_layer_equals_the_paper_step_by_step(k):
    model = build()
    random_gamma(model)
    mixer = model.blocks[k].mixer
    x = torch.randn(2, 11, D, generator=torch.Generator().manual_seed(k))
    expect = paper_layer(mixer, mixer.lower_bounds.gamma.detach(), k, x)
    model.double()
    with torch.no_grad():
        chunked, final = mixer(x.double())  # chunks of 4: crosses chunk boundaries
        state, steps = mixer.init_state(2, dtype=torch.float64), []
        for t in range(x.shape[1]):  # the step form, one token at a time
            y, state = mixer(x[:, t : t + 1].double(), state)
            steps.append(y)
    torch.testing.assert_close(chunked, expect, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(torch.cat(steps, dim=1), expect, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(state, final, atol=1e-10, rtol=1e-10)


def test_lower_bound_starts_at_k_over_L_and_rises_with_depth():
    """fla: ``lower_bounds = zeros(L, d)``; ``softmax(0).cumsum(0) - [0]`` -> layer k's bound k / L at the start."""
    model = build()
    bounds = model.blocks[0].mixer.lower_bounds
    for k in range(L):
        torch.testing.assert_close(bounds(k), torch.full((D,), k / L))
    random_gamma(model)
    with torch.no_grad():
        rows = torch.stack([bounds(k) for k in range(L)])  # (L, d)
    assert (rows[0] == 0).all() and (rows[1:] > rows[:-1]).all() and (rows < 1).all()


# flash-linear-attention's HGRN2 (fla/layers/hgrn2.py, HGRN2Attention with num_heads given: expand_ratio =
# hidden_size // num_heads, forget_dim = num_heads * expand_ratio; use_short_conv False by default), as read:
FLA_LAYER = {  # parameter -> its shape for hidden size d and H heads; every projection bias-free
    "q_proj.weight": lambda d, H: (H * (d // H), d),
    "f_proj.weight": lambda d, H: (H * (d // H), d),
    "i_proj.weight": lambda d, H: (d, d),
    "g_norm.weight": lambda d, H: (d,),  # RMSNorm over the whole hidden size (elementwise_affine)
    "o_proj.weight": lambda d, H: (d, d),
}
FLA_NAMES = {"q_proj": "output_gate", "f_proj": "forget_gate", "i_proj": "input", "g_norm": "norm", "o_proj": "out"}  # fla -> bench
# fla/models/hgrn2/modeling_hgrn2.py: ``lower_bounds = nn.Parameter(torch.zeros(num_hidden_layers, hidden_size))``
# on the model, one for all layers; ``if lower_bound is not None and self.layer_idx > 0`` in the layer: none at layer 0


def test_layer_structure_matches_fla():
    model = build()
    for k, block in enumerate(model.blocks):
        mixer = block.mixer
        own = {name: tuple(p.shape) for name, p in mixer.named_parameters() if not name.startswith("lower_bounds.")}
        expect = {FLA_NAMES[a] + "." + b: shape(D, H) for a, b, shape in ((*n.split("."), s) for n, s in FLA_LAYER.items())}
        assert own == expect
        assert mixer.layer_idx == k and mixer.expand_ratio == D // H
        assert mixer.lower_bounds is model.blocks[0].mixer.lower_bounds  # one Gamma for the stack
    gamma = model.blocks[0].mixer.lower_bounds.gamma
    assert gamma.shape == (L, D) and (gamma == 0).all()
    assert sum(p is gamma for p in model.parameters()) == 1  # counted once


def test_state_is_n_by_n_per_head_and_flat_in_the_context():
    model = build()
    assert model.blocks[0].mixer.init_state(3).shape == (3, H, D // H, D // H)
    assert stream_state_bytes(model, 40) == stream_state_bytes(model, 400) > 0
    assert model.bounded_state


def test_streaming_equals_forward():
    model = build()
    random_gamma(model)
    tokens = torch.randint(0, 11, (2, 19), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = model(tokens).hidden
        state, pieces, start = model.init_state(2), [], 0
        for size in (1, 5, 2, 8, 3):
            out, state = model.step(tokens[:, start : start + size], state)
            pieces.append(out.hidden)
            start += size
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=0)


def test_heads_must_divide_the_width():
    with pytest.raises(bench.UserError, match="divisible by n_heads"):
        bench.build_model("hgrn2", vocab_size=11, causal=True, d_model=10, n_heads=4)
