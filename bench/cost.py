"""What a model costs: `bench cost` [issue 25] measures training steps, halting and streaming.

Three measurements, each a table whose rows are registry models at the sizes the task preset
gives them (resolved exactly as `bench run` resolves them: bench/config.py's resolve_run, the
harness's Head, loss and optimizer):

* training (default; the shape of LRA Table 2): for each model and sequence length T, one
  training step = forward, the task's head and loss (+ the model's auxiliary loss), backward,
  gradient clipping at train.grad_clip, the preset's optimizer step. Inputs are random token
  batches of the task's vocabulary at length T with every position real (no data is generated).
  Warm-up steps are not timed; the timed repeats are interleaved across models (round r times
  every model once, in an order rotated each round) so machine noise hits all alike; the step
  time is the median over repeats, its spread the range. Every figure also reads as a ratio to
  the Transformer at the same length (its row reads 1.00).
* halting (`--halting`; HALT Table 5): the depth-recurrent models in each ``mode`` (halt /
  upperbound / no-halt) at each bound (``max_layers``); ratios to no-halt at the same bound.
  Weights are freshly initialised: how early a model halts shows in its mean halting depth.
* streaming (`--stream`; issue 26): models with the streaming contract of bench/models/base.py:
  prefill of a context of T tokens in one ``step`` call, then per-token decoding latency over
  single-token steps, and the bytes of the state after the context.

How each figure is counted (one instrumented training step, never timed, after the model's first
step so that the optimizer's state exists; it warms up too, ``warmup`` more steps follow):

* ops/step: aten operators that reach a kernel, counted with a TorchDispatchMode (what the
  dispatcher hands to the Python mode: composite operators appear decomposed into the
  operators that run). Views and pure metadata operators (every ``OpOverload.is_view``,
  ``_unsafe_view``, ``_reshape_alias``, ``lift_fresh``) and bare allocations (``empty*``,
  ``new_empty*``, ``resize_``) launch no kernel and are left out; ``all_ops`` counts them too.
* syncs/step: operators that read a tensor's value on the host, so that a GPU queue must
  drain: ``_local_scalar_dense`` (.item(), int(), float(), bool() of a tensor), ``nonzero``,
  ``masked_select``, ``unique``-family, ``equal``, ``repeat_interleave`` with tensor repeats
  and no output_size, and ``index`` / ``index_put_`` with a boolean index (x[mask]).
  Reads of the optimizer's step counters are not syncs: torch.optim keeps them on the host.
* fwd_bwd_ops / fwd_bwd_syncs (files only): the same counts over forward, loss and backward
  alone (no clipping, no optimizer), the measure of issue 25's cross-check.
* peak memory: on CUDA, torch.cuda.max_memory_allocated over a step (weights, gradients,
  optimizer state and activations). On the CPU, the bytes of the distinct storages that
  autograd saves for backward during the step's forward (torch.autograd.graph.saved_tensors_hooks;
  parameters left out, they are resident anyway): the activation memory, which is what grows
  with the length.
* halt depth: the mean of ``stats["halt_depth"]`` for models that report it.

Ops, syncs and saved bytes are counted on the eager model (with ``--compile`` too: a compiled
graph's kernels are not aten operators). With ``compile``, the first step's time (compilation
included) is reported separately from the timed steps.

* kernels/step (``--kernels``, CPU): kernel calls of one training step read from torch.profiler,
  for the eager model and, with ``--compile``, the compiled one, by one rule for both: every
  inductor-generated C++ kernel (inductor's ``cpp.enable_kernel_profile`` records each call: set
  before compiling, it adds a record-function per kernel call to the generated code) plus every
  aten operator the dispatcher runs from Python, the autograd engine or inductor's wrapper (its
  extern kernels: matmuls, attention, and whatever runs outside the compiled graphs), i.e. not
  from inside another operator's kernel, that has a kernel of its own (CompositeImplicitAutograd
  operators count as the operators they decompose into) and launches one (views and bare
  allocations excluded, as ``ops``; by operator name: the profiler gives no overload). On the eager
  model it reproduces ``ops`` to about 1-2% (flip-flop smoke: transformer 247 vs 248, tlb 3,170 vs
  3,152, gutlb 5,384 vs 5,453); the compiled count is the same rule applied to the compiled step.

Nothing here prints: the CLI prints what these functions return.
"""
from __future__ import annotations

import datetime
import json
import math
import platform
import statistics
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bench.models.base import StreamingUnsupported

from .config import resolve_run
from .errors import UserError
from .runner.build import instantiate_model, instantiate_task
from .runner.module import Head, TaskModule, forward_batch, task_loss
from .tasks.kinds import kind_of

REFERENCE = "transformer"
HALTING_MODELS = ("ut", "gut", "gutlb")
HALTING_MODES = ("halt", "upperbound", "no-halt")
OOM = "OOM"

