"""Split metrics against hand-counted outcomes: acc, token_acc and last_acc for every task kind,
length bins, per-example and per-batch backbone statistics."""

import math

import pytest
import torch

from bench.metrics import OutcomeBuffer, _bin_start, example_outcomes, with_token_chance
from bench.tasks.base import IGNORE


def logits_for(predictions, n_classes):
    """Logits whose argmax is ``predictions`` (any shape)."""
    return torch.nn.functional.one_hot(torch.tensor(predictions), n_classes).float()


def summarize(kind, logits, batch, length_bin=lambda n: None, stats=None):
    buf = OutcomeBuffer()
    lengths = batch.get("length", batch.get("mask", torch.ones(len(logits), 1)).sum(-1))
    buf.add(example_outcomes(kind, logits, batch), lengths, stats or {}, logits.shape[0])
    return buf.summarize(length_bin)


@pytest.mark.parametrize("kind", ["classify", "pair_classify"])
def test_classification_counts_examples(kind):
    # labels 0 1 2 1, predictions 0 2 2 1: three of four right
    out = summarize(kind, logits_for([0, 2, 2, 1], 3), {"label": torch.tensor([0, 1, 2, 1])})
    assert out["n"] == 4
    assert out["acc"] == out["token_acc"] == out["last_acc"] == 0.75
    assert out["majority"] == 0.5  # label 1: 2 of the 4 examples


def test_tagging_needs_every_position_and_ignores_padding():
    # two strings, 2 labels per position; the second string has length 2 (one padded position)
    labels = torch.tensor([[[1, 0], [0, 1], [1, 1]], [[0, 1], [1, 0], [0, 0]]], dtype=torch.float)
    # predicted label sets (logit > 0): string 0 gets position 1 wrong ([1, 1] for [0, 1]);
    # string 1 is right on its two real positions and wrong on the padded one
    predicted = torch.tensor([[[1, 0], [1, 1], [1, 1]], [[0, 1], [1, 0], [1, 1]]], dtype=torch.float)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    out = summarize("tag", predicted * 2 - 1, {"labels": labels, "mask": mask})
    assert out["acc"] == 0.5  # string 1 only
    assert out["token_acc"] == pytest.approx(4 / 5)  # positions right: 2 of 3, 2 of 2
    assert out["last_acc"] == 1.0  # the last real positions (2 and 1) are both right
    assert "majority" not in out  # no class label per example


def test_lm_scores_only_targets_and_skips_sequences_without_any():
    I = IGNORE
    targets = torch.tensor(
        [
            [I, 2, 3, I],  # predictions 2 (right), 1 (wrong): last scored wrong
            [1, 1, I, I],  # both right
            [I, I, I, I],
        ]
    )  # nothing scored: counts in no metric
    predictions = [[0, 2, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]]
    out = summarize("lm", logits_for(predictions, 5), {"targets": targets})
    assert out["n"] == 3
    assert out["acc"] == 0.5  # 1 of the 2 sequences with scored positions
    assert out["token_acc"] == 3 / 4
    assert out["last_acc"] == 0.5
    assert "majority" not in out  # token-level: no class label per example


def test_nothing_scored_is_missing_not_zero():
    out = summarize("lm", logits_for([[0, 0]], 3), {"targets": torch.full((1, 2), IGNORE)})
    assert math.isnan(out["acc"]) and math.isnan(out["token_acc"]) and math.isnan(out["last_acc"])


def test_length_bins_statistics_and_several_batches():
    bins = lambda n: None if n > 15 else f"{(n - 1) // 5 * 5 + 1}-{(n - 1) // 5 * 5 + 5}"
    buf = OutcomeBuffer()
    # batch 1: labels 0 1 2, predictions 0 1 0, lengths 12 3 7
    buf.add(
        example_outcomes("classify", logits_for([0, 1, 0], 3), {"label": torch.tensor([0, 1, 2])}),
        torch.tensor([12, 3, 7]),
        {"depth": torch.tensor([1.0, 2.0, 3.0]), "gate": 0.5},
        3,
    )
    # batch 2: one example, right, length 12; length 40 is in no bin
    buf.add(
        example_outcomes("classify", logits_for([1, 2], 3), {"label": torch.tensor([1, 0])}),
        torch.tensor([12, 40]),
        {"depth": torch.tensor([2.04, 5.0]), "gate": torch.tensor(0.8)},
        2,
    )
    out = buf.summarize(bins)
    assert out["n"] == 5 and out["acc"] == pytest.approx(3 / 5)
    assert out["majority"] == pytest.approx(2 / 5)  # labels 0 1 2 1 0: 0 and 1 twice each, over both batches
    stats = out["stats"]
    assert stats["gate"] == pytest.approx((0.5 * 3 + 0.8 * 2) / 5)  # per-batch scalars, weighted by batch size
    assert stats["depth"] == pytest.approx((1 + 2 + 3 + 2.04 + 5) / 5)
    assert stats["depth_hist"] == {"1": 1, "2": 2, "3": 1, "5": 1}  # rounded to 0.1: 2.04 -> 2
    assert list(out["by_length"]) == ["1-5", "6-10", "11-15"]  # numeric order, not "11-15" < "6-10"
    assert out["by_length"]["1-5"] == {"n": 1, "acc": 1.0, "token_acc": 1.0, "last_acc": 1.0, "depth": 2.0}
    assert out["by_length"]["6-10"] == {"n": 1, "acc": 0.0, "token_acc": 0.0, "last_acc": 0.0, "depth": 3.0}
    eleven = out["by_length"]["11-15"]  # lengths 12 (right, depth 1) and 12 (right, depth 2.04)
    assert eleven["n"] == 2 and eleven["acc"] == 1.0 and eleven["depth"] == pytest.approx(1.52)


