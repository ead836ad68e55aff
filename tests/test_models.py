"""Every registry model: forward and backward on every task (smoke preset), causality for every
causal model, padding for every bidirectional one. Conformance checks, parametrised over the
registry by what the classes declare (tests/conformance.py), so a new entry is tested the moment it
is added. A pair is refused only where the classes declare it (a task that needs a causal model, a
model without a causal mode): the refusal is checked; any other refusal fails."""

import functools

import pytest
import torch
from conformance import MODELS, REG, TASKS, model_class, task_class

import bench
from bench.data import SplitData, collate, load_split
from bench.errors import Incompatible, UserError
from bench.runner.module import Head, forward_batch, task_loss
from bench.tasks.base import TaskError


@functools.cache
def smoke_batch(task_name: str):
    """A batch of 4 training examples of the task's smoke preset, or None if the task reads the user's
    files (it declares ``reads_user_files``) and they are not here."""
    try:
        task = bench.build_task(task_name, preset="smoke")
        data = SplitData(load_split(task, "train"))
    except (UserError, TaskError):
        if task_class(task_name).reads_user_files:
            return None, None  # e.g. LRA files the user has to supply
        raise
    return task, crop(collate([data[i] for i in range(min(4, len(data)))]))


def crop(batch: dict, max_len: int = 96) -> dict:
    """Keep the first max_len positions: forward/backward on LRA-length inputs only adds time here
    (long inputs are exercised by the tasks' own tests and the causality tests)."""
    return {k: v[:, :max_len] if v.dim() >= 2 else v for k, v in batch.items()}


def declared_refusal(model_name: str, task_name: str) -> bool:
    """Whether the classes declare the pair impossible: the task needs a causal model and the model has no causal mode."""
    return bool(task_class(task_name).requires_causal) and not model_class(model_name).supports_causal


@pytest.mark.conformance(family="model_name", task="task_name")
@pytest.mark.parametrize("task_name", TASKS)
@pytest.mark.parametrize("model_name", MODELS)
def test_forward_backward_on_every_task(model_name, task_name):
    if declared_refusal(model_name, task_name):
        with pytest.raises(Incompatible):
            bench.build_model(model_name, task=task_name, preset="smoke")
        return
    task, batch = smoke_batch(task_name)
    if task is None:
        pytest.skip(f"{task_name}: reads the user's files, and none are supplied")
    torch.manual_seed(0)
    backbone = bench.build_model(model_name, task=task_name, preset="smoke")  # any refusal here fails
    head = Head(task.kind, backbone.d_model, task.vocab_size, task.num_classes, task.num_labels)
    logits, aux, stats = forward_batch(backbone, head, batch)
    loss = task_loss(task.kind, logits, batch) + aux
    assert torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in backbone.parameters() if p.requires_grad]
    assert any(g is not None and g.abs().sum() > 0 for g in grads), "no gradient reached the backbone"
    assert isinstance(stats, dict)


CAUSAL_MODELS = [m for m in MODELS if model_class(m).supports_causal]


@pytest.mark.conformance(family="model_name")
@pytest.mark.parametrize("model_name", CAUSAL_MODELS)
@pytest.mark.parametrize("seq_len", [13, 40])
def test_causal_models_never_see_the_future(model_name, seq_len):
    """Changing token t' must leave every output at positions < t' unchanged (eval mode)."""
    torch.manual_seed(0)
    model = bench.build_model(model_name, vocab_size=12, causal=True, preset="smoke", **_small(model_name))
    model.eval()
    tokens = torch.randint(1, 12, (2, seq_len))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    with torch.no_grad():
        base = model(tokens, mask).hidden
        for t in (seq_len // 3, seq_len - 1):
            changed = tokens.clone()
            changed[:, t:] = (changed[:, t:] % 11) + 1  # different tokens from t on
            out = model(changed, mask).hidden
            torch.testing.assert_close(out[:, :t], base[:, :t], atol=1e-5, rtol=1e-4)
            assert not torch.allclose(out[:, t], base[:, t], atol=1e-5), "perturbing position t had no effect at t"


def _small(model_name):
    """Tiny sizes for whichever of these parameters the model accepts."""
    from bench.registry import constructor_params

    accepted = constructor_params(model_class(model_name))
    n_heads = REG.model_entry(model_name)["params"].get("n_heads", accepted.get("n_heads", 4))
    want = {"d_model": 8 * n_heads, "d_ff": 64, "dropout": 0.0}  # d_model divisible by any head count
    return {k: v for k, v in want.items() if k in accepted}


@pytest.mark.conformance(family="model_name")
@pytest.mark.parametrize("model_name", [m for m in MODELS if model_class(m).supports_bidirectional])
def test_padding_does_not_change_real_positions(model_name):
    """Extra right padding must not change the outputs at real positions (non-causal mode)."""
    torch.manual_seed(0)
    model = bench.build_model(model_name, vocab_size=12, causal=False, preset="smoke", **_small(model_name))
    model.eval()
    tokens = torch.randint(1, 12, (2, 10))
    padded = torch.cat([tokens, torch.zeros(2, 6, dtype=torch.long)], dim=1)
    mask = padded != 0
    with torch.no_grad():
        a = model(tokens, torch.ones_like(tokens, dtype=torch.bool)).hidden
        b = model(padded, mask).hidden[:, :10]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
