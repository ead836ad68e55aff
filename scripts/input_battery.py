"""The bad-input audits' cases as a before/after battery: each case runs `bench ...` in a fresh
clone of a code tree (PYTHONPATH=that tree), and its exit status, stderr line count, first stderr
line and the files it left (git status of the clone, ignored files included) are written as a
Markdown table.  python scripts/input_battery.py CODE_TREE LABEL > table.md
(BATTERY_ONLY='r5:' runs round five only; a case named "PY ..." runs Python code, as a
user of the library would, printing the exception's type and message as its one stderr line.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

TREE = Path(sys.argv[1]).resolve()
LABEL = sys.argv[2]
WORK = Path(f"/tmp/battery-{LABEL}")
TIMEOUT = float(os.environ.get("BATTERY_TIMEOUT", "60"))
PY = os.environ.get("BATTERY_PY", "/work/main/.venv/bin/python")

shutil.rmtree(WORK, ignore_errors=True)
WORK.mkdir(parents=True)
CLONE = WORK / "clone"
subprocess.run(["git", "clone", "-q", str(TREE), str(CLONE)], check=True)
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "SLURM_")) and k not in ("RANK", "LOCAL_RANK")},
    "PYTHONPATH": str(TREE),
    "OMP_NUM_THREADS": "1",
    "BENCH_DATA_DIR": "/tmp/battery-data",
    "BENCH_NO_PLUGINS": "1",
}


def bench(*argv, env=None, cwd=CLONE, timeout=TIMEOUT):
    command = [PY, "-c", PY_CASE, *map(str, argv[1:])] if argv and argv[0] == "PY" else [PY, "-m", "bench.cli", *map(str, argv)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env={**ENV, **(env or {})}, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return f"timeout {timeout:.0f}s", "", err


# a library call as a user makes it: PY <function> <args...>; an exception is its type and message, exit 2
PY_CASE = """import sys
import bench
try:
    getattr(bench, sys.argv[1])(*sys.argv[2:])
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__, file=sys.stderr)
    sys.exit(2)
