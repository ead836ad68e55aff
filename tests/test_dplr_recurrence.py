"""The diagonal-plus-low-rank rule (``dplr_delta_rule``, bench/models/layers/linear_recurrence.py):
S_t = (diag(w_t) + b_t a_t^T) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t. The chunkwise form and the step
form against the step-by-step reference loop (outputs, final states, gradients) for every decay kind
(none, per head, per key channel, and per channel so strong that the exact (C, C, dk) form is used),
with and without an initial state, T a multiple of the chunk and not; against ``delta_rule`` (an
independent chunked form) where the two coincide; a hand-computed overwrite. Inputs as RWKV-7 feeds
them: a = -kappa^, b = kappa^ * rate, kappa^ unit, rate in (0, 1).

Float64: agreement to 1e-10; float32 against the float64 reference: <= 1e-5 at T = 1024 and 1000."""

import pytest
import torch
import torch.nn.functional as F
from recurrence_helpers import float32_gradient_errors

from bench.models.layers.linear_recurrence import delta_rule, dplr_delta_rule, dplr_delta_rule_reference, dplr_delta_rule_step

pytestmark = pytest.mark.usefixtures("one_thread")

B, H, DK, DV = 2, 2, 16, 8
DECAYS = ["none", "head", "channel", "strong"]  # strong: up to -8 a step, beyond the factored form's range


def make(T, decay, dtype=torch.float64, seed=0, state=True):
    g = torch.Generator().manual_seed(seed)
    unit = lambda: F.normalize(torch.randn(B, H, T, DK, generator=g, dtype=dtype), dim=-1)  # noqa: E731
    q, k, kappa = unit(), unit(), unit()
    rate = torch.rand(B, H, T, DK, generator=g, dtype=dtype)
    args = {"q": q, "k": k, "v": torch.randn(B, H, T, DV, generator=g, dtype=dtype), "a": -kappa, "b": kappa * rate}
    if decay == "head":
        args["log_decay"] = -0.3 * torch.rand(B, H, T, generator=g, dtype=dtype)
    elif decay in ("channel", "strong"):
        args["log_decay"] = -(8 if decay == "strong" else 1) * torch.rand(B, H, T, DK, generator=g, dtype=dtype)
    if state:
        args["initial_state"] = torch.randn(B, H, DK, DV, generator=g, dtype=dtype)
    return args


@pytest.mark.parametrize("decay", DECAYS)
@pytest.mark.parametrize("T,chunk,state", [(1024, 32, True), (1000, 64, True), (37, 5, False), (5, 8, True), (9, 1, True)])
def test_chunked_equals_reference_float64(decay, T, chunk, state):
    args = make(T, decay, state=state)
    o, S = dplr_delta_rule(**args, chunk_size=chunk)
    ro, rS = dplr_delta_rule_reference(**args)
    err = max((o - ro).abs().max().item(), (S - rS).abs().max().item())
    print(f"\ndplr {decay} T={T} C={chunk}: {err:.1e}")
    assert err < 1e-10


@pytest.mark.parametrize("decay", DECAYS)
@pytest.mark.parametrize("T", [1024, 1000])
def test_chunked_float32_within_1e_5_of_the_float64_reference(decay, T):
    args = make(T, decay, seed=1)
    o, S = dplr_delta_rule(**{n: x.float() for n, x in args.items()})
    ro, rS = dplr_delta_rule_reference(**args)
    err = max((o.double() - ro).abs().max().item(), (S.double() - rS).abs().max().item())
    print(f"\ndplr float32 {decay} T={T}: {err:.1e}")
    assert err <= 1e-5


@pytest.mark.parametrize("decay", DECAYS)
def test_gradients_equal_the_reference_loop(decay):
    args = make(21, decay, seed=2)
    leaves = {n: x.clone().requires_grad_(True) for n, x in args.items()}
    grads = {}
    for name, fn in (("chunked", lambda **kw: dplr_delta_rule(**kw, chunk_size=4)), ("reference", dplr_delta_rule_reference)):
        o, S = fn(**leaves)
        loss = (o * torch.linspace(-1, 1, o.shape[-1], dtype=o.dtype)).sum() + (S**2).sum()
        grads[name] = torch.autograd.grad(loss, list(leaves.values()))
    for n, got, ref in zip(leaves, grads["chunked"], grads["reference"]):
        err = (got - ref).abs().max().item()
        assert err < 1e-10, f"d/d{n}: {err:.1e}"


@pytest.mark.parametrize("decay", DECAYS)
def test_step_form_equals_the_reference(decay):
    T = 30
    args = make(T, decay, seed=3)
    S, outs = args["initial_state"], []
    for t in range(T):
        ld = args.get("log_decay")
        o, S = dplr_delta_rule_step(*(args[n][:, :, t] for n in "qkvab"), None if ld is None else ld[:, :, t], S)
        outs.append(o)
    ro, rS = dplr_delta_rule_reference(**args)
    torch.testing.assert_close(torch.stack(outs, 2), ro, atol=1e-12, rtol=0)
    torch.testing.assert_close(S, rS, atol=1e-12, rtol=0)