aten = torch.ops.aten


# ---- counting operators and host syncs ------------------------------------------------------
NO_KERNEL = {aten._unsafe_view, aten._reshape_alias, aten.lift_fresh, aten.empty, aten.empty_like, aten.empty_strided,
             aten.new_empty, aten.new_empty_strided, aten.resize_}
SYNC_OPS = {aten._local_scalar_dense, aten.nonzero, aten.masked_select, aten._unique, aten._unique2, aten.unique_dim,
            aten.unique_consecutive, aten.equal, aten.is_nonzero}
BOOL_INDEX_OPS = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}


def _bool_indexed(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


def is_sync(func, args, kwargs, host_tensors=frozenset()) -> bool:
    """Whether this operator call reads a tensor value on the host (the rule of the module
    docstring); reads of ``host_tensors`` (data pointers of tensors that live on the host in
    any run, e.g. the optimizer's step counters) are not syncs."""
    packet = func.overloadpacket
    if packet is aten._local_scalar_dense and isinstance(args[0], torch.Tensor) and args[0].data_ptr() in host_tensors:
        return False
    if packet in SYNC_OPS:
        return True
    if packet in BOOL_INDEX_OPS:
        return _bool_indexed(args)
    if packet is aten.repeat_interleave and isinstance(args[0], torch.Tensor) and len(args) < 2 and kwargs.get("output_size") is None:
        return True  # repeat_interleave(repeats_tensor): the output size is read from the counts
    if packet is aten.repeat_interleave and len(args) > 1 and isinstance(args[1], torch.Tensor) and kwargs.get("output_size") is None:
        return True
    return False


def launches_kernel(func) -> bool:
    return not (func.is_view or func.overloadpacket in NO_KERNEL)


class OpCounter(TorchDispatchMode):
    """Counts the aten operators run inside it: ``ops`` (those that launch a kernel), ``syncs``
    (those that read a value on the host), ``all_ops`` and ``by_name`` (operator -> calls)."""

    def __init__(self, host_tensors=()):
        super().__init__()
        self.host_tensors = frozenset(host_tensors)
        self.ops = self.syncs = self.all_ops = 0
        self.by_name: Counter = Counter()
        self.sync_names: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.all_ops += 1
        if launches_kernel(func):
            self.ops += 1
            self.by_name[str(func.overloadpacket)] += 1
        if is_sync(func, args, kwargs, self.host_tensors):
            self.syncs += 1
            self.sync_names[str(func.overloadpacket)] += 1
        return func(*args, **kwargs)


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
        while parent is not None and not ((parent.name.startswith("aten::") and not _composite(parent.name)) or _inductor_kernel(parent.name)):
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


class SavedBytes:
    """Bytes of the distinct storages autograd saves for backward while active (storages in
    ``exclude``, e.g. the parameters', left out): torch.autograd.graph.saved_tensors_hooks."""

    def __init__(self, exclude=()):
        self.exclude = {self._key(t) for t in exclude}
        self.storages: dict = {}

    @staticmethod
    def _key(t: torch.Tensor):
        s = t.untyped_storage()
        return (t.device, s.data_ptr())

    def _pack(self, t: torch.Tensor):
        try:
            key = self._key(t)
            if key not in self.exclude:
                self.storages[key] = t.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):  # tensors without a storage (subclasses): not counted
            pass
        return t

    @property
    def nbytes(self) -> int:
        return sum(self.storages.values())

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hooks.__exit__(*exc)


def state_bytes(obj) -> int:
    """Sum of tensor nbytes over a streaming state (tensors in lists, tuples, dicts, dataclasses, objects)."""
    if isinstance(obj, torch.Tensor):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(state_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple, set)):
        return sum(state_bytes(v) for v in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return state_bytes(vars(obj))
    return 0


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, MemoryError)) and ("out of memory" in text or "can't allocate memory" in text
                                                              or isinstance(exc, MemoryError))


# ---- inputs ---------------------------------------------------------------------------------
def parse_positive_ints(raw: str, what: str, example: str) -> list[int]:
    try:
        values = [int(s) for s in str(raw).split(",") if s.strip() != ""]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise UserError(f"--{what} takes positive whole numbers separated by commas (e.g. {example}), got {raw!r}")
    return list(dict.fromkeys(values))


def resolve_device(name: str) -> torch.device:
    if name not in ("cpu", "cuda"):
        raise UserError(f"--device {name!r}: choose cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA GPU is visible to this torch (" + torch.__version__ + "); use --device cpu")
    return torch.device(name)


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def model_of(label: str) -> str:
    """The registry model of a row label: ``tlb``, ``tlb:chunk_size=100`` (a model with its own
    settings, from --models) or ``gut@20@halt`` (a --halting cell) -> ``tlb`` / ``gut``."""
    return label.split("@")[0].split(":")[0]