def test_majority_share_counts_every_rank_s_examples(monkeypatch):
    """Under DDP each rank scores a shard (examples rank, rank + world, ...); the majority share is
    counted after the shards are gathered: labels 0 1 0 1 1 -> 3/5, where rank 0's shard alone
    (examples 0, 2, 4: labels 0 0 1) would say 2/3."""
    import torch.distributed as dist

    from bench.runner.module import gather_buffers

    labels = [0, 1, 0, 1, 1]
    shards = []
    for rank in (0, 1):
        index = torch.arange(rank, 5, 2)
        buf = OutcomeBuffer()
        batch = {"label": torch.tensor([labels[i] for i in index])}
        buf.add(example_outcomes("classify", logits_for([0] * len(index), 2), batch), torch.ones(len(index)), {}, len(index))
        buf.parts["index"].append(index)
        shards.append(buf)
    sent = [({k: torch.cat(v) for k, v in b.parts.items()}, dict(b.scalar_stats)) for b in shards]
    monkeypatch.setattr(dist, "all_gather_object", lambda everyone, mine: everyone.__setitem__(slice(None), [{0: s} for s in sent]))
    assert shards[0].summarize(lambda n: None)["majority"] == pytest.approx(2 / 3)
    out = gather_buffers({0: shards[0]}, world_size=2)[0].summarize(lambda n: None)
    assert out["n"] == 5 and out["majority"] == pytest.approx(3 / 5) and out["acc"] == pytest.approx(2 / 5)  # always 0


def test_token_chance_is_the_accuracy_of_always_guessing_the_split_s_most_frequent_target():
    """Scored targets 7 7 | 5 7 | 5 5 5 (IGNORE skipped): 5 four times, 7 three times ->
    guess 5, 4 of 7 right. Per length bin the same guess: bin "short" (lengths 2, 3: targets 7 7 5 7)
    1 of 4; bin "long" (length 4: 5 5 5) 3 of 3; an unbinned example counts only in the split."""
    columns = {"tokens": [[1, 2], [1, 2, 3], [1, 2, 3, 4], [1] * 9], "targets": [[7, 7], [IGNORE, 5, 7], [5, 5, IGNORE, 5], [IGNORE] * 9]}
    bins = {2: "short", 3: "short", 4: "long"}
    metrics = {"n": 4, "acc": 0.5, "by_length": {"short": {"n": 2, "token_acc": 0.5}, "long": {"n": 1, "token_acc": 1.0}}}
    out = with_token_chance(metrics, "lm", columns, bins.get)
    assert out["token_majority"] == pytest.approx(4 / 7)
    # last scored targets 7, 7, 5 (the fourth example has none): guess 7, 2 of 3; per bin 7 7 -> 2/2, 5 -> 0/1
    assert out["last_majority"] == pytest.approx(2 / 3)
    assert out["by_length"]["short"] == {"n": 2, "token_acc": 0.5, "token_majority": pytest.approx(1 / 4), "last_majority": 1.0}
    assert out["by_length"]["long"]["token_majority"] == 1.0 and out["by_length"]["long"]["last_majority"] == 0.0
    assert out["acc"] == 0.5 and "token_majority" not in metrics  # the rest kept, the input untouched
    assert with_token_chance({"n": 1}, "classify", {"tokens": [[1]], "label": [0]}, bins.get) == {"n": 1}  # labels: ``majority``


def test_tag_token_chance_guesses_the_split_s_most_frequent_label_vector():
    """A tag position is right iff its whole label vector is, so chance guesses the most frequent
    vector: positions [0,1] [1,0] | [0,1] [0,1] [1,1] | [0,1]: [0,1] four times of six -> 4/6;
    last vectors [1,0], [1,1], [0,1]: each once -> 1/3."""
    columns = {"tokens": [[1, 2], [1, 2, 3], [1]], "labels": [[[0, 1], [1, 0]], [[0, 1], [0, 1], [1, 1]], [[0, 1]]]}
    out = with_token_chance({"n": 3, "token_acc": 0.5}, "tag", columns, lambda n: None)
    assert out == {"n": 3, "token_acc": 0.5, "token_majority": pytest.approx(4 / 6), "last_majority": pytest.approx(1 / 3)}


def test_bin_labels_sort_by_their_first_number():
    labels = [">2000", "1001-2000", "T1024", "T512", "ops12", "ops7", "none"]
    assert [_bin_start(x) for x in labels] == [2000, 1001, 1024, 512, 12, 7, math.inf]
    assert sorted(labels, key=_bin_start) == ["ops7", "ops12", "T512", "1001-2000", "T1024", ">2000", "none"]


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown task kind"):
        example_outcomes("regress", torch.zeros(1, 2), {})
