"""Per-example outcomes kept beside every record: a fresh smoke run of each task kind, its
``bench eval`` and ``bench eval --stream``, read back with ``bench.load_outcomes``, give the
record's acc / token_acc exactly, cover every example of every split once, agree with each other
example by example, and still load from a moved results tree."""

import json
import shutil

import numpy as np
import pytest
import torch

import bench
from bench.cli import main
from bench.config import resolve_run
from bench.data import TaskData
from bench.errors import UserError
from bench.metrics import LAST_CORRECT, OUTCOME_FIELDS, OutcomeBuffer, example_outcomes
from bench.records import record_path, run_folder
from bench.runner.build import instantiate_task
from bench.tasks.base import IGNORE

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["train.max_epochs=1", "data.n_train=64", "data.n_val=16", "data.n_test=16"]
#: the fastest smoke task of each kind; causal, so that every one streams too
KINDS = {
    "lm": ("copy", [*TINY, "data.max_len=24", "data.test_lengths=[24]"]),
    "tag": ("parity", TINY),
    "classify": ("listops", [*TINY, "data.test_splits=[test]", "model.causal=true"]),
    "pair_classify": ("logic", [*TINY, "data.test_ops=[7]", "model.causal=true"]),
}


@pytest.fixture(scope="module", params=list(KINDS))
def smoke_run(request, tmp_path_factory):
    """(record path, record) of a tiny transformer run of the kind's task, trained once."""
    task, overrides = KINDS[request.param]
    out = tmp_path_factory.mktemp(f"outcomes-{request.param}")
    rec = bench.run(model="transformer", task=task, preset="smoke", seed=0, out=out, progress=False, overrides=overrides)
    assert rec["status"] == "ok"
    path = record_path(out, "transformer", task, "smoke", 0, overrides)
    return path, json.loads(path.read_text())


def assert_outcomes_give_metrics(outcomes: dict, metrics: dict) -> None:
    assert list(outcomes) == list(metrics)  # val and every test split, in the record's order
    for split, m in metrics.items():
        o = outcomes[split]
        assert set(o) == {*OUTCOME_FIELDS, LAST_CORRECT}
        assert all(len(v) == m["n"] for v in o.values())
        assert o[LAST_CORRECT].mean() == pytest.approx(m["last_acc"], abs=1e-6)  # the record's last_acc averages float32 values
        np.testing.assert_array_equal(o["index"], np.arange(m["n"]))  # each example once, in the split's order
        assert o["correct"].mean() == m["acc"]  # exactly: the record's number, from the kept outcomes
        assert o["token_correct"].sum() / o["tokens"].sum() == m["token_acc"]
        assert set(np.unique(o["correct"])) <= {0, 1} and (o["token_correct"] <= o["tokens"]).all()
        assert all(v.dtype.kind == "i" and v.dtype.itemsize <= 2 for v in o.values())  # compact at these sizes


def test_a_run_keeps_its_outcomes_and_they_give_its_metrics(smoke_run, registry):
    path, rec = smoke_run
    assert rec["outcomes"] == f"{path.stem}/outcomes.npz"  # named relative to the record, like its checkpoint
    outcomes = bench.load_outcomes(path)
    assert_outcomes_give_metrics(outcomes, rec["metrics"])
    # lengths are the examples' own, read from the split's data, and the record's by_length bins count them
    task = instantiate_task(resolve_run(registry, "transformer", rec["task"], "smoke", rec["overrides"]).task)
    data = TaskData(task, 8, 8, seed=0)
    for split, m in rec["metrics"].items():
        dataset = data.splits[split]
        lengths = [int(ex["length"]) if "length" in ex else len(ex["tokens"]) for ex in (dataset[i] for i in range(len(dataset)))]
        np.testing.assert_array_equal(outcomes[split]["length"], lengths)
        bins = [task.length_bin(n) for n in lengths]
        assert {b: e["n"] for b, e in m.get("by_length", {}).items()} == {b: bins.count(b) for b in set(bins) - {None}}


def test_eval_and_stream_write_outcomes_that_agree_with_the_run(smoke_run):
    path, _ = smoke_run
    assert main(["eval", str(path)]) == 0
    assert main(["eval", str(path), "--stream"]) == 0
    run = bench.load_outcomes(path)
    for name in ("eval", "eval-stream"):
        result = json.loads((run_folder(path) / f"{name}.json").read_text())
        assert result["outcomes"] == f"{name}-outcomes.npz"
        outcomes = bench.load_outcomes(path, eval=name)
        assert_outcomes_give_metrics(outcomes, result["metrics"])
        same = bench.load_outcomes(run_folder(path) / f"{name}.json")  # the evaluation's JSON, given directly
        for split in run:
            for field in OUTCOME_FIELDS:  # the same checkpoint on the same examples: the same outcome, example by example
                np.testing.assert_array_equal(outcomes[split][field], run[split][field], err_msg=f"{name} {split} {field}")
                np.testing.assert_array_equal(same[split][field], outcomes[split][field])


