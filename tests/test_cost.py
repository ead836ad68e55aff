"""`bench cost` (bench/cost/): the op / sync counter and the saved-bytes measure against
hand-computed values, ratios to the Transformer, OOM cells, bad input, --stream with a test
double that streams, and the files' header. Tiny models only; nothing here times anything."""

import json
import sys

import pytest
import torch
import yaml
from conftest import ROOT
from torch import nn

from bench import cost
from bench.cli import main
from bench.models.base import Backbone, BackboneOutput, StreamingUnsupported
from bench.registry import Registry

TINY = ["--task", "flipflop", "--preset", "smoke", "--batch", "2", "--repeats", "2", "--warmup", "0", "--quiet"]


# ---- test doubles, registered through a registry file that adds them --------------------------
class StreamingToy(Backbone):
    """A causal backbone with an explicit state: a decaying running sum h (B, d) and a cache of
    every embedded token (B, n, d) that grows by one row per token; out_t = h_t + mean(cache)."""

    supports_bidirectional = False
    supports_streaming = True

    def __init__(self, vocab_size: int, causal: bool, d_model: int = 16):
        super().__init__(vocab_size, causal, d_model)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.decay = 0.5

    def init_state(self, batch_size, device=None):
        return {"h": torch.zeros(batch_size, self.d_model, device=device), "cache": torch.zeros(batch_size, 0, self.d_model, device=device)}

    def step(self, tokens, state):
        x = self.embed(tokens)  # (B, t, d)
        h, cache, outs = state["h"], state["cache"], []
        for i in range(x.shape[1]):
            h = self.decay * h + x[:, i]
            cache = torch.cat([cache, x[:, i : i + 1]], dim=1)
            outs.append(h + cache.mean(1))
        hidden = torch.stack(outs, 1)
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden)), {"h": h, "cache": cache}

    def forward(self, tokens, mask=None):
        out, _ = self.step(tokens, self.init_state(tokens.shape[0], tokens.device))
        return out


class RefusingToy(StreamingToy):
    """Has the streaming methods but refuses when asked, as a family that needs the whole length."""

    def init_state(self, batch_size, device=None):
        raise StreamingUnsupported("RefusingToy needs the whole sequence to cut its chunks")


class BidirectionalOnly(Backbone):
    supports_causal = False

    def __init__(self, vocab_size: int, causal: bool, d_model: int = 16):
        super().__init__(vocab_size, causal, d_model)
        self.embed = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens, mask=None):
        hidden = self.embed(tokens)
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden))


@pytest.fixture(scope="module")
def toy_registry(tmp_path_factory):
    module = __name__  # as pytest imported this file; the registry's targets import it from sys.modules
    assert sys.modules[module].StreamingToy is StreamingToy
    reg = yaml.safe_load((ROOT / "bench" / "registry.yaml").read_text())
    reg["models"]["streaming-toy"] = {"target": f"{module}:StreamingToy", "description": "test double"}
    reg["models"]["refusing-toy"] = {"target": f"{module}:RefusingToy", "description": "test double"}
    reg["models"]["bidirectional-only"] = {"target": f"{module}:BidirectionalOnly", "description": "test double"}
    path = tmp_path_factory.mktemp("registry") / "registry.yaml"
    path.write_text(yaml.safe_dump(reg, allow_unicode=True))
    return path


# ---- the counter --------------------------------------------------------------------------------
def test_op_counter_counts_kernels_not_views():
    x = torch.randn(4, 8)
    with cost.OpCounter() as c:
        y = x + 1  # aten.add
        z = y * 2  # aten.mul
        w = z.view(-1)  # aten.view: a view, no kernel
        s = w.sum()  # aten.sum
        e = torch.empty(3)  # aten.empty: an allocation, no kernel
    assert (c.ops, c.all_ops, c.syncs) == (3, 5, 0)
    assert dict(c.by_name) == {"aten.add": 1, "aten.mul": 1, "aten.sum": 1}
    assert s.shape == () and e.shape == (3,)


