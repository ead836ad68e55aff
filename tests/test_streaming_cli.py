"""Streaming through the harness: ``bench eval --stream`` gives the batched metrics,
``bench generate`` is greedy decoding of the forward and refuses bad input, the worked
add-a-model example (docs/adding-a-model.md) streams, and ``bench list`` shows which models stream.

The eval / generate tests share one tiny copy run, trained once for this module (``copy_run``).
"""

import pytest
import torch
from streaming_helpers import CAUSAL, REG, STREAMING, TOL, stream, tokens_for

import bench

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- the harness: bench eval --stream and bench generate ---------------------------------------


@pytest.fixture(scope="module")
def copy_run(tmp_path_factory):
    """A tiny copy smoke run (transformer), trained once for the harness tests."""
    out = tmp_path_factory.mktemp("stream-run")
    small_data = ["train.max_epochs=1", "data.n_train=64", "data.n_val=16", "data.n_test=16", "data.max_len=24", "data.test_lengths=[24]"]
    rec = bench.run(model="transformer", task="copy", preset="smoke", seed=0, out=out, progress=False, overrides=small_data)
    assert rec["status"] == "ok"
    from bench.records import record_path

    return record_path(out, "transformer", "copy", "smoke", 0, small_data)


def test_eval_stream_gives_the_batched_metrics(copy_run):
    import json

    from bench.cli import main

    assert main(["eval", str(copy_run)]) == 0
    assert main(["eval", str(copy_run), "--stream"]) == 0
    from bench.records import run_folder

    batched = json.loads((run_folder(copy_run) / "eval.json").read_text())
    streamed = json.loads((run_folder(copy_run) / "eval-stream.json").read_text())
    assert streamed["streamed"] and set(streamed["metrics"]) == {"val", "len24"}
    for split, metrics in batched["metrics"].items():
        got = streamed["metrics"][split]
        assert set(got) == set(metrics) - {"stats"}  # n, acc, token_acc, last_acc, token_majority (by_length where binned)
        for key in got:
            assert got[key] == metrics[key], (split, key)
    run = json.loads(copy_run.read_text())  # the same data: the same chance level in the run, eval and eval --stream
    assert {s: m["token_majority"] for s, m in streamed["metrics"].items()} == {s: m["token_majority"] for s, m in run["metrics"].items()}


def test_generate_is_greedy_decoding_of_the_forward(copy_run, capsys):
    """bench.generate (streaming) against greedy decoding that reruns the full forward on the
    whole prefix for every new token; the CLI prints the same continuation."""
    from bench.cli import main
    from bench.generate import load_tested

    prompt = "s3 s7 s1 s2 s5 s0 s9 s4 s4 s8 <sep> s3"
    result = bench.generate(copy_run, prompt=prompt, tokens=8)
    _, task, _, module = load_tested(copy_run, [], REG)
    ids = [task.vocab.index(s) for s in prompt.split()]
    with torch.no_grad():
        for _ in range(8):
            logits = module.head.out(module.backbone(torch.tensor([ids])).hidden[:, -1])
            ids.append(int(logits.argmax(-1)))
    assert result["generated"] == [task.vocab[i] for i in ids[-8:]]
    assert main(["generate", str(copy_run), "--prompt", prompt, "--tokens", "8"]) == 0
    assert capsys.readouterr().out.strip() == f"{prompt} => {' '.join(result['generated'])}"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--prompt", "s3 bogus"], "not in the task's vocabulary"),
        (["--prompt", " "], "prompt is empty"),
        (["--prompt", "s3", "--tokens", "-1"], "--tokens must be >= 0"),
    ],
)
def test_generate_refuses_bad_input(copy_run, capsys, argv, message):
    from bench.cli import main

    assert main(["generate", str(copy_run), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_readme_add_a_model_example_streams(tmp_path, monkeypatch):
    """The worked example of docs/adding-a-model.md carries the optional streaming part; it meets the contract."""
    import sys

    from conftest import readme_example

    readme_example(tmp_path, monkeypatch, "highway.py", "models", "readme_stream_models")
    from readme_stream_models.highway import Highway

    torch.manual_seed(0)
    model = Highway(11, True, d_model=16).eval()
    tokens = tokens_for(7)
    with torch.no_grad():
        hidden, _ = stream(model, tokens, [1, 5, 17])
        assert (hidden - model(tokens).hidden).abs().max().item() < TOL
    sys.modules.pop("readme_stream_models.highway", None)


def test_bench_list_shows_which_models_stream(capsys):
    from bench.cli import main

    assert main(["list", "models"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:] if line.strip()}
    for name in CAUSAL:
        assert ("yes" in rows[name]) == (name in STREAMING), name
    assert "no" in rows["tlb-fr"]
