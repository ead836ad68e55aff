"""Shared by the bench tune tests (``tests/test_tune*.py``): the smoke study's task, where a trial's
record lies, and the Optuna studies of a study folder."""

from pathlib import Path

import optuna

from bench.config import canonical_text
from bench.records import record_path

# flip-flop at its smoke preset learns something in an epoch or two (validation token_acc ~ 0.5-0.9)
TASK = ["--task", "flipflop", "--preset", "smoke"]


def trial_record(out: Path, model: str, lr: float, sets=("train.max_epochs=1",)) -> Path:
    return record_path(out, model, "flipflop", "smoke", 0, [*sets, f"train.lr={canonical_text(lr)}"])


def studies(out: Path, name: str = "flipflop-smoke") -> dict:
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / "studies" / name / "journal.log")))
    return {s.study_name: optuna.load_study(study_name=s.study_name, storage=storage) for s in optuna.get_all_study_summaries(storage)}


def without_chance(monkeypatch) -> None:
    """The validation's chance level unknown to the study (none from the split, none from the
    records): flip-flop's smoke runs stay under its trivial level (repeating the previous token
    scores 78% of the last reads), where the protocol would pass every rung and pick nothing; the
    tests of the study's plumbing turn those rules off (tests/test_tune_protocol.py checks them)."""
    import bench.tune.sync
    import bench.tune.validation

    monkeypatch.setattr(bench.tune.sync, "validation_chance", lambda registry, meta, model: None)
    monkeypatch.setattr(bench.tune.validation, "record_chance", lambda out, record, objective: None)
