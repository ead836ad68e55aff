"""The inputs a new user hits: a record is its run's whole truth (eval and generate rebuild from
it), reading commands never write, and every bad input is one line with exit status 2 before any
training. One tiny parity run is trained once for the module (``parity_run``)."""
import json
import shutil
from pathlib import Path

import pytest
import yaml

import bench
from bench.cli import main

ROOT = Path(__file__).resolve().parent.parent
TINY = ["train.max_epochs=1"]


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line(code, err, *words):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("bench: error:"), (code, err)
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def parity_run(tmp_path_factory):
    """(out folder, record path, record) of one finished tiny transformer parity smoke run."""
    out = tmp_path_factory.mktemp("parity-run")
    rec = bench.run(model="transformer", task="parity", preset="smoke", seed=0, out=out, progress="none", overrides=TINY)
    assert rec["status"] == "ok"
    return out, out / rec["path"] if not Path(rec["path"]).is_absolute() else Path(rec["path"]), rec


def edited_registry(tmp_path, **smoke) -> Path:
    """A user registry whose parity smoke preset is edited (model / data sections given)."""
    shipped = yaml.safe_load((ROOT / "bench" / "registry.yaml").read_text())
    base = shipped["tasks"]["_formal"]["presets"]["smoke"]
    preset = {section: {**(base.get(section) or {}), **values} for section, values in smoke.items()}
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump({"tasks": {"parity": {"base": "_formal", "target": "bench.tasks.formal_languages:Parity",
                                                         "presets": {"smoke": preset}}}}))
    return path


# ---- 1. eval and generate rebuild from the record ----------------------------------------------

def test_eval_after_the_preset_is_edited_gives_the_records_metrics(parity_run, capsys, tmp_path):
    out, path, rec = parity_run
    registry = edited_registry(tmp_path, model={"d_model": 48}, data={"n_test": 40, "n_val": 24})
    code, stdout, err = run_cli(capsys, "--registry", registry, "eval", path, "--out", tmp_path / "evals")
    assert code == 0, err
    notes = [ln for ln in err.splitlines() if ln.strip()]
    assert len(notes) == 1 and "model.d_model 32 -> 48" in notes[0] and "data.n_test 64 -> 40" in notes[0], err
    written = Path(stdout.split("wrote ")[1].splitlines()[0])
    assert written.parent == tmp_path / "evals" / path.relative_to(out).with_suffix("")
    evaluated = json.loads(written.read_text())
    assert evaluated["metrics"] == rec["metrics"]
    assert evaluated["metrics"]["val"]["n"] == 64


def test_eval_with_data_overrides_scores_other_data_named_in_the_file(parity_run, capsys, tmp_path):
    out, path, rec = parity_run
    code, stdout, err = run_cli(capsys, "eval", path, "--set", "data.n_test=24", "--set", "data.n_val=8", "--out", tmp_path)
    assert code == 0, err
    written = Path(stdout.split("wrote ")[1].splitlines()[0])
    assert written.name.startswith("eval-") and json.loads(written.read_text())["metrics"]["val"]["n"] == 8


def test_a_record_the_current_code_cannot_build_is_one_line(parity_run, capsys, tmp_path):
    out, path, rec = parity_run
    copy = tmp_path / "runs" / path.relative_to(out / "runs")
    shutil.copytree(path.with_suffix(""), copy.with_suffix(""))
    data = json.loads(path.read_text())
    data["config"]["model"]["params"]["bogus_width"] = 3
    copy.write_text(json.dumps(data))
    one_line(*run_cli(capsys, "eval", copy)[::2], "cannot be rebuilt", "bogus_width")
    data["config"]["model"]["params"].pop("bogus_width")
    data["config"]["model"]["target"] = "bench.models.gone:Transformer"
    copy.write_text(json.dumps(data))
    one_line(*run_cli(capsys, "eval", copy)[::2], "cannot be rebuilt", "bench.models.gone")


# ---- 2. reading never writes where you did not ask -----------------------------------------------

@pytest.fixture
def clone(tmp_path, monkeypatch, parity_run):
    """A fresh clone of this checkout, the current folder, with the tiny parity run committed
    as a reference record (its checkpoint ignored by git, as the reference checkpoints are)."""
    import subprocess

    path = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(path)], check=True)
    out, record, _ = parity_run
    target = path / "results" / record.relative_to(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(record, target)
    shutil.copytree(record.with_suffix(""), target.with_suffix(""))
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    kept = [target.with_suffix("") / name for name in ("metrics.csv", "outcomes.npz")]  # committed with a reference record
    subprocess.run([*git, "add", "-f", str(target), *map(str, kept)], check=True)
    subprocess.run([*git, "commit", "-qm", "a reference record"], check=True)
    monkeypatch.chdir(path)
    monkeypatch.delenv("BENCH_OUT", raising=False)
    return path, target


def git_status(path) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(path), "status", "--porcelain"], capture_output=True, text=True, check=True).stdout


