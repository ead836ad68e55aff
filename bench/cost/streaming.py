"""`bench cost --stream`: models with the streaming contract of bench/models/base.py,
prefill of a context in one ``step`` call, per-token decoding latency, the state's bytes; the
table and the latency / state plot against the context length."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import torch

from ..config import RunConfig
from ..errors import UserError
from ..runner.build import instantiate_model, instantiate_task
from ..runner.stream_state import state_bytes, streaming_refusal
from .common import Row, Setup, _cell_guard, add_ratios
from .step import timed
from .tables import _cell


def measure_streaming(configs: dict[Row, RunConfig], setup: Setup, decode_tokens: int = 32, progress=None) -> list[dict]:
    """Per resolved row (``resolve_rows``, the reference among them) and context length: prefill
    seconds (median over repeats), per-token decode latency (median, p90 over ``decode_tokens``
    single-token steps per repeat), state bytes after the context; ratios to the Transformer's.
    Rows of models without streaming say why."""
    if decode_tokens < 1:
        raise UserError("--decode-tokens takes a whole number >= 1")
    device = torch.device(setup.device)
    backbones, out = {}, []
    for row, config in configs.items():
        task = instantiate_task(config.task)
        torch.manual_seed(0)
        backbone = instantiate_model(config.model, task.vocab_size).to(device).eval()
        batch = setup.batch or config.train.batch_size
        refusal = streaming_refusal(backbone, batch, device)  # a family may refuse by its definition at run time
        if refusal is None:
            backbones[row.name] = (backbone, task, batch)
        else:
            out += [{"model": row.name, "length": length, "status": f"no streaming ({refusal})"} for length in setup.lengths]
    for length in setup.lengths:
        out += _stream_at(backbones, setup, length, decode_tokens, progress or (lambda _msg: None))
    order = {row.name: i for i, row in enumerate(configs)}
    out.sort(key=lambda r: (r["length"], order[r["model"]]))
    return add_ratios(out, keys=("prefill_s", "decode_s", "decode_p90_s", "state_bytes"))


def _stream_at(backbones: dict[str, tuple], setup: Setup, length: int, decode_tokens: int, say) -> list[dict]:
    """One cell per streaming model at context ``length``: warm-up and timed rounds interleaved
    across models, each a prefill of the context and ``decode_tokens`` single-token steps."""
    device = torch.device(setup.device)
    gen = torch.Generator().manual_seed(length)
    cells, prefill, decode = {}, {n: [] for n in backbones}, {n: [] for n in backbones}
    inputs = {
        n: (
            torch.randint(1, t.vocab_size, (b, length), generator=gen).to(device),
            torch.randint(1, t.vocab_size, (b, decode_tokens), generator=gen).to(device),
        )
        for n, (_, t, b) in backbones.items()
    }
    for name, (_, _, b) in backbones.items():
        cells[name] = {"model": name, "length": length, "batch": b, "status": "ok"}
    order = list(backbones)
    for r in range(setup.warmup + setup.repeats):
        for name in order[r % len(order) :] + order[: r % len(order)] if order else []:
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
                        s, (_, state) = timed(device, backbone.step, tokens[:, i : i + 1], state)
                        lat.append(s)
                if r >= setup.warmup:
                    prefill[name].append(seconds)
                    decode[name].extend(lat)

            _cell_guard(row, once)
        say(f"T={length}: streaming round {r + 1}/{setup.warmup + setup.repeats} done")
    for name, row in cells.items():
        if row["status"] == "ok":
            lat = sorted(decode[name])
            row.update(
                prefill_s=statistics.median(prefill[name]),
                decode_s=statistics.median(lat),
                decode_p90_s=lat[min(len(lat) - 1, math.ceil(0.9 * len(lat)) - 1)],
                decode_steps=len(lat),
            )
    return list(cells.values())


def streaming_table(rows: list[dict], setup: Setup) -> tuple[list[str], list[list[str]]]:
    headers = ["model", "context T", "prefill ms", "decode ms/token", "p90 ms", "state MB"]
    table = []
    for r in rows:
        if r["status"] != "ok":
            table.append([r["model"], r["length"], r["status"], "", "", ""])
            continue
        ms = lambda v: f"{1000 * v:,.2f}"  # noqa: E731
        table.append(
            [
                r["model"],
                r["length"],
                _cell(r, "prefill_s", ms),
                _cell(r, "decode_s", ms),
                _cell(r, "decode_p90_s", ms),
                _cell(r, "state_bytes", lambda v: f"{v / 2**20:,.3f}"),
            ]
        )
    return headers, table


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
