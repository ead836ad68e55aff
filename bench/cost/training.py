"""The training measurement (default; LRA Table 2's shape): every model at every length, the counts
first on the eager models, then (compiled, if asked) warm-up and the timed repeats, interleaved
across models; ``measure_steps`` serves --halting and `bench reproduce`'s cost tables too."""
from __future__ import annotations

import statistics

import torch

from .common import Setup, _cell_guard, add_ratios, check_models, random_batch, with_reference
from .kernels import count_kernels
from .step import TrainingStep, _sync, build_steps, count_forward_backward, instrumented_step, timed
from .tables import _cell, _mb, _spread


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


def measure_training(registry, models: list[str], setup: Setup, progress=None) -> list[dict]:
    setup.check()
    models = with_reference(models)
    check_models(registry, models, setup)
    steps = build_steps(registry, models, setup)
    return add_ratios(measure_steps(steps, setup, setup.lengths, progress))


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
