"""What a model costs: `bench cost` measures training steps, halting and streaming.

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
* streaming (`--stream`): models with the streaming contract of bench/models/base.py:
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
  alone (no clipping, no optimizer): a cross-check of the step's counts.
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
  for the eager model and, with ``--compile``, the compiled one; the rule is in bench/cost/kernels.py.

The package, data flowing one way (each module imports only those above it):

* common.py: ``Setup`` (what every measurement shares), ``Row`` (one measured row: a model, its
  own settings, its bound and mode or its cost-table cell), ``resolve_rows`` (each row resolved
  once, its sizes checked), random batches, OOM and compile-failure cells, ratios to a reference row;
* counters.py: the op / sync counter and the saved-bytes measure; kernels.py: kernels/step;
* step.py: one resolved model's training step (``TrainingStep``), timed or counted;
* tables.py: the cells' formats, the header, the Markdown / CSV / JSON files;
* state.py: the bytes of a model's streaming state after a given length (``stream_state_bytes``,
  ``model_state``; what run records keep as ``stream_state``);
* training.py, halting.py, streaming.py: the three measurements, each with its table;
* weights.py: a run's tested checkpoint loaded into a TrainingStep (cost tables' ``cost.weights``);
* here: ``run_cost``, one measurement from rows to files (the rows resolved once, here), and
  every name above re-exported.

Nothing here prints: the CLI prints what these functions return.
"""

from __future__ import annotations

from pathlib import Path

from ..runner.stream_state import longest_test_length, state_bytes, state_of, stream_state_bytes, streaming_refusal
from .common import (
    COMPILE_FAILED,
    DTYPES,
    OOM,
    RATIO_KEYS,
    REFERENCE,
    Row,
    Setup,
    add_ratios,
    is_oom,
    parse_positive_ints,
    random_batch,
    resolve_device,
    resolve_rows,
    with_reference,
)
from .counters import BOOL_INDEX_OPS, NO_KERNEL, SYNC_OPS, OpCounter, SavedBytes, aten, is_sync, launches_kernel
from .halting import HALTING_MODELS, HALTING_MODES, halting_rows, halting_table, measure_halting
from .kernels import count_kernels, kernel_calls
from .state import model_state
from .step import TrainingStep, build_steps, count_forward_backward, halt_depth, instrumented_step, timed, training_step
from .streaming import measure_streaming, plot_streaming, streaming_table
from .tables import device_name, header, stem, write_outputs
from .training import measure_steps, measure_training, training_table

__all__ = [
    "BOOL_INDEX_OPS",
    "COMPILE_FAILED",
    "DTYPES",
    "HALTING_MODELS",
    "HALTING_MODES",
    "NO_KERNEL",
    "OOM",
    "RATIO_KEYS",
    "REFERENCE",
    "SYNC_OPS",
    "OpCounter",
    "Row",
    "SavedBytes",
    "Setup",
    "TrainingStep",
    "add_ratios",
    "aten",
    "build_steps",
    "count_forward_backward",
    "count_kernels",
    "device_name",
    "halt_depth",
    "halting_rows",
    "halting_table",
    "header",
    "instrumented_step",
    "is_oom",
    "is_sync",
    "kernel_calls",
    "launches_kernel",
    "longest_test_length",
    "model_state",
    "state_of",
    "stream_state_bytes",
    "streaming_refusal",
    "measure_halting",
    "measure_steps",
    "measure_streaming",
    "measure_training",
    "parse_positive_ints",
    "plot_streaming",
    "random_batch",
    "resolve_device",
    "resolve_rows",
    "run_cost",
    "state_bytes",
    "stem",
    "streaming_table",
    "timed",
    "training_step",
    "training_table",
    "with_reference",
    "write_outputs",
]


def run_cost(
    registry,
    rows: list[Row],
    setup: Setup,
    out: Path | None,
    mode: str = "training",
    bounds: list[int] | None = None,
    decode_tokens: int = 32,
    progress=None,
) -> dict:
    """One `bench cost` measurement: its rows resolved once (``resolve_rows``; with the reference
    row, or each row at each bound and mode for ``halting``), measured; the table, the header, the
    files written (if ``out``)."""
    setup.check()
    bounds = bounds or [10, 20, 40]
    measured = halting_rows(registry, rows, bounds) if mode == "halting" else with_reference(rows)
    configs, raised = resolve_rows(registry, measured, setup)
    names = [r.name for r in (rows if mode == "halting" else measured)]
    if mode == "halting":
        cells = measure_halting(configs, setup, progress)
        headers, table = halting_table(cells, setup)
        head = header(
            "halting",
            names,
            setup,
            cells,
            {"bounds": ", ".join(map(str, bounds)), "weights": "fresh initialisation (halting not trained)"},
            raised,
        )
    elif mode == "streaming":
        cells = measure_streaming(configs, setup, decode_tokens, progress)
        headers, table = streaming_table(cells, setup)
        head = header(
            "streaming",
            names,
            setup,
            cells,
            {
                "decode": f"{decode_tokens} single-token steps after the context, per repeat; eval mode, no grad",
                "state": "sum of tensor nbytes over the state after the context",
            },
            raised,
        )
    else:
        cells = measure_training(configs, setup, progress)
        headers, table = training_table(cells, setup)
        head = header(
            "training",
            names,
            setup,
            cells,
            {
                "step": "forward, task head + loss, backward, grad clip, optimizer step (the preset's)",
                "ratios": f"(x) = value / {REFERENCE}'s at the same length",
            },
            raised,
        )
    files = []
    if out is not None:
        name = stem(mode, setup)
        files = write_outputs(out, name, head, headers, table, cells)
        if mode == "streaming" and (p := plot_streaming(cells, out / f"{name}.png")):
            files.append(p)
    return {"rows": cells, "headers": headers, "table": table, "header": head, "files": files}
