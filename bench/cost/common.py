"""What every `bench cost` measurement shares: the command's inputs (``Setup``, the lengths, the
device), its rows (``Row``) each resolved once (``resolve_rows``), random batches, OOM cells and the
ratio to a reference row."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import torch

from ..config import RunConfig, resolve_run
from ..errors import UserError
from ..tasks.kinds import kind_of

log = logging.getLogger("bench.cost")

REFERENCE = "transformer"
OOM = "OOM"
COMPILE_FAILED = "compile failed"  # torch.compile (dynamo / inductor) raised on this row at this length


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


@dataclass(frozen=True)
class Row:
    """One measured row: a registry model with its own --set items, and where its table puts it
    (``bound`` and ``mode`` for --halting, ``cell`` for a cost table). Rows are told apart by value:
    one model at two bounds is two rows."""

    model: str  # the registry model
    sets: tuple[str, ...] = ()  # the row's own --set items, after the command's (model.chunk_size=100, model.mode=halt ...)
    label: str = ""  # how the table names the row (default: the model)
    bound: int | None = None
    mode: str | None = None
    cell: str | None = None

    @classmethod
    def parse(cls, text: str) -> Row:
        """A --models item: ``tlb`` or ``tlb:chunk_size=100:memory_slots=10`` (a model with its own settings)."""
        model, *items = text.split(":")
        return cls(model, tuple(f"model.{item}" for item in items), text)

    @property
    def name(self) -> str:
        return self.label or self.model

    def __str__(self) -> str:
        where = ", ".join(
            filter(
                None, [f"bound {self.bound}" if self.bound is not None else "", self.mode or "", f"cell {self.cell}" if self.cell else ""]
            )
        )
        return f"{self.name} ({where})" if where else self.name


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

    def __post_init__(self) -> None:
        if self.device == "auto":  # as `bench run`: the GPU when torch sees one (--kernels counts CPU kernels)
            self.device = "cuda" if torch.cuda.is_available() and not self.kernels else "cpu"

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
    return isinstance(exc, (RuntimeError, MemoryError)) and (
        "out of memory" in text or "can't allocate memory" in text or isinstance(exc, MemoryError)
    )


def is_compile_failure(exc: BaseException) -> bool:
    """torch.compile's own errors (dynamo tracing, the backend: inductor's codegen) as opposed to the model's."""
    from torch._dynamo.exc import TorchDynamoException

    return isinstance(exc, TorchDynamoException)


def _cell_guard(row: dict, fn):
    """Runs fn(); an out-of-memory error makes the row an OOM cell, a torch.compile failure a
    ``compile failed`` cell (with the error's first line), instead of a crash of every row."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - only OOM and compile failures are caught, everything else is re-raised
        if is_oom(exc):
            status = OOM
        elif is_compile_failure(exc):
            status = COMPILE_FAILED
        else:
            raise
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        row.update(status=status, error=first[:200])
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


def with_reference(rows: list[Row]) -> list[Row]:
    return rows if any(r.name == REFERENCE for r in rows) else [Row(REFERENCE), *rows]


def resolve_rows(registry, rows: list[Row], setup: Setup) -> tuple[dict[Row, RunConfig], list[str]]:
    """Each row resolved once, as `bench run` resolves it (the command's --set items, then the
    row's own), and its training step's sizes checked: (configs by row, the names of the rows whose
    position table was raised). A position table (max_len) shorter than the longest length is raised
    to that length: --lengths is what the command measures, and the table's size changes no
    per-position cost. Unknown names, causality mismatches: UserError, before anything is built."""
    longest = max(setup.lengths)
    configs, raised = {}, []
    for row in rows:
        config = resolve_run(registry, row.model, setup.task, setup.preset, [*setup.overrides, *row.sets])
        max_len = config.model.params.get("max_len")
        if isinstance(max_len, int) and max_len < longest:
            model = replace(
                config.model,
                params={**config.model.params, "max_len": longest},
                sources={**config.model.sources, "max_len": "--lengths (the longest)"},
            )
            config = replace(config, model=model)
            raised.append(row.name)
        check_step_sizes(row, config, setup)
        configs[row] = config
    return configs, list(dict.fromkeys(raised))


def check_step_sizes(row: Row, config: RunConfig, setup: Setup) -> None:
    """A training step of ``row`` at each length, estimated before any is built (bench/sizes.py):
    on the CPU, one that would not fit in memory is refused; a long one is noted with its time."""
    from ..sizes import CPU_MACS_PER_S, check_fits, duration, forward_cost

    batch = setup.batch or config.train.batch_size
    for length in setup.lengths:
        need, macs = forward_cost(config.model.params, batch, length, training=True)
        if setup.device == "cpu":
            check_fits(f"{row}: a training step of a batch of {batch:,} at length {length:,}", need, "lower --lengths or --batch")
        steps = 1 + setup.warmup + setup.repeats
        if setup.device == "cpu" and macs * steps / CPU_MACS_PER_S > 120:
            log.info(f"bench: note: {row} at length {length:,}: {steps} steps of about {duration(macs)} each on one CPU core (rough)")
