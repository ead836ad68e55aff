"""Issue 29: a record means its own run, one configuration trains once, every failure is one line.

Most tests call the CLI in-process and train nothing; the few that train use the smoke preset
with one or two epochs (a few seconds each)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch

import bench
from bench.cli import build_parser, main
from bench.config import canonical_overrides, parse_value, resolve_run
from bench.cpus import _cgroup_quota, available_cpus, default_threads
from bench.parsing import default_out
from bench.records import read_record, record_checkpoint, record_path
from bench.registry import Registry

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ["--model", "transformer", "--task", "parity", "--preset", "smoke", "--quiet"]


def cli(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def written(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in Path(out).rglob("*")) if Path(out).exists() else []


# ---- numbers and identity --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ("3e-4", 3e-4),
        ("1E-3", 1e-3),
        ("5E-4", 5e-4),
        ("1e3", 1000.0),
        ("0x40", 64),
        ("0o17", 15),
        ("1_000", 1000),
        (" 64", 64),
        ("nan", "nan"),
        ("sinusoidal", "sinusoidal"),
        ("[3e-4, 1E-3]", [3e-4, 1e-3]),
        ("true", True),
    ],
)
def test_numbers_in_any_yaml_or_python_spelling_are_numbers(text, value):
    got = parse_value(text)
    if value == "nan":
        assert isinstance(got, float) and got != got
    else:
        assert got == value and type(got) is type(value)


def test_the_readme_example_lr_3e_4_is_accepted(capsys):
    config = resolve_run(Registry(), "transformer", "tomita3", "small", ["model.d_model=64", "train.lr=3e-4", "data.n_train=500"])
    assert config.train.lr == 0.0003 and config.model.params["d_model"] == 64
    code, out, err = cli(capsys, "explain", "--model", "transformer", "--task", "parity", "--set", "train.lr=1E-3")
    assert code == 0 and any(ln.split()[:3] == ["train", "lr", "0.001"] for ln in out.splitlines()), out


def test_one_configuration_however_typed_is_one_run(tmp_path):
    paths = {
        record_path(tmp_path, "transformer", "parity", "smoke", 0, [s])
        for s in ("model.d_model=64", "model.d_model= 64", "model.d_model=0x40", " model.d_model=64.")
    }
    assert len(paths) == 2  # 64. is a float: another value (refused for an int parameter when run)
    assert record_path(tmp_path, "t", "p", "s", 0, ["train.lr=3e-4", "model.d_model=64"]) == record_path(
        tmp_path, "t", "p", "s", 0, ["model.d_model=0x40", "train.lr=0.0003"]
    )
    assert canonical_overrides(["train.lr=1e-3", "train.lr=3e-4"]) == ["train.lr=0.0003"]  # the last of a key wins, as in a run
    # settings that do not change what is learned are no part of the identity, however typed
    assert record_path(tmp_path, "t", "p", "s", 0, ["train.num_threads=0x2"]) == record_path(tmp_path, "t", "p", "s", 0, [])


def test_every_committed_record_keeps_its_folder_name():
    """The canonical identity is the spelling every committed record was typed with: each record
    under results/runs is where record_path puts it, so none looks missing or moves."""
    checked = 0
    for path in sorted((ROOT / "results" / "runs").rglob("seed*.json")):
        rec = read_record(path)
        assert rec, path
        expected = record_path(
            ROOT / "results", rec["model"], rec["task"], rec["preset"], rec["seed"], rec.get("overrides"), rec.get("world_size", 1)
        )
        assert expected == path, (path, rec.get("overrides"))
        checked += 1
    assert checked > 200


def test_committed_records_name_no_path_of_the_machine_they_ran_on():
    for path in (ROOT / "results" / "runs").rglob("seed*.json"):
        rec = json.loads(path.read_text())
        assert not str(rec.get("checkpoint", "")).startswith("/"), path
        assert rec["command"].startswith("bench ") and "/work/main" not in rec["command"], path
        if rec.get("checkpoint"):
            assert record_checkpoint(path, rec).parent.parent == path.with_suffix("")


# ---- bad input: one line, exit 2, nothing written -----------------------------------------------

BAD = [
    (["--seeds", "-1"], "seed -1 is out of range"),
    (["--seed", "4294967296"], "out of range"),
    (["--set", "train.lr=-1"], "train.lr=-1: must be a finite number > 0"),
    (["--set", "train.lr=nan"], "train.lr=nan: must be a finite number > 0"),
    (["--set", "train.lr=.inf"], "train.lr=inf: must be a finite number > 0"),
    (["--set", "train.batch_size=0"], "train.batch_size=0: must be >= 1"),
    (["--set", "train.batch_size=-5"], "train.batch_size=-5: must be >= 1"),
    (["--set", "train.max_epochs=0"], "train.max_epochs=0: must be >= 1"),
    (["--set", "train.patience=-1"], "train.patience=-1: must be >= 0"),
    (["--set", "model.d_model=0"], "model.d_model=0: must be >= 1"),
    (["--set", "model.dropout=1.5"], "model.dropout=1.5: must be in [0, 1)"),
    (["--num-nodes", "abc"], "--num-nodes takes a whole number >= 1, got 'abc'"),
    (["--set", "data.max_len=10000000", "--set", "data.bin1_max_len=10000001"], "the data would need at least"),
]


@pytest.mark.parametrize("extra, message", BAD, ids=[" ".join(e) for e, _ in BAD])
def test_bad_input_is_one_line_exit_2_nothing_written(extra, message, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "run", *SMOKE, *extra, "--out", str(out))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("bench: error: ") and message in lines[0], err
    assert stdout == "" and written(out) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine has a gpu accelerator")
def test_gpu_accelerator_on_a_cpu_machine_is_one_line(tmp_path, capsys):
    code, _, err = cli(capsys, "run", *SMOKE, "--accelerator", "gpu", "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1 and "--accelerator gpu: " in err and "no CUDA device" in err, err
    assert written(tmp_path / "out") == []


def test_unwritable_data_cache_is_one_line(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("BENCH_DATA_DIR", str(blocker / "cache"))  # under a file: cannot be created, even by root
    code, _, err = cli(capsys, "run", *SMOKE, "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1 and f"the data cache {blocker / 'cache'} cannot be written" in err, err
    assert "BENCH_DATA_DIR" in err and written(tmp_path / "out") == []


def test_values_from_the_registry_are_checked_too(tmp_path, capsys):
    import yaml

    from bench.registry import shipped_layer

    reg = shipped_layer()[0]  # registry.yaml and the task files beside their modules
    reg["tasks"]["parity"]["presets"] = {"smoke": {"train": {"lr": 0}}}  # over the base entry's smoke preset
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump(reg))
    code, _, err = cli(capsys, "--registry", str(path), "run", *SMOKE, "--out", str(tmp_path / "out"))
    assert code == 2 and "train.lr=0 (from preset parity.smoke.train): must be a finite number > 0" in err, err


# ---- malformed records: skipped with a warning wherever they are read ------------------------------


def malformed(out: Path, text: str = '{"status": "ok", "config": [1], "metrics": 5, "model": "transformer"}') -> Path:
    path = out / "runs" / "parity" / "smoke" / "transformer" / "seed0.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text",
    [
        '{"status": "ok", "config": [1], "metrics": 5}',
        "[1, 2]",
        '{"status": "ok", "metrics": {"val": 3}}',
        '{"seed": 0}',
        '{"status": "done", "metrics": {}}',
        "{not json",
    ],
)
def test_a_malformed_record_is_skipped_with_a_warning(text, tmp_path, capsys):
    path = malformed(tmp_path, text)
    code, _, err = cli(capsys, "compare", "--models", "transformer", "--tasks", "parity", "--preset", "smoke", "--out", str(tmp_path))
    assert code == 2 and f"bench: warning: record {path}" in err and "skipped" in err and "no records" in err, err
    assert "Traceback" not in err
    from bench.grid import plan_grid

    grid = plan_grid(Registry(), ["transformer"], ["parity"], [0], "smoke", None, tmp_path)
    assert len(grid.todo) == 1 and "skipped" in capsys.readouterr().err  # the grid trains it again
    code, _, err = cli(capsys, "eval", str(path))
    assert code == 2 and err.count("\n") == 1 and "bench: error: record" in err, err


# ---- a record owns its folder -----------------------------------------------------------------


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished smoke run (1 epoch), written with a relative --out from its own directory."""
    base = tmp_path_factory.mktemp("finished")
    cwd = os.getcwd()
    os.chdir(base)
    try:
        rec = bench.run(model="transformer", task="parity", preset="smoke", out="rel", progress="none", overrides=["train.max_epochs=1"])
    finally:
        os.chdir(cwd)
    return base, base / rec["path"], rec


