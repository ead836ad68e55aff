"""Run records: one JSON file per (model, task, preset, seed[, overrides]), written atomically."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from .config import NOT_IDENTITY, TRAIN_DEFAULTS, canonical_overrides  # NOT_IDENTITY: the fields' identity flags
from .errors import UserError
from .parsing import REFERENCE, default_out, version
from .registry import BACKBONE_SETTINGS

SCHEMA = 1


def identity_overrides(overrides: list[str] | dict | None) -> list[str]:
    """The learning-relevant --set items (those whose field is part of a run's identity: the
    ``identity`` flags of bench/config.py's settings), parsed and written one way
    (canonical_overrides): train.lr=3e-4 and train.lr=0.0003 are one run. The canonical spelling
    is the one every committed record was typed with, so their folder names do not change."""
    return [i for i in canonical_overrides(overrides) if i.partition("=")[0] not in NOT_IDENTITY]


def overrides_tag(overrides: list[str] | dict | None, world_size: int = 1) -> str:
    """A run's identity beyond (task, preset, model, seed): its learning-relevant overrides and,
    on several devices, the world size (it multiplies the global batch)."""
    items = identity_overrides(overrides) + ([f"world_size={world_size}"] if world_size > 1 else [])
    if not items:
        return ""
    return hashlib.sha1("\n".join(items).encode()).hexdigest()[:8]


def config_changes(made_with: dict | None, current: dict | None) -> str | None:
    """The learning-relevant settings a record was made with that a run of the same cell would
    not use today, e.g. "model.pos_encoding 'xpos' -> 'sinusoidal'" (a preset edited after the
    run); None when there are none. Keys a record lacks count as their default for train and for
    the settings every backbone takes (``model.init``), and are skipped for the other model and data
    parameters (parameters added later). The data generator's version counts too:
    a record that does not name one was made before versions were recorded, i.e. version "1"
    unless scripts/history/backfill_data_version.py read its version from the record's commit."""
    if not made_with or not current:
        return None
    pairs = [
        ("model", {**BACKBONE_SETTINGS, **made_with.get("model", {}).get("params", {})}, current["model"].get("params", {})),
        ("data", made_with.get("task", {}).get("params", {}), current["task"].get("params", {})),
        ("train", {**TRAIN_DEFAULTS, **made_with.get("train", {})}, current["train"]),
    ]
    diffs = [
        f"{section}.{key} {old[key]!r} -> {new[key]!r}"
        for section, old, new in pairs
        for key in sorted(old.keys() & new.keys())
        if old[key] != new[key] and f"{section}.{key}" not in NOT_IDENTITY
    ]
    old_version, new_version = made_with.get("task", {}).get("version", "1"), current["task"].get("version", "1")
    if old_version != new_version:
        diffs.append(f"data version {old_version!r} -> {new_version!r}")
    return ", ".join(diffs) or None


def record_path(out: Path, model: str, task: str, preset: str, seed: int, overrides=None, world_size: int = 1) -> Path:
    tag = overrides_tag(overrides, world_size)
    return Path(out) / "runs" / task / preset / model / (f"seed{seed}" + (f"-{tag}" if tag else "") + ".json")


def run_folder(record: Path) -> Path:
    """Checkpoints and curves of a run live beside its record: seed0.json -> seed0/."""
    return record.with_suffix("")


def eval_folder(record: Path, out: str | Path | None = None) -> Path:
    """Where ``bench eval`` writes what it scores for ``record``: beside it (its run folder) when
    the record lies under ``out``, or, with no ``out`` given, when it lies outside the checkout's
    reference results (``results/``, written only when asked); otherwise under ``out`` (default
    $BENCH_OUT or out/), at the record's path from its ``runs/`` folder on."""
    record = Path(record)
    where = record.resolve()
    if out is None:
        references = {Path(REFERENCE).resolve(), Path(__file__).resolve().parent.parent / REFERENCE}
        if not any(where.is_relative_to(ref) for ref in references):
            return run_folder(record)
        out = default_out()
    if where.is_relative_to(Path(out).resolve()):
        return run_folder(record)
    parts = where.with_suffix("").parts
    runs = max((i for i, part in enumerate(parts[:-1]) if part == "runs"), default=None)
    return Path(out).joinpath(*(parts[runs:] if runs is not None else ("runs", parts[-1])))


def ensure_writable(out: Path, option: str = "--out") -> None:
    """Fail before training, not after, when the output directory cannot be written; creates nothing.
    ``option``: the command-line option that named the folder, which the message asks to change."""
    out = Path(out)
    existing = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise UserError(f"output directory {str(out)!r} cannot be created: {str(existing)!r} is a file; pass another {option}")
    try:  # a probe file, removed at once (os.access says yes to root even on read-only filesystems)
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(
            f"output directory {str(out)!r} cannot be written ({exc.strerror or exc} in {str(existing)!r}); pass a writable {option}"
        ) from None


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write by rename (a reader, or a resume after a kill, never sees half a file), readable like
    any other file (0644 under the usual umask; mkstemp alone would leave 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: dict) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


log = logging.getLogger(__name__)


def warn(message: str) -> None:
    """A problem the reader goes on past, logged as ``bench: warning: ...`` (the CLI writes it to stderr)."""
    log.warning(f"bench: warning: {message}")


STATUSES = ("ok", "failed", "pruned")  # pruned: a tuning trial stopped by its pruner (bench tune), not a failure
#: the types of the fields readers use; "status" is required, and "metrics" when it is "ok"
FIELDS = {
    "status": str,
    "model": str,
    "task": str,
    "preset": str,
    "seed": int,
    "metrics": dict,
    "config": dict,
    "test_splits": list,
    "report_metrics": list,
    "overrides": list,
}


class RecordError(ValueError):
    """Why a record file cannot be used: ``unreadable`` (not JSON, an I/O error) or not a run record."""

    def __init__(self, problem: str, unreadable: bool = False):
        super().__init__(problem)
        self.problem, self.unreadable = problem, unreadable


@dataclasses.dataclass
class Record:
    """A run record as read: the fields readers rely on, typed and checked, and ``data``, the whole
    JSON mapping (what the readers of ``read_record`` get). ``from_json`` is the one reader."""

    status: str
    data: dict
    model: str | None = None
    task: str | None = None
    preset: str | None = None
    seed: int | None = None
    metrics: dict = dataclasses.field(default_factory=dict)
    config: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_json(cls, source: str | bytes | dict, required: tuple[str, ...] = ()) -> Record:
        """A record from its JSON text (or the parsed mapping); RecordError saying what is wrong:
        not JSON, not a mapping, no status or an unknown one, a finished record without metrics,
        a field of the wrong type, a metrics entry or config section that is not a mapping, or a
        ``required`` field missing."""
        if isinstance(source, (str, bytes)):
            try:
                source = json.loads(source)
            except ValueError as exc:
                raise RecordError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, unreadable=True) from None
        problem = record_problem(source) or next((f"it has no {k!r}" for k in required if k not in source), None)
        if problem:
            raise RecordError(problem)
        return cls(
            source["status"], source, **{k: source[k] for k in ("model", "task", "preset", "seed", "metrics", "config") if k in source}
        )

    @classmethod
    def read(cls, path: Path, required: tuple[str, ...] = ()) -> Record:
        """The record at ``path``: FileNotFoundError when there is none, RecordError when it cannot be used."""
        try:
            text = Path(path).read_text()
        except (FileNotFoundError, IsADirectoryError):
            raise
        except OSError as exc:
            raise RecordError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, unreadable=True) from None
        except UnicodeDecodeError as exc:
            raise RecordError(f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}", unreadable=True) from None
        return cls.from_json(text, required)