def label_sets(label: str) -> list[str]:
    """The label's own model settings: ``tlb:chunk_size=100:memory_slots=10`` -> model.chunk_size=100, ..."""
    return [f"model.{item}" for item in label.split("@")[0].split(":")[1:]]


@dataclass
class Setup:
    """What every measurement shares; ``overrides`` are --set items applied to every model."""

    task: str
    preset: str
    lengths: list[int]
    batch: int | None = None  # None: the preset's train.batch_size
    device: str = "cpu"
    dtype: str = "fp32"
    compile: bool = False
    kernels: bool = False  # --kernels: kernel calls per step from the profiler (eager; compiled with --compile)
    repeats: int = 3
    warmup: int = 1
    overrides: list[str] = field(default_factory=list)
    # per model: model.max_len raised to the longest length where a position table was shorter
    # (set by check_models; the header says so)
    raised: dict[str, list[str]] = field(default_factory=dict)

    def overrides_for(self, label: str) -> list[str]:
        """--set items, the raised position table, then the label's own settings."""
        return [*self.overrides, *self.raised.get(label.split("@")[0], []), *label_sets(label)]

    def check(self) -> None:
        if self.dtype not in DTYPES:
            raise UserError(f"--dtype {self.dtype!r}: choose fp32 or bf16")
        if self.repeats < 1 or self.warmup < 0 or (self.batch is not None and self.batch < 1):
            raise UserError("--repeats and --batch take a whole number >= 1, --warmup >= 0")
        resolve_device(self.device)
        if self.kernels and self.device != "cpu":
            raise UserError("--kernels counts kernel calls on the CPU (inductor's C++ kernels); on CUDA use torch.profiler's CUDA activity")


def random_batch(task, batch: int, length: int, device: torch.device, gen: torch.Generator) -> dict:
    """A batch of the task's kind: uniform non-PAD tokens of its vocabulary, every position real."""
    def tokens():
        return torch.randint(1, task.vocab_size, (batch, length), generator=gen).to(device)

    full = torch.ones(batch, length, dtype=torch.bool, device=device)
    out = {"tokens": tokens(), "mask": full}
    kind_of(task.kind).random_batch(task, out, tokens, gen, device)
    return out


# ---- one model's training step -----------------------------------------------------------------
class TrainingStep:
    """A registry model with the harness's head, loss, gradient clipping and optimizer; calling it
    runs one training step on ``batch`` and returns the step's stats (halting depth ...)."""

    def __init__(self, registry, model: str, setup: Setup, overrides: list[str] | None = None):
        config = resolve_run(registry, model_of(model), setup.task, setup.preset, [*setup.overrides_for(model), *(overrides or [])])
        self.name, self.config = model, config
        self.device = torch.device(setup.device)
        self.task = instantiate_task(config.task)
        torch.manual_seed(0)
        self.backbone = instantiate_model(config.model, self.task.vocab_size).to(self.device)
        self.module = TaskModule(self.backbone, self.task, config.train, steps_per_epoch=1).to(self.device)
        self.head: Head = self.module.head
        self.optimizer = self.module.configure_optimizers()["optimizer"]
        self.grad_clip = config.train["grad_clip"]
        self.batch_size = setup.batch or config.train["batch_size"]
        self.autocast = setup.dtype == "bf16"
        self.compiled = False
        self.module.train()

    def host_counters(self) -> set[int]:
        """Data pointers of the optimizer's step counters: torch.optim keeps them on the host
        (not capturable / fused), so reading them never waits for a GPU."""
        return {s["step"].data_ptr() for s in self.optimizer.state.values()
                if isinstance(s.get("step"), torch.Tensor) and s["step"].device.type == "cpu"}

    @property
    def parameters(self) -> list[torch.Tensor]:
        return [p for p in self.module.parameters() if p.requires_grad]

    def compile(self) -> None:
        from torch import _dynamo

        _dynamo.config.allow_rnn = True  # as bench run's train.compile does
        self.backbone.compile()
        self.compiled = True

    def __call__(self, batch: dict) -> dict:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits, aux, stats = forward_batch(self.backbone, self.head, batch)
            loss = task_loss(self.task.kind, logits.float(), batch) + aux
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.grad_clip)
        self.optimizer.step()
        return stats

    def release(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, fn, *args):
    _sync(device)
    t0 = time.perf_counter()
    result = fn(*args)
    _sync(device)
    return time.perf_counter() - t0, result


def halt_depth(stats: dict) -> float | None:
    depth = stats.get("halt_depth") if isinstance(stats, dict) else None
    if depth is None:
        return None
    return float(depth.float().mean()) if isinstance(depth, torch.Tensor) else float(depth)