def test_a_record_names_its_checkpoint_relative_to_itself(finished):
    base, path, rec = finished
    assert rec["checkpoint"] == f"{path.stem}/ckpt/best.ckpt" and not os.path.isabs(rec["checkpoint"])
    assert not rec["command"].startswith("/") and rec["command"].split()[0] == "bench"  # "bench" alone when pytest has no arguments
    assert record_checkpoint(path, rec).is_file()


def test_eval_from_another_directory_finds_the_checkpoint_beside_the_record(finished, capsys, monkeypatch, tmp_path):
    base, path, rec = finished
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "eval", str(path))
    assert code == 0, err
    assert json.loads((path.with_suffix("") / "eval.json").read_text())["metrics"] == rec["metrics"]


def test_a_copied_tree_uses_its_own_checkpoints_and_a_copy_without_them_stops(finished, capsys, tmp_path):
    base, path, rec = finished
    copy = tmp_path / "copy"
    shutil.copytree(base / "rel", copy)
    copied = copy / path.relative_to(base / "rel")
    assert cli(capsys, "eval", str(copied))[0] == 0  # the copy's own checkpoint
    record_checkpoint(copied, rec).unlink()
    code, out, err = cli(capsys, "eval", str(copied))
    assert code == 2 and err.count("\n") == 1 and str(record_checkpoint(copied, rec)) in err and "missing" in err, err