def test_reading_commands_leave_a_fresh_clone_untouched(clone, capsys):
    path, record = clone
    commands = [
        ["reproduce", "--list"],
        ["reproduce", "rsa-table2"],
        ["reproduce", "halt-table5-cpu"],
        ["compare", "--models", "transformer", "--tasks", "parity", "--preset", "smoke"],
        ["curves", "--models", "transformer", "--tasks", "parity", "--preset", "smoke"],
        ["cost", "--models", "tlb", "--task", "flipflop", "--preset", "smoke", "--lengths", "16", "--repeats", "1", "--warmup", "0",
         "--quiet"],
        ["eval", record.relative_to(path)],
    ]
    for argv in commands:
        code, stdout, err = run_cli(capsys, *argv)
        assert code in (0, 2), (argv, err)
        assert git_status(path) == "", (argv, git_status(path))
    assert (path / "out" / record.relative_to(path / "results")).with_suffix("").joinpath("eval.json").is_file()
    assert "out/runs/" in stdout  # eval said where it wrote
    code, stdout, err = run_cli(capsys, "reproduce", "rsa-table2", "--out", "results")  # asked: the reference table is written
    assert code == 0 and "wrote results/reproduce/rsa-table2.md" in stdout, err


@pytest.mark.parametrize("argv", [["compare", "--models", "lstm", "--out", ""], ["reproduce", "--list", "--out", " "],
                                  ["eval", "x.json", "--out", ""], ["cost", "--task", "parity", "--models", "lstm", "--out", ""],
                                  ["run", "--model", "lstm", "--task", "parity", "--out", ""]])
def test_an_empty_out_is_refused(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line(*run_cli(capsys, *argv)[::2], "--out is empty")
    assert not list(tmp_path.iterdir())


def test_an_empty_bench_out_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCH_OUT", "")
    one_line(*run_cli(capsys, "compare", "--models", "lstm")[::2], "BENCH_OUT is set but empty")
    assert not list(tmp_path.iterdir())


# ---- 4. every failure one line, before any work ----------------------------------------------------

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
    (["run", "--model", "", "--task", "parity"], "unknown model ''"),
    (["run", "--model", "lstm", "--task", ""], "unknown task ''"),
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
    return {"latin1": tmp_path / "latin1.yaml", "duplicate": tmp_path / "duplicate.yaml",
            "duplicate_deep": tmp_path / "duplicate_deep.yaml", "tmp": tmp_path}


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


@pytest.mark.parametrize("env,message", [({"SLURM_NTASKS": "abc", "SLURM_PROCID": "1"}, "$SLURM_NTASKS='abc' is not a whole number"),
                                         ({"LOCAL_RANK": "x"}, "$LOCAL_RANK='x'"),
                                         ({"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "lots"}, "$SLURM_CPUS_PER_TASK='lots'"),
                                         ({"BENCH_NO_PLUGINS": "maybe"}, "$BENCH_NO_PLUGINS='maybe'")])
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


def test_records_with_rates_outside_0_1_or_a_nan_metric_are_refused_by_every_reader(parity_run, capsys, tmp_path):
    from bench.records import Record, RecordError, read_record

    out, path, rec = parity_run
    for value, words in [(7.5, "7.5, outside [0, 1]"), (float("nan"), "is NaN"), (-0.1, "outside [0, 1]")]:
        bad = tmp_path / "runs" / path.relative_to(out / "runs")
        shutil.copytree(path.with_suffix(""), bad.with_suffix(""), dirs_exist_ok=True)
        data = json.loads(path.read_text())
        data["metrics"]["val"]["acc"] = value
        bad.write_text(json.dumps(data))
        with pytest.raises(RecordError, match=r"metrics\['val'\]\['acc'\]"):
            Record.read(bad)
        assert read_record(bad, quiet=True) == {}
        one_line(*run_cli(capsys, "eval", bad)[::2], words)
        code, _, err = run_cli(capsys, "compare", "--models", "transformer", "--tasks", "parity", "--preset", "smoke",
                               "--out", tmp_path, "--set", TINY[0])
        assert code == 2 and "skipped" in err and words in err, err


def test_curves_refuses_an_unknown_metric_and_names_models_without_runs(parity_run, capsys):
    out, path, rec = parity_run
    argv = ["curves", "--models", "transformer,lstm", "--tasks", "parity", "--preset", "smoke", "--out", out, "--set", TINY[0]]
    one_line(*run_cli(capsys, *argv, "--metric", "bogus")[::2], "--metric 'bogus'", "val_metric")
    assert not (out / "leaderboards").exists()
    code, stdout, err = run_cli(capsys, *argv)
    assert code == 0 and "no runs of lstm" in err and "wrote" in stdout


# ---- 5. hints that work ---------------------------------------------------------------------------

@pytest.mark.slow
def test_the_compare_hint_is_a_command_that_runs_as_printed(capsys, tmp_path, monkeypatch):
    import shlex

    monkeypatch.chdir(tmp_path)
    line = one_line(*run_cli(capsys, "compare", "--models", "lstm", "--preset", "small", "--out", "o",
                             "--set", "train.max_epochs=1")[::2], "name the tasks with --tasks", "a quick first one to try: bench compare")
    hinted = shlex.split(line.split("a quick first one to try: ")[1])
    assert hinted[:2] == ["bench", "compare"] and "--run" in hinted
    assert hinted[hinted.index("--tasks") + 1] == "parity" and hinted[hinted.index("--preset") + 1] == "smoke"  # asked, not chosen: smoke
    code, stdout, err = run_cli(capsys, *hinted[1:])
    assert code == 0, err
    assert "lstm" in stdout and list((tmp_path / "o" / "runs").rglob("seed0*.json"))


# ---- 3. sizes estimated before work ----------------------------------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["cost", "--models", "tlb", "--task", "flipflop", "--preset", "smoke", "--lengths", "10000000000", "--device", "cpu"],
     "a training step of a batch of 32 at length 10,000,000,000 would need at least"),
    (["cost", "--models", "tlb", "--task", "flipflop", "--preset", "smoke", "--lengths", "64", "--batch", "100000000", "--device", "cpu"],
     "lower --lengths or --batch"),
    (["run", "--model", "transformer", "--task", "copy", "--preset", "smoke", "--set", "data.test_lengths=[1000000]",
      "--set", "data.n_train=8", "--set", "data.n_val=8", "--set", "data.n_test=8"], "testing a batch of 128 at length 1,000,000"),
])
def test_sizes_that_cannot_fit_are_refused_with_the_estimate_and_the_limit(argv, message, capsys, tmp_path):
    line = one_line(*run_cli(capsys, *argv, "--out", tmp_path / "o")[::2], message)
    assert "GiB of memory is available" in line
    assert not (tmp_path / "o").exists()


