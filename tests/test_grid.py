"""Grids: cells in parallel processes, a failing cell reported while the others go on, a rerun
that trains nothing; and the data cache under concurrent first use."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.cli import main
from bench.cpus import available_cpus

ROOT = Path(__file__).resolve().parent.parent


def test_compare_run_jobs_trains_cells_in_parallel_reports_failures_and_resumes(tmp_path, capsys):
    reg = yaml.safe_load((ROOT / "bench" / "registry.yaml").read_text())
    reg["models"]["exploding"] = {"target": "tests.fixtures.exploding:Exploding", "params": {"d_model": 8}}
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump(reg))
    out = tmp_path / "out"
    argv = [
        "--registry",
        str(registry),
        "compare",
        "--models",
        "exploding,lstm",
        "--tasks",
        "parity",
        "--preset",
        "smoke",
        "--seeds",
        "0,1",
        "--set",
        "train.max_epochs=2",
        "--run",
        "--jobs",
        "2",
        "--out",
        str(out),
    ]
    code = main(argv)
    printed = capsys.readouterr()
    assert code == 1, "a failed cell makes the grid's exit status non-zero"
    assert "grid: 4 to train, 0 already finished" in printed.err  # notes and progress: stderr
    progress = [ln for ln in printed.err.splitlines() if ln.startswith("[")]
    assert len(progress) == 4 and progress[-1].startswith("[4/4]")
    assert sum("FAIL exploding" in ln for ln in progress) == 2 and sum("ok   lstm" in ln for ln in progress) == 2
    details = [ln for ln in printed.err.splitlines() if "(log: " in ln]  # each failure names its own cell's log
    assert sorted(ln.rsplit("/", 1)[1] for ln in details) == ["parity--exploding--seed0.log)", "parity--exploding--seed1.log)"]
    records = {p.parent.name + "/" + p.name: json.loads(p.read_text()) for p in out.rglob("seed*.json")}
    assert sorted(r["status"] for r in records.values()) == ["failed", "failed", "ok", "ok"]
    assert all(r["config"]["train"]["num_threads"] == max(1, available_cpus() // 2) for r in records.values())
    assert "lstm" in printed.out and "FAIL" in printed.out  # the leaderboard (results: stdout) still prints
    # the same command again: finished cells are skipped; failed ones are retried (and fail again)
    main(argv)
    assert "grid: 2 to train, 2 already finished" in capsys.readouterr().err


@pytest.mark.slow
def test_a_forked_cell_finds_lightning_and_the_runner_already_imported():
    """The fork server imports what a cell trains with once (Lightning, the runner): a forked cell that had
    to import them itself would spend ~10 s of every cell on it (the lazy ``bench.runner`` package alone
    loads nothing). The child runs the builtin ``exec`` (nothing of this test module is imported in it) and
    exits 0 only when those modules are in its ``sys.modules`` from the start."""
    import bench.grid.local as local

    code = "import os, sys; os._exit(0 if {'lightning', 'bench.runner.lifecycle', 'bench.runner.cell'} <= set(sys.modules) else 3)"
    local.start_fork_server()
    child = local._fork_server().Process(target=exec, args=(code,))
    child.start()
    child.join(120)
    assert child.exitcode == 0, "the fork server did not preload Lightning and the runner"


def test_concurrent_first_use_of_a_fresh_data_cache(tmp_path):
    """Four processes generate the same splits at once into an empty cache that holds an orphan
    temporary folder (a generator killed mid-write): all succeed, one folder per split, no orphan."""
    import bench
    from bench.data import split_path

    cache = tmp_path / "cache"
    orphan = cache / "parity" / f".{split_path(bench.build_task('parity', preset='smoke'), 'train').name}-killed"
    orphan.mkdir(parents=True)
    code = (
        "import bench; from bench.data import load_split; t = bench.build_task('parity', preset='smoke'); "
        "print(sum(len(load_split(t, s)) for s in t.splits()))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_DATA_DIR": str(cache)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-500:] for _, err in results]
    assert len({out for out, _ in results}) == 1  # everyone read the same data
    folders = sorted(p.name.split("-")[0] for p in (cache / "parity").iterdir() if p.is_dir())
    assert folders == ["bin0", "bin1", "train", "val"]  # one per split, and the orphan is gone


def test_a_users_thread_count_wins_over_the_launchers_share():
    from bench.grid import Cell

    assert Cell("lstm", "parity", "smoke", 0).threads_argv(2) == ["--set", "train.num_threads=2"]
    mine = Cell("lstm", "parity", "smoke", 0, ("train.num_threads=1", "train.lr=0.01"))
    assert mine.threads_argv(2) == []
    assert mine.argv(Path("out"), None, {}, False).count("train.num_threads=1") == 1


def test_a_grid_trains_every_cell_at_one_seed_before_any_at_the_next(tmp_path, monkeypatch):
    """Seed-major order, whatever order the plan gave (reproduce plans one model at a time):
    a grid stopped part-way leaves every cell with the same number of seeds, give or take one."""
    import bench.grid as grid
    import bench.grid.local as local
    from bench.grid import Cell

    planned = [Cell(m, t, "smoke", s) for m in ("lstm", "transformer") for t in ("parity", "d2") for s in (1, 0, 2)]
    planned = planned[1:]  # lstm on parity, seed 1 finished: the grid still starts with seed 0
    seen = []
    monkeypatch.setattr(local, "start_fork_server", lambda: None)
    monkeypatch.setattr(grid, "prepare_data", lambda registry, cells: None)
    monkeypatch.setattr(local, "run_local", lambda cells, *a, **k: seen.extend(cells) or [])

    class Registry:
        path = tmp_path / "registry.yaml"
        user_spec = None

    assert grid.run_grid(Registry(), planned, tmp_path) == []
    assert [c.seed for c in seen] == [0] * 4 + [1] * 3 + [2] * 4
    pairs = [(c.model, c.task) for c in seen]
    assert pairs[:4] == [("lstm", "parity"), ("lstm", "d2"), ("transformer", "parity"), ("transformer", "d2")]
    assert pairs[4:7] == pairs[1:4] and pairs[7:] == pairs[:4]


def test_reproduce_run_takes_the_grid_options_of_compare_run(tmp_path, monkeypatch):
    """One parent parser, one grid call: `reproduce --run` and `compare --run` hand the launcher
    the same options (jobs, GPU sharing, launcher, rerun, Lightning's)."""
    import bench.grid as grid

    calls = []
    monkeypatch.setattr(grid, "run_grid", lambda registry, cells, out, **kw: calls.append((len(cells), kw)) or [])
    options = [
        "--run",
        "--rerun",
        "--jobs",
        "2",
        "--runs-per-gpu",
        "3",
        "--accelerator",
        "cpu",
        "--launcher",
        "local",
        "--out",
        str(tmp_path),
    ]
    assert main(["reproduce", "halt-table2", "--preset", "small", "--models", "gut", "--seeds", "0", *options]) == 0
    main(["compare", "--models", "gut", "--tasks", "logic", "--preset", "small", "--seeds", "0", *options])  # no records: exit 2
    (cells_reproduce, by_reproduce), (cells_compare, by_compare) = calls
    assert cells_reproduce == cells_compare == 1
    assert (
        by_reproduce
        == by_compare
        == {"jobs": 2, "launcher": "local", "runs_per_gpu": 3, "trainer_args": {"accelerator": "cpu"}, "rerun": True, "profile": None}
    )


def test_a_grid_reports_cells_stopped_by_a_signal_as_interrupted_not_failed(tmp_path, monkeypatch, caplog):
    """A SIGTERM to the grid's process group also ends the fork server, and multiprocessing then
    reports each forked cell as exit status 255: still a stop, one resumable line per cell, no FAIL."""
    import logging
    import signal

    import bench.grid.local as local
    from bench.grid import Cell, Stopped

    codes = iter([255, 143])  # 255: multiprocessing's status for a cell whose fork server died

    class FakeCell:  # a running cell that the grid's SIGTERM stops
        def __init__(self, cell, *args):
            self.pid, self.signum = id(self), 0
            if cell.seed == 0:
                os.kill(os.getpid(), signal.SIGTERM)  # the grid's handler forwards it to the running cells

        def poll(self):
            return next(codes) if self.signum else None

        def signal(self, signum):
            self.signum = signum

    monkeypatch.setattr(local, "device_slots", lambda jobs, per_gpu: ([{"BENCH_THREADS": "1"}] * jobs, False))
    monkeypatch.setattr(local, "CellProcess", FakeCell)
    cells = [Cell("lstm", "parity", "smoke", s) for s in (1, 0, 2)]
    with caplog.at_level(logging.INFO, logger="bench.grid"), pytest.raises(Stopped) as stopped:
        local.run_local(cells, tmp_path, None, jobs=2, runs_per_gpu=1, trainer_args={}, rerun=False)
    assert stopped.value.signum == signal.SIGTERM
    lines = [r.getMessage() for r in caplog.records if r.name == "bench.grid"]
    assert not any("FAIL" in ln for ln in lines), lines
    assert sorted(ln.split(" stopped ")[1].split(" (")[0] for ln in lines) == ["lstm on parity", "lstm on parity"]
    assert all("interrupted; the same command resumes it" in ln for ln in lines) and len(lines) == 2


def test_exit_statuses_of_a_stop():
    import signal

    from bench.grid.local import stopped_status

    assert [stopped_status(c) for c in (130, 143, -signal.SIGINT, -signal.SIGTERM)] == [True] * 4
    assert [stopped_status(c) for c in (0, 1, 2, 255, -signal.SIGKILL, None)] == [False] * 6


def descendants(pid: int) -> set[int]:
    """Every process under ``pid`` now (its children, theirs, ...), from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def in_sessions(sessions: set[int]) -> set[int]:
    """The live processes of these sessions (a cell's session holds whatever the cell started)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) in sessions and fields[0] not in "ZX":
            found.add(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


def start_grid(out: Path):
    """`bench compare --run --jobs 2` of two long smoke cells in a session of its own, returned once
    both cells are past their first validation (a last.ckpt each), with the processes under it then."""
    import time

    argv = [
        "compare",
        "--models",
        "transformer,lstm",
        "--tasks",
        "parity",
        "--preset",
        "smoke",
        "--seeds",
        "0",
        "--set",
        "train.max_epochs=500",
        "--run",
        "--jobs",
        "2",
        "--out",
        str(out),
    ]
    grid = subprocess.Popen(
        [sys.executable, "-m", "bench", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.time() + 180
    while time.time() < deadline and (
        sum("training into" in p.read_text() for p in out.glob("logs/*/*.log")) < 2 or len(list(out.rglob("last.ckpt"))) < 2
    ):
        time.sleep(0.5)
    assert grid.poll() is None and len(list(out.rglob("last.ckpt"))) == 2, grid.communicate()
    return grid, descendants(grid.pid)


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    import time

    deadline = time.time() + seconds
    while time.time() < deadline and any(running(p) for p in pids):
        time.sleep(0.25)
    return {p for p in pids if running(p)}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_grid_whose_process_group_gets_sigterm_or_ctrl_c_stops_its_forked_cells_resumably(tmp_path, signum):
    """`kill -- -PGID` (timeout, a batch system) or Ctrl-C (SIGINT to the terminal's foreground
    group): the fork server dies with the grid's group, the cells checkpoint; the grid says each
    stopped, exits 143 / 130, no cell is reported as failed, no process is left, and its last line
    counts what was written: no record, a checkpoint per cell (the files there say the same)."""
    import signal

    out = tmp_path / "out"
    grid, under = start_grid(out)
    assert len(under) >= 3  # the fork server and the two cells
    os.killpg(grid.pid, getattr(signal, signum))
    _, err = grid.communicate(timeout=120)
    assert grid.returncode == 128 + getattr(signal, signum), err
    assert not wait_gone(under, 10), "a process of the grid outlived it"
    assert "FAIL" not in err and "exit status" not in err, err
    stopped = [ln for ln in err.splitlines() if "interrupted; the same command resumes it (from " in ln]
    assert len(stopped) == 2 and all(str(out) in ln and "last.ckpt" in ln for ln in stopped), err
    for ln in stopped:  # each checkpoint the grid names is there
        assert Path(ln.split("(from ")[1].rstrip(")")).is_file(), ln
    logs = list(out.glob("logs/*/*.log"))
    said = [log for log in logs if f"stopped by {signum}" in log.read_text().splitlines()[-1]]
    assert said, [log.read_text()[-300:] for log in logs]  # the cells' own logs say so (one may be cut by a late signal)
    assert not list(out.rglob("seed0*.json")), "a stopped cell writes no record"
    assert len(list(out.rglob("last.ckpt"))) == 2
    logs = next(out.glob("logs/grid-*"))
    assert err.strip().splitlines()[-1] == (
        f"bench: stopped by {signum}: of 2 cell(s), 0 run(s) finished (their records written), "
        f"2 stopped at a checkpoint, 0 not started; cell logs in {logs}; run the same command "
        f"again to resume"
    )


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkill_of_the_grids_process_group_leaves_no_cell_running(tmp_path):
    """`timeout -s KILL`, a scheduler's hard stop: SIGKILL to the grid's group ends the grid and its
    fork server at once; the cells (in sessions of their own) get SIGTERM from their parent's death
    and the grid watchdog, checkpoint and stop: within a bounded time nothing the grid started is left."""
    import signal

    out = tmp_path / "out"
    grid, under = start_grid(out)
    cells = {pid for pid in under if os.getpgid(pid) != grid.pid}  # the two cells, setsid'd out of the group
    assert len(cells) == 2, under
    os.killpg(grid.pid, signal.SIGKILL)
    grid.communicate(timeout=30)
    assert grid.returncode == -signal.SIGKILL
    left = wait_gone(under, 90)
    assert not left, f"still running after the grid's SIGKILL: {left}"
    assert not wait_gone(in_sessions(cells), 10), "a process a cell started outlived it"
    for log in out.glob("logs/*/*.log"):  # each stopped at a checkpoint, as with SIGTERM
        assert "bench: stopped by SIGTERM at step " in log.read_text(), log.read_text()[-500:]
    assert len(list(out.rglob("last.ckpt"))) == 2 and not list(out.rglob("seed0*.json"))