def record_problem(rec) -> str | None:
    """Why a parsed record cannot be used (None: it can): not a mapping, no status or an unknown
    one, a finished record without metrics, a field of the wrong type, a metrics entry or config
    section that is not a mapping."""
    if not isinstance(rec, dict):
        return f"it holds a JSON {type(rec).__name__}, not a record"
    if "status" not in rec or (rec.get("status") == "ok" and "metrics" not in rec):
        return f"it has no {'status' if 'status' not in rec else 'metrics'}"
    for key, kind in FIELDS.items():
        if key in rec and (not isinstance(rec[key], kind) or isinstance(rec[key], bool)):
            return f"its {key!r} is a {type(rec[key]).__name__}, not a {kind.__name__}"
    if rec["status"] not in STATUSES:
        return f"its status {rec['status']!r} is none of {', '.join(STATUSES)}"
    for split, result in rec.get("metrics", {}).items():
        if not isinstance(result, dict):
            return f"its metrics[{split!r}] is a {type(result).__name__}, not a mapping"
        problem = _rates_problem(f"metrics[{split!r}]", result, rec.get("primary_metric"))
        if problem:
            return problem
    for section in ("model", "task", "train"):
        if section in rec.get("config", {}) and not isinstance(rec["config"][section], dict):
            return f"its config[{section!r}] is a {type(rec['config'][section]).__name__}, not a mapping"
    return None