def test_eval_on_data_that_cannot_fit_is_refused(parity_run, capsys, tmp_path):
    out, path, rec = parity_run
    one_line(*run_cli(capsys, "eval", path, "--set", "data.bin1_max_len=100000000", "--out", tmp_path)[::2], "GiB of memory is available")
    assert not list(tmp_path.iterdir())


def test_generating_more_tokens_than_fit_is_refused():
    from bench.errors import UserError
    from bench.generate import check_generation_fits

    with pytest.raises(UserError, match="generating 1,000,000,000 tokens would need at least .* GiB of memory is available; "
                                        "lower --tokens"):
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


# ---- 6. grids at once ------------------------------------------------------------------------------


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


def test_a_record_hand_edited_to_another_width_is_one_line(parity_run, capsys, tmp_path):
    out, path, rec = parity_run
    copy = tmp_path / "runs" / path.relative_to(out / "runs")
    shutil.copytree(path.with_suffix(""), copy.with_suffix(""))
    data = json.loads(path.read_text())
    data["config"]["model"]["params"]["d_model"] = 48
    copy.write_text(json.dumps(data))
    one_line(*run_cli(capsys, "eval", copy)[::2], "does not hold the model its config describes", "48)")
    assert not list(copy.with_suffix("").glob("eval*.json"))


# ---- 7. round five (issue 60): outcomes files, a huge registry, compare without tasks, a missing checkpoint ----

@pytest.fixture
def outcomes_copy(parity_run, tmp_path):
    """A copy of the tiny run (record and folder) to damage, and its outcomes file."""
    out, path, rec = parity_run
    copy = tmp_path / "runs" / path.relative_to(out / "runs")
    shutil.copytree(path.with_suffix(""), copy.with_suffix(""))
    shutil.copy(path, copy)
    return copy, copy.with_suffix("") / "outcomes.npz"


def _loads_as(record, *words):
    from bench.errors import UserError

    with pytest.raises(UserError) as exc:
        bench.load_outcomes(record)
    text = str(exc.value)
    assert "\n" not in text and all(w in text for w in words), text
    return text


