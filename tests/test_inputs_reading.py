"""Reading a finished run, the inputs a new user hits: a record is its run's whole truth (eval and
generate rebuild from it), reading commands never write where you did not ask, and a record or
outcomes file that contradicts its run is one line with exit status 2. One tiny parity run is
trained once for the module (``parity_run``). Bad input before any run: tests/test_inputs_cli.py."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from inputs_helpers import one_line, run_cli

import bench
from bench.registry import shipped_layer

ROOT = Path(__file__).resolve().parent.parent
TINY = ["train.max_epochs=1"]


@pytest.fixture(scope="module")
def parity_run(tmp_path_factory):
    """(out folder, record path, record) of one finished tiny transformer parity smoke run."""
    out = tmp_path_factory.mktemp("parity-run")
    rec = bench.run(model="transformer", task="parity", preset="smoke", seed=0, out=out, progress="none", overrides=TINY)
    assert rec["status"] == "ok"
    return out, out / rec["path"] if not Path(rec["path"]).is_absolute() else Path(rec["path"]), rec


def edited_registry(tmp_path, **smoke) -> Path:
    """A user registry whose parity smoke preset is edited (model / data sections given)."""
    shipped = shipped_layer()[0]  # registry.yaml and the task files beside their modules
    base = shipped["tasks"]["_formal"]["presets"]["smoke"]
    preset = {section: {**(base.get(section) or {}), **values} for section, values in smoke.items()}
    path = tmp_path / "registry.yaml"
    path.write_text(
        yaml.safe_dump(
            {"tasks": {"parity": {"base": "_formal", "target": "bench.tasks.formal_languages:Parity", "presets": {"smoke": preset}}}}
        )
    )
    return path


# ---- eval and generate rebuild from the record ----------------------------------------------------


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


# ---- reading never writes where you did not ask ---------------------------------------------------


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
        [
            "cost",
            "--models",
            "tlb",
            "--task",
            "flipflop",
            "--preset",
            "smoke",
            "--lengths",
            "16",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--quiet",
        ],
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


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "--models", "lstm", "--out", ""],
        ["reproduce", "--list", "--out", " "],
        ["eval", "x.json", "--out", ""],
        ["cost", "--task", "parity", "--models", "lstm", "--out", ""],
        ["run", "--model", "lstm", "--task", "parity", "--out", ""],
    ],
)
def test_an_empty_out_is_refused(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line(*run_cli(capsys, *argv)[::2], "--out is empty")
    assert not list(tmp_path.iterdir())


def test_an_empty_bench_out_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCH_OUT", "")
    one_line(*run_cli(capsys, "compare", "--models", "lstm")[::2], "BENCH_OUT is set but empty")
    assert not list(tmp_path.iterdir())


# ---- a record that contradicts its run is one line for every reader -------------------------------


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
        code, _, err = run_cli(
            capsys, "compare", "--models", "transformer", "--tasks", "parity", "--preset", "smoke", "--out", tmp_path, "--set", TINY[0]
        )
        assert code == 2 and "skipped" in err and words in err, err


def test_curves_refuses_an_unknown_metric_and_names_models_without_runs(parity_run, capsys):
    out, path, rec = parity_run
    argv = ["curves", "--models", "transformer,lstm", "--tasks", "parity", "--preset", "smoke", "--out", out, "--set", TINY[0]]
    one_line(*run_cli(capsys, *argv, "--metric", "bogus")[::2], "--metric 'bogus'", "val_metric")
    assert not (out / "leaderboards").exists()
    code, stdout, err = run_cli(capsys, *argv)
    assert code == 0 and "no runs of lstm" in err and "wrote" in stdout


def test_eval_on_data_that_cannot_fit_is_refused(parity_run, capsys, tmp_path):
    out, path, rec = parity_run
    one_line(*run_cli(capsys, "eval", path, "--set", "data.bin1_max_len=100000000", "--out", tmp_path)[::2], "GiB of memory is available")
    assert not list(tmp_path.iterdir())


def test_a_record_hand_edited_to_another_width_is_one_line(parity_run, capsys, tmp_path):
    out, path, rec = parity_run
    copy = tmp_path / "runs" / path.relative_to(out / "runs")
    shutil.copytree(path.with_suffix(""), copy.with_suffix(""))
    data = json.loads(path.read_text())
    data["config"]["model"]["params"]["d_model"] = 48
    copy.write_text(json.dumps(data))
    one_line(*run_cli(capsys, "eval", copy)[::2], "does not hold the model its config describes", "48)")
    assert not list(copy.with_suffix("").glob("eval*.json"))


# ---- outcomes files and a missing checkpoint (round five) -------------------------------


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
    _loads_as(
        record,
        str(npz),
        "contradicts record",
        "split 'val'",
        f"the outcomes give acc {expected:.6g}",
        f"the record {rec['metrics']['val']['acc']:.6g}",
    )


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
