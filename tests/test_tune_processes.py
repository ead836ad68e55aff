"""bench tune's workers end with the command: a SIGKILL of
the command's process group, or of the command alone, leaves no worker running; SIGTERM stops
every worker after a checkpoint and the command's last line counts what was written."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("optuna")

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def children(pid: int) -> list[int]:
    """The live (not zombie) processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start(out: Path) -> tuple[subprocess.Popen, list[int]]:
    """bench tune --jobs 2 in a session of its own (the test's handle on its group), once both of its
    workers train; returns the command and its workers' pids."""
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "tune",
        "--task",
        "flipflop",
        "--preset",
        "smoke",
        "--models",
        "lstm",
        "--grid",
        "train.lr=[1e-3,3e-3]",
        "--set",
        "train.max_epochs=200",
        "--jobs",
        "2",
        "--out",
        str(out),
    ]
    err = open(out.parent / "stderr.txt", "w")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    logs = out / "studies" / "flipflop-smoke" / "logs"
    deadline = time.time() + 300
    while time.time() < deadline:
        texts = [p.read_text() for p in logs.glob("worker-*.log")] if logs.is_dir() else []
        if len(texts) == 2 and all("training to" in t for t in texts):
            break
        assert proc.poll() is None, (out.parent / "stderr.txt").read_text()
        time.sleep(0.5)
    else:
        proc.kill()
        raise AssertionError("the workers did not start training")
    time.sleep(3)  # into the runs
    workers = children(proc.pid)
    assert len(workers) == 2
    return proc, workers


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def test_sigkill_of_the_group_leaves_no_worker(tmp_path):
    proc, workers = start(tmp_path / "out")
    assert all(os.getpgid(w) == proc.pid for w in workers)  # the workers are in the command's group
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_gone(workers, 10) == []


def test_sigkill_of_the_command_alone_ends_its_workers(tmp_path):
    proc, workers = start(tmp_path / "out")
    os.kill(proc.pid, signal.SIGKILL)  # the parent alone: its workers get SIGTERM (PR_SET_PDEATHSIG) and stop
    proc.wait()
    left = wait_gone(workers, 120)
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert left == []


def test_sigterm_stops_every_worker_and_says_what_was_written(tmp_path):
    out = tmp_path / "out"
    proc, workers = start(out)
    deadline = time.time() + 300
    while len(list((out / "runs").rglob("last.ckpt"))) < 2 and time.time() < deadline:  # both runs past a validation
        time.sleep(0.5)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=180) == 128 + signal.SIGTERM
    assert wait_gone(workers, 10) == []
    last = (tmp_path / "stderr.txt").read_text().strip().splitlines()[-1]
    ckpts = list((out / "runs").rglob("last.ckpt"))
    records = list((out / "runs").rglob("*.json"))
    assert len(ckpts) >= 2  # each worker's run stopped after a checkpoint
    assert "the workers have stopped" in last
    assert f"{len(records)} run record(s), {len(ckpts)} resume checkpoint(s)" in last, last