def test_profiler_kernel_calls_are_the_op_counters_ops_on_an_eager_step():
    """--kernels' rule (torch.profiler) on eager code counts what OpCounter counts: composite operators
    (linear, layer_norm) as the operators they run, views and allocations not, nothing run inside
    another operator's kernel, the backward's operators too."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 1))
    x = torch.randn(4, 8)

    def step():
        loss = model(x).view(-1).sum() + torch.empty(3).numel()
        loss.backward()

    step()
    with cost.OpCounter() as c:
        step()
    counted = cost.count_kernels(step)
    assert counted == {"kernels": c.ops, "inductor": 0, "aten": c.ops}, (counted, dict(c.by_name))


def test_profiler_counts_inductors_kernels_of_a_compiled_function():
    """Compiled with inductor's kernel profiling on, each generated C++ kernel call is one event."""
    from torch._inductor import config as inductor_config

    torch._dynamo.reset()
    with inductor_config.patch({"cpp.enable_kernel_profile": True}):
        f = torch.compile(lambda x, w: ((x * 2 + 1).relu() @ w).sum(-1).exp())
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        f(x, w)
        counted = cost.count_kernels(lambda: f(x, w))
    assert counted["inductor"] >= 1 and counted["aten"] >= 1, counted  # the fused pointwise kernels; the matmul an extern call
    assert counted["kernels"] == counted["inductor"] + counted["aten"]


@pytest.mark.parametrize("k", [0, 1, 3])
def test_each_item_is_one_sync(k):
    x = torch.randn(5)
    with cost.OpCounter() as c:
        for _ in range(k):
            x.sum().item()  # aten.sum + aten._local_scalar_dense
    assert (c.ops, c.syncs) == (2 * k, k)


def test_boolean_mask_indexing_and_bool_are_syncs_integer_indexing_is_not():
    x = torch.arange(6.0)
    with cost.OpCounter() as c:
        x[torch.tensor([0, 2])]  # integer index: no host read
    assert c.syncs == 0
    with cost.OpCounter() as c:
        x[x > 2]  # gt, then index with a boolean mask: the size is read on the host
        bool(x.sum() > 0)  # sum, gt, _local_scalar_dense
    assert c.syncs == 2
    assert dict(c.sync_names) == {"aten.index": 1, "aten._local_scalar_dense": 1}


def test_the_optimizers_host_counters_are_not_syncs():
    p = nn.Parameter(torch.randn(3))
    opt = torch.optim.Adam([p])
    p.grad = torch.ones(3)
    opt.step()  # creates the state: step counter on the host
    counters = {s["step"].data_ptr() for s in opt.state.values()}
    with cost.OpCounter() as plain:
        opt.step()
    with cost.OpCounter(counters) as told:
        opt.step()
    assert plain.syncs >= 1 and told.syncs == 0 and told.ops == plain.ops


def test_saved_bytes_of_a_known_graph():
    x = torch.randn(4, 8, requires_grad=True)  # 128 bytes
    with cost.SavedBytes() as saved:
        y = x.exp()  # saves its result y (128 B)
        z = y.sin()  # saves y again: the same storage, counted once
        w = z * x  # saves z (128 B) and x (128 B)
    assert saved.nbytes == 3 * 128
    with cost.SavedBytes(exclude=[x]) as saved:  # x as a parameter: resident anyway
        (x.exp().sin() * x).sum()
    assert saved.nbytes == 2 * 128
    w.sum().backward()


def test_state_bytes_walks_nested_containers():
    state = {"a": torch.zeros(2, 3), "b": [torch.zeros(4, dtype=torch.int64), (torch.zeros(1, dtype=torch.bfloat16), 7)], "c": None}
    assert cost.state_bytes(state) == 2 * 3 * 4 + 4 * 8 + 2


