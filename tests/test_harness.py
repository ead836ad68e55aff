"""The harness end to end: runs that learn, determinism, records, failures, bad input."""

import json
import logging
from pathlib import Path

import pytest
import yaml

import bench
from bench.cli import main
from bench.registry import Registry
from bench.validation import registry_problems

ROOT = Path(__file__).resolve().parent.parent


def run_cli(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def no_records(out: Path) -> bool:
    return not list(Path(out).rglob("*.json"))


# ---- learning and records ---------------------------------------------------------------


@pytest.mark.slow
def test_lstm_learns_parity_in_a_smoke_run(tmp_path):
    rec = bench.run(
        model="lstm",
        task="parity",
        preset="smoke",
        seed=0,
        out=tmp_path,
        progress=False,
        overrides=["train.max_epochs=12", "train.lr=0.01"],
    )
    assert rec["status"] == "ok"
    assert rec["metrics"]["bin0"]["acc"] >= 0.9, rec["metrics"]["bin0"]


def test_same_seed_same_metrics_and_record_contents(tmp_path):
    kw = dict(model="transformer", task="copy", preset="smoke", progress=False, overrides=["train.max_epochs=1"])
    a = bench.run(seed=3, out=tmp_path / "a", **kw)
    b = bench.run(seed=3, out=tmp_path / "b", **kw)
    assert a["metrics"] == b["metrics"]
    rec = json.loads(Path(a["path"]).read_text())
    for key in (
        "config",
        "seed",
        "versions",
        "git",
        "device",
        "param_count",
        "wall_time_s",
        "train_tokens_per_s",
        "best_epoch",
        "metrics",
        "date",
        "status",
    ):
        assert key in rec, key
    assert rec["config"]["model"]["params"]["d_model"] == 32  # the smoke preset's model size applied
    assert rec["config"]["model"]["causal"] is True
    assert set(rec["metrics"]) == {"val", "len40"}
    assert rec["overrides"] == ["train.max_epochs=1"] and Path(a["path"]).name.startswith("seed3-")
    assert rec["versions"]["torch"]
    # where the wall time went: training, validation (sanity check included) and tests, in sequence within it
    parts = [rec["train_time_s"], rec["val_time_s"], rec["test_time_s"]]
    assert all(t > 0 for t in parts) and sum(parts) <= rec["wall_time_s"]


def test_best_validation_weights_are_tested(tmp_path):
    rec = bench.run(
        model="transformer", task="parity", preset="smoke", seed=0, out=tmp_path, progress=False, overrides=["train.max_epochs=3"]
    )
    best = max(h["acc"] for h in rec["val_history"])
    assert rec["best_val"] == best == rec["metrics"]["val"]["acc"]


def test_watched_split_is_scored_at_every_validation_and_never_selects(tmp_path):
    """train.watch_splits logs bin1 at each validation; with select=last the tested weights are
    the last validation's, so its logged bin1 equals the record's bin1; selection stays on val."""
    rec = bench.run(
        model="transformer",
        task="parity",
        preset="smoke",
        seed=0,
        out=tmp_path,
        progress=False,
        overrides=["train.max_epochs=3", "train.select=last", "train.watch_splits=[bin1]"],
    )
    history = rec["val_history"]
    assert len(history) == 3 and all("bin1_acc" in h for h in history)
    assert history[-1]["bin1_acc"] == rec["metrics"]["bin1"]["acc"]
    assert history[-1]["acc"] == rec["metrics"]["val"]["acc"]
    curve = (Path(rec["path"]).with_suffix("") / "metrics.csv").read_text().splitlines()
    assert "bin1_acc" in curve[0].split(",") and len(curve) == 4
    plain = bench.run(
        model="transformer",
        task="parity",
        preset="smoke",
        seed=0,
        out=tmp_path / "plain",
        progress=False,
        overrides=["train.max_epochs=3", "train.select=last"],
    )
    assert Path(plain["path"]).name == Path(rec["path"]).name  # not part of the run's identity
    assert plain["metrics"] == rec["metrics"]  # watching changes nothing that is trained or tested


def test_piped_progress_prints_training_lines_between_validations(tmp_path, caplog):
    """A 10k-step epoch validates once: between validations a training line comes every
    train.progress_every_min minutes (here: after every batch; 0: validation lines only), with the
    mean training loss since the last validation. Not part of the run's identity. The lines are
    logged to bench.progress (the CLI writes them to stderr: test_cli_progress_lines_go_to_stderr)."""
    kw = dict(model="transformer", task="parity", preset="smoke", seed=0, progress="lines")
    base = ["train.max_epochs=2", "train.batch_size=64"]  # 256 strings: 4 steps an epoch
    caplog.set_level(logging.INFO, logger="bench.progress")

    def progress_lines():
        lines = [r.getMessage() for r in caplog.records if r.name == "bench.progress"]
        caplog.clear()
        return lines

    rec = bench.run(out=tmp_path / "often", overrides=base + ["train.progress_every_min=0.000001"], **kw)
    lines = progress_lines()
    estimate, lines = lines[0], lines[1:]  # before training: the run's size and its time from a timed step
    assert estimate.startswith(f"bench: {rec['param_count']:,} parameters, 8 steps; a timed step takes "), estimate
    assert "--preset smoke" not in estimate  # named only for a long estimate at another preset
    training = [ln for ln in lines if "  training  " in ln]
    validation = [ln for ln in lines if "  val acc " in ln]
    assert [ln.split()[1] for ln in training] == [f"{s}/8" for s in range(1, 9)]
    assert [ln.split()[1] for ln in validation] == ["4/8", "8/8"] and len(lines) == 10
    assert all(ln.split()[5] != "-" and float(ln.split()[5]) > 0 for ln in training)  # "loss <mean>"
    quiet = bench.run(out=tmp_path / "quiet", overrides=base + ["train.progress_every_min=0"], **kw)
    lines = progress_lines()
    assert len(lines) == 3 and "parameters" in lines[0] and not any("  training  " in ln for ln in lines)
    assert Path(rec["checkpoint"]).parent.parent.name == Path(quiet["checkpoint"]).parent.parent.name  # same identity
    assert rec["metrics"] == quiet["metrics"]
    silent = bench.run(out=tmp_path / "silent", overrides=base, **{**kw, "progress": "none"})  # no estimate, no lines
    assert progress_lines() == []
    assert silent["metrics"] == rec["metrics"] and silent["val_history"] == rec["val_history"]  # the timed step changed nothing


def test_the_estimate_names_the_smoke_preset_only_when_it_is_long():
    from bench.runner.estimate import LONG_S, Estimate, estimate_line

    short = Estimate(params=17_676, steps=24, step_s=0.5, train_s=12.0, eval_s=3.0)
    long = Estimate(params=2_500_000, steps=30_000, step_s=0.3, train_s=9000.0, eval_s=900.0)
    assert estimate_line(short, "small") == (
        "bench: 17,676 parameters, 24 steps; a timed step takes 0.5 s: about 15 s (12 s training, 3 s validating and testing)"
    )
    assert long.total_s > LONG_S
    assert estimate_line(long, "small") == (
        "bench: 2.50 M parameters, 30,000 steps; a timed step takes 0.3 s: about 2.8 h "
        "(2.5 h training, 15 min validating and testing); --preset smoke is a quick first run"
    )
    assert "--preset smoke" not in estimate_line(long, "smoke")
    assert "30,000 steps left" in estimate_line(long, "paper", resumed=True)


def test_cli_progress_lines_go_to_stderr(tmp_path, capsys):
    """Piped (not a terminal), `bench run` writes one progress line per validation on stderr, and
    stdout holds the results only."""
    code, out, err = run_cli(
        capsys,
        "run",
        "--model",
        "transformer",
        "--task",
        "parity",
        "--preset",
        "smoke",
        "--set",
        "train.max_epochs=2",
        "--set",
        "train.batch_size=64",
        "--out",
        str(tmp_path),
    )
    assert code == 0 and "record: " in out and not any(ln.startswith("step ") for ln in out.splitlines())
    assert [ln.split()[1] for ln in err.splitlines() if ln.startswith("step ") and " val " in ln] == ["4/8", "8/8"], err
    assert "parameters, 8 steps; a timed step takes" in err.split("step 4/8")[0]  # the estimate, before training


def test_rsa_record_holds_the_tested_rem_parameters(tmp_path):
    import torch

    rec = bench.run(
        model="rsa-transformer",
        task="parity",
        preset="smoke",
        seed=0,
        out=tmp_path,
        progress=False,
        overrides=["train.max_epochs=1", "train.select=last"],
    )
    from bench.records import record_checkpoint

    assert rec["checkpoint"] == f"{Path(rec['path']).stem}/ckpt/last.ckpt"  # relative to the record's folder
    state = torch.load(record_checkpoint(rec["path"], rec), map_location="cpu", weights_only=False)["state_dict"]
    layer0 = rec["learned"]["blocks.0.attn.rsa"]
    assert layer0["gate"] == pytest.approx(float(torch.sigmoid(state["backbone.blocks.0.attn.rsa.mu"])))
    assert layer0["lambda_h0"] == pytest.approx(float(torch.tanh(state["backbone.blocks.0.attn.rsa.rem.eta"][0])))
    assert layer0["theta_h3"] == pytest.approx(float(state["backbone.blocks.0.attn.rsa.rem.theta"][1]))


def test_nan_loss_gives_a_failed_record(tmp_path):
    reg_path = tmp_path / "registry.yaml"
    reg = yaml.safe_load((ROOT / "bench" / "registry.yaml").read_text())
    reg["models"]["exploding"] = {"target": "tests.fixtures.exploding:Exploding", "params": {"d_model": 8}}
    reg_path.write_text(yaml.safe_dump(reg))
    rec = bench.run(
        model="exploding", task="parity", preset="smoke", seed=0, out=tmp_path / "out", registry=Registry(reg_path), progress=False
    )
    assert rec["status"] == "failed" and "non-finite" in rec["error"]
    assert json.loads(Path(rec["path"]).read_text())["status"] == "failed"


# ---- compare / leaderboard ----------------------------------------------------------------


@pytest.mark.slow
def test_compare_run_trains_missing_and_prints_mean_std(tmp_path, capsys):
    code, out, err = run_cli(
        capsys,
        "compare",
        "--models",
        "transformer,lstm",
        "--tasks",
        "parity",
        "--preset",
        "smoke",
        "--run",
        "--seeds",
        "0,1",
        "--set",
        "train.max_epochs=1",
        "--out",
        str(tmp_path),
        "--quiet",
        "--plot",
    )
    assert code == 0, err
    assert "±" in out and "parity:bin0 acc ↑" in out
    assert len(list((tmp_path / "runs" / "parity" / "smoke").rglob("seed*.json"))) == 4
    assert list((tmp_path / "leaderboards").glob("*.md")) and list((tmp_path / "leaderboards").glob("*.csv"))
    assert list((tmp_path / "leaderboards" / "plots").glob("*.png"))


def test_compare_marks_failed_runs(tmp_path, capsys):
    rec_dir = tmp_path / "runs" / "parity" / "smoke" / "lstm"
    rec_dir.mkdir(parents=True)
    (rec_dir / "seed0.json").write_text(json.dumps({"status": "failed", "seed": 0, "error": "non-finite"}))
    code, out, _ = run_cli(capsys, "compare", "--models", "lstm", "--tasks", "parity", "--preset", "smoke", "--out", str(tmp_path))
    assert code == 0 and "FAIL" in out


# ---- bad input: one line on stderr, exit 2, nothing written -------------------------------

BAD = [
    (["run", "--model", "transfomer", "--task", "parity"], "did you mean 'transformer'"),
    (["run", "--model", "transformer", "--task", "partiy"], "did you mean 'parity'"),
    (["run", "--model", "transformer", "--task", "parity", "--preset", "huge"], "unknown preset"),
    (["run", "--model", "transformer", "--task", "parity", "--set", "model.d_modle=3"], "did you mean 'd_model'"),
    (["run", "--model", "transformer", "--task", "parity", "--set", "model.d_model=big"], "expected int"),
    (["run", "--model", "transformer", "--task", "parity", "--set", "train.schedule=wavy"], "choose one of"),
    (["run", "--model", "transformer", "--task", "parity", "--set", "lr=3"], "must start with"),
    (["run", "--model", "transformer", "--task", "parity", "--set", "model.causal=false"], "needs a causal model"),
    (["run", "--model", "nope", "--task", "parity", "--set", "model.causal=false"], "needs a causal model"),
    (["run", "--model", "transformer", "--task", "parity", "--seeds", "0,x"], "seeds must be integers"),
    (["run", "--model", "transformer", "--task", "copy", "--set", "data.max_len=5"], "too short"),
    (["run", "--model", "transformer", "--task", "parity", "--out", "/proc/nope"], "cannot be written"),
    (["compare", "--models", "transformer,lstn"], "did you mean 'lstm'"),
    (
        ["run", "--model", "transformer", "--task", "parity", "--preset", "smoke", "--set", "train.watch_splits=[bin7]"],
        "has no test split 'bin7'",
    ),
    (
        [
            "run",
            "--model",
            "transformer",
            "--task",
            "parity",
            "--preset",
            "smoke",
            "--accelerator",
            "cpu",
            "--set",
            "model.attn_backend=xformers",
        ],
        "runs on CUDA only",
    ),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a[1:])[:50] for a, _ in BAD])
