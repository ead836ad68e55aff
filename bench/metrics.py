"""Per-example outcomes -> split metrics, per-length metrics and backbone statistics.

A split's metrics: ``n`` (examples), ``acc``, ``token_acc``, ``last_acc``; for kinds with one
class label per example (classify, pair_classify) also ``majority``: the share of the split's
examples whose label is its most frequent label (the accuracy of always guessing that label),
counted over every example evaluated, on all ranks (outcomes are gathered before summarizing), and
``predicted_classes``: how many distinct classes the model predicted on the split (1: collapsed);
for kinds with token targets (lm; tag, a position's target its whole label vector)
``token_majority`` (``with_token_chance``): the share of the split's scored positions whose target
is its most frequent target (the ``token_acc`` of always guessing that target), and
``last_majority``: the share of examples whose last scored target is the most frequent one (the
``last_acc`` of always guessing it), in the split's metrics and, for those same guesses, in each
length bin.

Rates are exact ratios of whole counts (acc = right examples / scored examples, token_acc =
right positions / scored positions, in float64), so the per-example outcomes kept beside a record
(``arrays``; read back by ``bench.load_outcomes``) give the record's numbers again to the last bit."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from bench.tasks.kinds import kind_of

from .errors import UserError
from .records import Record, RecordError, outcomes_file, run_folder, write_atomic

#: the per-example arrays kept for every split (``OutcomeBuffer.arrays``, ``bench.load_outcomes``)
OUTCOME_FIELDS = ("index", "correct", "token_correct", "tokens", "length")
#: kept beside them by runs made since: whether the last scored target is right (1 / 0; -1: no scored target)
LAST_CORRECT = "last_correct"


def smallest_int(values: np.ndarray) -> np.ndarray:
    """Whole numbers in the smallest signed integer type that holds them (signed: differences
    of two arrays stay right)."""
    values = np.asarray(values)
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if values.size == 0 or (values.min() >= info.min and values.max() <= info.max):
            return values.astype(dtype)
    return values.astype(np.int64)


def example_outcomes(kind: str, logits: torch.Tensor, batch: dict) -> dict:
    """Per-example correctness for one batch (the kind's ``outcomes``). Returns 1-D tensors of length B."""
    return kind_of(kind).outcomes(logits, batch)


class OutcomeBuffer:
    """Collects per-example outcomes and statistics over an evaluation pass."""

    def __init__(self):
        self.parts: dict[str, list] = defaultdict(list)
        self.scalar_stats: dict[str, list] = defaultdict(list)

    def add(self, outcomes: dict, lengths: torch.Tensor, stats: dict, batch_size: int, index: torch.Tensor | None = None) -> None:
        """One batch: the kind's ``outcomes``, the examples' lengths, the backbone's statistics and
        the examples' ``index`` in their split's dataset (the batch's ``index`` column)."""
        for k, v in outcomes.items():
            self.parts[k].append(v.detach().float().cpu())
        self.parts["length"].append(lengths.detach().cpu())
        if index is not None:
            self.parts["index"].append(index.detach().cpu())
        for name, value in (stats or {}).items():
            if torch.is_tensor(value) and value.dim() == 1 and value.shape[0] == batch_size:
                self.parts["stat:" + name].append(value.detach().float().cpu())
            else:
                self.scalar_stats[name].append((float(value), batch_size))

    def arrays(self) -> dict[str, np.ndarray]:
        """The split's per-example outcomes as kept beside a record (``OUTCOME_FIELDS``), in the
        order evaluated (by example index once gathered), each in the smallest signed integer type
        that holds it: ``index`` (the example's index in the split's dataset; 0, 1, ... when the
        batches carried none), ``correct`` (0/1, as ``acc`` counts it), ``token_correct`` and
        ``tokens`` (scored positions right / scored; one per example for classification kinds),
        ``length``, and ``last_correct`` (LAST_CORRECT: the last scored position right, 1 / 0, -1
        without one: what ``last_acc`` averages). An example with no scored position (``tokens``
        0) counts in no rate."""
        if not self.parts:
            return {}
        cat = {k: torch.cat(v).numpy() for k, v in self.parts.items()}
        n = len(cat["correct"])
        last = cat["last_correct"]
        columns = {
            "index": cat["index"] if "index" in cat else np.arange(n),
            "correct": cat["correct"] * (cat["n_scored"] > 0),
            "token_correct": cat["tok_correct"],
            "tokens": cat["n_scored"],
            "length": cat["length"],
            LAST_CORRECT: np.where(np.isnan(last) | (cat["n_scored"] == 0), -1, last),
        }
        return {name: smallest_int(columns[name]) for name in (*OUTCOME_FIELDS, LAST_CORRECT)}

    def summarize(self, length_bin) -> dict:
        if not self.parts:
            return {}
        cat = {k: torch.cat(v).numpy() for k, v in self.parts.items()}
        out = {"n": int(len(cat["correct"])), **_rates(cat, np.arange(len(cat["correct"])))}
        if "label" in cat:  # one class label per example: the share of the most frequent one (always guessing it)
            out["majority"] = float(np.unique(cat["label"], return_counts=True)[1].max() / len(cat["label"]))
        if "prediction" in cat:  # how many classes the model predicts (1: it collapsed to one class)
            out["predicted_classes"] = int(len(np.unique(cat["prediction"])))
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


def with_token_chance(split_metrics: dict, kind: str, columns: dict, length_bin) -> dict:
    """``split_metrics`` of a split whose every example was evaluated, with ``token_majority``:
    the ``token_acc`` of always guessing the split's most frequent target token, and
    ``last_majority``: the ``last_acc`` of always guessing the most frequent last scored target
    (flip-flop's last read: the majority share of the last read's target), in the split's metrics
    and in each of its per-length bins (the same guesses: the bins' values are those guesses'
    scores, so their mean is their length-averaged accuracy). Counted from the split's data
    (``columns``, as bench/data.py:SplitData holds them; an example's length is its ``length``
    column, else its number of tokens, as batches count it). Unchanged for kinds without token
    targets."""
    targets = kind_of(kind).scored_targets(columns)
    if targets is None:
        return split_metrics
    flat = np.concatenate([np.asarray(t).ravel() for t in targets]) if len(targets) else np.zeros(0)
    if flat.size == 0:
        return dict(split_metrics, token_majority=float("nan"), last_majority=float("nan"))
    values, counts = np.unique(flat, return_counts=True)
    guess = values[counts.argmax()]
    last = np.array([np.asarray(t).ravel()[-1] for t in targets if np.asarray(t).size])  # each example's last scored target
    last_values, last_counts = np.unique(last, return_counts=True)
    last_guess = last_values[last_counts.argmax()]
    out = dict(split_metrics, token_majority=float(counts.max() / flat.size), last_majority=float(last_counts.max() / last.size))
    if out.get("by_length"):
        lengths = columns["length"] if "length" in columns else [len(t) for t in columns["tokens"]]
        right: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # bin -> [guesses right, scored tokens, last right, lasts]
        for example_targets, length in zip(targets, lengths):
            label = length_bin(int(length))
            example_targets = np.asarray(example_targets).ravel()
            if label is not None:
                right[label][0] += int((example_targets == guess).sum())
                right[label][1] += int(example_targets.size)
                if example_targets.size:
                    right[label][2] += int(example_targets[-1] == last_guess)
                    right[label][3] += 1

        def share(right_count: int, total: int) -> float:
            return right_count / total if total else float("nan")

        out["by_length"] = {
            label: dict(entry, token_majority=share(*right[label][:2]), last_majority=share(*right[label][2:]))
            for label, entry in out["by_length"].items()
        }
    return out


def write_outcomes(path: Path, splits: dict[str, dict[str, np.ndarray]]) -> None:
    """One compressed ``.npz`` holding every split's ``OutcomeBuffer.arrays`` (``<split>/<field>``),
    written by rename."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{f"{split}/{name}": values for split, arrays in splits.items() for name, values in arrays.items()})
    write_atomic(path, buffer.getvalue())


def load_outcomes(record: str | Path, eval: str | None = None) -> dict[str, dict[str, np.ndarray]]:
    """The per-example outcomes of a finished run's test phase, ``{split: {"index", "correct",
    "token_correct", "tokens", "length"}}`` for val and every test split (``OutcomeBuffer.arrays``
    says what each holds), read from the run folder beside ``record`` (a run's JSON).

    ``eval`` names one of the run's evaluations instead, by its JSON's name in the run folder
    ("eval", "eval-stream", "eval-<tag>"); giving that JSON's path as ``record`` does the same.
    Per split, ``correct[tokens > 0].mean()`` is the record's ``acc`` and ``token_correct.sum() /
    tokens.sum()`` its ``token_acc``, exactly (every example of the built-in tasks has
    ``tokens > 0``, so ``correct.mean()`` is ``acc``). ``index`` is the example's index in the
    split's dataset, the same for every model and seed evaluated on the same data. A record
    without outcomes (made before they were kept) or whose file is missing: one UserError line."""
    path = run_folder(Path(record)) / f"{eval}.json" if eval else Path(record)
    try:
        rec = Record.read(path, required=("model", "task")).data
    except FileNotFoundError:
        raise UserError(
            f"record {str(path)!r} not found; give the path of a run's .json under OUT/runs"
            + (" and the name of one of its evaluations (eval, eval-stream, eval-<tag>)" if eval else "")
        ) from None
    except RecordError as exc:
        raise UserError(f"record {str(path)!r} cannot be read ({exc.problem})") from None
    if rec["status"] != "ok":
        raise UserError(f"record {str(path)!r} has status {rec['status']!r}; only finished runs have outcomes")
    evaluation = "evaluated_with" in rec
    if "outcomes" not in rec:
        raise UserError(
            f"record {str(path)!r} has no per-example outcomes (records written before outcomes were kept); "
            f"`bench eval {path}` scores its checkpoint again and writes them (then load_outcomes(record, eval='eval'))"
        )
    file = outcomes_file(path, evaluation)
    if not file.is_file():
        raise UserError(
            f"the outcomes file {str(file)!r} of record {str(path)!r} is missing (a copy made without it?); "
            f"`bench eval` writes its evaluation's again"
        )
    again = f"rerun the {'evaluation' if evaluation else 'run (--rerun)'} to write both again"
    out = read_outcomes(file, [s for s in rec["metrics"]], again)
    wrong = [s for s, m in rec["metrics"].items() if s not in out or len(out[s]["correct"]) != m.get("n")]
    if wrong:
        raise UserError(f"the outcomes file {str(file)!r} does not match record {str(path)!r} (split {wrong[0]!r}); {again}")
    for split, metrics in rec["metrics"].items():
        problem = contradiction(out[split], metrics)
        if problem:
            raise UserError(f"the outcomes file {str(file)!r} contradicts record {str(path)!r} (split {split!r}: {problem}); {again}")
    return out


def read_outcomes(file: Path, splits: list[str], again: str) -> dict[str, dict[str, np.ndarray]]:
    """``{split: {field: array}}`` of the splits ``file`` holds, read without unpickling anything
    (``allow_pickle=False``: an array of Python objects is refused); a file that is not a readable
    ``.npz`` of numeric arrays is one UserError line naming it, ``again`` saying what rewrites it."""
    import zipfile

    try:
        with np.load(file, allow_pickle=False) as saved:
            if not hasattr(saved, "files"):
                raise ValueError("one array, not an .npz archive of arrays")
            out = {
                split: {
                    name: np.asarray(saved[f"{split}/{name}"])
                    for name in OUTCOME_FIELDS + ((LAST_CORRECT,) if f"{split}/{LAST_CORRECT}" in saved.files else ())
                }
                for split in splits
                if f"{split}/correct" in saved.files
            }
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "pickle" in text:  # numpy's own words would advise loading it unsafely
            text = "it holds Python objects, which are never unpickled"
        raise UserError(f"the outcomes file {str(file)!r} is damaged or not an outcomes file ({text}); {again}") from None
    for split, arrays in out.items():
        bad = next((name for name, a in arrays.items() if a.dtype.kind not in "biuf"), None)
        if bad:
            raise UserError(
                f"the outcomes file {str(file)!r} is not an outcomes file ({split}/{bad} holds {arrays[bad].dtype} values, "
                f"not numbers); {again}"
            )
    return out


def contradiction(arrays: dict[str, np.ndarray], metrics: dict) -> str | None:
    """What in a split's outcomes disagrees with its record's metrics (``acc`` is
    ``correct[tokens > 0].mean()``, ``token_acc`` is ``token_correct.sum() / tokens.sum()``), or None."""
    scored = arrays["tokens"] > 0
    found = {
        "acc": float(np.mean(arrays["correct"][scored], dtype=np.float64)) if scored.any() else float("nan"),
        "token_acc": float(arrays["token_correct"].sum(dtype=np.float64) / arrays["tokens"].sum(dtype=np.float64))
        if arrays["tokens"].sum()
        else float("nan"),
    }
    for name, value in found.items():
        recorded = metrics.get(name)
        if not isinstance(recorded, (int, float)) or isinstance(recorded, bool) or not np.isfinite(recorded) or not np.isfinite(value):
            continue
        if abs(value - recorded) > 1e-9:  # equal to the last bit in every committed record
            return f"the outcomes give {name} {value:.6g}, the record {recorded:.6g}"
    return None


def _rates(cat: dict, idx: np.ndarray) -> dict:
    """acc, token_acc and last_acc of the examples ``idx``. Examples without a scored position
    (an LM sequence whose targets are all IGNORE) count in none of them; a metric with nothing
    to score is NaN (shown as missing), never 0 or 1."""
    n_scored = cat["n_scored"][idx]
    scored = n_scored > 0
    last = cat["last_correct"][idx][scored]
    return {
        "acc": float(np.mean(cat["correct"][idx][scored], dtype=np.float64)) if scored.any() else float("nan"),
        "token_acc": float(cat["tok_correct"][idx].sum(dtype=np.float64) / n_scored.sum(dtype=np.float64))
        if scored.any()
        else float("nan"),
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