#: the accuracies every split records, whatever the task's kind (bench/metrics.py ``_rates``): a tag
#: task's ``token_acc`` is per position, a classify task's equals its ``acc``
SPLIT_RATES = ("acc", "token_acc", "last_acc")
#: the metrics a record holds as fractions of examples (bench/metrics.py): each in [0, 1]
RATES = (*SPLIT_RATES, "majority", "token_majority", "last_majority")


def _rates_problem(where: str, result: dict, primary: str | None) -> str | None:
    """A rate outside [0, 1], or a primary metric that is NaN (other rates are NaN when they have
    nothing to score), in a split's metrics or its per-length bins."""
    bins = result.get("by_length") if isinstance(result.get("by_length"), dict) else {}
    for at, values in [(where, result), *((f"{where}['by_length'][{b!r}]", v) for b, v in bins.items())]:
        if not isinstance(values, dict):
            return f"its {at} is a {type(values).__name__}, not a mapping"
        for key in RATES:
            value = values.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"its {at}[{key!r}] is {value!r}, not a number"
            if value != value:
                if key == primary and at == where:
                    return f"its {at}[{key!r}] is NaN (the run's metric was never scored)"
            elif not 0 <= value <= 1:
                return f"its {at}[{key!r}] is {value!r}, outside [0, 1]"
    return None


def read_record(path: Path, quiet: bool = False) -> dict:
    """A record's contents, or {} when it is missing, unreadable or malformed (then, unless
    ``quiet``, with a one-line warning: every reader skips such a record the same way)."""
    try:
        return Record.read(path).data
    except (FileNotFoundError, IsADirectoryError):
        return {}
    except RecordError as exc:
        if not quiet:
            what = f"is unreadable ({exc.problem})" if exc.unreadable else f"is not a run record ({exc.problem})"
            warn(f"record {Path(path)} {what}; skipped (rerun that run with --rerun to replace it)")
        return {}


def record_checkpoint(record: Path, rec: dict) -> Path:
    """The tested checkpoint of a record: always in the record's own run folder (``seed0.json``
    -> ``seed0/ckpt/best.ckpt``), whatever path it was written with, so a moved or copied results
    tree finds its own checkpoints and never another copy's."""
    name = Path(str(rec.get("checkpoint") or "best.ckpt")).name
    return run_folder(Path(record)) / "ckpt" / name


def rerun_command(record: Path, rec: dict) -> str:
    """The ``bench run`` command that trains the record's run again into the same place (its
    checkpoint recreated, its record rewritten), with what the first training took."""
    import shlex

    record = Path(record)
    out = record.parents[4] if len(record.parents) > 4 and record.parents[3].name == "runs" else Path("OUT")
    overrides = rec.get("overrides") or []
    items = [f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, dict) else [str(o) for o in overrides]
    words = [
        "bench",
        "run",
        "--model",
        str(rec.get("model")),
        "--task",
        str(rec.get("task")),
        "--preset",
        str(rec.get("preset")),
        "--seed",
        str(rec.get("seed", 0)),
        *(w for item in items for w in ("--set", item)),
        "--out",
        str(out),
        "--rerun",
    ]
    took = rec.get("train_time_s") or rec.get("wall_time_s")
    device = (rec.get("device") or {}).get("type") if isinstance(rec.get("device"), dict) else None
    when = f" (its training took {took / 60:.0f} min{f' on {device}' if device else ''})" if isinstance(took, (int, float)) else ""
    return shlex.join(words) + when


def relative_checkpoint(record: Path, checkpoint: Path) -> str:
    """How a record names its checkpoint: relative to the record's folder (``seed0/ckpt/best.ckpt``)."""
    return str(Path(checkpoint).relative_to(Path(record).parent))


