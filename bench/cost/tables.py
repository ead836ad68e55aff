"""What `bench cost` writes: the cells' formats, the header (what a reader needs to trust or redo
a table), the files' stem and the Markdown / CSV / JSON files."""

from __future__ import annotations

import datetime
import json
import platform
import subprocess
from pathlib import Path

import torch

from .common import COMPILE_FAILED, OOM, Setup


def _mb(n) -> str:
    return f"{n / 2**20:,.1f}"


def _cell(row: dict, key: str, fmt) -> str:
    if row.get("status", "ok") != "ok":
        return row["status"] if row["status"] in (OOM, COMPILE_FAILED) else "—"
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


def _git_commit() -> str:
    root = Path(__file__).resolve().parent.parent.parent
    if not (root / "pyproject.toml").is_file():  # an installed bench (site-packages): no checkout to name
        return "unknown"
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
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


def header(kind: str, models: list[str], setup: Setup, rows: list[dict], extra: dict | None = None, raised: list[str] = ()) -> dict:
    """What a reader needs to trust (or redo) the table, in the style of fla's benchmark scripts;
    ``raised``: the rows whose position table was raised to the longest length (``resolve_rows``)."""
    batches = sorted({r["batch"] for r in rows if "batch" in r})
    memory = (
        "torch.cuda.max_memory_allocated over one step (weights, grads, optimizer state, activations)"
        if setup.device == "cuda"
        else "bytes of distinct storages autograd saves for backward in one step's forward (parameters excluded)"
    )
    h = {
        "measurement": kind,
        "task": setup.task,
        "preset": setup.preset,
        "models": models,
        "shapes": f"batch {', '.join(map(str, batches)) or setup.batch} x length {', '.join(map(str, setup.lengths))}",
        "inputs": "random tokens of the task's vocabulary, every position real (no data generated)",
        "dtype": setup.dtype + (" (autocast)" if setup.dtype == "bf16" else ""),
        "compile": setup.compile,
        "device": device_name(setup.device),
        "torch": torch.__version__,
        "commit": _git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "repeats": f"{setup.repeats} timed (interleaved across models), after the counted step and {setup.warmup} warm-up step(s)",
    }
    if kind != "streaming":
        h["memory"] = memory
        h["ops"] = "aten ops reaching a kernel per training step (views, metadata, bare allocations excluded); eager model"
        h["syncs"] = "host reads of tensor values per training step (_local_scalar_dense, nonzero, boolean-mask indexing ...)"
        if setup.kernels:
            h["kernels"] = (
                "kernel calls per training step from torch.profiler: inductor's C++ kernels (in parentheses) + aten "
                "operators called from outside any kernel that launch one (bench/cost/kernels.py's docstring); "
                "eager, and compiled"
            )
    if setup.overrides:
        h["overrides"] = " ".join(setup.overrides)
    if raised:
        h["max_len"] = f"position tables raised to {max(setup.lengths)} (the longest length) for {', '.join(sorted(raised))}"
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
