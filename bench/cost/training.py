"""The training measurement (default; LRA Table 2's shape): every model at every length, the counts
first on the eager models, then (compiled, if asked) warm-up and the timed repeats, interleaved
across models; ``measure_steps`` serves --halting and `bench reproduce`'s cost tables too."""

from __future__ import annotations

import statistics

import torch

from ..config import RunConfig
from .common import Row, Setup, _cell_guard, add_ratios, random_batch
from .kernels import count_kernels
from .step import TrainingStep, _sync, build_steps, count_forward_backward, instrumented_step, timed
from .tables import _cell, _mb, _spread


def _summary(times: list[float]) -> dict:
    return {
        "step_s": statistics.median(times),
        "step_min_s": min(times),
        "step_max_s": max(times),
        "repeats": len(times),
        "step_times_s": list(times),
    }


def measure_steps(steps: dict[Row, TrainingStep], setup: Setup, lengths: list[int], progress=None) -> list[tuple[Row, dict]]:
    """(row, cell) for every (row, length), lengths outer: the cell is {model (the row's name),
    length, status, step_s, tokens_per_s, peak_bytes, ops, syncs, halt_depth, ...}; the counts
    first on the eager models, then (compiled, if asked) warm-up, then the timed repeats,
    interleaved across rows."""
    say = progress or (lambda _msg: None)
    cells, data = _count(steps, setup, lengths, say)
    if setup.compile:
        if setup.kernels:  # inductor's C++ kernels record each call in the profiler (read when the code is generated)
            from torch._inductor import config as inductor_config

            inductor_config.cpp.enable_kernel_profile = True
        for step in steps.values():
            step.compile()
    for length in lengths:
        for row, step in steps.items():
            if cells[row, length]["status"] == "ok":
                say(f"T={length} {row}: warming up")
                _cell_guard(
                    cells[row, length],
                    lambda step=step, cell=cells[row, length], batch=data[row, length]: _prepare(step, cell, batch, setup),
                )
                step.release()
        _time(steps, setup, length, cells, data, say)
    return [(row, cells[row, length]) for length in lengths for row in steps]


def _count(steps: dict[Row, TrainingStep], setup: Setup, lengths: list[int], say) -> tuple[dict, dict]:
    """Every row's cell at every length with its counts (ops, syncs, saved bytes; kernels with
    --kernels) from one instrumented step of the eager model, and the random batch it is timed on."""
    device = torch.device(setup.device)
    cells: dict[tuple[Row, int], dict] = {}
    data: dict[tuple[Row, int], dict] = {}
    for length in lengths:
        gen = torch.Generator().manual_seed(length)
        for row, step in steps.items():
            cell = cells[row, length] = {"model": row.name, "length": length, "batch": step.batch_size, "status": "ok"}
            batch = data[row, length] = random_batch(step.task, step.batch_size, length, device, gen)
            say(f"T={length} {row}: counting ops")
            _cell_guard(
                cell,
                lambda cell=cell, step=step, batch=batch: cell.update(
                    instrumented_step(step, batch), **{f"fwd_bwd_{k}": v for k, v in count_forward_backward(step, batch).items()}
                ),
            )
            if setup.kernels and cell["status"] == "ok":
                say(f"T={length} {row}: counting kernel calls (profiler)")
                cell.update({f"eager_{k}": v for k, v in count_kernels(lambda step=step, batch=batch: step(batch)).items()})
            step.release()
    return cells, data


def _prepare(step: TrainingStep, cell: dict, batch: dict, setup: Setup) -> None:
    """Compilation (or a recompilation for this length) and the first step, the warm-up steps, the
    peak memory; with --kernels and --compile, the compiled step's kernel calls."""
    device = step.device
    if setup.compile:
        cell["compile_first_s"], _ = timed(device, step, batch)
    for _ in range(setup.warmup):
        step(batch)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        step(batch)
        _sync(device)
        cell["peak_bytes"] = torch.cuda.max_memory_allocated(device)
    else:
        cell["peak_bytes"] = cell.get("saved_bytes")
    if setup.kernels and setup.compile:  # the compiled step, compiled and warm: its kernel calls
        cell.update({f"compiled_{k}": v for k, v in count_kernels(lambda: step(batch)).items()})


def _time(steps: dict[Row, TrainingStep], setup: Setup, length: int, cells: dict, data: dict, say) -> None:
    """The timed repeats at ``length``, each round every row once in an order rotated each round;
    each cell's summary (median, range) and tokens per second."""
    device = torch.device(setup.device)
    times: dict[Row, list[float]] = {row: [] for row in steps}
    order = list(steps)
    for r in range(setup.repeats):
        for row in order[r % len(order) :] + order[: r % len(order)]:
            if cells[row, length]["status"] != "ok":
                continue

            def once(row=row):
                seconds, _ = timed(device, steps[row], data[row, length])
                times[row].append(seconds)

            _cell_guard(cells[row, length], once)
            steps[row].release()
        say(f"T={length}: repeat {r + 1}/{setup.repeats} done")
    for row in steps:
        cell = cells[row, length]
        if cell["status"] == "ok":
            cell.update(_summary(times[row]))
            cell["tokens_per_s"] = cell["batch"] * length / cell["step_s"]
        data.pop((row, length))


def measure_training(configs: dict[Row, RunConfig], setup: Setup, progress=None) -> list[dict]:
    """Every resolved row (``resolve_rows``, the reference among them) at every length; ratios to the reference."""
    measured = measure_steps(build_steps(configs, setup), setup, setup.lengths, progress)
    return add_ratios([cell for _, cell in measured])


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
            line += [
                _cell(r, "step_s", lambda v: f"{1000 * v:,.1f}"),
                _spread(r),
                _cell(r, "tokens_per_s", lambda v: f"{v:,.0f}"),
                _cell(r, "peak_bytes", _mb),
                _cell(r, "ops", lambda v: f"{v:,}"),
                _cell(r, "syncs", lambda v: f"{v:,}"),
            ]
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