def test_a_damaged_tested_checkpoint_is_one_line_in_eval(finished, capsys, tmp_path):
    base, path, rec = finished
    copy = tmp_path / "copy"
    shutil.copytree(base / "rel", copy)
    copied = copy / path.relative_to(base / "rel")
    ckpt = record_checkpoint(copied, rec)
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    code, _, err = cli(capsys, "eval", str(copied))
    assert code == 2 and err.count("\n") == 1 and "is damaged" in err, err


# ---- one configuration, one process at a time ------------------------------------------------------


def test_a_second_process_waits_for_the_first_and_never_trains_it_twice(finished, capsys, tmp_path):
    """While the run's lock is held (a first process training it), a second `bench run` of the same
    run waits and says so; when the first finishes, the second finds its record and trains nothing."""
    from filelock import FileLock

    base, path, rec = finished
    out = tmp_path / "out"
    target = out / path.relative_to(base / "rel")
    target.parent.mkdir(parents=True)
    lock = FileLock(str(target.parent / f".{target.stem}.lock"))
    lock.acquire()
    result = {}
    second = threading.Thread(target=lambda: result.update(code=main(["run", *SMOKE, "--set", "train.max_epochs=1", "--out", str(out)])))
    second.start()
    time.sleep(3)
    assert second.is_alive(), "the second process did not wait for the lock"
    shutil.copytree(path.with_suffix(""), target.with_suffix(""))  # the first one finishes: its folder, then its record
    shutil.copy(path, target)
    lock.release()
    second.join(60)
    err = capsys.readouterr().err
    assert result["code"] == 0 and "waiting: another process is running" in err and "already finished" in err, err
    assert json.loads(target.read_text())["date"] == rec["date"], "the second process trained the run again"


# ---- checkpoints and storage: nothing lost ----------------------------------------------------------


def test_a_damaged_resume_checkpoint_stops_with_one_line_and_rerun_starts_over(tmp_path, capsys):
    record = record_path(tmp_path, "transformer", "parity", "smoke", 0, ["train.max_epochs=1"])
    last = record.with_suffix("") / "ckpt" / "last.ckpt"
    last.parent.mkdir(parents=True)
    last.write_bytes(b"PK\x03\x04 truncated")
    argv = ["run", *SMOKE, "--set", "train.max_epochs=1", "--out", str(tmp_path)]
    code, _, err = cli(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and f"the resume checkpoint {last} is damaged" in err and "--rerun" in err, err
    assert last.read_bytes() == b"PK\x03\x04 truncated", "nothing is changed"
    assert cli(capsys, *argv, "--rerun")[0] == 0 and read_record(record)["resumed_from"] == []


def test_a_full_disk_mid_run_keeps_the_last_checkpoint_and_the_same_command_resumes(tmp_path, capsys, monkeypatch):
    """ENOSPC on the third checkpoint write (the second validation's best.ckpt): one line naming the
    folder and the intact last checkpoint; the same command later resumes from it."""
    from bench.runner import checkpoint_io

    saves, real = [], checkpoint_io.write_atomic

    def full_disk(path, data):
        saves.append(path)
        if len(saves) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(checkpoint_io, "write_atomic", full_disk)
    argv = ["run", *SMOKE, "--set", "train.max_epochs=3", "--out", str(tmp_path)]
    code, _, err = cli(capsys, *argv)
    record = record_path(tmp_path, "transformer", "parity", "smoke", 0, ["train.max_epochs=3"])
    errors = [ln for ln in err.splitlines() if ln.startswith("bench: error")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert f"cannot write in {record.with_suffix('')} (No space left on device" in errors[0]
    assert "the last good checkpoint" in errors[0] and "(step 8)" in errors[0], errors[0]
    monkeypatch.setattr(checkpoint_io, "write_atomic", real)
    assert cli(capsys, *argv)[0] == 0
    assert read_record(record)["resumed_from"] == [8] and read_record(record)["steps_run"] == 24


# ---- stale results are marked everywhere ---------------------------------------------------------


def test_compare_marks_stale_records_and_says_how_to_retrain_them(tmp_path, capsys):
    current = resolve_run(Registry(), "transformer", "parity", "smoke").public()
    old = json.loads(json.dumps(current))
    old["train"]["lr"] = 0.01  # the preset said 0.01 when this record was made
    for model, config in (("transformer", old), ("lstm", resolve_run(Registry(), "lstm", "parity", "smoke").public())):
        path = record_path(tmp_path, model, "parity", "smoke", 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "model": model,
                    "task": "parity",
                    "preset": "smoke",
                    "seed": 0,
                    "status": "ok",
                    "config": config,
                    "metrics": {"val": {"acc": 0.5, "n": 64}, "bin0": {"acc": 0.6, "n": 64}},
                    "test_splits": ["bin0"],
                    "report_metrics": ["acc"],
                }
            )
        )
    code, out, _ = cli(capsys, "compare", "--models", "transformer,lstm", "--tasks", "parity", "--preset", "smoke", "--out", str(tmp_path))
    rows = {ln.split("|")[1].strip(): ln for ln in out.splitlines() if ln.startswith("| ")}
    assert code == 0 and "60.0 †" in rows["transformer"] and "†" not in rows["lstm"], out
    assert "train.lr 0.01 -> 0.003" in out and "transformer on parity" in out
    assert f"retrain them with: bench compare --models transformer,lstm --tasks parity --preset smoke --out {tmp_path} --run" in out