def outcomes_file(result: Path, evaluation: bool = False) -> Path:
    """Where the per-example outcomes of a result live, named by it: a run record's in its run
    folder (``seed0.json`` -> ``seed0/outcomes.npz``), an evaluation's beside its JSON in that
    folder (``seed0/eval-<tag>.json`` -> ``seed0/eval-<tag>-outcomes.npz``); a moved or copied
    results tree carries them with the folder, as it does the checkpoint."""
    result = Path(result)
    return result.with_name(f"{result.stem}-outcomes.npz") if evaluation else run_folder(result) / "outcomes.npz"


def command_line(argv: list[str] | None = None, cwd: str | None = None) -> str:
    """The command as a user would type it again: ``bench ...``, with absolute paths below the
    current directory written relative to it (a record names no path of the machine it ran on)."""
    argv = list(sys.argv if argv is None else argv)
    cwd = os.path.abspath(cwd or os.getcwd())

    def word(arg: str) -> str:
        if os.path.isabs(arg) and (arg == cwd or arg.startswith(cwd + os.sep)):
            return os.path.relpath(arg, cwd)
        return arg

    return " ".join(["bench", *map(word, argv[1:])])


def git_commit(root: Path | None = None) -> dict:
    """The code a run is made from: the checkout's commit and whether its tracked files differ from
    it, results/ aside (records, study journals and write-ups, which runs and studies write as they
    go, are not code); when they do, ``diff_sha256``, the SHA-256 of ``git diff HEAD --binary`` over
    the same files (the code is that commit plus the diff with this hash). Tables mark such records
    (bench/report/cells.py)."""
    root = Path(root) if root else Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():  # an installed bench (site-packages): no checkout to name
        return {"commit": None, "dirty": None}

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=10, check=False).stdout

    try:
        commit = git("rev-parse", "HEAD").decode().strip()
        code = ["--", ".", ":(exclude)results"]  # results/ holds records and write-ups, written by the runs themselves
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", *code).strip())
        diff = git("diff", "HEAD", "--binary", *code) if dirty else b""
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": dirty, **({"diff_sha256": hashlib.sha256(diff).hexdigest()} if dirty else {})}


def other_code(rec: dict) -> bool:
    """Whether a record was made from code its named commit does not give: a dirty tree (``git.dirty``,
    with ``git.diff_sha256``) or a ``git.note`` saying which code it ran."""
    git = rec.get("git") or {}
    return bool(git.get("dirty") or git.get("note"))


def versions() -> dict:
    import datasets
    import lightning
    import numpy

    return {
        "python": platform.python_version(),
        "bench": version(),
        "torch": torch.__version__,
        "lightning": lightning.__version__,
        "datasets": datasets.__version__,
        "numpy": numpy.__version__,
    }


def cpu_model(cpuinfo: str | None = None) -> str:
    """The processor as /proc/cpuinfo names it, with its family / model / stepping numbers (two
    machines of one marketing name can be different generations, with different vector units):
    e.g. "AMD EPYC (family 25, model 1, stepping 1)"; ``platform.processor()`` where there is no
    /proc/cpuinfo. ``cpuinfo``: that file's text (tests)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the first processor's block is enough
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine()
    numbers = [f"{k.replace('cpu ', '')} {fields[k]}" for k in ("cpu family", "model", "stepping") if fields.get(k)]
    return f"{name} ({', '.join(numbers)})" if numbers else name


def device_info(trainer=None) -> dict:
    """Where a run ran: device type and names, processes (world size); on the CPU its threads, the
    processor (``cpu_model``) and the vector instructions torch's kernels use (``isa``: AVX2,
    AVX512, ...): runs on two ISAs round differently, so they can part after many steps."""
    world = trainer.world_size if trainer is not None else 1
    on_cuda = trainer.strategy.root_device.type == "cuda" if trainer is not None else torch.cuda.is_available()
    if on_cuda:
        names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
        return {"type": "cuda", "name": names[0] if len(names) == 1 else names, "count": torch.cuda.device_count(), "world_size": world}
    return {
        "type": "cpu",
        "name": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "world_size": world,
        "cpu": cpu_model(),
        "isa": torch.backends.cpu.get_cpu_capability(),
    }


def base_record(model: str, task: str, preset: str, seed: int, overrides) -> dict:
    return {
        "schema": SCHEMA,
        "model": model,
        "task": task,
        "preset": preset,
        "seed": seed,
        "overrides": list(overrides) if isinstance(overrides, (list, tuple)) else (overrides or []),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command_line(),
        "git": git_commit(),
        "versions": versions(),
        "hostname": platform.node(),
    }