"""


def left() -> list[str]:
    out = subprocess.run(["git", "-C", str(CLONE), "status", "--porcelain", "--ignored", "-uall"], capture_output=True, text=True).stdout
    return [
        ln[3:]
        for ln in out.splitlines()
        if not ln[3:].startswith((".cache/", "__pycache__", "bench/tables/zz-broken.yaml")) and "__pycache__" not in ln
    ]


# ---- fixtures: a tiny LM run (with its checkpoint) and files made to be wrong -------------------
REC_OUT = WORK / "rec"
code, _, err = bench(
    "run",
    "--model",
    "transformer",
    "--task",
    "copy",
    "--preset",
    "smoke",
    "--set",
    "train.max_epochs=1",
    "--out",
    REC_OUT,
    "--quiet",
    timeout=600,
)
assert code == 0, err
RECORD = next((REC_OUT / "runs/copy/smoke/transformer").glob("seed0*.json"))
for name, acc in (("bad-acc", 7.5), ("nan-acc", float("nan"))):  # the primary metric (copy: token_acc)
    folder = WORK / name / "runs/copy/smoke/transformer"
    shutil.copytree(RECORD.parent, folder)
    rec = json.loads(RECORD.read_text())
    rec["metrics"]["val"][rec["primary_metric"]] = acc
    (folder / RECORD.name).write_text(json.dumps(rec))
EDITED = WORK / "edited.yaml"
import yaml  # noqa: E402

# the copy task's entry: beside its module (bench/tasks/copy.yaml), or in registry.yaml in older trees
task_file = TREE / "bench/tasks/copy.yaml"
copy_entry = yaml.safe_load((task_file if task_file.is_file() else TREE / "bench/registry.yaml").read_text())["tasks"]["copy"]
smoke = copy_entry.get("presets", {}).get("smoke", {})
edited = {
    "tasks": {
        "copy": {
            **copy_entry,
            "presets": {
                **copy_entry.get("presets", {}),
                "smoke": {
                    **smoke,
                    "model": {**(smoke.get("model") or {}), "d_model": 48},
                    "data": {**(smoke.get("data") or {}), "n_test": 40},
                },
            },
        }
    }
}
EDITED.write_text(yaml.safe_dump(edited))
LATIN = WORK / "latin1.yaml"
LATIN.write_bytes("models:\n  caf\xe9: {base: transformer}\n".encode("latin-1"))
DUP = WORK / "dup.yaml"
DUP.write_text("models:\n  mine: {base: transformer}\n  mine: {base: lstm}\n")
DUP_DEEP = WORK / "dup-deep.yaml"
DUP_DEEP.write_text("models:\n  mine:\n    base: transformer\n    params: {d_model: 32, d_model: 64}\n")
RAISES = WORK / "raises.yaml"
RAISES.write_text("models:\n  bad-pe: {base: transformer, params: {pos_encoding: bogus}}\n")
BIG = "9" * 10000
SMOKE = ["--preset", "smoke", "--out", WORK / "o"]

CASES = [
    ("eval --accelerator gpu (CPU machine)", ["eval", RECORD, "--accelerator", "gpu"], {}),
    ("eval --stream --accelerator gpu", ["eval", RECORD, "--stream", "--accelerator", "gpu"], {}),
    ("generate --accelerator gpu", ["generate", RECORD, "--prompt", "s1 s2 <sep>", "--accelerator", "gpu"], {}),
    ("eval after the preset's width and data size are edited", ["--registry", EDITED, "eval", RECORD], {}),
    ("registry file not UTF-8 (--registry)", ["--registry", LATIN, "list"], {}),
    ("registry file not UTF-8 (validate)", ["validate", LATIN], {}),
    ("registry: duplicate model key", ["validate", DUP], {}),
    ("registry: duplicate key in params", ["validate", DUP_DEEP], {}),
    ("validate: a model whose constructor raises", ["validate", RAISES], {}),
    ("--set model.d_model=<10,000 digits>", ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--set", f"model.d_model={BIG}"], {}),
    ("--set data.n_train=<10,000 digits>", ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--set", f"data.n_train={BIG}"], {}),
    ("--seed <10,000 digits>", ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--seed", BIG], {}),
    ("--set data.n_train=0 (parity)", ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--set", "data.n_train=0"], {}),
    ("--set data.max_len=0 (parity)", ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--set", "data.max_len=0"], {}),
    ("--set data.n_test=-1 (parity)", ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--set", "data.n_test=-1"], {}),
    ("--set data.n_symbols=0 (copy)", ["run", "--model", "lstm", "--task", "copy", *SMOKE, "--set", "data.n_symbols=0"], {}),
    ("--set data.train_len=0 (flipflop)", ["run", "--model", "lstm", "--task", "flipflop", *SMOKE, "--set", "data.train_len=0"], {}),
    ("--set data.train_max_ops=0 (logic)", ["run", "--model", "lstm", "--task", "logic", *SMOKE, "--set", "data.train_max_ops=0"], {}),
    ("--set data.train_p_i=1.5 (flipflop)", ["run", "--model", "lstm", "--task", "flipflop", *SMOKE, "--set", "data.train_p_i=1.5"], {}),
    ("--set data.test_lengths=5", ["run", "--model", "lstm", "--task", "copy", *SMOKE, "--set", "data.test_lengths=5"], {}),
    (
        "--set data.test_lengths=[100000] (copy)",
        ["run", "--model", "lstm", "--task", "copy", *SMOKE, "--set", "data.test_lengths=[100000]"],
        {},
    ),
    ("eval --set data.test_lengths=[10000000]", ["eval", RECORD, "--set", "data.test_lengths=[10000000]"], {}),
    (
        "SLURM_NTASKS=abc",
        ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--set", "data.n_train=0"],
        {"SLURM_NTASKS": "abc", "SLURM_PROCID": "1"},
    ),
    ("LOCAL_RANK=x", ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--set", "data.n_train=0"], {"LOCAL_RANK": "x"}),
    (
        "SLURM_CPUS_PER_TASK=lots",
        ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--set", "data.n_train=0"],
        {"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "lots"},
    ),
    ("--model ''", ["run", "--model", "", "--task", "parity", *SMOKE], {}),
    ("--task ''", ["run", "--model", "lstm", "--task", "", *SMOKE], {}),
    ("--models ','", ["compare", "--models", ","], {}),
    ("eval ''", ["eval", ""], {}),
    ("--registry ''", ["--registry", "", "list"], {}),
    ("--out ''", ["run", "--model", "lstm", "--task", "parity", "--preset", "smoke", "--out", ""], {}),
    ("BENCH_OUT='' compare", ["compare", "--models", "lstm"], {"BENCH_OUT": ""}),
    ("BENCH_NO_PLUGINS=0 validate", ["validate"], {"BENCH_NO_PLUGINS": "0"}),
    ("BENCH_NO_PLUGINS=maybe validate", ["validate"], {"BENCH_NO_PLUGINS": "maybe"}),
    (
        "--seed 0 --seeds 1,2",
        ["run", "--model", "lstm", "--task", "parity", *SMOKE, "--seed", "0", "--seeds", "1,2", "--set", "data.n_train=0"],
        {},
    ),
    (
        "curves --metric bogus",
        [
            "curves",
            "--models",
            "transformer",
            "--tasks",
            "copy",
            "--preset",
            "smoke",
            "--out",
            REC_OUT,
            "--metric",
            "bogus",
            "--set",
            "train.max_epochs=1",
        ],
        {},
    ),
    (
        "curves: a model without runs",
        ["curves", "--models", "transformer,lstm", "--tasks", "copy", "--preset", "smoke", "--out", REC_OUT, "--set", "train.max_epochs=1"],
        {},
    ),
    (
        "compare: a record with acc 7.5",
        [
            "compare",
            "--models",
            "transformer",
            "--tasks",
            "copy",
            "--preset",
            "smoke",
            "--out",
            WORK / "bad-acc",
            "--set",
            "train.max_epochs=1",
        ],
        {},
    ),
    (
        "compare: a record with acc NaN",
        [
            "compare",
            "--models",
            "transformer",
            "--tasks",
            "copy",
            "--preset",
            "smoke",
            "--out",
            WORK / "nan-acc",
            "--set",
            "train.max_epochs=1",
        ],
        {},
    ),
    ("eval: a record with acc 7.5", ["eval", WORK / "bad-acc/runs/copy/smoke/transformer" / RECORD.name], {}),
    ("compare --models rsa-xl,tlb,gut (hint)", ["compare", "--models", "rsa-xl,tlb,gut"], {}),
    ("compare --models rsa-xl,tlb,gut --run (the hint)", ["compare", "--models", "rsa-xl,tlb,gut", "--run"], {}),
    ("reproduce rsa-table2 (no --run)", ["reproduce", "rsa-table2"], {}),
    (
        "cost --models tlb --task flipflop --preset smoke --lengths 64",
        ["cost", "--models", "tlb", "--task", "flipflop", "--preset", "smoke", "--lengths", "64", "--repeats", "1", "--warmup", "0"],
        {},
    ),
    ("cost --lengths 100000", ["cost", "--models", "tlb", "--task", "flipflop", "--preset", "smoke", "--lengths", "100000"], {}),
    ("cost --lengths 10000000000", ["cost", "--models", "tlb", "--task", "flipflop", "--preset", "smoke", "--lengths", "10000000000"], {}),
    (
        "cost --batch 100000000",
        ["cost", "--models", "tlb", "--task", "flipflop", "--preset", "smoke", "--lengths", "64", "--batch", "100000000"],
        {},
    ),
    ("generate --tokens 1000000000", ["generate", RECORD, "--prompt", "s1 s2 <sep>", "--tokens", "1000000000"], {}),
]

# ---- round five: outcomes files, a huge registry, --budget/--at, table YAML, honest defaults ----
import numpy as np  # noqa: E402


def outcomes_copy(name: str) -> Path:
    """A copy of RECORD's run (record and folder) under WORK/name; returns its record's path."""
    folder = WORK / name / "runs/copy/smoke/transformer"
    shutil.copytree(RECORD.parent, folder, dirs_exist_ok=True)
    return folder / RECORD.name


NPZ = RECORD.with_suffix("") / "outcomes.npz"
TRUNC = outcomes_copy("npz-truncated")
(TRUNC.with_suffix("") / "outcomes.npz").write_bytes(NPZ.read_bytes()[: NPZ.stat().st_size // 2])
NOTZIP = outcomes_copy("npz-notzip")
(NOTZIP.with_suffix("") / "outcomes.npz").write_text("this is not an npz file\n")
PICKLED = outcomes_copy("npz-pickle")
with np.load(NPZ) as saved:
    arrays = {k: saved[k] for k in saved.files}
np.savez(PICKLED.with_suffix("") / "outcomes.npz", **{**arrays, "val/correct": np.array([object()] * len(arrays["val/correct"]))})
FLIPPED = outcomes_copy("npz-contradicts")
np.savez_compressed(
    FLIPPED.with_suffix("") / "outcomes.npz",
    **{**arrays, "val/correct": ~arrays["val/correct"].astype(bool), "val/token_correct": arrays["val/tokens"] * 0},
)
HUGE = WORK / "huge.yaml"
with HUGE.open("w") as f:
    f.write("models:\n")
    for i in range(1_900_000):
        f.write(f"  m{i}: {{base: transformer}}\n")
REF = "results/runs/d2/paper/rsa-transformer-I/seed2.json"  # a reference record whose checkpoint is not committed
BROKEN = {  # a table file in the clone's bench/tables (the clone is the code: PYTHONPATH=CLONE)
    "invalid YAML": "title: [unclosed\nrows: 1\n",
    "rows: 5": "title: t\nsource: s\npreset: smoke\nseeds: [0]\ntasks: [copy]\nsplits: [test]\nrows: 5\n",
    "a list, not a mapping": "- a\n- b\n",
    "a base that is not there": "base: nowhere\ntitle: t\n",
    "seeds: [a]": "title: t\nsource: s\npreset: smoke\nseeds: [a]\ntasks: [copy]\nsplits: [test]\nrows: [{model: lstm}]\n",
    "not UTF-8": "title: caf\xe9\n",
}
R5 = [
    ("r5: PY load_outcomes: truncated outcomes.npz", ["PY", "load_outcomes", TRUNC], {}),
    ("r5: PY load_outcomes: outcomes.npz not a zip", ["PY", "load_outcomes", NOTZIP], {}),
    ("r5: PY load_outcomes: outcomes.npz holding objects (pickle)", ["PY", "load_outcomes", PICKLED], {}),
    ("r5: PY load_outcomes: outcomes contradict the record's acc", ["PY", "load_outcomes", FLIPPED], {}),
    ("r5: --registry 50 MB file, list", ["--registry", HUGE, "list"], {}),
    (
        "r5: compare --budget params --at 1x,2x (smoke)",
        [
            "compare",
            "--models",
            "transformer,lstm",
            "--tasks",
            "copy",
            "--preset",
            "smoke",
            "--budget",
            "params",
            "--at",
            "1x,2x",
            "--out",
            WORK / "o",
        ],
        {},
    ),
    (
        "r5: compare --budget params --at 1x,2x (smoke, parity)",
        [
            "compare",
            "--models",
            "transformer,gut",
            "--tasks",
            "parity",
            "--preset",
            "smoke",
            "--budget",
            "params",
            "--at",
            "1x,2x",
            "--out",
            WORK / "o",
        ],
        {},
    ),
    (
        "r5: compare --budget params --at 64",
        ["compare", "--models", "lstm", "--tasks", "copy", "--preset", "smoke", "--budget", "params", "--at", "64", "--out", WORK / "o"],
        {},
    ),
    (
        "r5: compare --budget flops --at 0x",
        ["compare", "--models", "lstm", "--tasks", "copy", "--preset", "smoke", "--budget", "flops", "--at", "0x", "--out", WORK / "o"],
        {},
    ),
    *[
        (f"r5: reproduce --list, one table {why}", ["reproduce", "--list"], {"PYTHONPATH": str(CLONE), "__table__": text})
        for why, text in list(BROKEN.items())[:1]
    ],
    *[
        (f"r5: reproduce a table: {why}", ["reproduce", "zz-broken"], {"PYTHONPATH": str(CLONE), "__table__": text})
        for why, text in BROKEN.items()
    ],
    ("r5: compare --models rsa-xl,tlb,gut (no --tasks)", ["compare", "--models", "rsa-xl,tlb,gut", "--out", WORK / "o"], {}),
    ("r5: eval a reference record whose checkpoint is not committed", ["eval", REF], {}),
    (
        "r5: run --model rsa-brt --task copy (default preset; first line)",
        ["run", "--model", "rsa-brt", "--task", "copy", "--out", WORK / "o"],
        {"__timeout__": "60"},
    ),
]
CASES += R5

only = [name for name in os.environ.get("BATTERY_ONLY", "").split("|") if name]  # cases to run, by part of their name
print("| case | exit | stderr lines | first stderr line | files left |\n|---|---|---|---|---|")
for name, argv, env in CASES:
    if only and not any(part in name for part in only):
        continue
    subprocess.run(["git", "-C", str(CLONE), "checkout", "-q", "."], check=True)
    subprocess.run(["git", "-C", str(CLONE), "clean", "-qfdx", "-e", ".cache"], check=True)
    shutil.rmtree(WORK / "o", ignore_errors=True)
    env = dict(env)
    if "__table__" in env:
        (CLONE / "bench/tables/zz-broken.yaml").write_bytes(env.pop("__table__").encode("latin-1"))
    timeout = float(env.pop("__timeout__", TIMEOUT))
    code, out, err = bench(*argv, env=env, timeout=timeout)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    first = (lines[0] if lines else "").replace("|", "\\|")
    first = first if len(first) <= 160 else first[:157] + "..."
    files = left() + [str(p.relative_to(WORK)) for p in (WORK / "o").rglob("*") if p.is_file()] if (WORK / "o").exists() else left()
    shown = ", ".join(files[:3]) + (f" (+{len(files) - 3})" if len(files) > 3 else "")
    print(f"| {name} | {code} | {len(lines)} | {first} | {shown or '—'} |", flush=True)
