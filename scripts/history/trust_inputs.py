"""The bad inputs and surprises of the first trust audit, each run as a new user would (`python -m bench ...` in a
fresh output folder), as a table: exit status, first line of output, files left in the output
folder. Run it once per checkout to compare (the code under test is the one in REPO):

    python scripts/history/trust_inputs.py REPO WORKDIR > table.md

Each case is a few seconds (smoke preset); the data.max_len case is stopped after 20 s
(the old code grows its memory without a word).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO, WORK = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
PY = sys.executable
BASE = ["run", "--model", "transformer", "--task", "parity", "--preset", "smoke", "--quiet"]


def bench(args, out: Path | None, env=None, cwd=None, timeout=120):
    cmd = [PY, "-m", "bench", *args] + (["--out", str(out)] if out is not None else [])
    e = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "BENCH_DATA_DIR": str(WORK / "data"), **(env or {})}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=cwd or REPO, timeout=timeout)
        code = p.returncode
        n = len(p.stderr.strip().splitlines())
    except subprocess.TimeoutExpired:
        return f"killed at {timeout}s", "(still running, no output)", 0
    first = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or [""])[0]
    if first.startswith("Traceback"):
        first = f"Traceback ... {[ln for ln in p.stderr.splitlines() if ln.strip()][-1][:110]}"
    return code, first[:150], n


def files(out: Path) -> str:
    if not out.exists():
        return "nothing"
    found = [p for p in out.rglob("*") if p.is_file()]
    dirs = [p for p in out.rglob("*") if p.is_dir()]
    return f"{len(found)} files, {len(dirs)} folders" if found or dirs else "empty folder"


def case(name, args, setup=None, env=None, timeout=120, count=None):
    out = WORK / name.replace(" ", "_").replace("/", "_")[:40]
    shutil.rmtree(out, ignore_errors=True)
    if setup:
        setup(out)
    code, first, n = bench(args, out, env=env, timeout=timeout)
    left = count(out) if count else files(out)
    first = first.replace("|", "\\|").replace(str(WORK), "W")
    print(f"| `{name}` | {code} | {n} | {first} | {left} |", flush=True)


def records(out: Path) -> str:
    return f"{len(list(out.rglob('seed*.json')))} record(s)"


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    ro = WORK / "ro-cache"
    ro.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(ro)], check=False)
    print("| input | exit | stderr lines | first line | left in --out |\n|---|---|---|---|---|")
    case("--set train.lr=3e-4", [*BASE, "--set", "train.lr=3e-4"], count=records)
    case("--seeds -1", [*BASE, "--seeds", "-1"])
    for value in ("-1", "nan"):
        case(f"train.lr={value}", [*BASE, "--set", f"train.lr={value}"])
    for value in ("0", "-5"):
        case(f"train.batch_size={value}", [*BASE, "--set", f"train.batch_size={value}"])
    case("train.max_epochs=0", [*BASE, "--set", "train.max_epochs=0"])
    case("model.d_model=0", [*BASE, "--set", "model.d_model=0"])
    case("train.patience=-1", [*BASE, "--set", "train.patience=-1"])
    case("--accelerator gpu", [*BASE, "--accelerator", "gpu"])
    case("--num-nodes abc", [*BASE, "--num-nodes", "abc"])
    case("unwritable data cache", BASE, env={"BENCH_DATA_DIR": str(ro / "cache")})
    case("data.max_len=10000000", [*BASE, "--set", "data.max_len=10000000", "--set", "data.bin1_max_len=10000001"], timeout=20)

    def bad_record(out):
        path = out / "runs" / "parity" / "smoke" / "transformer" / "seed0.json"
        path.parent.mkdir(parents=True)
        path.write_text('{"status": "ok", "config": [1], "metrics": 5, "model": "transformer"}\n')

    case("record with wrong fields: run", BASE, setup=bad_record)
    case(
        "record with wrong fields: compare",
        ["compare", "--models", "transformer", "--tasks", "parity", "--preset", "smoke"],
        setup=bad_record,
    )
    # one configuration written three ways
    out = WORK / "spellings"
    shutil.rmtree(out, ignore_errors=True)
    for spelling in ("model.d_model=64", "model.d_model= 64", "model.d_model=0x40"):
        bench([*BASE, "--set", spelling, "--set", "train.max_epochs=1"], out)
    print(f"| `model.d_model=64 / = 64 / 0x40` (three runs) | | | | {records(out)} |")
    subprocess.run(["umount", str(ro)], check=False)


if __name__ == "__main__":
    main()
