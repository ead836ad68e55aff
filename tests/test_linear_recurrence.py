"""The matrix-state recurrences (bench/models/layers/linear_recurrence.py): the chunkwise-parallel
form and the step form against the step-by-step reference loop, outputs, final states and
gradients, for every decay kind (none, per head, per key channel: factored and, for strong decays,
exact; signed per head), with and without an initial state, T a multiple of the chunk and not.

Float64: agreement to 1e-10; float32 (compared with the float64 reference, the truth): <= 1e-5 at
T = 1024 and 1000. Inputs are what the families feed: L2-normalised q and k (DeltaNet, Gated
DeltaNet; the delta rule is stable only with ||k|| <= 1 and beta in (0, 2)), unit-variance v.
Run with ``-s`` to see the largest differences."""

import pytest
import torch
import torch.nn.functional as F
from recurrence_helpers import float32_gradient_errors

from bench.models.layers.linear_recurrence import (
    delta_rule,
    delta_rule_reference,
    delta_rule_step,
    gated_linear_attention,
    gated_linear_attention_reference,
    gated_linear_attention_step,
)

pytestmark = pytest.mark.usefixtures("one_thread")

B, H, DK, DV = 2, 2, 16, 8
GLA_DECAYS = ["none", "head", "channel", "strong", "signed"]  # strong: per channel, up to -8 a step (the exact (C, C, dk) form)
DELTA_DECAYS = ["none", "head"]


def make(T, decay, dtype=torch.float64, seed=0, state=True, delta=False):
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, H, T, DK, generator=g, dtype=dtype), dim=-1)
    k = F.normalize(torch.randn(B, H, T, DK, generator=g, dtype=dtype), dim=-1)
    v = torch.randn(B, H, T, DV, generator=g, dtype=dtype)
    args = {"q": q, "k": k, "v": v}
    if delta:
        args["beta"] = 2 * torch.rand(B, H, T, generator=g, dtype=dtype)  # (0, 2): negative eigenvalues too
    if decay in ("head", "signed"):
        args["log_decay"] = -0.3 * torch.rand(B, H, T, generator=g, dtype=dtype)
    elif decay in ("channel", "strong"):
        args["log_decay"] = -(8 if decay == "strong" else 1) * torch.rand(B, H, T, DK, generator=g, dtype=dtype)
    if decay == "signed":
        args["decay_sign"] = torch.where(torch.rand(B, H, T, generator=g) < 0.3, -1.0, 1.0).to(dtype)
    if state:
        args["initial_state"] = torch.randn(B, H, DK, DV, generator=g, dtype=dtype)
    return args


def double(args):
    return {k: v.double() for k, v in args.items()}


def run(delta, args, **kw):
    if delta:
        return delta_rule(**args, **kw)
    return gated_linear_attention(**args, **kw)


def reference(delta, args):
    return (delta_rule_reference if delta else gated_linear_attention_reference)(**args)


CASES = [(False, d) for d in GLA_DECAYS] + [(True, d) for d in DELTA_DECAYS]
IDS = [f"{'delta' if d else 'gla'}-{decay}" for d, decay in CASES]


@pytest.mark.parametrize("delta,decay", CASES, ids=IDS)
@pytest.mark.parametrize("T,chunk,state", [(1024, 64, True), (1000, 64, True), (1000, 64, False), (37, 16, True), (5, 64, True)])
def test_chunked_equals_reference_float64(delta, decay, T, chunk, state):
    args = make(T, decay, state=state, delta=delta)
    o, S = run(delta, args, chunk_size=chunk)
    ro, rS = reference(delta, args)
    err = max((o - ro).abs().max().item(), (S - rS).abs().max().item())
    print(f"\nfloat64 {'delta_rule' if delta else 'gated_linear_attention'} {decay} T={T}: max abs err {err:.1e}")
    assert err < 1e-10


@pytest.mark.parametrize("delta,decay", CASES, ids=IDS)
@pytest.mark.parametrize("T", [1024, 1000])
def test_chunked_float32_within_1e_5_of_the_float64_reference(delta, decay, T):
    args = make(T, decay, dtype=torch.float32, delta=delta)
    o, S = run(delta, args)
    assert o.dtype == S.dtype == torch.float32
    ro, rS = reference(delta, double(args))
    err = max((o.double() - ro).abs().max().item(), (S.double() - rS).abs().max().item())
    print(f"\nfloat32 {'delta_rule' if delta else 'gated_linear_attention'} {decay} T={T}: max abs err {err:.1e}")
    assert err <= 1e-5


@pytest.mark.parametrize("delta,decay", CASES, ids=IDS)
def test_gradients_equal_the_reference_loops(delta, decay):
    """d/d(every input) of a random linear function of (o, final state), float64."""
    args = make(75, decay, delta=delta, seed=1)
    grads = {}
    for name, fn in (("chunked", lambda a: run(delta, a, chunk_size=16)), ("reference", lambda a: reference(delta, a))):
        leaves = {k: v.clone().requires_grad_(k != "decay_sign") for k, v in args.items()}
        o, S = fn(leaves)
        g = torch.Generator().manual_seed(2)
        loss = (o * torch.randn(o.shape, generator=g, dtype=o.dtype)).sum() + (S * torch.randn(S.shape, generator=g, dtype=S.dtype)).sum()
        wrt = [k for k in leaves if leaves[k].requires_grad]
        grads[name] = dict(zip(wrt, torch.autograd.grad(loss, [leaves[k] for k in wrt])))
    for key, ref in grads["reference"].items():
        err = (grads["chunked"][key] - ref).abs().max().item()
        assert err < 1e-10, f"d/d{key}: {err:.1e}"


