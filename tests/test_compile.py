"""No host synchronisation in the models' forward and backward, checked on the CPU.

Two complementary checks, on tiny models and a padded batch:
* ``torch._dynamo.explain`` traces the forward as torch.compile would: every ``.item()``,
  ``bool(t)``, ``int(t)`` and data-dependent shape (boolean indexing, ``nonzero``) is a graph
  break there (``capture_scalar_outputs`` is off by default). The Transformer, NoPE, every
  RSA-Transformer and UT / GUT without early exit must trace as one graph; so must the XL,
  BRT and TLB families, which now do too.
* the eager forward and backward run with the tensor-to-Python conversions patched to raise,
  which also covers the hand-written backward passes (FFT convolution, gated mix) that dynamo's
  forward trace never sees.
Counts for every registry model: results/perf/compile_graph_breaks.md
(scripts/benchmarks/compile_graph_breaks.py).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch
import torch._dynamo as dynamo
from conformance import MODELS, model_class
from streaming_helpers import small

import bench

V = 11
HALTING = dict(max_layers=2)
SEGMENTS = dict(n_layers=1, segment_len=5, mem_len=5)
CHUNKS = dict(chunk_size=5, memory_slots=3)


def build(name: str, causal: bool, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    d_model = 20 if name.startswith("rsa-transformer-") else 16  # head dim 4 with the entry's 5 or 4 heads
    return bench.build_model(name, vocab_size=V, causal=causal, d_model=d_model, d_ff=24, dropout=0.0, **kw)


def batch(B: int = 2, T: int = 13):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, V, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 9:] = False  # right padding
    return tokens, mask


def graph_breaks(model: torch.nn.Module) -> tuple[int, list[str]]:
    """dynamo's graph break count and every break site as "file:function: reason" (a break in the
    last statement leaves no second graph and escapes the count, so both are checked)."""
    dynamo.reset()
    ex = dynamo.explain(model)(*batch())
    sites = [f"{Path(b.user_stack[-1].filename).name}:{b.user_stack[-1].name}: {str(b.reason).splitlines()[0]}" for b in ex.break_reasons]
    return ex.graph_break_count, sites


FAST = [  # (registry name, causal, extra parameters)
    ("transformer", True, {}),
    ("transformer", False, {"n_layers": 1}),
    ("rsa-transformer-II", False, {"n_layers": 1}),  # two dilation groups (d = 1, 2)
    ("gut", False, {**HALTING, "mode": "upperbound"}),
]
SLOW = [  # each entry once, causal and bidirectional alternating (the fast cases cover both for the core)
    ("nope", True, {}),
    *((f"rsa-transformer{v}", c, {"n_layers": 1}) for v, c in (("", True), ("-I", False), ("-II", True), ("-III", False), ("-IV", True))),
    ("ut", False, {**HALTING, "mode": "upperbound"}),
    ("ut", True, {**HALTING, "mode": "no-halt"}),
    ("gut", True, {**HALTING, "mode": "upperbound"}),
    ("gut", False, {**HALTING, "mode": "no-halt"}),
    ("xl", False, SEGMENTS),
    ("rsa-xl", True, SEGMENTS),
    ("brt", False, {"n_layers": 2, "block_size": 5, "n_state": 3}),
    ("tlb", False, {**CHUNKS, "n_layers": 1}),
    ("rsa-tlb", True, {**CHUNKS, "n_layers": 1}),
    ("gutlb", False, {**HALTING, **CHUNKS, "mode": "upperbound"}),
]


def _label(case) -> str:
    name, causal, kw = case
    return f"{name}-{'causal' if causal else 'bidir'}" + (f"-{kw['mode']}" if "mode" in kw else "")


@pytest.mark.parametrize("case", [*FAST, *(pytest.param(case, marks=pytest.mark.slow, id=_label(case)) for case in SLOW)], ids=_label)
def test_forward_traces_as_one_graph(case):
    name, causal, kw = case
    breaks, sites = graph_breaks(build(name, causal, **kw))
    assert breaks == 0 and not sites, sites


@pytest.mark.slow
def test_early_exit_is_the_only_graph_break_of_halting():
    """GUT in ``halt`` mode breaks the graph only where it asks which sequences finished."""
    breaks, sites = graph_breaks(build("gut", False, **HALTING, mode="halt"))
    assert breaks >= 1 and {site.split(": ")[0] for site in sites} == {"halting.py:run_dropping"}, sites


class HostSync(RuntimeError):
    pass


@contextlib.contextmanager
def host_syncs_raise():
    """Make every Python-level device -> host read raise (on a GPU each one waits for the device)."""
    names = ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__")
    saved = {n: getattr(torch.Tensor, n) for n in names}

    def refuse(name):
        def f(self, *a, **k):
            raise HostSync(f"Tensor.{name} called")

        return f

    try:
        for n in names:
            setattr(torch.Tensor, n, refuse(n))
        yield
    finally:
        for n, f in saved.items():
            setattr(torch.Tensor, n, f)


def test_host_sync_guard_catches_a_sync():
    with host_syncs_raise(), pytest.raises(HostSync):
        bool(torch.ones(2).all())


@pytest.mark.parametrize(
    "case",
    [
        ("transformer", False, {"pos_encoding": "sinusoidal"}),
        ("transformer", True, {"pos_encoding": "learned"}),
        ("rsa-transformer-IV", True, {"rsa": {"kinds": [3, 0, 0, 0, 1, 1], "dilations": [2, 2], "path": "dense"}}),
        ("rsa-xl", False, SEGMENTS),
        ("brt", True, {"block_size": 5, "n_state": 3}),
        ("rsa-tlb", False, CHUNKS),
        ("gut", False, {**HALTING, "mode": "upperbound"}),
        ("gut", True, {**HALTING, "mode": "no-halt"}),
        ("ut", False, {**HALTING, "mode": "upperbound"}),
        ("gutlb", False, {**HALTING, **CHUNKS, "mode": "upperbound"}),
    ],
    ids=_label,
)
def test_forward_and_backward_never_read_device_values(case):
    """Settings beside the registry entries' own (the halting modes that never read, positional encodings,
    the dense REM path, short segments and chunks): no device value read on the host."""
    name, causal, kw = case
    model = build(name, causal, **kw).train()
    with host_syncs_raise():
        loss = forward_backward(model)
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters() if p.numel())


def forward_backward(model) -> torch.Tensor:
    tokens, mask = batch()
    out = model(tokens, mask)
    loss = out.hidden.square().mean() + out.aux_loss + (0 if out.pooled is None else out.pooled.mean())
    loss.backward()
    return loss


@pytest.mark.conformance(family="name")
@pytest.mark.parametrize("name", MODELS)
def test_a_family_reads_no_device_value_unless_it_says_why(name):
    """Every registry entry, tiny and as registered (bidirectional where it has the mode: the padding
    path), forward and backward: no device value is read on the host, unless the model or a module in
    it declares why it must (``host_reads``), and then one is read."""
    cls = model_class(name)
    torch.manual_seed(0)
    model = bench.build_model(name, vocab_size=V, causal=not cls.supports_bidirectional, **small(name)).train()
    reasons = [why for m in model.modules() if (why := getattr(m, "host_reads", ""))]
    if reasons:
        with host_syncs_raise(), pytest.raises(HostSync):
            forward_backward(model)
        return
    with host_syncs_raise():
        loss = forward_backward(model)
    assert torch.isfinite(loss)