def instrumented_step(step: TrainingStep, batch: dict) -> dict:
    """One training step under the op counter and the saved-tensor hooks (never timed); the
    first step of a model is run before, uncounted, so the optimizer's state exists."""
    if not step.optimizer.state:
        step(batch)
    with OpCounter(step.host_counters()) as counter, SavedBytes(exclude=step.parameters) as saved:
        stats = step(batch)
    return {"ops": counter.ops, "all_ops": counter.all_ops, "syncs": counter.syncs, "saved_bytes": saved.nbytes,
            "sync_ops": dict(counter.sync_names), "halt_depth": halt_depth(stats)}


def count_forward_backward(step: TrainingStep, batch: dict) -> dict:
    """Ops and syncs of forward + loss + backward only (no optimizer): the issue's cross-check."""
    step.release()  # no gradients to accumulate into
    with OpCounter(step.host_counters()) as counter:
        with torch.autocast(step.device.type, dtype=torch.bfloat16, enabled=step.autocast):
            logits, aux, _ = forward_batch(step.backbone, step.head, batch)
            loss = task_loss(step.task.kind, logits.float(), batch) + aux
        loss.backward()
    step.release()
    return {"ops": counter.ops, "all_ops": counter.all_ops, "syncs": counter.syncs}


# ---- the measurements ---------------------------------------------------------------------------
def _cell_guard(row: dict, fn):
    """Runs fn(); an out-of-memory error makes the row an OOM cell instead of a crash."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - only OOM is caught, everything else is re-raised
        if not is_oom(exc):
            raise
        row.update(status=OOM, error=str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _summary(times: list[float]) -> dict:
    return {"step_s": statistics.median(times), "step_min_s": min(times), "step_max_s": max(times), "repeats": len(times),
            "step_times_s": list(times)}


def measure_steps(steps: dict[str, TrainingStep], setup: Setup, lengths: list[int], progress=None) -> list[dict]:
    """Rows {model, length, status, step_s, tokens_per_s, peak_bytes, ops, syncs, halt_depth, ...}
    for every (model, length), repeats interleaved across models."""
    device = torch.device(setup.device)
    say = progress or (lambda _msg: None)
    cells: dict[tuple[str, int], dict] = {}
    data: dict[tuple[str, int], dict] = {}
    for length in lengths:  # first every count, on the eager models
        gen = torch.Generator().manual_seed(length)
        for name, step in steps.items():
            row = cells[name, length] = {"model": name, "length": length, "batch": step.batch_size, "status": "ok"}
            batch = data[name, length] = random_batch(step.task, step.batch_size, length, device, gen)
            say(f"T={length} {name}: counting ops")
            _cell_guard(row, lambda row=row, step=step, batch=batch: row.update(
                instrumented_step(step, batch), **{f"fwd_bwd_{k}": v for k, v in count_forward_backward(step, batch).items()}))
            if setup.kernels and row["status"] == "ok":
                say(f"T={length} {name}: counting kernel calls (profiler)")
                row.update({f"eager_{k}": v for k, v in count_kernels(lambda step=step, batch=batch: step(batch)).items()})
            step.release()
    if setup.compile:
        if setup.kernels:  # inductor's C++ kernels record each call in the profiler (read when the code is generated)
            from torch._inductor import config as inductor_config

            inductor_config.cpp.enable_kernel_profile = True
        for step in steps.values():
            step.compile()
    for length in lengths:
        for name, step in steps.items():
            row, batch = cells[name, length], data[name, length]
            if row["status"] != "ok":
                continue

            def prepare(step=step, row=row, batch=batch):
                if setup.compile:  # compilation (or a recompilation for this length) and the first step
                    row["compile_first_s"], _ = timed(device, step, batch)
                for _ in range(setup.warmup):
                    step(batch)
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                    step(batch)
                    _sync(device)
                    row["peak_bytes"] = torch.cuda.max_memory_allocated(device)
                else:
                    row["peak_bytes"] = row.get("saved_bytes")
                if setup.kernels and setup.compile:  # the compiled step, compiled and warm: its kernel calls
                    row.update({f"compiled_{k}": v for k, v in count_kernels(lambda: step(batch)).items()})

            say(f"T={length} {name}: warming up")
            _cell_guard(row, prepare)
            step.release()
        times: dict[str, list[float]] = {name: [] for name in steps}
        order = list(steps)
        for r in range(setup.repeats):
            for name in order[r % len(order):] + order[: r % len(order)]:
                row = cells[name, length]
                if row["status"] != "ok":
                    continue

                def once(name=name):
                    seconds, _ = timed(device, steps[name], data[name, length])
                    times[name].append(seconds)

                _cell_guard(row, once)
                steps[name].release()
            say(f"T={length}: repeat {r + 1}/{setup.repeats} done")
        for name in steps:
            row = cells[name, length]
            if row["status"] == "ok":
                row.update(_summary(times[name]))
                row["tokens_per_s"] = row["batch"] * length / row["step_s"]
            data.pop((name, length))
    return [cells[name, length] for length in lengths for name in steps]


RATIO_KEYS = ("step_s", "tokens_per_s", "peak_bytes", "ops", "syncs")


def add_ratios(rows: list[dict], reference: str = REFERENCE, group=("length",), keys=RATIO_KEYS) -> list[dict]:
    """Adds ``<key>_ratio`` = value / the reference row's value in the same group (same length;
    None where either is missing, an OOM, or the reference's value is 0)."""
    refs = {tuple(r[g] for g in group): r for r in rows if r["model"] == reference}
    for row in rows:
        ref = refs.get(tuple(row[g] for g in group))
        for key in keys:
            mine, theirs = row.get(key), (ref or {}).get(key)
            ok = row.get("status", "ok") == "ok" and ref is not None and ref.get("status", "ok") == "ok"
            row[f"{key}_ratio"] = (mine / theirs) if ok and mine is not None and theirs not in (None, 0) else None
    return rows


