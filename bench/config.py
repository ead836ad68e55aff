"""Resolving a run: (model entry, task entry, preset, --set) -> a RunConfig whose every value
knows where it came from (`bench explain` prints them).

Precedence, lowest first; each later source replaces a value (nested dicts merge key by key;
bench/spec.py:layer is the merge, the _resolve_* functions below list each section's sources):
  model:  constructor default, every backbone's default (BACKBONE_SETTINGS: init, dropout_at, faithful)
          < base entry B (the most general base first) < registry entry M
          < preset E.P.model (keys the model class accepts)
          < adapted: what M's class maps from the sizes so far (Backbone.adapt, e.g. RSA kinds from n_heads)
          < preset E.P.family.F (F: M's bases, the most general first, then M itself) < --set model.*
  data:   constructor default < base entry B < registry entry T < preset E.P.data < --set data.*
  train:  TRAIN_DEFAULTS < preset E.P.train
          < preset E.P.family_train.F (F: M's bases, the most general first, then M itself) < --set train.*
where E.P is preset P as written under task T or one of its bases (the most general first).
model.causal: true when the task needs a causal model; else the explicit value (--set or the
registry entry); else true only for a model class without a bidirectional mode.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
from dataclasses import dataclass
from typing import Literal

import yaml

from .errors import Incompatible, UserError
from .registry import (
    BACKBONE_SETTINGS,
    DROPOUT_PLACES,
    FAITHFUL,
    MODEL_INITS,
    REFERENCE_DATA,
    REFERENCE_OPTIONS,
    Registry,
    check_preset,
    constructor_params,
)
from .schema import (
    AT_LEAST_0,
    AT_LEAST_1,
    FRACTION,
    POSITIVE,
    Domain,
    check_domain,
    choices_of,
    defaults_of,
    domains_of,
    not_identity_of,
    parse_yaml,
    setting,
    suggest,
    type_problem,
)
from .spec import BACKBONE_DEFAULT, DEFAULT, ModelSpec, TaskSpec, flat, layer
from .targets import import_model_class, import_target, import_task_class

Optimizer = Literal["adamw", "adam"]
Schedule = Literal["constant", "linear", "cosine", "inverse_sqrt", "step"]
Select = Literal["best_val", "last"]
Precision = Literal["32-true", "16-mixed", "bf16-mixed", "32", "16", "bf16"]


@dataclass
class TrainConfig:
    """The training settings (``train.*``): their types, defaults, choices (``Literal``), the
    values each may take (``Domain``) and whether each is part of a run's identity (``identity``:
    false for those that change how a run executes, not what it learns). A record's ``config.train``
    is ``asdict`` of one, as JSON."""

    optimizer: Optimizer = "adamw"
    lr: float = setting(1e-3, Domain.finite(0, True, "a finite number > 0, e.g. 0.001"))
    weight_decay: float = setting(0.01, AT_LEAST_0)
    betas: list = setting([0.9, 0.999])
    warmup_steps: int = setting(0, AT_LEAST_0)
    schedule: Schedule = "constant"
    step_every_epochs: int = setting(5, AT_LEAST_1)  # schedule=step: multiply lr by step_gamma every N epochs
    step_gamma: float = setting(0.5, POSITIVE)
    batch_size: int = setting(32, AT_LEAST_1)
    eval_batch_size: int = setting(128, AT_LEAST_1, identity=False)
    max_epochs: int = setting(10, AT_LEAST_1)
    max_steps: int = setting(-1, Domain(lambda v: v == -1 or v >= 1, "-1 (no limit) or >= 1"))  # -1: no step limit
    val_every_steps: int = setting(0, AT_LEAST_0)  # 0: validate once per epoch
    patience: int = setting(0, AT_LEAST_0)  # early stopping on the validation metric, in validations; 0: off
    grad_clip: float = setting(1.0, AT_LEAST_0)
    accumulate_grad_batches: int = setting(1, AT_LEAST_1)
    num_threads: int = setting(0, AT_LEAST_0, identity=False)  # 0: min(the CPUs this process may use, $OMP_NUM_THREADS, 8) (bench/cpus.py)
    precision: Precision = "32-true"
    deterministic: bool = True
    select: Select = "best_val"  # best_val: test the best-on-validation weights | last: the final weights
    # the resume checkpoint is also written this often (and at every validation)
    checkpoint_every_min: float = setting(10.0, POSITIVE, identity=False)
    # piped output (stderr not a terminal): a training line this often between validations (0: only at validations)
    progress_every_min: float = setting(0.5, AT_LEAST_0, identity=False)
    compile: bool = setting(False, identity=False)  # torch.compile the backbone
    # test splits also scored at every validation, logged as <split>_<metric>; never selects
    watch_splits: list = setting([], identity=False)

    @classmethod
    def check(cls, given: dict, source: str = "--set") -> None:
        """Each given ``train.*`` value against its field (``check_overrides``)."""
        check_overrides("train", given, TRAIN_DEFAULTS, "training", source)

    @classmethod
    def resolve(cls, values: dict, sources: dict) -> TrainConfig:
        """The layered values, each in its domain (naming where an offending value came from)."""
        check_domains("train", values, sources, TRAIN_DOMAIN)
        return cls(**values)


#: derived views of TrainConfig (the source of truth)
TRAIN_DEFAULTS = defaults_of(TrainConfig)
CHOICES = choices_of(TrainConfig)
TRAIN_DOMAIN = domains_of(TrainConfig)
SECTIONS = ("model", "train", "data")


@dataclass(frozen=True)
class RunConfig:
    """A resolved run: the model, the task, the training settings (typed) and where each
    training value came from."""

    model: ModelSpec
    task: TaskSpec
    train: TrainConfig
    preset: str
    train_sources: dict

    def public(self) -> dict:
        """The config as run records hold it (JSON; the classes and sources left out)."""
        m, t = self.model, self.task
        return copy.deepcopy(
            {
                "model": {"name": m.name, "target": m.target, "params": m.params, "causal": m.causal},
                "task": {
                    "name": t.name,
                    "target": t.target,
                    "params": t.params,
                    "preset": t.preset,
                    "version": t.cls.version,
                },  # the generator's version: a bump means other data
                "train": dataclasses.asdict(self.train),
                "preset": self.preset,
            }
        )

    def explain(self) -> list[tuple[str, str, object, str]]:
        """(section, key, value, source) for every resolved value; section.key is its --set name."""
        m, t = self.model, self.task
        return [
            *(("model", k, v, m.sources[k]) for k, v in flat(m.params).items()),
            ("model", "causal", m.causal, m.sources["causal"]),
            *(("data", k, v, t.sources[k]) for k, v in flat(t.values).items()),
            *(("train", k, v, self.train_sources[k]) for k, v in dataclasses.asdict(self.train).items()),
        ]


@dataclass
class ModelSettings:
    """The model settings several families share (``model.*``) and the values each may take. A
    family takes those its constructor names (bench/registry.py: constructor_params) with its own
    defaults (None here: no common default); every one is part of a run's identity."""

    d_model: int | None = setting(None, AT_LEAST_1)
    n_heads: int | None = setting(None, AT_LEAST_1)
    n_layers: int | None = setting(None, AT_LEAST_1)
    d_ff: int | None = setting(None, AT_LEAST_1)
    dropout: float | None = setting(None, FRACTION)
    attn_dropout: float | None = setting(None, FRACTION)
    max_len: int | None = setting(None, AT_LEAST_1)  # a position table's length
    max_layers: int | None = setting(None, AT_LEAST_1)  # depth recurrence: the bound on iterations
    chunk_size: int | None = setting(None, AT_LEAST_1)
    memory_slots: int | None = setting(None, AT_LEAST_1)
    update_layers: int | None = setting(None, AT_LEAST_1)
    n_chunks: int | None = setting(None, AT_LEAST_0)
    segment_len: int | None = setting(None, AT_LEAST_1)
    mem_len: int | None = setting(None, AT_LEAST_0)
    block_size: int | None = setting(None, AT_LEAST_1)
    n_state: int | None = setting(None, AT_LEAST_1)
    window: int | None = setting(None, AT_LEAST_1)
    rnn_per_layer: int | None = setting(None, AT_LEAST_1)


