"""The matrix-state recurrences on a CUDA device (``pytest -m gpu``; skipped without one): the torch
forms on the GPU against the float64 reference loop on the CPU, and, where flash-linear-attention is
installed (``pip install 'bench[fla]'``), its Triton kernels against the torch forms. fla is imported
only inside these tests, never on a CPU-only machine. fla's layout is (B, T, H, d) and it scales q by
``scale`` (given as 1 here: bench's functions scale nothing)."""

import pytest
import torch
import torch.nn.functional as F

from bench.models.layers.linear_recurrence import (
    delta_rule,
    delta_rule_reference,
    dplr_delta_rule,
    gated_linear_attention,
    gated_linear_attention_reference,
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

B, H, T, D = 2, 4, 1000, 64


def inputs(decay, delta, device="cuda"):
    g = torch.Generator().manual_seed(0)
    q = F.normalize(torch.randn(B, H, T, D, generator=g), dim=-1)
    k = F.normalize(torch.randn(B, H, T, D, generator=g), dim=-1)
    v = torch.randn(B, H, T, D, generator=g)
    out = {"q": q, "k": k, "v": v, "initial_state": torch.randn(B, H, D, D, generator=g)}
    if delta:
        out["beta"] = 2 * torch.rand(B, H, T, generator=g)
    if decay == "head":
        out["log_decay"] = -0.3 * torch.rand(B, H, T, generator=g)
    elif decay == "channel":
        out["log_decay"] = -torch.rand(B, H, T, D, generator=g)
    return {name: x.to(device) for name, x in out.items()}


@pytest.mark.parametrize("delta,decay", [(False, None), (False, "head"), (False, "channel"), (True, None), (True, "head")])
def test_torch_forms_on_cuda_equal_the_reference(delta, decay):
    args = inputs(decay, delta)
    o, S = (delta_rule if delta else gated_linear_attention)(**args)
    ref = (delta_rule_reference if delta else gated_linear_attention_reference)(**{k: v.cpu().double() for k, v in args.items()})
    assert (o.double().cpu() - ref[0]).abs().max() <= 1e-4
    assert (S.double().cpu() - ref[1]).abs().max() <= 1e-4


def _bthd(x):
    return x.transpose(1, 2).contiguous()  # (B, H, T, d) -> (B, T, H, d)


@pytest.mark.parametrize("delta,decay", [(False, "head"), (False, "channel"), (True, None), (True, "head")])
def test_fla_kernels_equal_the_torch_forms(delta, decay):
    pytest.importorskip("fla")
    ops = pytest.importorskip("fla.ops")
    args = inputs(decay, delta)
    o, S = (delta_rule if delta else gated_linear_attention)(**args)
    q, k, v = (_bthd(args[n]) for n in "qkv")
    common = dict(scale=1.0, initial_state=args["initial_state"], output_final_state=True)
    if delta and decay is None:
        fo, fS = ops.chunk_delta_rule(q, k, v, args["beta"].transpose(1, 2).contiguous(), **common)
    elif delta:
        fo, fS = ops.chunk_gated_delta_rule(
            q, k, v, args["log_decay"].transpose(1, 2).contiguous(), args["beta"].transpose(1, 2).contiguous(), **common
        )
    elif decay == "head":
        fo, fS = ops.chunk_simple_gla(q, k, v, args["log_decay"].transpose(1, 2).contiguous(), **common)
    else:
        fo, fS = ops.chunk_gla(q, k, v, _bthd(args["log_decay"]), **common)
    torch.testing.assert_close(fo.transpose(1, 2).float(), o, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(fS.float(), S, atol=2e-3, rtol=2e-3)


def test_fla_dplr_kernel_equals_the_torch_form():
    """fla's ``chunk_dplr_delta_rule`` (S_t = S_{t-1} read along a, written along b, its naive.py) against
    ``dplr_delta_rule`` with RWKV-7's inputs: a = -kappa^, b = kappa^ * rate, a per-channel decay."""
    pytest.importorskip("fla")
    ops = pytest.importorskip("fla.ops.generalized_delta_rule")
    args = inputs("channel", False)
    g = torch.Generator().manual_seed(1)
    kappa = F.normalize(torch.randn(B, H, T, D, generator=g), dim=-1).cuda()
    rate = torch.rand(B, H, T, D, generator=g).cuda()
    a, b = -kappa, kappa * rate
    o, S = dplr_delta_rule(args["q"], args["k"], args["v"], a, b, args["log_decay"], initial_state=args["initial_state"])
    fo, fS = ops.chunk_dplr_delta_rule(
        *(_bthd(x) for x in (args["q"], args["k"], args["v"], a, b, args["log_decay"])),
        scale=1.0,
        initial_state=args["initial_state"],
        output_final_state=True,
    )
    torch.testing.assert_close(fo.transpose(1, 2).float(), o, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(fS.float(), S, atol=2e-3, rtol=2e-3)