# ---- defaults --------------------------------------------------------------------------------


def test_runs_and_leaderboards_go_to_an_ignored_folder_by_default(monkeypatch):
    monkeypatch.delenv("BENCH_OUT", raising=False)
    assert default_out() == "out"
    parser = build_parser()
    for argv in (["run", "--model", "m", "--task", "t"], ["compare", "--models", "m"], ["curves", "--models", "m", "--tasks", "t"]):
        assert parser.parse_args(argv).out == "out"
    assert parser.parse_args(["reproduce", "rsa-table2"]).out is None  # it reads the committed reference records, writes to out/
    assert "/out/" in (ROOT / ".gitignore").read_text().splitlines()
    monkeypatch.setenv("BENCH_OUT", "/scratch/me")
    assert build_parser().parse_args(["run", "--model", "m", "--task", "t"]).out == "/scratch/me"


def test_threads_follow_the_cpus_this_process_may_use(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setattr("bench.cpus._cgroup_quota", lambda: None)
    assert available_cpus() == 6
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    assert available_cpus() == 3
    (tmp_path / "cpu.max").write_text("250000 100000\n")  # a container's --cpus 2.5
    assert _cgroup_quota(tmp_path) == 3
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert _cgroup_quota(tmp_path) is None


def test_default_threads_are_capped_by_omp_num_threads_and_a_run_gives_the_callers_count_back(monkeypatch, tmp_path):
    monkeypatch.setattr("bench.cpus.available_cpus", lambda: 6)
    for omp, expected in ((None, 6), ("4", 4), ("12", 6), ("0", 6), ("two", 6)):
        if omp is None:
            monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("OMP_NUM_THREADS", omp)
        assert default_threads() == expected, omp
    assert default_threads(limit=3) == 3
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rec = bench.run(
            model="lstm",
            task="parity",
            preset="smoke",
            out=tmp_path,
            progress="none",
            overrides=["train.max_epochs=1", "train.num_threads=2"],
        )
        assert rec["device"]["threads"] == 2  # the run trained on its own count
        assert torch.get_num_threads() == 1  # and the caller has its own back
        # and the vector unit its kernels used: records from an AVX2 and an AVX-512 machine round differently
        assert rec["device"]["isa"] == torch.backends.cpu.get_cpu_capability()
    finally:
        torch.set_num_threads(before)


def test_cpu_model_names_the_processor_by_its_first_block_with_family_model_and_stepping():
    from bench.records import cpu_model

    two_cpus = (
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC 9654 96-Core Processor\nstepping\t: 1\nflags\t\t: fpu avx512f\n\n"
        "processor\t: 1\ncpu family\t: 6\nmodel name\t: another\n"
    )
    assert cpu_model(two_cpus) == "AMD EPYC 9654 96-Core Processor (family 25, model 17, stepping 1)"
    assert cpu_model("processor\t: 0\nmodel name\t: AMD EPYC\n") == "AMD EPYC"  # no numbers given: the name alone


def test_a_grid_stopped_by_sigterm_exits_143(monkeypatch, capsys):
    import signal

    from bench.grid import Stopped

    def stopped(args, registry):
        raise Stopped(signal.SIGTERM)

    monkeypatch.setattr("bench.cli.cmd_compare", stopped)
    assert main(["compare", "--models", "lstm"]) == 143
    monkeypatch.setattr("bench.cli.cmd_compare", lambda a, r: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert main(["compare", "--models", "lstm"]) == 130
