"""What every `bench cost` measurement shares: the command's inputs (``Setup``, the lengths, the
device, the row labels), random batches, OOM cells, the ratio to a reference row and the models'
checks before any is built."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from ..config import resolve_run
from ..errors import UserError
from ..tasks.kinds import kind_of

log = logging.getLogger("bench.cost")

REFERENCE = "transformer"
OOM = "OOM"


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
        raise UserError(f"--device {name!r}: choose auto, cpu or cuda")
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

    def __post_init__(self) -> None:
        if self.device == "auto":  # as `bench run`: the GPU when torch sees one (--kernels counts CPU kernels)
            self.device = "cuda" if torch.cuda.is_available() and not self.kernels else "cpu"

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


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, MemoryError)) and ("out of memory" in text or "can't allocate memory" in text
                                                              or isinstance(exc, MemoryError))


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
        check_step_sizes(name, config, setup)


def check_step_sizes(name: str, config, setup: Setup) -> None:
    """A training step of ``name`` at each length, estimated before any is built (bench/sizes.py):
    on the CPU, one that would not fit in memory is refused; a long one is noted with its time."""
    from ..sizes import CPU_MACS_PER_S, check_fits, duration, forward_cost

    batch = setup.batch or config.train["batch_size"]
    for length in setup.lengths:
        need, macs = forward_cost(config.model.params, batch, length, training=True)
        if setup.device == "cpu":
            check_fits(f"{name}: a training step of a batch of {batch:,} at length {length:,}", need,
                       "lower --lengths or --batch")
        steps = 1 + setup.warmup + setup.repeats
        if setup.device == "cpu" and macs * steps / CPU_MACS_PER_S > 120:
            log.info(f"bench: note: {name} at length {length:,}: {steps} steps of about {duration(macs)} each on one CPU core (rough)")
