"""The streaming path of a finished run: greedy generation and streamed evaluation.

Both rebuild the run from its record (``runner.evaluate.rebuild_run``), load its tested
checkpoint, and feed tokens through the backbone's ``init_state`` / ``step`` (``bench/models/base.py``)
instead of ``forward``:

* ``generate(record, prompt, tokens)``: LM tasks (copy, flip-flop). The prompt is symbols of the
  task's vocabulary; it is fed in one step, then each greedy (argmax) token in its own step.
* ``stream_evaluate(record)`` (``bench eval RECORD --stream``): every split of ``bench eval``
  scored through ``step``. Streams have no padding, so the sequences of a batch are grouped by
  length and each group is streamed token by token; the padded hidden states then go through the
  same head and metrics as the batched evaluation, which they must reproduce.

Nothing here imports Lightning at module import (``bench.generate`` is exposed by the package).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch
from torch import Tensor

from .errors import UserError
from .metrics import OutcomeBuffer, example_outcomes, write_outcomes
from .models.base import BackboneOutput
from .records import eval_folder, outcomes_file, overrides_tag, write_json_atomic
from .registry import Registry

log = logging.getLogger(__name__)


def load_tested(record: str | Path, data_overrides: list[str], registry, device: str | None = None):
    """(record dict, task, data, TaskModule with the tested weights, in eval mode, on ``device``)."""
    from .runner.evaluate import rebuild_run

    rec, ckpt, task, data, module = rebuild_run(Path(record), data_overrides, registry)
    checkpoint = torch.load(ckpt, map_location="cpu", weights_only=True)  # tensors, ints and strings only (callbacks.py)
    module.load_state_dict(checkpoint["state_dict"])
    module.to(device or "cpu").eval()
    if not module.backbone.supports_streaming or not module.backbone.causal:
        raise UserError(f"{rec['model']} cannot stream here: {module.backbone.streaming_refusal()}")
    return rec, task, data, module


class StreamedBackbone:
    """Called like a backbone, ``(tokens (B, T), mask (B, T)) -> BackboneOutput``, but computed by
    streaming: the rows of each real length together (batch of equal lengths, no padding), one
    token per ``step``. Padded positions of the result are zeros, never read (masked metrics)."""

    def __init__(self, backbone, piece: int = 1):
        self.backbone, self.piece = backbone, piece

    def __call__(self, tokens: Tensor, mask: Tensor | None = None):
        B, T = tokens.shape
        lengths = torch.full((B,), T) if mask is None else mask.long().sum(-1).cpu()
        hidden = tokens.new_zeros(B, T, self.backbone.d_model, dtype=torch.float32)
        pooled = None
        for length in lengths.unique().tolist():
            rows = (lengths == length).nonzero().squeeze(1).to(tokens.device)
            state = self.backbone.init_state(len(rows), tokens.device)
            for start in range(0, max(int(length), 1), self.piece):
                out, state = self.backbone.step(tokens[rows, start : start + self.piece], state)
                hidden = hidden.to(out.hidden.dtype)
                hidden[rows, start : start + out.hidden.shape[1]] = out.hidden
            if out.pooled is not None:  # a model's own summary after its last token
                pooled = out.pooled.new_zeros(B, out.pooled.shape[-1]) if pooled is None else pooled
                pooled[rows] = out.pooled
        return BackboneOutput(hidden=hidden, aux_loss=hidden.new_zeros(()), pooled=pooled)


@torch.no_grad()
def stream_evaluate(
    record: str | Path, data_overrides: list[str], registry, device: str | None = None, out: str | Path | None = None
) -> dict:
    """``bench eval RECORD --stream``: the metrics of every split (val and the test splits),
    computed through the streaming path. Written beside the record as eval-stream[-tag].json,
    the per-example outcomes as eval-stream[-tag]-outcomes.npz."""
    from .runner.module import forward_batch

    rec, task, data, module = load_tested(record, data_overrides, registry, device)
    streamed = StreamedBackbone(module.backbone)
    splits = ["val", *task.test_splits()]
    metrics, outcomes = {}, {}
    for split in splits:
        buf = OutcomeBuffer()
        for batch in data.eval_loader(split):
            batch = {k: v.to(module.device) if torch.is_tensor(v) else v for k, v in batch.items()}
            logits, _, _ = forward_batch(streamed, module.head, batch)
            buf.add(example_outcomes(task.kind, logits, batch), batch["length"], {}, batch["tokens"].shape[0], index=batch["index"])
        metrics[split], outcomes[split] = data.with_chance(split, buf.summarize(task.length_bin)), buf.arrays()
    tag = overrides_tag(data_overrides)
    written = eval_folder(Path(record), out) / (f"eval-stream-{tag}.json" if tag else "eval-stream.json")
    result = {
        **rec,
        "metrics": metrics,
        "test_splits": splits[1:],
        "evaluated_with": data_overrides,
        "streamed": True,
        "outcomes": outcomes_file(written, evaluation=True).name,
    }
    write_outcomes(outcomes_file(written, evaluation=True), outcomes)
    write_json_atomic(written, result)
    return {"record": result, "path": str(written)}


#: bytes one generated token takes until it is printed (its id, its symbol, the output line)
BYTES_PER_OUTPUT_TOKEN = 100
#: a progress line this often while generating
PROGRESS_EVERY_S = 30.0


def check_generation_fits(params: dict, prompt: int, tokens: int) -> None:
    """Refuse, before decoding, ``tokens`` whose output (and, for attention models, the keys and
    values every layer keeps for each position) would not fit in memory; note long decoding."""
    from .sizes import CPU_MACS_PER_S, check_fits, duration, forward_cost

    total = prompt + tokens
    d, layers = params.get("d_model") or 128, params.get("n_layers") or 1
    cache = total * layers * 2 * d * 4 if params.get("n_heads") else 0
    check_fits(f"generating {tokens:,} tokens", tokens * BYTES_PER_OUTPUT_TOKEN + cache, "lower --tokens")
    _, macs = forward_cost(params, 1, 1, training=False)
    attention = total * total * layers * d if params.get("n_heads") else 0  # each new token reads every earlier one
    work = macs * total + attention
    if work / CPU_MACS_PER_S > 60:
        log.info(
            f"bench: note: generating {tokens:,} tokens takes about {duration(work)} on one CPU core (rough); "
            f"a progress line every {PROGRESS_EVERY_S:.0f}s"
        )


def parse_prompt(prompt: str | list[str], vocab: list[str]) -> list[int]:
    """Space-separated symbols (or a list of them) of the task's vocabulary -> token ids."""
    symbols = prompt.split() if isinstance(prompt, str) else list(prompt)
    if not symbols:
        raise UserError(f"the prompt is empty; give space-separated symbols of the task's vocabulary: {' '.join(vocab)}")
    index = {s: i for i, s in enumerate(vocab)}
    unknown = [s for s in symbols if s not in index]
    if unknown:
        raise UserError(f"prompt symbol {unknown[0]!r} is not in the task's vocabulary; use: {' '.join(vocab)}")
    return [index[s] for s in symbols]