#: the values each shared model setting may take (derived from ModelSettings)
MODEL_DOMAIN = domains_of(ModelSettings)
#: the dotted settings that change how a run executes, not what it learns (their fields say
#: ``identity=False``): left out of a run's identity, so `bench compare` finds a run whatever
#: threads or evaluation batch it was made with
NOT_IDENTITY = frozenset(
    f"{section}.{name}" for section, cls in (("train", TrainConfig), ("model", ModelSettings)) for name in not_identity_of(cls)
)


PROBABILITY = Domain(lambda v: 0 <= v <= 1, "in [0, 1]")
#: the values the data parameters may take, where their names say what they are (sizes, counts,
#: lengths); a task checks the rest itself (its constructor raises a ValueError)
DATA_DOMAIN = {
    **dict.fromkeys(
        (
            "n_train",
            "n_val",
            "n_test",
            "n_test_iid",
            "n_val_each",
            "min_len",
            "max_len",
            "bin1_max_len",
            "bin_width",
            "n_symbols",
            "pattern_len",
            "train_len",
            "max_length",
            "train_max_ops",
        ),
        AT_LEAST_1,
    ),
    **dict.fromkeys(("data_seed", "n_distractors"), AT_LEAST_0),
    **dict.fromkeys(("train_p_i", "val_fraction"), PROBABILITY),
}
#: data parameters that are lists (of lengths, operator counts, ...), and whose items are sizes
DATA_LISTS = {"test_lengths": AT_LEAST_1, "test_lens": AT_LEAST_1, "test_ops": AT_LEAST_1, "test_p_i": PROBABILITY, "test_splits": None}


