"""Parsing and defaults shared by the command line and the code below it (plain Python, no torch
or Lightning: the CLI imports this module up front). Nothing here prints; bad input is a UserError."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import UserError

OUT_ENV = "BENCH_OUT"
REFERENCE = "results"  # the checkout's committed reference results (not package data)


def default_out() -> str:
    """Where runs and leaderboards go without --out: $BENCH_OUT, else ``out`` (git-ignored);
    a $BENCH_OUT that is set but empty is refused (it would write into the current folder)."""
    value = os.environ.get(OUT_ENV)
    if value is not None and not value.strip():
        raise UserError(f"${OUT_ENV} is set but empty; unset it or name a folder (e.g. {OUT_ENV}=out)")
    return value or "out"


def reference_out(sub: str = "") -> str:
    """Where ``bench reproduce`` (and ``bench cost``, under ``cost/``) read and write by default:
    the checkout's reference results, ``results/``, when the current folder has them (a checkout);
    elsewhere (an installed bench used outside a checkout) $BENCH_OUT, else ``out``."""
    base = REFERENCE if Path(REFERENCE).is_dir() else default_out()
    return f"{base}/{sub}" if sub else base


def parse_seeds(seeds: str | None = None, seed: str | int | None = None) -> list[int]:
    """``--seeds 0,1,2`` (or ``--seed N``; default 0) as distinct whole numbers in [0, 2**32)."""
    if seeds is not None and seed is not None:
        raise UserError(f"--seed {seed} and --seeds {seeds} both given; give one of them (--seeds 0,1,2 for several)")
    raw = seeds if seeds is not None else (str(seed) if seed is not None else "0")
    if any(len(s.strip()) > 20 for s in str(raw).split(",")):
        raise UserError(f"seed {str(raw).strip()[:12]}... is out of range; seeds are whole numbers from 0 to 4294967295 (e.g. 0,1,2)")
    items = [s.strip() for s in str(raw).split(",")]
    if "" in items and any(items):  # 0,,1 or 0,1,: a seed left out between commas, refused as 0-2 is
        raise UserError(
            f"seeds {raw!r}: an empty item (two commas in a row, or one at an end); give whole numbers separated by commas (e.g. 0,1,2)"
        )
    try:
        parsed = [int(s) for s in items if s != ""]
    except ValueError:
        raise UserError(f"seeds must be integers separated by commas (e.g. 0,1,2), got {raw!r}") from None
    if not parsed:
        raise UserError("no seed given; use --seed N or --seeds 0,1,2")
    bad = [s for s in parsed if not 0 <= s < 2**32]
    if bad:
        raise UserError(f"seed {bad[0]} is out of range; seeds are whole numbers from 0 to 4294967295 (e.g. 0,1,2)")
    if len(set(parsed)) != len(parsed):
        dup = sorted({s for s in parsed if parsed.count(s) > 1})
        raise UserError(f"seed {', '.join(map(str, dup))} given twice in {raw!r}; give each seed once (e.g. 0,1,2)")
    return parsed


def env_flag(name: str) -> bool:
    """A boolean environment variable: unset, empty, 0, false, no, off -> False; 1, true, yes,
    on -> True (any case); any other value is one UserError line."""
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise UserError(f"${name}={os.environ[name]!r}: give 1/true/yes to turn it on, 0/false/no (or unset it) to turn it off")


#: integers that schedulers and launchers (SLURM, torchrun, Lightning) put in the environment
LAUNCHER_INTS = (
    "RANK",
    "LOCAL_RANK",
    "NODE_RANK",
    "GROUP_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_PORT",
    "SLURM_NTASKS",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_CPUS_PER_TASK",
    "SLURM_NNODES",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_ARRAY_TASK_ID",
)


def check_launcher_env() -> None:
    """One UserError line for a scheduler's or launcher's variable that should hold a whole number
    and does not (SLURM_NTASKS=abc, LOCAL_RANK=x): Lightning and torch would fail on it mid-run."""
    for name in LAUNCHER_INTS:
        value = os.environ.get(name)
        if value is not None and value.strip() and not (value.strip().isdigit() and len(value.strip()) < 10):
            if name == "SLURM_NTASKS_PER_NODE" and all(p.split("(")[0].isdigit() for p in value.split(",")):
                continue  # SLURM writes per-node counts as 2(x3),1
            raise UserError(
                f"${name}={value[:40]!r} is not a whole number; it is set by a scheduler or launcher "
                f"(SLURM, torchrun): unset it or give a number"
            )


#: The names rule for models, tasks, tables and studies: a letter or digit, then letters, digits and
#: ``_ . + -`` (a registry entry may start with ``_``: an abstract entry, a base for others), at most
#: ``NAME_MAX`` characters. A name becomes a folder or file name (``OUT/runs/TASK/PRESET/MODEL``,
#: ``OUT/studies/NAME``, ``tables/NAME.yaml``) and a list item (``--models a,b``): so never a path
#: separator, never ``.`` or ``..``, never a comma.
NAME_RULE = re.compile(r"_?[A-Za-z0-9][A-Za-z0-9_.+-]*")
NAME_MAX = 100
NAME_WORDS = f"a letter or digit, then letters, digits, _ . + - (at most {NAME_MAX} characters)"


def check_name(name, what: str, where: str = "") -> str:
    """``name`` if it follows ``NAME_RULE``, else one UserError line: ``<where>: <what> name '...'
    is not a name: <why>; a name is <NAME_WORDS>``. ``what``: model, task, table or study."""
    if not isinstance(name, str):
        why = f"it is {type(name).__name__} {name!r}; quote it in YAML"
    elif len(name) > NAME_MAX:
        why = f"it has {len(name)} characters"
    elif name in ("", ".", ".."):
        why = "it is empty" if not name else "it names a folder"
    elif "/" in name or "\\" in name:
        why = "it holds a path separator"
    elif "," in name:
        why = "it holds a comma, which separates names in --models and --tasks"
    elif NAME_RULE.fullmatch(name):
        return name
    else:
        odd = re.search(r"[^A-Za-z0-9_.+-]", name)
        why = f"it holds {odd.group()!r}" if odd else f"it starts with {name.lstrip('_')[:1]!r}"
    shown = repr(name[:40] + "...") if isinstance(name, str) and len(name) > 40 else repr(name)
    raise UserError(f"{where + ': ' if where else ''}{what} name {shown} is not a name: {why}; a name is {NAME_WORDS}")


def parse_names(raw: str, what: str, settings: bool = False) -> list[str]:
    """``--models a,b`` -> ["a", "b"] (at least one), each following the names rule (``check_name``).
    ``settings``: an item may carry its own settings after the name (``bench cost``'s
    ``tlb:chunk_size=4``); the rule applies to the name before the first ``:``."""
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names:
        raise UserError(f"--{what} needs at least one name")
    for n in names:
        check_name(n.split(":", 1)[0] if settings else n, what.rstrip("s"), f"--{what}")
    return names


def trainer_kwargs(accelerator=None, devices=None, strategy=None, num_nodes=None) -> dict:
    """The Lightning Trainer settings given on the command line (left out when not given)."""
    kw = {}
    for key, value in (("accelerator", accelerator), ("devices", devices), ("strategy", strategy), ("num_nodes", num_nodes)):
        if value is None:
            continue
        if key == "num_nodes" and not (str(value).isdigit() and int(value) >= 1):
            raise UserError(f"--num-nodes takes a whole number >= 1, got {value!r}")
        kw[key] = int(value) if key == "num_nodes" or (key == "devices" and str(value).isdigit()) else value
    return kw


def version() -> str:
    """The installed distribution's version (pyproject.toml's, through the package metadata)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("bench")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "unknown (not installed)"
