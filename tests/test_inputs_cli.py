"""The inputs a new user hits before any run: every bad input is one line with exit status 2 before
any training, sizes are estimated before work, and a hint is a command that runs as printed.
Reading a finished run (eval, records, outcomes files): tests/test_inputs_reading.py."""

from pathlib import Path

import pytest
from inputs_helpers import one_line, run_cli

ROOT = Path(__file__).resolve().parent.parent


# ---- every failure one line, before any work ------------------------------------------------------

BIG = "9" * 10000
RUN = ["run", "--model", "lstm", "--task", "parity", "--preset", "smoke"]
ONE_LINE = [
    (["--registry", "{latin1}", "list"], "is not UTF-8 text"),
    (["validate", "{latin1}"], "is not UTF-8 text"),
    (["validate", "{duplicate}"], "duplicate key 'mine'"),
    (["validate", "{duplicate_deep}"], "duplicate key 'd_model'"),
    ([*RUN, "--set", f"model.d_model={BIG}"], "too large a number"),
    ([*RUN, "--set", f"data.n_train={BIG}"], "too large a number"),
    ([*RUN, "--seed", BIG], "out of range"),
    ([*RUN, "--set", "data.n_train=0"], "data.n_train=0: must be >= 1"),
    ([*RUN, "--set", "data.max_len=0"], "data.max_len=0: must be >= 1"),
    ([*RUN, "--set", "data.n_test=-1"], "data.n_test=-1: must be >= 1"),
    (["run", "--model", "lstm", "--task", "copy", "--preset", "smoke", "--set", "data.n_symbols=0"], "data.n_symbols=0"),
    (["run", "--model", "lstm", "--task", "copy", "--preset", "smoke", "--set", "data.test_lengths=5"], "expected a non-empty list"),
    (["run", "--model", "lstm", "--task", "flipflop", "--preset", "smoke", "--set", "data.train_p_i=1.5"], "must be in [0, 1]"),
    (["run", "--model", "lstm", "--task", "flipflop", "--preset", "smoke", "--set", "data.train_len=0"], "data.train_len=0"),
    (["run", "--model", "lstm", "--task", "logic", "--preset", "smoke", "--set", "data.train_max_ops=0"], "data.train_max_ops=0"),
    (["run", "--model", "lstm", "--task", "copy", "--preset", "smoke", "--set", "data.test_lengths=[0,8]"], "must be >= 1"),
    ([*RUN, "--seed", "0", "--seeds", "1,2"], "--seed 0 and --seeds 1,2 both given"),
    (["run", "--model", "", "--task", "parity"], "--model: model name '' is not a name: it is empty"),
    (["run", "--model", "lstm", "--task", ""], "--task: task name '' is not a name: it is empty"),
    (["compare", "--models", ","], "--models needs at least one name"),
    (["--registry", "", "list"], "--registry is empty"),
    (["eval", "", "--out", "{tmp}"], "record path is empty"),
    (["eval", "{tmp}"], "is a folder, not a record"),
    (["eval", "{tmp}/nothing.json", "--accelerator", "gpu"], "--accelerator gpu"),
    (["eval", "{tmp}/nothing.json", "--stream", "--accelerator", "tpu"], "choose cpu, gpu or auto"),
    (["generate", "{tmp}/nothing.json", "--prompt", "s1", "--accelerator", "gpu"], "--accelerator gpu"),
]


@pytest.fixture
def bad_files(tmp_path):
    (tmp_path / "latin1.yaml").write_bytes("models:\n  caf\xe9: {base: transformer}\n".encode("latin-1"))
    (tmp_path / "duplicate.yaml").write_text("models:\n  mine: {base: transformer}\n  mine: {base: lstm}\n")
    (tmp_path / "duplicate_deep.yaml").write_text("models:\n  mine:\n    base: transformer\n    params: {d_model: 32, d_model: 64}\n")
    return {
        "latin1": tmp_path / "latin1.yaml",
        "duplicate": tmp_path / "duplicate.yaml",
        "duplicate_deep": tmp_path / "duplicate_deep.yaml",
        "tmp": tmp_path,
    }