def check_data(values: dict, sources: dict) -> None:
    """The data parameters in their domains (DATA_DOMAIN), the list ones lists of sizes: one
    UserError line saying what was expected and where the offending value came from."""
    check_domains("data", values, sources, DATA_DOMAIN)
    for key, item_domain in DATA_LISTS.items():
        value = values.get(key)
        where = f" (from {sources[key]})" if sources.get(key) not in (None, "--set") else ""
        if value is None:
            continue
        if not isinstance(value, list) or not value:
            raise UserError(f"data.{key}={value!r}{where}: expected a non-empty list, e.g. data.{key}=[100,200]")
        for item in value:
            check_domain(f"data.{key} item", item, item_domain, sources.get(key, ""))


def check_domains(section: str, values: dict, sources: dict, domain: dict) -> None:
    """A numeric value outside what its setting may take (lr <= 0, batch_size 0, d_model 0 ...)
    is refused, naming where it came from; every check runs before anything is written."""
    for key, dom in domain.items():
        check_domain(f"{section}.{key}", values.get(key), dom, sources.get(key, ""))


def parse_value(raw: str):
    """The value of one ``--set`` item: YAML (numbers in YAML 1.1 or 1.2 spelling: 3e-4, 1E-3,
    0x40, 1_000), then a Python number spelling YAML does not know (0o17, nan, inf); else the text."""
    if not raw.strip():
        return ""
    try:
        value = parse_yaml(raw)
    except yaml.YAMLError as exc:
        if "too large" in str(exc):
            text = raw.strip()
            raise UserError(f"{text[:12]}... ({len(text)} characters) is too large a number to read") from None
        return raw
    if isinstance(value, str):
        text = value.strip()
        for number in (lambda t: int(t, 0), float):
            try:
                return number(text)
            except ValueError:
                pass
    return value


def parse_overrides(items: list[str] | dict | None) -> dict:
    """['model.d_model=64', 'train.lr=3e-4'] -> {'model': {'d_model': 64}, 'train': {'lr': 0.0003}}"""
    out: dict = {s: {} for s in SECTIONS}
    for key, value in override_pairs(items):
        section, _, rest = key.partition(".")
        if section not in SECTIONS or not rest:
            raise UserError(f"--set key {key!r} must start with one of {', '.join(s + '.' for s in SECTIONS)} (e.g. model.d_model)")
        node = out[section]
        *path, leaf = rest.split(".")
        for p in path:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise UserError(f"--set {key}: {section}.{'.'.join(path)} is given a value and sub-keys; give one of them")
        node[leaf] = value
    return out


def override_pairs(items: list[str] | dict | None) -> list[tuple[str, object]]:
    """--set items as (dotted key, parsed value), in the order given."""
    if not items:
        return []
    if isinstance(items, dict):
        return [(str(k).strip(), v) for k, v in items.items()]
    pairs = []
    for item in items:
        if "=" not in str(item):
            raise UserError(f"--set expects section.key=value (e.g. model.d_model=64), got {item!r}")
        key, _, raw = str(item).partition("=")
        try:
            pairs.append((key.strip(), parse_value(raw)))
        except UserError as exc:
            raise UserError(f"--set {key.strip()}: {exc}; give a value in the setting's range") from None
    return pairs


