"""The CUDA paths: every registry model computes on the GPU what it computes on the CPU (outputs
and gradients), bf16 autocast stays close to fp32, the FFT REM path and the gated RSA mix agree
with their references on the GPU, the attention backends agree with each other there, and
`bench run` trains on the GPU in bf16. All skipped without a CUDA device (CI has none); run them
on a GPU machine with `pytest -m gpu` (scripts/gpu/gpu_check.sh runs them with the GPU benchmarks)."""

import pytest
import torch
from test_models import MODELS, _small, model_class
from test_rem import random_rem

import bench
from bench.models.layers import attend, xformers_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(autouse=True)
def exact_fp32():
    """fp32 on the GPU as on the CPU: TF32 would change results at the 1e-3 level."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _model_and_batch(name: str, seq_len: int = 40):
    causal = model_class(name).supports_causal
    torch.manual_seed(0)
    # train mode (dropout is 0 here): cuDNN's RNN backward refuses eval mode
    model = bench.build_model(name, vocab_size=12, causal=causal, preset="smoke", **_small(name)).train()
    tokens = torch.randint(1, 12, (3, seq_len))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    if not causal:
        mask[1, seq_len - 7 :] = False  # padding too, where the model takes it
        tokens[1, seq_len - 7 :] = 0
    return model, tokens, mask


def _loss_and_grads(model, tokens, mask, weight):
    model.zero_grad(set_to_none=True)
    out = model(tokens, mask).hidden
    (out.float() * weight).sum().backward()
    grads = {n: p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return out.detach().float().cpu(), grads


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", MODELS)
def test_cuda_matches_cpu_outputs_and_gradients(name):
    model, tokens, mask = _model_and_batch(name)
    weight = torch.randn(3, tokens.shape[1], model.d_model)
    out_cpu, grads_cpu = _loss_and_grads(model, tokens, mask, weight)
    model.cuda()
    out_gpu, grads_gpu = _loss_and_grads(model, tokens.cuda(), mask.cuda(), weight.cuda())
    torch.testing.assert_close(out_gpu, out_cpu, atol=1e-4, rtol=1e-3)
    assert grads_gpu.keys() == grads_cpu.keys()
    for n in grads_cpu:
        torch.testing.assert_close(grads_gpu[n], grads_cpu[n], atol=1e-3, rtol=1e-2, msg=lambda m: f"{n}: {m}")  # noqa: B023 (called at once)


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", MODELS)
def test_bf16_autocast_stays_close_to_fp32(name):
    model, tokens, mask = _model_and_batch(name)
    model.cuda()
    tokens, mask = tokens.cuda(), mask.cuda()
    with torch.no_grad():
        ref = model(tokens, mask).hidden.float()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(tokens, mask).hidden
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < 3e-2, f"bf16 output is {rel:.3f} (relative) away from fp32"
    out.float().square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T", [7, 41, 300])  # not multiples of the dilations 2, 3, 5; 300 > lag cap
def test_rem_fft_path_matches_dense_on_cuda(T, causal):
    """All six kinds at once, square and memory + new-token shapes, values and gradients (fp64)."""
    rem = random_rem(lag_cap=50).cuda()
    for Tq, offset in [(T, 0), (max(1, T - 3), 3)]:
        v = torch.randn(2, 6, T, 4, dtype=torch.float64, device="cuda", requires_grad=True)
        w = None
        results = {}
        for path in ("fft", "dense"):
            rem.path = path
            out = rem(v, n_queries=Tq, offset=offset, causal=causal)
            w = torch.randn_like(out) if w is None else w
            results[path] = (out, *torch.autograd.grad((out * w).sum(), [v, *rem.parameters()]))
        for a, b in zip(results["fft"], results["dense"]):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_gated_mix_gradients_match_finite_differences_on_cuda():
    from test_rsa import check_gated_mix_gradients

    check_gated_mix_gradients(device="cuda")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_kernels_match_the_math_backend(causal, dtype):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 77, 32, device="cuda", dtype=dtype) for _ in range(3))
    key_mask = torch.ones(2, 77, dtype=torch.bool, device="cuda")
    key_mask[1, 60:] = False
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    for kw in ({}, {"key_mask": key_mask}):
        got = attend(q, k, v, causal=causal, backend="sdpa", **kw).float()
        want = attend(q.float(), k.float(), v.float(), causal=causal, backend="math", **kw)
        torch.testing.assert_close(got, want, atol=tol, rtol=tol)


def test_xformers_is_optional():
    """Without a working xformers the sdpa default runs and xformers says why in one line."""
    if xformers_available():
        pytest.skip("xformers works here; tests/test_transformer.py compares it with sdpa")
    q = torch.randn(1, 2, 8, 16, device="cuda")
    with pytest.raises(RuntimeError, match="the xformers backend (needs the xformers package|finds no kernel)"):
        attend(q, q, q, backend="xformers")


def test_bench_run_trains_on_the_gpu_in_bf16(tmp_path):
    """The harness picks the GPU by itself, records it, and learns Parity's smoke split in bf16."""
    rec = bench.run(
        model="lstm",
        task="parity",
        preset="smoke",
        seed=0,
        out=tmp_path,
        progress=False,
        overrides=["train.max_epochs=12", "train.lr=0.01", "train.precision=bf16-mixed"],
    )
    assert rec["status"] == "ok"
    assert rec["device"]["type"] == "cuda"
    assert rec["config"]["train"]["precision"] == "bf16-mixed"
    assert rec["metrics"]["bin0"]["acc"] >= 0.9, rec["metrics"]["bin0"]


def test_xformers_backend_without_xformers_is_one_clear_error(tmp_path):
    if xformers_available():
        pytest.skip("xformers works here")
    from bench.errors import UserError

    with pytest.raises(UserError, match="model.attn_backend=xformers (needs the xformers package|finds no kernel)"):
        bench.run(
            model="transformer",
            task="parity",
            preset="smoke",
            seed=0,
            out=tmp_path,
            progress=False,
            overrides=["model.attn_backend=xformers"],
        )
    assert not list(tmp_path.rglob("*.json"))