def test_bad_input_one_line_exit_2_nothing_written(argv, message, tmp_path, capsys):
    if "--out" not in argv:
        argv = [*argv, "--out", str(tmp_path)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("bench: error:"), err
    assert message in lines[0]
    assert no_records(tmp_path)


def test_causal_only_model_with_bidirectional_setting():
    """The reverse mismatch: a task that accepts either mode, a causal-only model told to be bidirectional."""
    from bench.config import _resolve_causal
    from bench.errors import UserError
    from bench.models.transformer import NoPE, Transformer

    class AnyTask:
        requires_causal = None

    with pytest.raises(UserError, match="causal-only"):
        _resolve_causal("nope", NoPE, AnyTask, False)
    assert _resolve_causal("nope", NoPE, AnyTask, None) is True
    assert _resolve_causal("transformer", Transformer, AnyTask, None) is False


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda text: text.replace("models:", "models:\n  broken: [unclosed", 1), "line"),
        (lambda text: text + "\n  ghost:\n    target: bench.models.ghost:Ghost\n", "cannot import"),
        (lambda text: text + "\n  ghost:\n    base: nothing_here\n", "not an entry"),
    ],
    ids=["malformed-yaml", "unimportable-target", "missing-base"],
)
def test_bad_registry(mutate, message, tmp_path, capsys):
    text = (ROOT / "bench" / "registry.yaml").read_text()
    if "ghost" in mutate(""):  # appended to the tasks section: put it under models instead
        text = text.replace("\ntasks:", mutate("").rstrip("\n") + "\n\ntasks:", 1)
    else:
        text = mutate(text)
    path = tmp_path / "registry.yaml"
    path.write_text(text)
    code, _, err = run_cli(capsys, "validate", str(path))
    assert code == 2
    assert message in err
    if message == "line":
        assert len(err.strip().splitlines()) == 1


