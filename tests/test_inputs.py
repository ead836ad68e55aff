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
    subprocess.run([*git, "add", "-f", str(target), str(target.with_suffix("") / "metrics.csv")], check=True)
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