@torch.no_grad()
def generate(record: str | Path, prompt: str | list[str], tokens: int, registry=None, device: str | None = None) -> dict:
    """Greedy decoding from a finished LM run's tested checkpoint through the streaming path:
    {"prompt": [...symbols], "generated": [...symbols]} (``tokens`` new symbols)."""
    registry = registry or Registry()
    if tokens < 0:
        raise UserError(f"--tokens must be >= 0, got {tokens}")
    rec, task, _, module = load_tested(record, [], registry, device)
    if task.kind != "lm":
        raise UserError(f"bench generate decodes LM tasks (copy, flip-flop); {rec['task']} is a {task.kind} task")
    ids = parse_prompt(prompt, task.vocab)
    check_generation_fits(rec["config"]["model"]["params"], len(ids), tokens)
    backbone, head = module.backbone, module.head
    state = backbone.init_state(1, module.device)
    step_in = torch.tensor([ids], device=module.device)  # (1, prompt length): the prompt in one step
    out = []
    last_note = time.monotonic()
    for _ in range(tokens):
        if time.monotonic() - last_note > PROGRESS_EVERY_S:
            log.info(f"bench: generated {len(out):,} of {tokens:,} tokens")
            last_note = time.monotonic()
        hidden, state = backbone.step(step_in, state)
        nxt = int(head.out(hidden.hidden[:, -1]).argmax(-1))  # the LM head on the last position
        out.append(nxt)
        step_in = torch.tensor([[nxt]], device=module.device)
    return {"prompt": [task.vocab[i] for i in ids], "generated": [task.vocab[i] for i in out], "record": str(record)}