def test_a_damaged_outcomes_file_is_one_line_naming_it(outcomes_copy):
    record, npz = outcomes_copy
    whole = npz.read_bytes()
    npz.write_bytes(whole[: len(whole) // 2])  # truncated
    _loads_as(record, str(npz), "is damaged or not an outcomes file", "--rerun")
    npz.write_text("not an npz\n")  # not a zip (numpy would read it as a pickle, and advise unpickling it)
    text = _loads_as(record, str(npz), "is damaged or not an outcomes file")
    assert "allow_pickle" not in text


def test_outcomes_holding_python_objects_are_never_unpickled(outcomes_copy, capsys):
    import numpy as np

    record, npz = outcomes_copy
    with np.load(npz) as saved:
        arrays = {k: saved[k] for k in saved.files}

    class Runs:  # unpickling it would call print
        def __reduce__(self):
            return (print, ("unpickled",))

    objects = np.empty(len(arrays["val/correct"]), dtype=object)
    objects[:] = [Runs()] * len(objects)
    np.savez(npz, **{**arrays, "val/correct": objects})
    text = _loads_as(record, str(npz), "it holds Python objects, which are never unpickled")
    assert "allow_pickle" not in text and "unpickled" not in capsys.readouterr().out


def test_outcomes_that_contradict_their_records_accuracy_are_refused(outcomes_copy):
    """The record's val acc is correct[tokens > 0].mean() of its outcomes: one example flipped
    gives another accuracy, and the two files no longer describe one run."""
    import numpy as np

    record, npz = outcomes_copy
    with np.load(npz) as saved:
        arrays = {k: saved[k] for k in saved.files}
    rec = json.loads(record.read_text())
    assert bench.load_outcomes(record)["val"]["correct"].mean() == rec["metrics"]["val"]["acc"]  # as written: accepted
    flipped = arrays["val/correct"].copy()
    flipped[0] = not flipped[0]
    np.savez_compressed(npz, **{**arrays, "val/correct": flipped})
    n = len(flipped)
    expected = rec["metrics"]["val"]["acc"] + (1 if flipped[0] else -1) / n
    _loads_as(record, str(npz), "contradicts record", "split 'val'", f"the outcomes give acc {expected:.6g}",
              f"the record {rec['metrics']['val']['acc']:.6g}")


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


def test_compare_without_tasks_asks_for_them_naming_a_quick_one(capsys, tmp_path):
    line = one_line(*run_cli(capsys, "compare", "--models", "rsa-xl,tlb,gut", "--out", tmp_path / "o")[::2],
                    "no records for models rsa-xl, tlb, gut with preset 'small'", "name the tasks with --tasks")
    assert line.endswith(f"a quick first one to try: bench compare --models rsa-xl,tlb,gut --tasks parity --preset smoke "
                         f"--out {tmp_path / 'o'} --run")
    one_line(*run_cli(capsys, "compare", "--models", "lstm", "--run", "--out", tmp_path / "o")[::2],
             "--run needs --tasks to know what to train; name the tasks with --tasks")
    assert not (tmp_path / "o").exists()


def test_eval_of_a_record_without_its_checkpoint_names_the_command_that_recreates_it(parity_run, capsys, tmp_path, monkeypatch):
    """A reference record is committed without its checkpoint: eval says the `bench run` that trains
    it again in place; run as printed, it recreates the checkpoint and eval then scores it."""
    import shlex

    out, path, rec = parity_run
    results = tmp_path / "results"
    record = results / path.relative_to(out)
    record.parent.mkdir(parents=True)
    shutil.copy(path, record)  # the record alone, as committed
    monkeypatch.chdir(tmp_path)
    line = one_line(*run_cli(capsys, "eval", record.relative_to(tmp_path))[::2], "is missing", "this recreates it: bench run")
    command = line.split("this recreates it: ")[1].split(" (its training took")[0]
    argv = shlex.split(command)
    assert argv[:2] == ["bench", "run"] and argv[-3:] == ["--out", "results", "--rerun"]
    assert [argv[argv.index(k) + 1] for k in ("--model", "--task", "--preset", "--seed")] == ["transformer", "parity", "smoke", "0"]
    assert run_cli(capsys, *argv[1:], "--quiet")[0] == 0
    code, stdout, err = run_cli(capsys, "eval", record.relative_to(tmp_path), "--out", tmp_path / "evals")
    assert code == 0, err
    written = Path(stdout.split("wrote ")[1].splitlines()[0])
    assert json.loads(written.read_text())["metrics"] == rec["metrics"]  # the same run, trained again: the same numbers
