"""Several processes (DDP, 2 gloo ranks on the CPU): every example is scored exactly once, every
rank selects the same best epoch, one record is written (by rank 0) and one table printed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bench
from bench.cli import main

ROOT = Path(__file__).resolve().parent.parent
# split sizes that are not multiples of 2 ranks x batch size (DistributedSampler would pad them)
DATA = [
    "--set",
    "data.n_train=100",
    "--set",
    "data.n_val=37",
    "--set",
    "data.n_test=29",
    "--set",
    "train.eval_batch_size=8",
    "--set",
    "train.batch_size=16",
    "--set",
    "train.max_epochs=3",
]


@pytest.mark.slow
def test_two_cpu_processes_score_every_example_once(tmp_path):
    args = ["run", "--model", "transformer", "--task", "parity", "--preset", "smoke", *DATA, "--out", str(tmp_path), "--quiet"]
    proc = subprocess.run(
        [sys.executable, "-m", "bench", *args, "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "BENCH_DATA_DIR": os.environ["BENCH_DATA_DIR"]},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("record: ") == 1 and proc.stdout.count("transformer on parity") == 1  # rank 0 only
    (path,) = tmp_path.rglob("seed0*.json")
    ddp = json.loads(path.read_text())
    assert ddp["world_size"] == 2 and ddp["device"]["world_size"] == 2
    assert {s: m["n"] for s, m in ddp["metrics"].items()} == {"val": 37, "bin0": 29, "bin1": 29}
    assert sum(b["n"] for b in ddp["metrics"]["bin0"]["by_length"].values()) == 29
    # the gathered evaluation equals a one-process evaluation of the same checkpoint
    assert main(["eval", str(path), "--accelerator", "cpu"]) == 0
    single = json.loads((path.with_suffix("") / "eval.json").read_text())
    for split in ("val", "bin0", "bin1"):
        assert single["metrics"][split] == ddp["metrics"][split]
    # the per-example outcomes kept: both ranks' examples, each once, in the split's order, as one process scores them
    kept, one_process = bench.load_outcomes(path), bench.load_outcomes(path, eval="eval")
    for split, metrics in ddp["metrics"].items():
        assert kept[split]["index"].tolist() == list(range(metrics["n"]))
        assert kept[split]["correct"].mean() == metrics["acc"]
        assert all((kept[split][k] == one_process[split][k]).all() for k in kept[split])
    # the best epoch is the first maximum of the history every rank computed alike
    best = max(ddp["val_history"], key=lambda h: h["acc"])
    assert (ddp["best_step"], ddp["best_val"]) == (best["step"], best["acc"])
    # a one-process run of the same cell scores the same number of examples
    one = bench.run(
        model="transformer",
        task="parity",
        preset="smoke",
        out=tmp_path / "one",
        progress="none",
        overrides=[DATA[i + 1] for i in range(0, len(DATA), 2)],
    )
    assert {s: m["n"] for s, m in one["metrics"].items()} == {s: m["n"] for s, m in ddp["metrics"].items()}
    assert one["world_size"] == 1
    assert Path(one["path"]).name != path.name  # the world size is part of a run's identity