@pytest.mark.parametrize("delta,decay", CASES, ids=IDS)
def test_step_form_equals_the_reference(delta, decay):
    """The streaming form, one token at a time, from the initial state."""
    T = 40
    args = make(T, decay, delta=delta, seed=3)
    S = args["initial_state"]
    outs = []
    for t in range(T):
        ld = args.get("log_decay")
        ld = None if ld is None else ld[:, :, t]
        if delta:
            o, S = delta_rule_step(args["q"][:, :, t], args["k"][:, :, t], args["v"][:, :, t], args["beta"][:, :, t], ld, S)
        else:
            sign = args.get("decay_sign")
            o, S = gated_linear_attention_step(
                args["q"][:, :, t], args["k"][:, :, t], args["v"][:, :, t], ld, S, None if sign is None else sign[:, :, t]
            )
        outs.append(o)
    ro, rS = reference(delta, args)
    torch.testing.assert_close(torch.stack(outs, 2), ro, atol=1e-12, rtol=0)
    torch.testing.assert_close(S, rS, atol=1e-12, rtol=0)


@pytest.mark.parametrize("delta", [False, True])
def test_a_sequence_cut_anywhere_continues_through_the_state(delta):
    """Chunked on [0, 23) then on [23, 90) from its final state = chunked on [0, 90): what streaming
    relies on (any split, any chunk size)."""
    args = make(90, "head", delta=delta, seed=4)
    whole, S_whole = run(delta, args, chunk_size=16)
    first = {k: (v[:, :, :23] if k != "initial_state" else v) for k, v in args.items()}
    o1, S1 = run(delta, first, chunk_size=8)
    second = {k: (v[:, :, 23:] if k != "initial_state" else S1) for k, v in args.items()}
    o2, S2 = run(delta, second, chunk_size=64)
    torch.testing.assert_close(torch.cat((o1, o2), 2), whole, atol=1e-12, rtol=0)
    torch.testing.assert_close(S2, S_whole, atol=1e-12, rtol=0)


def test_delta_rule_with_beta_one_and_unit_keys_overwrites_a_key():
    """Hand-computed: beta = 1, ||k|| = 1 replaces the value stored under k (S^T k = v afterwards)
    and leaves orthogonal keys' values alone; plain linear attention adds instead."""
    e0, e1 = torch.eye(4, dtype=torch.float64)[:2]
    k = torch.stack([e0, e1, e0]).view(1, 1, 3, 4)
    v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [5.0, 7.0]], dtype=torch.float64).view(1, 1, 3, 2)
    q = k.clone()
    o, S = delta_rule(q, k, v, torch.ones(1, 1, 3, dtype=torch.float64))
    torch.testing.assert_close(o[0, 0], torch.tensor([[1.0, 0.0], [0.0, 2.0], [5.0, 7.0]], dtype=torch.float64))
    torch.testing.assert_close(S[0, 0].mT @ e1, torch.tensor([0.0, 2.0], dtype=torch.float64))
    o, _ = gated_linear_attention(q, k, v)
    torch.testing.assert_close(o[0, 0, 2], torch.tensor([6.0, 7.0], dtype=torch.float64))


def test_decay_of_one_half_is_hand_computable():
    """k = q = 1 (dk = 1), v = 1, a = 1/2: o_t = sum_{s<=t} 2^{-(t-s)} = 2 - 2^{1-t}."""
    T = 6
    ones = torch.ones(1, 1, T, 1, dtype=torch.float64)
    half = torch.full((1, 1, T), -torch.log(torch.tensor(2.0)).item(), dtype=torch.float64)
    o, S = gated_linear_attention(ones, ones, ones, half, chunk_size=4)
    expect = torch.tensor([2 - 2 ** (1 - t) for t in range(1, T + 1)], dtype=torch.float64)
    torch.testing.assert_close(o[0, 0, :, 0], expect)
    torch.testing.assert_close(S[0, 0, 0, 0], expect[-1])


@pytest.mark.parametrize(
    "bad,message",
    [
        (dict(log_decay=torch.zeros(1, 1, 5, 3)), "log_decay must be"),
        (dict(initial_state=torch.zeros(1, 1, 2, 2)), "initial_state must be"),
        (dict(chunk_size=0), "chunk_size must be"),
    ],
)
def test_bad_shapes_say_what_would_be_right(bad, message):
    q = torch.zeros(1, 1, 5, 4)
    with pytest.raises(ValueError, match=message):
        gated_linear_attention(q, q, q, **bad)


def test_delta_rule_refuses_a_per_channel_decay():
    q = torch.zeros(1, 1, 5, 4)
    with pytest.raises(ValueError, match=r"log_decay must be \(1, 1, 5\)"):
        delta_rule(q, q, q, torch.zeros(1, 1, 5), torch.zeros(1, 1, 5, 4))


@pytest.mark.parametrize("decay", ["channel", "strong"])
def test_per_channel_float32_gradients_within_1e_5_of_the_float64_loop(decay):
    """A per-channel decay's factored form (factors up to e^30) and its exact form: float32 gradients,
    relative to the largest of each input's, within 1e-5 of the float64 loop's (measured ~9e-7)."""
    args = make(200, decay, seed=8, state=False)
    for n, rel in float32_gradient_errors(gated_linear_attention, gated_linear_attention_reference, args).items():
        assert rel <= 1e-5, f"d/d{n}: {rel:.1e}"