def test_cli_subprocess_has_no_traceback(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "bench.cli", "run", "--model", "nope", "--task", "parity", "--seeds", "a"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0


def test_list_and_validate(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and "transformer" in out and "parity" in out and "_formal" not in out
    code, out, _ = run_cli(capsys, "validate")
    assert code == 0 and "all valid" in out


def test_registry_inheritance():
    reg = Registry()
    nope = reg.model_entry("nope")
    assert nope["lineage"] == ["nope", "transformer"] and nope["target"] == "bench.models.transformer:NoPE"
    case1 = reg.model_entry("rsa-transformer-I")  # target from transformer, rsa merged over rsa-transformer's
    assert case1["lineage"] == ["rsa-transformer-I", "rsa-transformer", "transformer"]
    assert case1["target"] == "bench.models.transformer:Transformer"
    assert case1["params"]["rsa"] == {"kinds": [5, 0, 0, 0, 0, 0], "dilations": [], "mu_init": 1.0, "lag_cap": 200, "path": "fft"}
    assert reg.preset("d2", "smoke")["data"]["max_len"] == 24  # own override on top of _formal
    assert reg.preset("d2", "smoke")["model"]["d_model"] == 32  # inherited from _formal


def test_readme_add_a_model_example_works(tmp_path, monkeypatch):
    """The worked example of docs/adding-a-model.md (one file + one entry) really runs."""
    import sys

    from conftest import readme_example

    reg, _ = readme_example(tmp_path, monkeypatch, "highway.py", "models", "readme_models")
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump(reg))
    registry = Registry(path)
    assert registry_problems(registry) == []
    carry = bench.build_model("highway-carry", task="parity", preset="smoke", registry=registry)
    assert carry.carry_bias == 2.0 and carry.d_model == 32  # the variant's mechanism, the preset's size
    rec = bench.run(model="highway", task="parity", preset="smoke", seed=0, out=tmp_path / "out", registry=registry, progress=False)
    assert rec["status"] == "ok"
    sys.modules.pop("readme_models.highway", None)