@pytest.mark.parametrize("argv,message", ONE_LINE, ids=[" ".join(a)[:60] for a, _ in ONE_LINE])
def test_bad_input_is_one_line_and_leaves_nothing(argv, message, bad_files, capsys, monkeypatch):
    import torch

    if "--accelerator" in argv and torch.cuda.is_available() and "tpu" not in argv:
        pytest.skip("a GPU is here")
    tmp = bad_files["tmp"]
    monkeypatch.chdir(tmp)
    before = sorted(tmp.rglob("*"))
    argv = [a.format(**bad_files) for a in argv]
    if argv[0] == "run":
        argv += ["--out", str(tmp / "o")]
    one_line(*run_cli(capsys, *argv)[::2], message)
    assert sorted(tmp.rglob("*")) == before


@pytest.mark.parametrize(
    "env,message",
    [
        ({"SLURM_NTASKS": "abc", "SLURM_PROCID": "1"}, "$SLURM_NTASKS='abc' is not a whole number"),
        ({"LOCAL_RANK": "x"}, "$LOCAL_RANK='x'"),
        ({"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "lots"}, "$SLURM_CPUS_PER_TASK='lots'"),
        ({"BENCH_NO_PLUGINS": "maybe"}, "$BENCH_NO_PLUGINS='maybe'"),
    ],
)
def test_garbage_in_scheduler_and_boolean_variables_is_one_line(env, message, capsys, monkeypatch, tmp_path):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    one_line(*run_cli(capsys, *RUN, "--out", tmp_path)[::2], message)


def test_boolean_variables_read_0_false_no_as_false(monkeypatch):
    from bench.parsing import env_flag

    for value, expected in [("0", False), ("false", False), ("No", False), ("", False), ("1", True), ("TRUE", True), ("yes", True)]:
        monkeypatch.setenv("BENCH_NO_PLUGINS", value)
        assert env_flag("BENCH_NO_PLUGINS") is expected, value


def test_validate_builds_every_model_and_reports_a_constructor_that_raises(tmp_path, capsys):
    (tmp_path / "r.yaml").write_text("models:\n  bad-pe: {base: transformer, params: {pos_encoding: bogus}}\n")
    code, _, err = run_cli(capsys, "validate", tmp_path / "r.yaml")
    assert code == 2 and err.count("\n") == 1 and "models.bad-pe" in err and "unknown pos_encoding 'bogus'" in err, err


def test_a_registry_file_too_large_to_be_one_is_refused_at_once(tmp_path, capsys):
    from bench.schema import MAX_YAML_BYTES

    huge = tmp_path / "huge.yaml"
    line = "  m{}: {{base: transformer}}\n"
    with huge.open("w") as f:
        f.write("models:\n")
        i = 0
        while f.tell() <= MAX_YAML_BYTES:
            f.writelines(line.format(i + j) for j in range(10000))
            i += 10000
    one_line(*run_cli(capsys, "--registry", huge, "list")[::2], "huge.yaml is 4.", "MiB, more than a YAML file bench reads (4 MiB")
    (tmp_path / "small.yaml").write_text("models:\n  mine: {base: transformer}\n")  # the limit is far above a real layer
    code, stdout, _ = run_cli(capsys, "--registry", tmp_path / "small.yaml", "list")
    assert code == 0 and "mine" in stdout


# ---- hints that work ------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_compare_hint_is_a_command_that_runs_as_printed(capsys, tmp_path, monkeypatch):
    import shlex

    monkeypatch.chdir(tmp_path)
    line = one_line(
        *run_cli(capsys, "compare", "--models", "lstm", "--preset", "small", "--out", "o", "--set", "train.max_epochs=1")[::2],
        "name the tasks with --tasks",
        "a quick first one to try: bench compare",
    )
    hinted = shlex.split(line.split("a quick first one to try: ")[1])
    assert hinted[:2] == ["bench", "compare"] and "--run" in hinted
    assert hinted[hinted.index("--tasks") + 1] == "parity" and hinted[hinted.index("--preset") + 1] == "smoke"  # asked, not chosen: smoke
    code, stdout, err = run_cli(capsys, *hinted[1:])
    assert code == 0, err
    assert "lstm" in stdout and list((tmp_path / "o" / "runs").rglob("seed0*.json"))


def test_compare_without_tasks_asks_for_them_naming_a_quick_one(capsys, tmp_path):
    line = one_line(
        *run_cli(capsys, "compare", "--models", "rsa-xl,tlb,gut", "--out", tmp_path / "o")[::2],
        "no records for models rsa-xl, tlb, gut with preset 'small'",
        "name the tasks with --tasks",
    )
    assert line.endswith(
        f"a quick first one to try: bench compare --models rsa-xl,tlb,gut --tasks parity --preset smoke --out {tmp_path / 'o'} --run"
    )
    one_line(
        *run_cli(capsys, "compare", "--models", "lstm", "--run", "--out", tmp_path / "o")[::2],
        "--run needs --tasks to know what to train; name the tasks with --tasks",
    )
    assert not (tmp_path / "o").exists()


# ---- sizes estimated before work ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["cost", "--models", "tlb", "--task", "flipflop", "--preset", "smoke", "--lengths", "10000000000", "--device", "cpu"],
            "a training step of a batch of 32 at length 10,000,000,000 would need at least",
        ),
        (
            [
                "cost",
                "--models",
                "tlb",
                "--task",
                "flipflop",
                "--preset",
                "smoke",
                "--lengths",
                "64",
                "--batch",
                "100000000",
                "--device",
                "cpu",
            ],
            "lower --lengths or --batch",
        ),
        (
            [
                "run",
                "--model",
                "transformer",
                "--task",
                "copy",
                "--preset",
                "smoke",
                "--set",
                "data.test_lengths=[1000000]",
                "--set",
                "data.n_train=8",
                "--set",
                "data.n_val=8",
                "--set",
                "data.n_test=8",
            ],
            "testing a batch of 128 at length 1,000,000",
        ),
    ],
)
def test_sizes_that_cannot_fit_are_refused_with_the_estimate_and_the_limit(argv, message, capsys, tmp_path):
    line = one_line(*run_cli(capsys, *argv, "--out", tmp_path / "o")[::2], message)
    assert "GiB of memory is available" in line
    assert not (tmp_path / "o").exists()