# ---- the command ---------------------------------------------------------------------------------
def test_without_task_the_models_are_sized_by_flipflop(tmp_path):
    """The issue's command, `bench cost --models deltanet,mamba2,transformer --lengths 512,4096`, needs no
    --task: flip-flop (a causal token task at any length) sizes the models, as results/cost/ does."""
    args = [
        "cost",
        "--models",
        "deltanet,mamba2",
        "--lengths",
        "8",
        "--preset",
        "smoke",
        "--batch",
        "2",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--quiet",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    rows = json.loads((tmp_path / "flipflop_smoke_train_cpu_T8.json").read_text())["rows"]
    assert [r["model"] for r in rows] == ["transformer", "deltanet", "mamba2"]


def test_ratios_to_the_transformer(tmp_path, capsys):
    assert main(["cost", "--models", "lstm", "--lengths", "8,16", *TINY, "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "flipflop_smoke_train_cpu_T8-16.json").read_text())["rows"]
    assert [(r["model"], r["length"]) for r in rows] == [("transformer", 8), ("lstm", 8), ("transformer", 16), ("lstm", 16)]
    for length in (8, 16):
        ref, lstm = (next(r for r in rows if r["model"] == m and r["length"] == length) for m in ("transformer", "lstm"))
        for key in ("step_s", "tokens_per_s", "peak_bytes", "ops"):
            assert ref[f"{key}_ratio"] == 1.0
            assert lstm[f"{key}_ratio"] == pytest.approx(lstm[key] / ref[key])
        assert ref["tokens_per_s"] == pytest.approx(2 * length / ref["step_s"])
        assert ref["syncs"] == 0 and ref["syncs_ratio"] is None  # 0 syncs: no ratio
        assert ref["peak_bytes"] == ref["saved_bytes"] > 0
    assert rows[2]["saved_bytes"] > rows[0]["saved_bytes"]  # activations grow with the length
    out = capsys.readouterr().out
    assert "transformer" in out and "(1.00)" in out and "T=16 ms/step" in out


def test_cost_of_the_rows_is_what_add_ratios_says():
    rows = [
        {"model": "transformer", "length": 4, "step_s": 2.0, "ops": 100},
        {"model": "ut", "length": 4, "step_s": 5.0, "ops": 250},
        {"model": "ut", "length": 4, "status": cost.OOM},
    ]
    cost.add_ratios(rows, keys=("step_s", "ops"))
    assert [r["step_s_ratio"] for r in rows] == [1.0, 2.5, None] and rows[1]["ops_ratio"] == 2.5


def test_out_of_memory_is_a_cell(tmp_path, monkeypatch):
    real = cost.TrainingStep.__call__

    def step(self, batch):
        if self.name == "lstm" and batch["tokens"].shape[1] == 16:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, batch)

    monkeypatch.setattr(cost.TrainingStep, "__call__", step)
    assert main(["cost", "--models", "lstm", "--lengths", "8,16", *TINY, "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "flipflop_smoke_train_cpu_T8-16.json").read_text())["rows"]
    cells = {(r["model"], r["length"]): r for r in rows}
    assert cells["lstm", 16]["status"] == "OOM" and "step_s" not in cells["lstm", 16]
    assert cells["lstm", 8]["status"] == "ok" and cells["transformer", 16]["status"] == "ok"
    assert "| OOM" in (tmp_path / "flipflop_smoke_train_cpu_T8-16.md").read_text()


def test_a_compile_failure_is_a_cell(tmp_path, monkeypatch):
    """On an H200 (torch 2.11) inductor's codegen raised on a UT-family row under --compile, and the whole
    measurement died with it (results/cost/gpu/README.md); now that row's cell says so and the others
    are measured. The compile is simulated (no real compile: the step stays eager) and fails for ut."""
    from torch._inductor.exc import InductorError

    real = cost.TrainingStep.__call__

    def step(self, batch):
        if self.compiled and self.name == "ut":
            raise InductorError(TypeError("list indices must be integers or slices, not NoneType"), None)
        return real(self, batch)

    monkeypatch.setattr(cost.TrainingStep, "compile", lambda self: setattr(self, "compiled", True))
    monkeypatch.setattr(cost.TrainingStep, "__call__", step)
    assert main(["cost", "--models", "ut,lstm", "--lengths", "8", "--compile", *TINY, "--out", str(tmp_path)]) == 0
    rows = {r["model"]: r for r in json.loads((tmp_path / "flipflop_smoke_train_cpu_T8_compile.json").read_text())["rows"]}
    assert rows["ut"]["status"] == cost.COMPILE_FAILED and "step_s" not in rows["ut"]
    assert "list indices must be integers" in rows["ut"]["error"]
    assert rows["ut"]["ops"] > 0  # the eager count came first and stays
    assert rows["lstm"]["status"] == rows["transformer"]["status"] == "ok" and rows["lstm"]["step_s"] > 0
    assert "| compile failed" in (tmp_path / "flipflop_smoke_train_cpu_T8_compile.md").read_text()


def test_an_error_of_the_model_is_not_a_cell(tmp_path, monkeypatch):
    real = cost.TrainingStep.__call__

    def step(self, batch):
        if self.name == "lstm":
            raise ValueError("a bug in the model")
        return real(self, batch)

    monkeypatch.setattr(cost.TrainingStep, "__call__", step)
    with pytest.raises(ValueError, match="a bug in the model"):
        main(["cost", "--models", "lstm", "--lengths", "8", *TINY, "--out", str(tmp_path)])


@pytest.mark.parametrize(
    "args, says",
    [
        (["--models", "transformr", "--task", "flipflop"], "unknown model 'transformr'"),
        (["--models", "lstm", "--task", "flipflop", "--lengths", "512,0"], "--lengths takes positive whole numbers"),
        (["--models", "lstm", "--task", "flipflop", "--lengths", "1k"], "--lengths takes positive whole numbers"),
        (["--models", "lstm", "--task", "flipflop", "--dtype", "fp16"], "choose fp32 or bf16"),
        (["--models", "lstm", "--task", "flipflop", "--halting"], "has no halting modes"),
        (["--models", "lstm", "--task", "flipflop", "--stream", "--halting"], "separate measurements"),
        (["--models", "bidirectional-only", "--task", "flipflop"], "cannot run causally"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, says, tmp_path, capsys, toy_registry):
    out = tmp_path / "out"
    assert main(["--registry", str(toy_registry), "cost", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bench: error:") and says in err and "\n" not in err
    assert not out.exists()


def test_position_tables_shorter_than_the_longest_length_are_raised():
    """--lengths beyond a model's max_len (4096 by default) raise that model's table, nobody else's,
    and the header says so; the built model has the longer table. Each row is resolved once: the
    same row at two bounds is two rows, and the setup is left as it was given."""
    setup = cost.Setup(task="flipflop", preset="smoke", lengths=[16, 8192], batch=1, repeats=1, warmup=0)
    rows = [cost.Row("transformer"), cost.Row("lstm"), *cost.halting_rows(Registry(), [cost.Row("ut")], [2])]
    configs, raised = cost.resolve_rows(Registry(), rows, setup)
    assert raised == ["transformer", "ut"] and list(configs) == rows and len(rows) == 5
    assert configs[cost.Row("transformer")].model.params["max_len"] == 8192 and "max_len" not in configs[cost.Row("lstm")].model.params
    assert [(c.model.params["max_layers"], c.model.params["mode"]) for c in list(configs.values())[2:]] == [
        (2, "halt"),
        (2, "upperbound"),
        (2, "no-halt"),
    ]
    assert (
        "raised to 8192 (the longest length) for transformer, ut"
        in cost.header("training", ["transformer"], setup, [], raised=raised)["max_len"]
    )
    step = cost.training_step(Registry(), cost.Row("transformer"), setup)
    assert step.config.model.params["max_len"] == 8192


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_cuda_without_a_gpu_is_bad_input(tmp_path, capsys):
    assert main(["cost", "--models", "lstm", "--task", "flipflop", "--device", "cuda", "--out", str(tmp_path / "out")]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_files_carry_the_header(tmp_path):
    assert main(["cost", "--models", "lstm", "--lengths", "8", *TINY, "--out", str(tmp_path)]) == 0
    md, csv_text = (tmp_path / "flipflop_smoke_train_cpu_T8.md").read_text(), (tmp_path / "flipflop_smoke_train_cpu_T8.csv").read_text()
    head = json.loads((tmp_path / "flipflop_smoke_train_cpu_T8.json").read_text())["header"]
    for key in ("models", "shapes", "dtype", "compile", "device", "torch", "commit", "date", "inputs", "memory"):
        assert key in head and f"- **{key}**:" in md and f"# {key}:" in csv_text
    assert head["torch"] == torch.__version__ and head["shapes"] == "batch 2 x length 8" and "random tokens" in head["inputs"]
    assert "| transformer |" in md


def test_halting_ratios_to_no_halt():
    setup = cost.Setup(task="flipflop", preset="smoke", lengths=[8], batch=2, repeats=1, warmup=0)
    configs, _ = cost.resolve_rows(Registry(), cost.halting_rows(Registry(), [cost.Row("ut")], [2]), setup)
    rows = cost.measure_halting(configs, setup)
    assert [(r["model"], r["bound"], r["mode"]) for r in rows] == [("ut", 2, "halt"), ("ut", 2, "upperbound"), ("ut", 2, "no-halt")]
    no_halt = rows[2]
    assert no_halt["step_s_ratio"] == 1.0 and no_halt["halt_depth"] == 2.0  # no halting: every position runs the bound
    assert rows[0]["step_s_ratio"] == pytest.approx(rows[0]["step_s"] / no_halt["step_s"])
    assert 1.0 <= rows[0]["halt_depth"] <= 2.0
    assert rows[0]["epoch_min"] == pytest.approx(256 / 2 * rows[0]["step_s"] / 60)  # smoke: n_train 256


def test_stream_rows(tmp_path, capsys, toy_registry):
    args = [
        "--registry",
        str(toy_registry),
        "cost",
        "--stream",
        "--models",
        "streaming-toy,refusing-toy",
        "--lengths",
        "4,16",
        "--decode-tokens",
        "5",
        *TINY,
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    rows = json.loads((tmp_path / "flipflop_smoke_stream_cpu_T4-16.json").read_text())["rows"]
    toy = {r["length"]: r for r in rows if r["model"] == "streaming-toy"}
    ref = [r for r in rows if r["model"] == "transformer"]
    assert [r["status"] for r in ref] == ["ok"] * 2
    refused = "no streaming (RefusingToy needs the whole sequence to cut its chunks)"
    assert [r["status"] for r in rows if r["model"] == "refusing-toy"] == [refused] * 2
    d, b = 32, 2  # the smoke preset's d_model, --batch
    for length, r in toy.items():
        assert r["status"] == "ok" and r["decode_steps"] == 2 * 5  # 5 per repeat, 2 repeats
        assert r["state_bytes"] == b * d * 4 + b * length * d * 4  # h, and one cached row per context token
        assert r["prefill_s"] > 0 and 0 < r["decode_s"] <= r["decode_p90_s"]
        t = next(x for x in ref if x["length"] == length)
        assert t["state_bytes"] == 1 * 2 * b * length * d * 4  # the Transformer's KV cache: 1 layer, keys and values
        assert r["decode_s_ratio"] == pytest.approx(r["decode_s"] / t["decode_s"])
        assert r["state_bytes_ratio"] == pytest.approx(r["state_bytes"] / t["state_bytes"])
    assert (tmp_path / "flipflop_smoke_stream_cpu_T4-16.png").stat().st_size > 0
    assert "no streaming (RefusingToy" in capsys.readouterr().out


def test_a_model_with_its_own_settings_is_its_own_row(tmp_path):
    """--models tlb,tlb:chunk_size=4: two rows of one family; the smaller chunks mean more sequential
    chunk steps (flip-flop smoke: chunk 10 -> 2 chunks of length 16, chunk 4 -> 4), so more ops."""
    assert main(["cost", "--models", "tlb,tlb:chunk_size=4", "--lengths", "16", *TINY, "--out", str(tmp_path)]) == 0
    rows = {r["model"]: r for r in json.loads((tmp_path / "flipflop_smoke_train_cpu_T16.json").read_text())["rows"]}
    assert set(rows) == {"transformer", "tlb", "tlb:chunk_size=4"}
    assert rows["tlb:chunk_size=4"]["ops"] > rows["tlb"]["ops"] > rows["transformer"]["ops"]
    step = cost.training_step(Registry(), cost.Row.parse("tlb:chunk_size=4"), cost.Setup(task="flipflop", preset="smoke", lengths=[16]))
    assert step.backbone.chunk_size == 4 and step.name == "tlb:chunk_size=4"


def test_device_auto_is_the_gpu_when_torch_sees_one_as_bench_run(monkeypatch):
    """`bench cost`'s default --device auto: cuda where torch sees a GPU (as `bench run`), the CPU
    where it sees none or where --kernels asks for CPU kernel counts; an explicit device stays."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cost.Setup(task="flipflop", preset="smoke", lengths=[8], device="auto").device == "cuda"
    assert cost.Setup(task="flipflop", preset="smoke", lengths=[8], device="auto", kernels=True).device == "cpu"
    assert cost.Setup(task="flipflop", preset="smoke", lengths=[8], device="cpu").device == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cost.Setup(task="flipflop", preset="smoke", lengths=[8], device="auto").device == "cpu"


def test_each_row_is_resolved_once_and_named_by_value(tmp_path, monkeypatch):
    """`bench cost --halting` resolves each (model, bound, mode) row once, as `bench run` would,
    and names its rows by their fields (model, bound, mode), never by a string to parse."""
    import bench.cost.common as common

    resolved = []
    resolve_run = common.resolve_run

    def counting(registry, model, task, preset, overrides=None):
        resolved.append((model, tuple(overrides or ())))
        return resolve_run(registry, model, task, preset, overrides)

    monkeypatch.setattr(common, "resolve_run", counting)
    args = ["cost", "--halting", "--models", "ut", "--bounds", "2", "--lengths", "8", *TINY, "--repeats", "1", "--out", str(tmp_path)]
    assert main(args) == 0
    assert resolved == [("ut", ("model.max_layers=2", f"model.mode={mode}")) for mode in cost.HALTING_MODES]
    rows = json.loads((tmp_path / "flipflop_smoke_halting_cpu_T8.json").read_text())["rows"]
    assert [(r["model"], r["bound"], r["mode"]) for r in rows] == [("ut", 2, mode) for mode in cost.HALTING_MODES]
    assert cost.Row.parse("tlb:chunk_size=4") == cost.Row("tlb", ("model.chunk_size=4",), "tlb:chunk_size=4")
