"""Per-example outcomes -> split metrics, per-length metrics and backbone statistics.

A split's metrics: ``n`` (examples), ``acc``, ``token_acc``, ``last_acc``; for kinds with one
class label per example (classify, pair_classify) also ``majority``: the share of the split's
examples whose label is its most frequent label (the accuracy of always guessing that label),
counted over every example evaluated, on all ranks (outcomes are gathered before summarizing)."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from bench.tasks.kinds import kind_of, tag_positions_ok  # noqa: F401 - tag_positions_ok: importable from here


def example_outcomes(kind: str, logits: torch.Tensor, batch: dict) -> dict:
    """Per-example correctness for one batch (the kind's ``outcomes``). Returns 1-D tensors of length B."""
    return kind_of(kind).outcomes(logits, batch)


class OutcomeBuffer:
    """Collects per-example outcomes and statistics over an evaluation pass."""

    def __init__(self):
        self.parts: dict[str, list] = defaultdict(list)
        self.scalar_stats: dict[str, list] = defaultdict(list)

    def add(self, outcomes: dict, lengths: torch.Tensor, stats: dict, batch_size: int) -> None:
        for k, v in outcomes.items():
            self.parts[k].append(v.detach().float().cpu())
        self.parts["length"].append(lengths.detach().cpu())
        for name, value in (stats or {}).items():
            if torch.is_tensor(value) and value.dim() == 1 and value.shape[0] == batch_size:
                self.parts["stat:" + name].append(value.detach().float().cpu())
            else:
                self.scalar_stats[name].append((float(value), batch_size))

    def summarize(self, length_bin) -> dict:
        if not self.parts:
            return {}
        cat = {k: torch.cat(v).numpy() for k, v in self.parts.items()}
        out = {"n": int(len(cat["correct"])), **_rates(cat, np.arange(len(cat["correct"])))}
        if "label" in cat:  # one class label per example: the share of the most frequent one (always guessing it)
            out["majority"] = float(np.unique(cat["label"], return_counts=True)[1].max() / len(cat["label"]))
        stats = {}
        for name, vals in self.scalar_stats.items():
            w = sum(b for _, b in vals)
            stats[name] = sum(v * b for v, b in vals) / max(w, 1)
        per_example_stats = [k for k in cat if k.startswith("stat:")]
        for key in per_example_stats:
            vals = cat[key]
            name = key[5:]
            stats[name] = float(vals.mean())
            hist_vals, counts = np.unique(np.round(vals, 1), return_counts=True)
            stats[name + "_hist"] = {f"{v:g}": int(c) for v, c in zip(hist_vals, counts)}
        if stats:
            out["stats"] = stats
        bins: dict[str, list[int]] = defaultdict(list)
        for i, length in enumerate(cat["length"]):
            label = length_bin(int(length))
            if label is not None:
                bins[label].append(i)
        if bins:
            by_length = {}
            for label, idx in bins.items():
                idx = np.asarray(idx)
                entry = {"n": int(len(idx)), **_rates(cat, idx)}
                for key in per_example_stats:
                    entry[key[5:]] = float(cat[key][idx].mean())
                by_length[label] = entry
            out["by_length"] = dict(sorted(by_length.items(), key=lambda kv: _bin_start(kv[0])))
        return out


def _rates(cat: dict, idx: np.ndarray) -> dict:
    """acc, token_acc and last_acc of the examples ``idx``. Examples without a scored position
    (an LM sequence whose targets are all IGNORE) count in none of them; a metric with nothing
    to score is NaN (shown as missing), never 0 or 1."""
    n_scored = cat["n_scored"][idx]
    scored = n_scored > 0
    last = cat["last_correct"][idx][scored]
    return {
        "acc": float(cat["correct"][idx][scored].mean()) if scored.any() else float("nan"),
        "token_acc": float(cat["tok_correct"][idx].sum() / n_scored.sum()) if scored.any() else float("nan"),
        "last_acc": float(np.nanmean(last)) if not np.isnan(last).all() else float("nan"),
    }


def _bin_start(label: str) -> float:
    digits = ""
    for ch in label:
        if ch.isdigit():
            digits += ch
        elif digits:
            break
    return float(digits) if digits else float("inf")
