"""bench/schema.py: one YAML loader with one error format, typed entries with one-line errors;
TrainConfig as the source of the train defaults, choices and domains; Record.from_json."""

import dataclasses
from typing import Literal

import pytest

from bench.config import CHOICES, MODEL_DOMAIN, NOT_IDENTITY, TRAIN_DEFAULTS, TRAIN_DOMAIN, ModelSettings, TrainConfig
from bench.errors import UserError
from bench.records import Record, RecordError
from bench.schema import Schema, load_yaml


def test_one_yaml_error_format_for_files_and_text(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\nb: [2\n")
    with pytest.raises(UserError, match=r"^my file is not valid YAML at line 3, column 1: "):
        load_yaml(path, "my file")
    with pytest.raises(UserError, match=r"cannot be read \(No such file or directory\)"):
        load_yaml(tmp_path / "missing.yaml", "my file")
    assert load_yaml("lr: 3e-4\nn: 0x40\n") == {"lr": 0.0003, "n": 64}  # YAML 1.2 floats


@dataclasses.dataclass
class Entry(Schema):
    name: str
    size: int = 1
    mode: Literal["fast", "slow"] = "fast"
    tags: list[str] | None = None


@pytest.mark.parametrize(
    "data, message",
    [
        ({"name": "a", "sise": 2}, "entry 1: unknown key(s) sise; valid: mode, name, size, tags; did you mean 'size'?"),
        ({"size": 2}, "entry 1: missing 'name'"),
        ({"name": "a", "size": "2"}, "entry 1: size must be int, got '2'"),
        ({"name": "a", "size": True}, "entry 1: size must be int, got True"),
        ({"name": "a", "mode": "medium"}, "entry 1: mode must be one of fast, slow, got 'medium'"),
        ({"name": "a", "tags": [1]}, "entry 1: tags must be a list of str or null, got [1]"),
        (["a"], "entry 1 must be a mapping (name, size, mode, tags), got list"),
    ],
)
def test_typed_entries_refuse_in_one_line(data, message):
    with pytest.raises(UserError) as info:
        Entry.from_mapping(data, "entry 1")
    assert str(info.value) == message


def test_typed_entry_reads_a_good_mapping():
    assert Entry.from_mapping({"name": "a", "tags": ["x"]}, "entry") == Entry("a", 1, "fast", ["x"])


def test_train_views_come_from_the_dataclass():
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(TRAIN_DEFAULTS) == fields and TRAIN_DEFAULTS["lr"] == 1e-3 and TRAIN_DEFAULTS["betas"] == [0.9, 0.999]
    assert CHOICES["schedule"] == ("constant", "linear", "cosine", "inverse_sqrt", "step") and set(CHOICES) == {
        "optimizer",
        "schedule",
        "select",
        "precision",
    }
    assert TRAIN_DOMAIN["batch_size"].text == ">= 1" and not TRAIN_DOMAIN["lr"].ok(0.0)
    assert TrainConfig().betas is not TrainConfig().betas  # a list per instance


def test_identity_and_domains_live_on_the_fields():
    """A setting's identity flag and domain are its field's: the views are derived from them, and
    the settings outside a run's identity are still the six every committed record was tagged
    without (a change here would move records: tests/test_trust.py checks each one's folder)."""
    assert NOT_IDENTITY == {
        "train.num_threads",
        "train.eval_batch_size",
        "train.compile",
        "train.checkpoint_every_min",
        "train.progress_every_min",
        "train.watch_splits",
    }
    flagged = {f.name for f in dataclasses.fields(TrainConfig) if f.metadata.get("identity") is False}
    assert {f"train.{name}" for name in flagged} == NOT_IDENTITY
    assert set(MODEL_DOMAIN) == {f.name for f in dataclasses.fields(ModelSettings)}
    assert not MODEL_DOMAIN["d_model"].ok(0) and MODEL_DOMAIN["mem_len"].ok(0) and not MODEL_DOMAIN["dropout"].ok(1.0)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[1]", "it holds a JSON list, not a record"),
        ('{"status": "ok"}', "it has no metrics"),
        ('{"status": "done", "metrics": {}}', "its status 'done' is none of ok, failed, pruned"),
        ('{"status": "failed", "seed": "0"}', "its 'seed' is a str, not a int"),
    ],
)
def test_record_from_json_says_what_is_wrong(text, problem):
    with pytest.raises(RecordError) as info:
        Record.from_json(text)
    assert info.value.problem == problem and not info.value.unreadable


def test_record_from_json_reads_fields_and_keeps_the_whole_record():
    rec = Record.from_json('{"status": "ok", "metrics": {"test": {"acc": 1.0}}, "seed": 2, "extra": 1}')
    assert (rec.status, rec.seed, rec.metrics["test"]["acc"], rec.data["extra"]) == ("ok", 2, 1.0, 1)
    with pytest.raises(RecordError) as info:
        Record.from_json("{not json")
    assert info.value.unreadable