def canonical_text(value) -> str:
    """One spelling per value, the one YAML reads back to it: 64 (not 0x40 or '= 64'),
    0.0003 (not 3e-4), true, [64,128], sinusoidal. A run's identity is made from it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{canonical_text(k)}: {canonical_text(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))) + "}"
        )
    text = str(value)
    return text if text and parse_value(text) == text and "," not in text else json.dumps(text)


def canonical_overrides(items: list[str] | dict | None) -> list[str]:
    """--set items as 'key=canonical value', the last of each key, sorted: one configuration
    however it was typed (model.d_model=64, model.d_model= 64, model.d_model=0x40)."""
    last = dict(override_pairs(items))
    return sorted(f"{key}={canonical_text(value)}" for key, value in last.items())


def check_overrides(section: str, given: dict, defaults: dict, what: str, source: str = "--set") -> None:
    """Each ``section.key=value`` that ``source`` gives (``--set``, a registry entry, a preset):
    a known key of the right type, one of the choices of a train setting; else one UserError
    line naming the source."""
    for key, value in given.items():
        label = f"--set {section}.{key}" if source == "--set" else f"{source}: {section}.{key}"
        if key not in defaults:
            raise UserError(f"{label}: {what} has no parameter {key!r}; {suggest(key, list(defaults))}")
        default = defaults[key]
        if isinstance(value, dict) and isinstance(default, dict):
            continue  # nested dict params (e.g. rsa) are checked by the model itself
        problem = type_problem(label, value, default)
        if problem:
            raise UserError(problem)
        if key in CHOICES and section == "train" and value not in CHOICES[key]:
            raise UserError(f"{label}={value!r}: choose one of {', '.join(CHOICES[key])}")


def _check_families(registry: Registry, parts: list[tuple[str, dict]], section: str) -> None:
    """Every entry named under a preset's ``section`` (family | family_train) is a model entry."""
    for where, part in parts:
        for fam in part.get(section) or {}:
            if fam not in registry.raw_models:
                raise UserError(f"preset {where}.{section}: {fam!r} is not a model entry; {suggest(fam, registry.model_names())}")


def _entry_layers(entries: dict, lineage: list[str]) -> list[tuple[str, dict | None]]:
    """The params of an entry and its bases, the most general base first."""
    name = lineage[0]
    return [(f"registry entry {e}" if e == name else f"base entry {e}", entries[e].get("params")) for e in reversed(lineage)]


def _task_preset(registry: Registry, task: str, preset: str) -> tuple[dict, list[tuple[str, dict]]]:
    """Task ``task``'s entry, looked up once, and its preset ``preset`` as written: ('E.P', the
    sections E writes) for the task and each base E that writes P, the most general first; refused
    as ``Registry.preset`` refuses a preset the task lacks."""
    entry = registry.task_entry(task)
    check_preset(entry, preset)
    written = [(e, (registry.raw_tasks[e].get("presets") or {}).get(preset)) for e in reversed(entry["lineage"])]
    return entry, [(f"{e}.{preset}", part) for e, part in written if part]


def _family_parts(parts: list[tuple[str, dict]], lineage: list[str], section: str) -> list[tuple[str, dict]]:
    """(source, values) of preset section ``section`` (family | family_train) for the model entry
    of ``lineage``: its bases, the most general first, then the entry itself."""
    return [
        (f"preset {where}.{section}.{fam}", (part.get(section) or {}).get(fam) or {}) for fam in reversed(lineage) for where, part in parts
    ]


def _defaults(accepted: dict) -> dict:
    return {k: v for k, v in accepted.items() if v is not inspect.Parameter.empty}


def resolve_run(registry: Registry, model: str, task: str, preset: str, overrides=None) -> RunConfig:
    """What ``bench run`` runs, in one pass: the task's entry and preset looked up once, then the
    model's entry, and each section layered from them (the precedence above)."""
    ov = parse_overrides(overrides)
    task_entry, parts = _task_preset(registry, task, preset)
    t = _resolve_task(registry, task_entry, preset, parts, ov)
    model_entry = registry.model_entry(model)
    m = _resolve_model(registry, model_entry, t, parts, ov)
    if m.params.get("faithful") == "reference" and not m.cls.reference_start_end:  # the code reads raw tokens
        switch = (f"model.faithful=reference ({m.sources['faithful']})", REFERENCE_DATA)
        t = _resolve_task(registry, task_entry, preset, parts, ov, switch)
    train, train_sources = _resolve_train(registry, model_entry["lineage"], parts, ov)
    return RunConfig(m, t, train, preset, train_sources)