def test_generating_more_tokens_than_fit_is_refused():
    from bench.errors import UserError
    from bench.generate import check_generation_fits

    with pytest.raises(
        UserError, match="generating 1,000,000,000 tokens would need at least .* GiB of memory is available; lower --tokens"
    ):
        check_generation_fits({"d_model": 32, "n_layers": 1, "n_heads": 4}, 3, 10**9)
    check_generation_fits({"d_model": 32, "n_layers": 1, "n_heads": 4}, 3, 100)  # a small one goes on


def test_ctrl_c_offers_resume_only_where_there_is_something_to_resume(capsys, monkeypatch):
    import bench.cli

    def stop(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench.cli, "cmd_cost", stop)
    monkeypatch.setattr(bench.cli, "cmd_run", stop)
    code, _, err = run_cli(capsys, "cost", "--task", "parity", "--models", "lstm")
    assert code == 130 and "nothing was written" in err and "resume" not in err
    code, _, err = run_cli(capsys, "run", "--model", "lstm", "--task", "parity")
    assert code == 130 and "run the same command again to resume" in err


# ---- grids at once --------------------------------------------------------------------------------


def test_two_grids_on_one_out_keep_their_cell_logs_apart(tmp_path):
    """Two grid processes started in the same second: each its own log folder (pid in the name;
    a folder that exists is never reused, even by the same process)."""
    import os
    import subprocess
    import sys

    from bench.grid.common import log_folder

    code = "import sys; from bench.grid.common import log_folder; print(log_folder(sys.argv[1], 'grid'))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    folders = {Path(p.communicate()[0].strip()) for p in procs}
    mine = {log_folder(tmp_path, "grid"), log_folder(tmp_path, "grid")}
    assert len(folders | mine) == 4 and all(f.is_dir() and f.parent == tmp_path / "logs" for f in folders | mine)
    assert all(f.name.startswith("grid-") for f in folders | mine) and sum(str(os.getpid()) in f.name for f in mine) == 2
