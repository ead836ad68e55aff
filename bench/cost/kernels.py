"""kernels/step (``bench cost --kernels``, CPU): kernel calls of one training step read from torch.profiler.

For the eager model and, with ``--compile``, the compiled one, by one rule for both: every
inductor-generated C++ kernel (inductor's ``cpp.enable_kernel_profile`` records each call: set
before compiling, it adds a record-function per kernel call to the generated code) plus every
aten operator the dispatcher runs from Python, the autograd engine or inductor's wrapper (its
extern kernels: matmuls, attention, and whatever runs outside the compiled graphs), i.e. not
from inside another operator's kernel, that has a kernel of its own (CompositeImplicitAutograd
operators count as the operators they decompose into) and launches one (views and bare
allocations excluded, as ``ops``; by operator name: the profiler gives no overload). On the eager
model it reproduces ``ops`` to about 1-2% (flip-flop smoke: transformer 247 vs 248, tlb 3,170 vs
3,152, gutlb 5,384 vs 5,453); the compiled count is the same rule applied to the compiled step.
"""

from __future__ import annotations

import torch

from .counters import NO_KERNEL, aten


def _composite(name: str, cache: dict = {}) -> bool:  # noqa: B006 - a per-process cache
    """Whether the aten operator ``name`` ("aten::linear") decomposes above the backends
    (CompositeImplicitAutograd): its calls are counted as the operators it runs."""
    if name not in cache:
        try:
            cache[name] = torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")
        except RuntimeError:
            cache[name] = False
    return cache[name]


def _launches_by_name(name: str, cache: dict = {}) -> bool:  # noqa: B006
    """``launches_kernel`` by operator name ("aten::add_"): False for views (every overload a view),
    metadata operators and bare allocations."""
    if name not in cache:
        op = getattr(aten, name.split("::", 1)[1], None)
        overloads = [getattr(op, o) for o in op.overloads()] if op is not None else []
        cache[name] = not (op in NO_KERNEL or (overloads and all(o.is_view for o in overloads)))
    return cache[name]


def _inductor_kernel(name: str) -> bool:
    return "cpp_fused" in name  # inductor's C++ kernels: [graph_N_]cpp_fused_<ops>_<n>


def kernel_calls(events) -> dict:
    """Kernel calls among torch.profiler FunctionEvents (the module docstring's kernels/step rule):
    {"kernels": inductor + aten, "inductor": generated C++ kernels, "aten": operators with a kernel}."""
    inductor = aten_calls = 0
    for e in events:
        name = e.name
        if _inductor_kernel(name):
            inductor += 1
            continue
        if not name.startswith("aten::") or _composite(name) or not _launches_by_name(name):
            continue
        parent = e.cpu_parent  # called from inside another kernel (an aten op's or a generated one): not a call of its own
        while parent is not None and not (
            (parent.name.startswith("aten::") and not _composite(parent.name)) or _inductor_kernel(parent.name)
        ):
            parent = parent.cpu_parent
        if parent is None:
            aten_calls += 1
    return {"kernels": inductor + aten_calls, "inductor": inductor, "aten": aten_calls}


def count_kernels(fn) -> dict:
    """``kernel_calls`` of one call of ``fn`` (CPU profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return kernel_calls(prof.events())