def build_steps(registry, models: list[str], setup: Setup, overrides: dict[str, list[str]] | None = None) -> dict[str, TrainingStep]:
    """Every model's TrainingStep (names checked first, so bad input fails before any build)."""
    overrides = overrides or {}
    for name in models:
        resolve_run(registry, model_of(name), setup.task, setup.preset, [*setup.overrides_for(name), *overrides.get(name, [])])
    return {name: TrainingStep(registry, name.split("@")[0], setup, overrides.get(name)) for name in models}


def with_reference(models: list[str]) -> list[str]:
    return models if REFERENCE in models else [REFERENCE, *models]


def check_models(registry, models: list[str], setup: Setup) -> None:
    """Unknown names, causality mismatches: UserError. A model whose position table (max_len) is
    shorter than the longest length gets it raised to that length (``setup.raised``): --lengths
    is what the command measures, and the table's size changes no per-position cost."""
    longest = max(setup.lengths)
    for name in models:
        config = resolve_run(registry, model_of(name), setup.task, setup.preset, [*setup.overrides, *label_sets(name)])
        max_len = config.model.params.get("max_len")
        if isinstance(max_len, int) and max_len < longest:
            setup.raised[name] = [f"model.max_len={longest}"]
            resolve_run(registry, model_of(name), setup.task, setup.preset, setup.overrides_for(name))


def measure_training(registry, models: list[str], setup: Setup, progress=None) -> list[dict]:
    setup.check()
    models = with_reference(models)
    check_models(registry, models, setup)
    steps = build_steps(registry, models, setup)
    return add_ratios(measure_steps(steps, setup, setup.lengths, progress))


def measure_halting(registry, models: list[str], setup: Setup, bounds: list[int], progress=None) -> list[dict]:
    """HALT Table 5: each model at each bound (max_layers) in each mode; ratios to no-halt."""
    setup.check()
    for name in models:
        config = resolve_run(registry, model_of(name), setup.task, setup.preset, [*setup.overrides, *label_sets(name)])
        if not {"mode", "max_layers"} <= set(config.model.params):
            raise UserError(f"--halting: model {name!r} has no halting modes (no mode / max_layers parameter); "
                            f"use depth-recurrent models such as {', '.join(HALTING_MODELS)}")
    overrides = {}
    for name in models:
        for bound in bounds:
            for mode in HALTING_MODES:
                overrides[f"{name}@{bound}@{mode}"] = [f"model.max_layers={bound}", f"model.mode={mode}"]
    check_models(registry, models, setup)
    steps = build_steps(registry, list(overrides), setup, overrides)
    rows = measure_steps(steps, setup, setup.lengths, progress)
    n_train = steps[next(iter(steps))].task.params.get("n_train")
    for row in rows:
        row["model"], bound, row["mode"] = row["model"].split("@")
        row["bound"] = int(bound)
        if row["status"] == "ok" and isinstance(n_train, int):
            row["epoch_min"] = math.ceil(n_train / row["batch"]) * row["step_s"] / 60
    no_halt = {(r["model"], r["bound"], r["length"]): r for r in rows if r["mode"] == "no-halt"}
    for row in rows:  # ratio to no-halt of the same model, bound and length
        ref = no_halt.get((row["model"], row["bound"], row["length"]))
        for key in ("step_s", "ops", "syncs"):
            ok = row["status"] == "ok" and ref is not None and ref["status"] == "ok" and ref.get(key)
            row[f"{key}_ratio"] = row[key] / ref[key] if ok else None
    return rows