def test_a_moved_results_tree_loads_its_own_outcomes(smoke_run, tmp_path):
    path, rec = smoke_run
    out = path.parents[4]  # OUT/runs/<task>/<preset>/<model>/seed0.json
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    moved_record = moved / path.relative_to(out)
    assert_outcomes_give_metrics(bench.load_outcomes(moved_record), rec["metrics"])
    (run_folder(moved_record) / "outcomes.npz").unlink()
    with pytest.raises(UserError, match="outcomes file .* is missing"):
        bench.load_outcomes(moved_record)


def test_a_record_without_outcomes_says_so_in_one_line(smoke_run, tmp_path):
    path, rec = smoke_run
    old = tmp_path / "seed0.json"
    old.write_text(json.dumps({k: v for k, v in rec.items() if k != "outcomes"}))  # as records made before
    with pytest.raises(UserError, match="has no per-example outcomes.*bench eval") as err:
        bench.load_outcomes(old)
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="not found"):
        bench.load_outcomes(path, eval="eval-nothing")


def test_outcomes_that_do_not_match_their_record_are_refused(smoke_run, tmp_path):
    path, rec = smoke_run
    copy = tmp_path / "runs" / path.name
    copy.parent.mkdir(parents=True)
    copy.write_text(json.dumps({**rec, "metrics": {**rec["metrics"], "val": {**rec["metrics"]["val"], "n": 999}}}))
    shutil.copytree(run_folder(path), run_folder(copy))
    with pytest.raises(UserError, match=r"does not match record .*\(split 'val'\)"):
        bench.load_outcomes(copy)


# ---- the arrays themselves, against hand-counted outcomes ---------------------------------------


def logits_for(predictions, n_classes):
    return torch.nn.functional.one_hot(torch.tensor(predictions), n_classes).float()


def test_unscored_lm_examples_count_in_no_rate():
    targets = torch.tensor([[IGNORE, 2, 3], [1, 1, IGNORE], [IGNORE, IGNORE, IGNORE]])
    predictions = [[0, 2, 1], [1, 1, 0], [0, 0, 0]]
    buf = OutcomeBuffer()
    buf.add(
        example_outcomes("lm", logits_for(predictions, 5), {"targets": targets}),
        torch.tensor([3, 2, 3]),
        {},
        3,
        index=torch.tensor([0, 1, 2]),
    )
    arrays, metrics = buf.arrays(), buf.summarize(lambda n: None)
    np.testing.assert_array_equal(arrays["correct"], [0, 1, 0])
    np.testing.assert_array_equal(arrays["token_correct"], [1, 2, 0])
    np.testing.assert_array_equal(arrays["tokens"], [2, 2, 0])
    np.testing.assert_array_equal(arrays["length"], [3, 2, 3])
    scored = arrays["tokens"] > 0
    assert arrays["correct"][scored].mean() == metrics["acc"] == 0.5
    assert arrays["token_correct"].sum() / arrays["tokens"].sum() == metrics["token_acc"] == 0.75


def test_gathered_shards_keep_each_example_once_in_order(monkeypatch):
    """Two ranks' shards, one padded with a repeat of example 0 (as DistributedSampler pads):
    the gathered outcomes hold examples 0..4 once each, in order, and the metrics count 5."""
    import torch.distributed as dist

    from bench.runner.module import gather_buffers

    labels, predicted = [0, 1, 0, 1, 1], [0, 0, 0, 1, 0]
    shards = []
    for index in ([0, 2, 4], [1, 3, 0]):
        buf = OutcomeBuffer()
        batch = {"label": torch.tensor([labels[i] for i in index])}
        buf.add(
            example_outcomes("classify", logits_for([predicted[i] for i in index], 2), batch),
            torch.tensor(index) + 1,
            {},
            len(index),
            index=torch.tensor(index),
        )
        shards.append(buf)
    sent = [({k: torch.cat(v) for k, v in b.parts.items()}, dict(b.scalar_stats)) for b in shards]
    monkeypatch.setattr(dist, "all_gather_object", lambda everyone, mine: everyone.__setitem__(slice(None), [{0: s} for s in sent]))
    merged = gather_buffers({0: shards[0]}, world_size=2)[0]
    arrays, metrics = merged.arrays(), merged.summarize(lambda n: None)
    np.testing.assert_array_equal(arrays["index"], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(arrays["correct"], [1, 0, 1, 1, 0])
    np.testing.assert_array_equal(arrays["length"], [1, 2, 3, 4, 5])
    assert metrics["n"] == 5 and metrics["acc"] == 3 / 5 == arrays["correct"].mean()
