"""Shared by the recurrence mechanism's tests (test_linear_recurrence.py, test_dplr_recurrence.py)."""

import torch


def float32_gradient_errors(chunked, reference, args: dict) -> dict:
    """{input: the largest |float32 gradient of ``chunked`` - float64 gradient of ``reference``|, relative
    to the largest of the reference's}, both of the loss sum(o) + sum(S^2) at ``args``."""
    grads = {}
    for name, dtype, fn in (("chunked", torch.float32, chunked), ("reference", torch.float64, reference)):
        leaves = {n: x.to(dtype).requires_grad_(True) for n, x in args.items()}
        o, S = fn(**leaves)
        grads[name] = torch.autograd.grad(o.sum() + S.square().sum(), list(leaves.values()))
    return {
        n: ((got.double() - ref).abs().max() / ref.abs().max()).item() for n, got, ref in zip(args, grads["chunked"], grads["reference"])
    }