def measure_streaming(registry, models: list[str], setup: Setup, decode_tokens: int = 32, progress=None) -> list[dict]:
    """Per (model, context length): prefill seconds (median over repeats), per-token decode
    latency (median, p90 over ``decode_tokens`` single-token steps per repeat), state bytes after
    the context; ratios to the Transformer's. Rows of models without streaming say why."""
    setup.check()
    if decode_tokens < 1:
        raise UserError("--decode-tokens takes a whole number >= 1")
    models = with_reference(models)
    check_models(registry, models, setup)
    device = torch.device(setup.device)
    say = progress or (lambda _msg: None)
    backbones, rows = {}, []
    for name in models:
        config = resolve_run(registry, model_of(name), setup.task, setup.preset, setup.overrides_for(name))
        task = instantiate_task(config.task)
        torch.manual_seed(0)
        backbone = instantiate_model(config.model, task.vocab_size).to(device).eval()
        batch = setup.batch or config.train["batch_size"]
        refusal = None if backbone.supports_streaming and backbone.causal else backbone.streaming_refusal()
        if refusal is None:
            try:  # a family may refuse by its definition at run time (e.g. chunks that need the whole length)
                backbone.init_state(batch, device)
            except StreamingUnsupported as exc:
                refusal = str(exc)
        if refusal is None:
            backbones[name] = (backbone, task, batch)
        else:
            rows += [{"model": name, "length": length, "status": f"no streaming ({refusal})"} for length in setup.lengths]
    for length in setup.lengths:
        gen = torch.Generator().manual_seed(length)
        cells, prefill, decode = {}, {n: [] for n in backbones}, {n: [] for n in backbones}
        inputs = {n: (torch.randint(1, t.vocab_size, (b, length), generator=gen).to(device),
                      torch.randint(1, t.vocab_size, (b, decode_tokens), generator=gen).to(device))
                  for n, (_, t, b) in backbones.items()}
        for name, (_, _, b) in backbones.items():
            cells[name] = {"model": name, "length": length, "batch": b, "status": "ok"}
        order = list(backbones)
        for r in range(setup.warmup + setup.repeats):
            for name in order[r % len(order):] + order[: r % len(order)] if order else []:
                row, (backbone, _, b) = cells[name], backbones[name]
                if row["status"] != "ok":
                    continue
                context, tokens = inputs[name]

                def once(name=name, row=row, backbone=backbone, b=b, context=context, tokens=tokens, r=r):
                    with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=setup.dtype == "bf16"):
                        state = backbone.init_state(b, device)
                        seconds, (_, state) = timed(device, backbone.step, context, state)
                        if r == 0:
                            row["state_bytes"] = state_bytes(state)
                        lat = []
                        for i in range(decode_tokens):
                            s, (_, state) = timed(device, backbone.step, tokens[:, i: i + 1], state)
                            lat.append(s)
                    if r >= setup.warmup:
                        prefill[name].append(seconds)
                        decode[name].extend(lat)

                _cell_guard(row, once)
            say(f"T={length}: streaming round {r + 1}/{setup.warmup + setup.repeats} done")
        for name, row in cells.items():
            if row["status"] == "ok":
                lat = sorted(decode[name])
                row.update(prefill_s=statistics.median(prefill[name]), decode_s=statistics.median(lat),
                           decode_p90_s=lat[min(len(lat) - 1, math.ceil(0.9 * len(lat)) - 1)], decode_steps=len(lat))
            rows.append(row)
    order = {n: i for i, n in enumerate(models)}
    rows.sort(key=lambda r: (r["length"], order[r["model"]]))
    return add_ratios(rows, keys=("prefill_s", "decode_s", "decode_p90_s", "state_bytes"))


# ---- tables and files ---------------------------------------------------------------------------
def _mb(n) -> str:
    return f"{n / 2**20:,.1f}"


def _cell(row: dict, key: str, fmt) -> str:
    if row.get("status", "ok") != "ok":
        return OOM if row["status"] == OOM else "—"
    value = row.get(key)
    if value is None:
        return "—"
    ratio = row.get(f"{key}_ratio")
    return fmt(value) + (f" ({ratio:.2f})" if ratio is not None else "")


def _spread(row: dict) -> str:
    if row.get("status", "ok") != "ok" or "step_s" not in row or row["repeats"] < 2:
        return ""
    half = (row["step_max_s"] - row["step_min_s"]) / 2
    return f"±{100 * half / row['step_s']:.0f}%"


