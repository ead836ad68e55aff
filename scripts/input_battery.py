"""The inputs of issue 44 as a before/after battery: each case runs `bench ...` in a fresh clone
of a code tree (PYTHONPATH=that tree), and its exit status, stderr line count, first stderr line
and the files it left (git status of the clone, ignored files included) are written as a
Markdown table.  python scripts/input_battery.py CODE_TREE LABEL > table.md"""
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
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "SLURM_")) and k not in ("RANK", "LOCAL_RANK")},
       "PYTHONPATH": str(TREE), "OMP_NUM_THREADS": "1", "BENCH_DATA_DIR": "/tmp/battery-data", "BENCH_NO_PLUGINS": "1"}


def bench(*argv, env=None, cwd=CLONE, timeout=TIMEOUT):
    try:
        proc = subprocess.run([PY, "-m", "bench.cli", *map(str, argv)], capture_output=True, text=True, cwd=cwd,
                              env={**ENV, **(env or {})}, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return f"timeout {TIMEOUT:.0f}s", "", err


def left() -> list[str]:
    out = subprocess.run(["git", "-C", str(CLONE), "status", "--porcelain", "--ignored", "-uall"], capture_output=True, text=True).stdout
    return [ln[3:] for ln in out.splitlines() if not ln[3:].startswith((".cache/", "__pycache__")) and "__pycache__" not in ln]


# ---- fixtures: a tiny LM run (with its checkpoint) and files made to be wrong -------------------
REC_OUT = WORK / "rec"
code, _, err = bench("run", "--model", "transformer", "--task", "copy", "--preset", "smoke", "--set", "train.max_epochs=1",
                     "--out", REC_OUT, "--quiet", timeout=600)
assert code == 0, err
RECORD = next((REC_OUT / "runs/copy/smoke/transformer").glob("seed0*.json"))
for name, acc in (("bad-acc", 7.5), ("nan-acc", float("nan"))):  # the primary metric (copy: token_acc)
    folder = WORK / name / "runs/copy/smoke/transformer"
    shutil.copytree(RECORD.parent, folder)
    rec = json.loads(RECORD.read_text())
    rec["metrics"]["val"][rec["primary_metric"]] = acc
    (folder / RECORD.name).write_text(json.dumps(rec))
EDITED = WORK / "edited.yaml"
shipped = (TREE / "bench/registry.yaml").read_text()
import yaml  # noqa: E402

reg = yaml.safe_load(shipped)
copy_entry = reg["tasks"]["copy"]
smoke = copy_entry.get("presets", {}).get("smoke", {})
edited = {"tasks": {"copy": {**copy_entry, "presets": {**copy_entry.get("presets", {}),
                                                        "smoke": {**smoke, "model": {**(smoke.get("model") or {}), "d_model": 48},
                                                                  "data": {**(smoke.get("data") or {}), "n_test": 40}}}}}}
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

only = [name for name in os.environ.get("BATTERY_ONLY", "").split("|") if name]  # cases to run, by part of their name
print("| case | exit | stderr lines | first stderr line | files left |\n|---|---|---|---|---|")
for name, argv, env in CASES:
    if only and not any(part in name for part in only):
        continue
    subprocess.run(["git", "-C", str(CLONE), "checkout", "-q", "."], check=True)
    subprocess.run(["git", "-C", str(CLONE), "clean", "-qfdx", "-e", ".cache"], check=True)
    shutil.rmtree(WORK / "o", ignore_errors=True)
    code, out, err = bench(*argv, env=env)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    first = (lines[0] if lines else "").replace("|", "\\|")
    first = first if len(first) <= 160 else first[:157] + "..."
    files = left() + [str(p.relative_to(WORK)) for p in (WORK / "o").rglob("*") if p.is_file()] if (WORK / "o").exists() else left()
    shown = ", ".join(files[:3]) + (f" (+{len(files) - 3})" if len(files) > 3 else "")
    print(f"| {name} | {code} | {len(lines)} | {first} | {shown or '—'} |", flush=True)