def test_a_sequence_cut_anywhere_continues_through_the_state():
    args = make(50, "channel", seed=4)
    whole, S_whole = dplr_delta_rule(**args, chunk_size=8)
    o1, S1 = dplr_delta_rule(**{n: (x[:, :, :19] if n != "initial_state" else x) for n, x in args.items()}, chunk_size=3)
    o2, S2 = dplr_delta_rule(**{n: (x[:, :, 19:] if n != "initial_state" else S1) for n, x in args.items()}, chunk_size=8)
    torch.testing.assert_close(torch.cat((o1, o2), 2), whole, atol=1e-12, rtol=0)
    torch.testing.assert_close(S2, S_whole, atol=1e-12, rtol=0)


@pytest.mark.parametrize("decay", ["none", "head"])
def test_the_delta_rule_is_the_rank_one_case(decay):
    """a (I - beta k k^T) S + beta k v^T = (a I + (-a beta k) k^T) S + (beta k) v^T: read along k,
    written along -a beta k, key beta k; against delta_rule's own chunked form (the UT transform)."""
    args = make(45, decay, seed=5)
    beta = 2 * torch.rand(B, H, 45, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    ld = args.get("log_decay")
    q, k, v, S0 = args["q"], args["k"], args["v"], args["initial_state"]
    o, S = delta_rule(q, k, v, beta, ld, initial_state=S0, chunk_size=16)
    a_t = torch.ones_like(beta) if ld is None else ld.exp()
    o2, S2 = dplr_delta_rule(q, beta[..., None] * k, v, k, -(a_t * beta)[..., None] * k, ld, initial_state=S0)
    torch.testing.assert_close(o2, o, atol=1e-12, rtol=0)
    torch.testing.assert_close(S2, S, atol=1e-12, rtol=0)


def test_rate_one_with_a_unit_key_replaces_what_it_stored():
    """Hand-computed, RWKV-7's a = -kappa, b = kappa (rate 1), kappa = k = e0: S_1 = e0 v1^T; then
    S_2 = (I - e0 e0^T) S_1 + e0 v2^T = e0 v2^T, so q = e0 reads v2; with rate 1/2 it reads v1 / 2 + v2."""
    e0 = torch.eye(3, dtype=torch.float64)[0]
    k = e0.expand(1, 1, 2, 3)
    v = torch.tensor([[1.0, 4.0], [2.0, -1.0]], dtype=torch.float64).view(1, 1, 2, 2)
    for rate, expect in ((1.0, [2.0, -1.0]), (0.5, [2.5, 1.0])):
        o, S = dplr_delta_rule(k, k, v, -k, rate * k)
        torch.testing.assert_close(o[0, 0, 1], torch.tensor(expect, dtype=torch.float64))
        torch.testing.assert_close(o[0, 0, 0], v[0, 0, 0])


def test_bad_shapes_say_what_would_be_right():
    q = torch.zeros(1, 1, 5, 4)
    with pytest.raises(ValueError, match=r"a and b must be \(B, H, T, dk\)"):
        dplr_delta_rule(q, q, q, q, torch.zeros(1, 1, 5, 3))


def test_the_chunk_and_form_follow_the_strongest_decay():
    """Hand-computed from FACTORED_LOG_RANGE = 30: a chunk of C steps factors while C * (strongest
    decay) <= 30, is cut to 30 // strongest steps down to 8, and takes the exact form beyond that;
    a stated floor is used instead of reading the tensor."""
    from bench.models.layers.linear_recurrence import FACTORED_LOG_RANGE, _per_channel_chunk

    assert FACTORED_LOG_RANGE == 30.0
    decays = lambda strongest: torch.full((1, 1, 100, 4), -0.1).index_fill_(2, torch.tensor([7]), -strongest)  # noqa: E731
    assert _per_channel_chunk(decays(0.4), 64, 100) == (64, True)  # 64 * 0.4 = 25.6
    assert _per_channel_chunk(decays(0.5), 64, 100) == (60, True)  # 64 * 0.5 = 32 > 30: 30 // 0.5 = 60
    assert _per_channel_chunk(decays(3.0), 64, 100) == (10, True)
    assert _per_channel_chunk(decays(4.0), 64, 100) == (8, False)  # 8 * 4 = 32 > 30: exact, chunks of 8
    assert _per_channel_chunk(decays(4.0), 64, 5) == (5, True)  # a 5-step sequence: 5 * 4 = 20
    assert _per_channel_chunk(decays(4.0), 64, 100, decay_floor=-0.25) == (64, True)  # the floor, not the tensor


@pytest.mark.parametrize("decay", ["channel", "strong"])
def test_float32_gradients_within_1e_5_of_the_float64_loop(decay):
    """The factored form multiplies factors up to e^30 and down to e^-30: its float32 gradients,
    relative to the largest of each input's, stay within 1e-5 of the float64 loop's (measured ~6e-7)."""
    args = make(200, decay, seed=7, state=False)
    for n, rel in float32_gradient_errors(dplr_delta_rule, dplr_delta_rule_reference, args).items():
        assert rel <= 1e-5, f"d/d{n}: {rel:.1e}"