# one section alone, as resolve_run resolves it (building a task or a model, `bench validate`)
def resolve_task(registry: Registry, task: str, preset: str, overrides: dict, switch: tuple[str, dict] | None = None) -> TaskSpec:
    """The data section of task ``task`` under preset ``preset`` (``switch``: ``_resolve_task``)."""
    entry, parts = _task_preset(registry, task, preset)
    return _resolve_task(registry, entry, preset, parts, overrides, switch)


def resolve_model(registry: Registry, model: str, task: TaskSpec | None, overrides: dict) -> ModelSpec:
    """The model's params; with ``task``, its preset's sizes and family overrides apply and its causality."""
    entry = registry.model_entry(model)
    parts = _task_preset(registry, task.name, task.preset)[1] if task is not None else []
    return _resolve_model(registry, entry, task, parts, overrides)


def resolve_train(registry: Registry, model: str, task: TaskSpec, overrides: dict) -> tuple[TrainConfig, dict]:
    """The training settings of model ``model`` under ``task``'s preset."""
    parts = _task_preset(registry, task.name, task.preset)[1]
    return _resolve_train(registry, registry.model_entry(model)["lineage"], parts, overrides)


def _resolve_task(
    registry: Registry, entry: dict, preset: str, parts: list[tuple[str, dict]], overrides: dict, switch: tuple[str, dict] | None = None
) -> TaskSpec:
    """The data section from task entry ``entry`` and its preset's ``parts``. ``switch``: (source,
    data values) layered under --set, where the task takes them (the model's ``faithful=reference``:
    ``resolve_run``)."""
    task = entry["name"]
    cls = import_task_class(entry["target"], f"tasks.{task}")
    accepted = constructor_params(cls, skip=("self",))
    given = overrides.get("data", {})
    written = [
        *_entry_layers(registry.raw_tasks, entry["lineage"]),
        *((f"preset {where}.data", part.get("data")) for where, part in parts),
    ]
    for source, values in written:
        check_overrides("data", values or {}, accepted, f"task {task!r}", source)
    check_overrides("data", given, {**accepted, **entry["params"]}, f"task {task!r}")
    if switch is not None:
        written.append((switch[0], {k: v for k, v in switch[1].items() if k in accepted}))
    values, sources = layer([(DEFAULT, _defaults(accepted)), *written, ("--set", given)])
    for key, default in accepted.items():
        if key not in values and default is inspect.Parameter.empty:
            raise UserError(
                f"task {task!r}: parameter {key!r} has no default; set it in the task's entry (params or a preset's data) or with --set data.{key}=..."
            )
    check_data({k: v for k, v in values.items() if k in accepted}, sources)
    return TaskSpec(task, entry["target"], cls, values, preset, sources)


def _resolve_train(registry: Registry, lineage: list[str], parts: list[tuple[str, dict]], overrides: dict) -> tuple[TrainConfig, dict]:
    """The training settings for the model entry of ``lineage`` under the preset's ``parts``."""
    _check_families(registry, parts, "family_train")
    given = [
        *((f"preset {where}.train", part.get("train") or {}) for where, part in parts),
        *_family_parts(parts, lineage, "family_train"),
        ("--set", overrides.get("train", {})),
    ]
    for source, settings in given:
        TrainConfig.check(settings, source)
    values, sources = layer([("TRAIN_DEFAULTS", TRAIN_DEFAULTS), *given])
    return TrainConfig.resolve(values, sources), sources