def training_table(rows: list[dict], setup: Setup) -> tuple[list[str], list[list[str]]]:
    """LRA Table 2's shape: a row per model, per length its figures with (ratio to Transformer)."""
    lengths = sorted({r["length"] for r in rows})
    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["model"], r["length"]): r for r in rows}
    depth = any(r.get("halt_depth") is not None for r in rows)
    mem = "peak MB" if setup.device == "cuda" else "saved MB"
    headers = ["model"]
    for t in lengths:
        headers += [f"T={t} ms/step", "spread", "tok/s", mem, "ops/step", "syncs"] + (["halt depth"] if depth else [])
        if setup.kernels:
            headers.append("kernels/step eager")
            if setup.compile:
                headers.append("kernels/step compiled (inductor)")
        if setup.compile:
            headers.append("compile+1st s")
    table = []
    for m in models:
        line = [m]
        for t in lengths:
            r = by[(m, t)]
            line += [_cell(r, "step_s", lambda v: f"{1000 * v:,.1f}"), _spread(r), _cell(r, "tokens_per_s", lambda v: f"{v:,.0f}"),
                     _cell(r, "peak_bytes", _mb), _cell(r, "ops", lambda v: f"{v:,}"), _cell(r, "syncs", lambda v: f"{v:,}")]
            if depth:
                line.append("" if r.get("halt_depth") is None else f"{r['halt_depth']:.2f}")
            if setup.kernels:
                line.append(f"{r['eager_kernels']:,}" if r.get("eager_kernels") is not None else "")
                if setup.compile:
                    line.append(f"{r['compiled_kernels']:,} ({r['compiled_inductor']:,})" if r.get("compiled_kernels") is not None else "")
            if setup.compile:
                line.append(f"{r['compile_first_s']:.1f}" if r.get("compile_first_s") is not None else "")
        table.append(line)
    return headers, table


def halting_table(rows: list[dict], setup: Setup) -> tuple[list[str], list[list[str]]]:
    headers = ["model", "T", "bound", "mode", "ms/step", "spread", "× no-halt", "min/epoch", "halt depth", "ops/step", "syncs"]
    table = []
    for r in rows:
        ok = r["status"] == "ok"
        table.append([r["model"], r["length"], r["bound"], r["mode"], f"{1000 * r['step_s']:,.1f}" if ok else r["status"], _spread(r),
                      f"{r['step_s_ratio']:.2f}" if r.get("step_s_ratio") is not None else "—",
                      f"{r['epoch_min']:,.1f}" if r.get("epoch_min") is not None else "—",
                      f"{r['halt_depth']:.2f}" if r.get("halt_depth") is not None else "—",
                      f"{r['ops']:,}" if r.get("ops") is not None else "—", f"{r['syncs']:,}" if r.get("syncs") is not None else "—"])
    return headers, table


def streaming_table(rows: list[dict], setup: Setup) -> tuple[list[str], list[list[str]]]:
    headers = ["model", "context T", "prefill ms", "decode ms/token", "p90 ms", "state MB"]
    table = []
    for r in rows:
        if r["status"] != "ok":
            table.append([r["model"], r["length"], r["status"], "", "", ""])
            continue
        ms = lambda v: f"{1000 * v:,.2f}"  # noqa: E731
        table.append([r["model"], r["length"], _cell(r, "prefill_s", ms), _cell(r, "decode_s", ms), _cell(r, "decode_p90_s", ms),
                      _cell(r, "state_bytes", lambda v: f"{v / 2**20:,.3f}")])
    return headers, table


def _git_commit() -> str:
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():  # an installed bench (site-packages): no checkout to name
        return "unknown"
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha or "unknown") + ("-dirty" if dirty else "")


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"CPU ({cpu}), {torch.get_num_threads()} thread(s)"


def header(kind: str, models: list[str], setup: Setup, rows: list[dict], extra: dict | None = None) -> dict:
    """What a reader needs to trust (or redo) the table, in the style of fla's benchmark scripts."""
    batches = sorted({r["batch"] for r in rows if "batch" in r})
    memory = ("torch.cuda.max_memory_allocated over one step (weights, grads, optimizer state, activations)" if setup.device == "cuda"
              else "bytes of distinct storages autograd saves for backward in one step's forward (parameters excluded)")
    h = {
        "measurement": kind, "task": setup.task, "preset": setup.preset, "models": models,
        "shapes": f"batch {', '.join(map(str, batches)) or setup.batch} x length {', '.join(map(str, setup.lengths))}",
        "inputs": "random tokens of the task's vocabulary, every position real (no data generated)",
        "dtype": setup.dtype + (" (autocast)" if setup.dtype == "bf16" else ""), "compile": setup.compile,
        "device": device_name(setup.device), "torch": torch.__version__, "commit": _git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "repeats": f"{setup.repeats} timed (interleaved across models), after the counted step and {setup.warmup} warm-up step(s)",
    }
    if kind != "streaming":
        h["memory"] = memory
        h["ops"] = "aten ops reaching a kernel per training step (views, metadata, bare allocations excluded); eager model"
        h["syncs"] = "host reads of tensor values per training step (_local_scalar_dense, nonzero, boolean-mask indexing ...)"
        if setup.kernels:
            h["kernels"] = ("kernel calls per training step from torch.profiler: inductor's C++ kernels (in parentheses) + aten "
                            "operators called from outside any kernel that launch one (bench/cost.py's docstring); eager, and compiled")
    if setup.overrides:
        h["overrides"] = " ".join(setup.overrides)
    if setup.raised:
        h["max_len"] = f"position tables raised to {max(setup.lengths)} (the longest length) for {', '.join(sorted(setup.raised))}"
    h.update(extra or {})
    return h


def stem(kind: str, setup: Setup) -> str:
    parts = [setup.task, setup.preset, {"training": "train", "halting": "halting", "streaming": "stream"}[kind], setup.device]
    parts.append("T" + "-".join(str(n) for n in setup.lengths))  # runs at other lengths never overwrite this one
    if setup.dtype != "fp32":
        parts.append(setup.dtype)
    if setup.compile:
        parts.append("compile")
    return "_".join(parts)


def write_outputs(out: Path, name: str, head: dict, headers: list[str], table: list[list[str]], rows: list[dict]) -> list[Path]:
    """OUT/name.md (header + table), OUT/name.csv (one line per row, header as # comments),
    OUT/name.json ({header, rows})."""
    import csv
    import io

    from tabulate import tabulate

    out.mkdir(parents=True, exist_ok=True)
    lines = [f"- **{k}**: {', '.join(v) if isinstance(v, list) else v}" for k, v in head.items()]
    md = out / f"{name}.md"
    md.write_text("\n".join(lines) + "\n\n" + tabulate(table, headers=headers, tablefmt="github", disable_numparse=True) + "\n")
    keys = list(dict.fromkeys(k for r in rows for k in r if not isinstance(r[k], (dict, list))))  # the JSON has them all
    buf = io.StringIO()
    for k, v in head.items():
        buf.write(f"# {k}: {', '.join(v) if isinstance(v, list) else v}\n")
    writer = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    csv_path = out / f"{name}.csv"
    csv_path.write_text(buf.getvalue())
    js = out / f"{name}.json"
    js.write_text(json.dumps({"header": head, "rows": rows}, indent=1, default=str) + "\n")
    return [md, csv_path, js]


def plot_streaming(rows: list[dict], path: Path) -> Path | None:
    """Per-token latency and state memory against context length, log-log, one line per model."""
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors, markers = plt.get_cmap("tab20").colors, "os^vDP*Xh<>p"
    for i, model in enumerate(dict.fromkeys(r["model"] for r in ok)):  # a colour and a marker each: 20+ lines stay apart
        mine = sorted((r for r in ok if r["model"] == model), key=lambda r: r["length"])
        xs = [r["length"] for r in mine]
        style = dict(color=colors[i % len(colors)], marker=markers[i % len(markers)], label=model)
        ax1.plot(xs, [1000 * r["decode_s"] for r in mine], **style)
        ax2.plot(xs, [max(r["state_bytes"], 1) / 2**20 for r in mine], **style)
    for ax, label in ((ax1, "decode latency (ms / token, median)"), (ax2, "state after the context (MB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run_cost(registry, models: list[str], setup: Setup, out: Path | None, mode: str = "training", bounds: list[int] | None = None,
             decode_tokens: int = 32, progress=None) -> dict:
    """One `bench cost` measurement: rows, the table, the header, the files written (if ``out``)."""
    if mode == "halting":
        rows = measure_halting(registry, models, setup, bounds or [10, 20, 40], progress)
        headers, table = halting_table(rows, setup)
        head = header("halting", models, setup, rows, {"bounds": ", ".join(map(str, bounds or [])),
                                                       "weights": "fresh initialisation (halting not trained)"})
    elif mode == "streaming":
        rows = measure_streaming(registry, models, setup, decode_tokens, progress)
        headers, table = streaming_table(rows, setup)
        head = header("streaming", with_reference(models), setup, rows,
                      {"decode": f"{decode_tokens} single-token steps after the context, per repeat; eval mode, no grad",
                       "state": "sum of tensor nbytes over the state after the context"})
    else:
        rows = measure_training(registry, models, setup, progress)
        headers, table = training_table(rows, setup)
        head = header("training", with_reference(models), setup, rows,
                      {"step": "forward, task head + loss, backward, grad clip, optimizer step (the preset's)",
                       "ratios": f"(x) = value / {REFERENCE}'s at the same length"})
    files = []
    if out is not None:
        name = stem(mode, setup)
        files = write_outputs(out, name, head, headers, table, rows)
        if mode == "streaming" and (p := plot_streaming(rows, out / f"{name}.png")):
            files.append(p)
    return {"rows": rows, "headers": headers, "table": table, "header": head, "files": files}