def _resolve_model(registry: Registry, entry: dict, task: TaskSpec | None, parts: list[tuple[str, dict]], overrides: dict) -> ModelSpec:
    """The model section from model entry ``entry``, with ``task`` (or None) and its preset's ``parts``."""
    model = entry["name"]
    cls = import_model_class(entry["target"], f"models.{model}")
    own = constructor_params(cls)
    accepted = {**own, **BACKBONE_SETTINGS}
    defaults = [(DEFAULT, _defaults(own)), (BACKBONE_DEFAULT, BACKBONE_SETTINGS)]
    bad = set(entry["params"]) - set(accepted) - {"causal"}
    if bad:
        raise UserError(f"registry model {model!r}: params {', '.join(sorted(bad))} not accepted by {entry['target']}")
    _check_families(registry, parts, "family")
    families = _family_parts(parts, entry["lineage"], "family")
    for where, fam_params in families:
        unknown = set(fam_params) - set(accepted)
        if unknown:
            raise UserError(f"{where}: {', '.join(sorted(unknown))} not accepted by {entry['target']}")
    given = overrides.get("model", {})
    written = [
        *_entry_layers(registry.raw_models, entry["lineage"]),
        *((f"preset {where}.model", {k: v for k, v in (part.get("model") or {}).items() if k in accepted}) for where, part in parts),
        *families,
        ("--set", given),
    ]
    for source, values in written:
        check_overrides("model", {k: v for k, v in (values or {}).items() if k != "causal"}, accepted, f"model {model!r}", source)
    params, sources = layer([*defaults, *written])
    adapted = [(f"adapted to {a.to} by {cls.__name__}", a.values) for a in cls.adapt(params, task.values if task is not None else {})]
    if adapted:  # the family's own values for the generic sizes, under the preset's family values and --set
        written[-1 - len(families) : -1 - len(families)] = adapted
        params, sources = layer([*defaults, *written])
    for key, allowed in (("faithful", FAITHFUL), ("init", MODEL_INITS), ("dropout_at", DROPOUT_PLACES)):
        if params[key] not in allowed:
            raise UserError(f"model.{key}={params[key]!r} ({sources.get(key, DEFAULT)}): choose one of {', '.join(allowed)}")
    if params["faithful"] == "reference":  # the one switch: every reference option the model takes, under --set
        switch = {k: v for k, v in {**REFERENCE_OPTIONS, **cls.reference_options}.items() if k in accepted}
        label = f"model.faithful=reference ({sources['faithful']})"
        params, sources = layer([*defaults, *written[:-1], (label, switch), written[-1]])
    check_domains("model", params, sources, {**MODEL_DOMAIN, **cls.setting_domains})
    _check_mixer_domains(model, params, sources)
    explicit, explicit_source = params.pop("causal", None), sources.pop("causal", None)
    task_cls = task.cls if task is not None else None
    causal = _resolve_causal(model, cls, task_cls, explicit)
    if getattr(task_cls, "requires_causal", None):
        sources["causal"] = f"task {task.name} needs a causal model"
    elif explicit is not None:
        sources["causal"] = explicit_source
    else:
        sources["causal"] = "bidirectional unless set" if cls.supports_bidirectional else f"{cls.__name__} is causal-only"
    return ModelSpec(model, entry["target"], cls, params, causal, sources)


def _check_mixer_domains(model: str, params: dict, sources: dict) -> None:
    """A stack's mixer settings (``model.mixer.params.expand_k``, ``model.mixers.mixer.params.*``: a
    hybrid's layers, bench/models/linear_recurrent.py) in the domains their mixer class declares
    (``setting_domains``) and the shared ones, before anything is built; a spec that is not
    ``{target, params}`` is left to the stack's own one-line refusal."""
    for at in ("mixer", "mixers.mixer"):
        spec = params
        for key in at.split("."):
            spec = spec.get(key) if isinstance(spec, dict) else None
        if not (isinstance(spec, dict) and isinstance(spec.get("target"), str) and isinstance(spec.get("params"), dict)):
            continue
        mixer_cls = import_target(spec["target"], f"model {model!r}: model.{at}.target")
        prefix = f"{at}.params."
        given = {k.removeprefix(prefix): v for k, v in sources.items() if k.startswith(prefix)}
        check_domains(f"model.{at}.params", spec["params"], given, {**MODEL_DOMAIN, **getattr(mixer_cls, "setting_domains", {})})


def _resolve_causal(model: str, cls, task_cls, explicit) -> bool:
    if explicit is not None and not isinstance(explicit, bool):
        raise UserError(f"--set model.causal={explicit!r}: expected true or false")
    requires = getattr(task_cls, "requires_causal", None) if task_cls is not None else None
    if requires and explicit is False:
        raise Incompatible("task needs a causal model (its targets depend only on the prefix), but model.causal=false was set; drop it")
    if requires and not cls.supports_causal:
        raise Incompatible(f"model {model!r} cannot run causally, and the task needs a causal model")
    if explicit is True and not cls.supports_causal:
        raise UserError(f"model {model!r} has no causal mode; drop model.causal=true")
    if explicit is False and not cls.supports_bidirectional:
        raise UserError(f"model {model!r} is causal-only; drop model.causal=false")
    if requires:
        return True
    if explicit is not None:
        return explicit
    return not cls.supports_bidirectional
