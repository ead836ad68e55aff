"""A tuning study on disk, and the worker that runs its trials.

``OUT/studies/<study>/`` holds::

    study.json     what the study tunes: task, preset, models, space, --set, seed, pruner
    journal.log    Optuna's JournalStorage (JournalFileBackend): one Optuna study per model
    workers/       a lock per live worker (a killed worker's lock is free: its trials are stale)
    logs/          each local or SLURM worker's output
    tuned.yaml     the registry overlay written from the best trials (bench/tune/overlay.py)

A trial is a bench run (``bench.runner.run``) with the trial's values as ``--set`` overrides: its
own record under ``OUT/runs`` (the values are in the record's identity), checkpoints, resume and
lock as any run. Its score is the validation metric of the run's selected weights; test splits
are never looked at. A ``TrialPruning`` callback reports every validation to the trial and stops
a run its pruner prunes (record status ``pruned``).

Workers (``--jobs`` local processes, or SLURM jobs) share the journal. Under a file lock
(``ask.lock``) a worker counts the trials, fails the stale ones and asks for the next trial; a
trial is stale when it is RUNNING and the lock of the worker that runs it is free (the worker was
killed): it is marked FAIL and re-queued with the same values (Optuna's
``RetryHeartbeatStaleTrialCallback``, what Optuna's own heartbeat does with a stale trial; the
journal storage has no heartbeat). The same values name the same run, so the re-queued trial
resumes the killed run from its checkpoint. A trial whose run already has a record (finished, or
pruned) is told its result without training: rerunning the command continues the study.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path

from ..config import canonical_text
from ..errors import RunInterrupted, UserError
from ..records import (
    config_changes,
    ensure_writable,
    read_record,
    record_path,
    write_json_atomic,
)
from .protocol import objective_value
from .space import Param

log = logging.getLogger("bench.tune")

#: the keys of study.json that must match for a command to continue a study
IDENTITY = ("task", "preset", "models", "space", "set", "seed", "pruner")
PRUNERS = ("sync", "asha", "hyperband", "none")
#: study.json keys that studies made before them lack (read as the defaults then in force)
LATER_KEYS = {"objective": None}


def study_folder(out: Path, name: str) -> Path:
    return Path(out) / "studies" / name


def study_names(out: Path) -> list[str]:
    """The studies under ``OUT/studies`` (folders holding a study.json), sorted by name."""
    return sorted(f.parent.name for f in (Path(out) / "studies").glob("*/study.json"))


def storage(folder: Path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str(folder / "journal.log")))


def read_meta(folder: Path) -> dict:
    path = folder / "study.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"no study in {folder} (no study.json); run bench tune with --models, --task and --space or --grid first") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} cannot be read ({exc}); remove the folder or pass another --study") from None


def check_journal(folder: Path, live: bool = False) -> None:
    """A study's journal as Optuna needs it, else one UserError line naming what is wrong: a folder
    in its place, not UTF-8, a line that is not JSON, a last line cut short (unless a live worker
    may be writing it), or empty / missing while study.json says the study exists (Optuna would
    start it over without a word, training every trial again)."""
    path = folder / "journal.log"
    fix = f"restore it from a copy, or remove {folder} (or pass another --study) to start the study over"
    if path.is_dir():
        raise UserError(f"{path} is a folder, not a study journal; {fix}")
    if not (folder / "study.json").exists():
        return
    if not path.is_file() or path.stat().st_size == 0:
        raise UserError(
            f"{path} is {'missing' if not path.exists() else 'empty'} but {folder / 'study.json'} says the study exists: "
            f"continuing would start it over; {fix}"
        )
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 (byte {exc.start}): not a study journal; {fix}") from None
    lines = text.split("\n")
    for number, line in enumerate(lines[:-1], start=1):
        if line.strip():
            try:
                json.loads(line)
            except ValueError as exc:
                raise UserError(f"{path} line {number} is not a journal entry ({exc.msg}): the journal is damaged; {fix}") from None
    if lines[-1].strip() and not live:
        raise UserError(f"{path} ends in a cut-short line (line {len(lines)}): the journal is truncated; {fix}")


def check_meta(folder: Path, meta: dict) -> bool:
    """Whether ``folder`` already holds this study (True), holds none (False); UserError when it
    holds a study of other settings, naming the first difference."""
    if not (folder / "study.json").exists():
        return False
    have = read_meta(folder)
    for key in (*IDENTITY, "objective"):
        if key in LATER_KEYS and key not in have:
            continue  # a study made before the key: its score was the task's validation metric
        if have.get(key) != meta.get(key):
            raise UserError(
                f"study {folder.name!r} ({folder}) tunes {key} {have.get(key)!r}, not {meta[key]!r}; "
                f"pass --study NAME for a new study, or the same {key} to continue it"
            )
    return True


def create(folder: Path, meta: dict) -> None:
    """study.json and one Optuna study per model in the journal (idempotent)."""
    import optuna

    ensure_writable(folder)
    folder.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    journal = storage(folder)
    have = {s.study_name for s in journal.get_all_studies()}  # a rerun appends no entry for a study that exists
    for model in meta["models"]:
        if model not in have:
            optuna.create_study(study_name=model, storage=journal, direction="maximize", load_if_exists=True)
    if not (folder / "study.json").exists():
        write_json_atomic(folder / "study.json", meta)


def space_of(meta: dict) -> list[Param]:
    from .space import parse_space

    grid = [p for p in meta["space"] if p.split("=", 1)[1].startswith("[")]
    return parse_space([p for p in meta["space"] if p not in grid], grid)


def target(meta: dict) -> int:
    """Trials per model: --trials, at most the grid's size for a grid."""
    params = space_of(meta)
    if params and all(p.kind == "grid" for p in params):
        size = 1
        for p in params:
            size *= len(p.args)
        return min(meta["trials"], size)
    return meta["trials"]


def make_sampler(meta: dict, offset: int = 0):
    """GridSampler for a grid (seeded by the study's seed alone: its seed orders the grid, which
    every worker must see alike); else TPE, seeded by the study's seed plus ``offset`` (a worker's
    number and the trials asked so far: a rerun does not replay the draws of the first run)."""
    import optuna

    params = space_of(meta)
    if all(p.kind == "grid" for p in params):
        return optuna.samplers.GridSampler({p.key: list(p.args) for p in params}, seed=meta["seed"])
    return optuna.samplers.TPESampler(seed=meta["seed"] + offset)


def make_pruner(name: str):
    """asha: successive halving on the validation curve; hyperband: Hyperband over it; none.

    Successive halving's rungs start at step 1 (``min_resource=1``), so every validation a trial
    reports, the first trial's included, is compared at the rungs it has passed: a trial that is not
    in the top quarter of the trials seen at a rung stops there. Optuna's default ("auto") takes the
    first rung from the first finished trial, which leaves that trial's curve out of every comparison
    (on the flip-flop proxy the Transformer's second and third trials then ran to the end)."""
    import optuna

    if name == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner()
    if name in ("none", "sync"):  # sync: bench/tune/sync.py decides, no Optuna pruner
        return optuna.pruners.NopPruner()
    raise UserError(f"--pruner {name!r}: choose one of {', '.join(PRUNERS)}")


def trial_overrides(meta: dict, params: dict) -> list[str]:
    """The run's --set: the study's, then the trial's values (canonical spelling)."""
    return [*meta["set"], *(f"{k}={canonical_text(v)}" for k, v in sorted(params.items()))]


def counted(study) -> int:
    """Trials that use up the budget: finished, pruned, running, and failed runs (a diverged loss);
    not the stale trials a killed worker left (their re-queued copy counts)."""
    from optuna.trial import TrialState

    return sum(
        t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        or (t.state == TrialState.FAIL and t.user_attrs.get("outcome") == "failed")
        for t in study.get_trials(deepcopy=False)
    )


def requeue(study, trial_id: int) -> None:
    """A FAIL'ed trial queued again with its values (WAITING): what Optuna does with a trial its
    heartbeat found stale (``RetryHeartbeatStaleTrialCallback``)."""
    import warnings

    from optuna.exceptions import ExperimentalWarning
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        RetryHeartbeatStaleTrialCallback()(study, study._storage.get_trial(trial_id))


def worker_alive(folder: Path, worker: str) -> bool:
    """Whether the worker ``worker`` of the study in ``folder`` still lives: it holds its lock file
    (``workers/<id>.lock``) while it lives, and the kernel frees the lock when it dies."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(folder / "workers" / f"{worker}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def fail_stale(study, folder: Path) -> list[int]:
    """Mark FAIL every RUNNING trial whose worker is gone (its lock is free) and re-queue its
    values; returns the trial numbers. Called under ``ask.lock``, where a trial is asked and
    given its worker in one step."""
    from optuna.trial import TrialState

    stale = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = t.user_attrs.get("worker")
        if worker and worker_alive(folder, worker):
            continue
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        requeue(study, t._trial_id)
        stale.append(t.number)
    return stale


class _Failed(Exception):
    """A trial whose run failed (a NaN loss): the trial is FAIL, the study goes on."""


class _Stopped(BaseException):
    """A trial's run stopped by a signal, carried past Optuna's optimize (the trial is already
    marked FAIL and re-queued); the worker raises the original."""


class StudyWorker:
    """What every worker of a study shares: its id (host, pid, a random part), the study's meta, and
    the lock file it holds while it lives; ``run`` does the work (``_work``: each model in turn,
    ``_model``; a sync worker moves to the next model while one waits at its barrier)."""

    def __init__(self, out: Path, name: str, registry=None, index: int = 0, threads: int | None = None, trainer_kwargs: dict | None = None):
        self.out, self.name, self.folder = Path(out), name, study_folder(out, name)
        self.meta = read_meta(self.folder)
        self.registry, self.index, self.threads, self.trainer_kwargs = registry, index, threads, trainer_kwargs or {}
        self.id = f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.trained = 0

    def run(self) -> int:
        """Work on every model's study until it is done; returns how many runs this worker trained."""
        from filelock import FileLock

        (self.folder / "workers").mkdir(parents=True, exist_ok=True)
        me = FileLock(str(self.folder / "workers" / f"{self.id}.lock"))
        with me:
            try:
                self._work()
            finally:
                Path(me.lock_file).unlink(missing_ok=True)
        return self.trained

    def _work(self) -> None:
        for model in self.meta["models"]:
            self._model(model)

    def _model(self, model: str) -> None:
        raise NotImplementedError


class Worker(StudyWorker):
    """One worker of an Optuna study: runs trials of each model's study until it has ``target`` trials."""

    def __init__(
        self,
        out: Path,
        name: str,
        registry=None,
        index: int = 0,
        threads: int | None = None,
        pruner=None,
        trainer_kwargs: dict | None = None,
    ):
        super().__init__(out, name, registry, index, threads, trainer_kwargs)
        self.pruner = pruner if pruner is not None else make_pruner(self.meta["pruner"])
        self.params = space_of(self.meta)

    def run(self) -> int:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        return super().run()

    def _model(self, model: str) -> None:
        import optuna
        from filelock import FileLock

        ask = FileLock(str(self.folder / "ask.lock"))
        store = storage(self.folder)
        while True:
            ask.acquire()
            try:
                asked = len(store.get_all_trials(store.get_study_id_from_name(model), deepcopy=False))
                sampler = make_sampler(self.meta, 1000 * self.index + asked)
                study = optuna.load_study(study_name=model, storage=store, sampler=sampler, pruner=self.pruner)
                for number in fail_stale(study, self.folder):
                    log.info(f"tune: {model}: trial {number} was left running by a stopped worker; re-queued")
                if counted(study) >= target(self.meta):
                    return
                try:
                    study.optimize(lambda trial: self._objective(model, trial, ask), n_trials=1, catch=(_Failed,))
                except _Stopped as stopped:
                    raise stopped.args[0] from None
            finally:
                if ask.is_locked:
                    ask.release()

    def _objective(self, model: str, trial, ask) -> float:
        import optuna
        from optuna.trial import TrialState

        from ..runner import run
        from ..runner.callbacks import TrialPruning

        trial.set_user_attr("worker", self.id)
        ask.release()  # the trial is asked and owned: other workers may ask theirs
        values = {p.key: p.suggest(trial) for p in self.params}
        overrides = trial_overrides(self.meta, values)
        meta = self.meta
        path = record_path(self.out, model, meta["task"], meta["preset"], meta["seed"], overrides)
        trial.set_user_attr("record", str(path.relative_to(self.out)))
        rec = read_record(path, quiet=True)
        if rec.get("status") in ("ok", "pruned") and not (rec["status"] == "ok" and self._changed(model, overrides, rec)):
            log.info(f"tune: {model}: trial {trial.number} {_values_text(values)}: record {path} exists ({rec['status']}); not trained")
        else:
            log.info(f"tune: {model}: trial {trial.number} {_values_text(values)}: training into {path}")

            def report(step: int, value: float) -> bool:
                trial.report(value, step)
                return trial.should_prune()

            run_overrides = overrides + ([f"train.num_threads={self.threads}"] if self.threads else [])
            objective = (lambda scores: objective_value(scores, meta["objective"])) if meta.get("objective") else None
            try:
                rec = run(
                    model,
                    meta["task"],
                    meta["preset"],
                    meta["seed"],
                    self.out,
                    run_overrides,
                    registry=self.registry,
                    trainer_kwargs=self.trainer_kwargs,
                    progress="none",
                    callbacks=[TrialPruning(report, objective=objective)],
                )
            except (RunInterrupted, KeyboardInterrupt) as exc:  # stopped: re-queued with its values, the next worker resumes the run
                trial.study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
                requeue(trial.study, trial._trial_id)
                raise _Stopped(exc) from None  # past optimize, which would record the trial a second time
            self.trained += 1
        if rec["status"] == "failed":
            trial.set_user_attr("outcome", "failed")
            raise _Failed(rec.get("error", "failed"))
        if rec["status"] == "pruned":
            reported = trial.study._storage.get_trial(trial._trial_id).intermediate_values
            for entry in rec.get("val_history", []):  # a record found, not trained: its curve, for the pruner's statistics
                if entry["step"] not in reported:
                    trial.report(entry.get("objective", entry[rec["primary_metric"]]), entry["step"])
            log.info(f"tune: {model}: trial {trial.number} pruned at step {rec.get('pruned_step')}")
            raise optuna.TrialPruned()
        name = meta.get("objective") or rec["primary_metric"]
        score = objective_value(rec["metrics"]["val"], name)
        log.info(f"tune: {model}: trial {trial.number} {_values_text(values)}: validation {name} {100 * score:.1f}")
        return score

    def _changed(self, model: str, overrides: list[str], rec: dict) -> bool:
        from ..config import resolve_run
        from ..runner.build import _registry

        return bool(
            config_changes(
                rec.get("config"), resolve_run(_registry(self.registry), model, self.meta["task"], self.meta["preset"], overrides).public()
            )
        )


def _values_text(values: dict) -> str:
    return " ".join(f"{k}={canonical_text(v)}" for k, v in values.items())


def results(out: Path, name: str) -> list[dict]:
    """Per model: its trials by state, the best trial's values and validation score, its record,
    what the pick rests on (``evidence``: seeds and scores; a sync bracket's, with its contenders and
    ``flags``), and ``nothing_learned`` (then ``best`` is None: no pick) when no score the study
    has for the model clears the validation's chance level: a sync bracket's verdict, else every
    finished trial's score, every pruned trial's reported scores and every second seed's at the
    level of the best trial's record (bench/report/cells.py)."""
    import optuna
    from optuna.trial import TrialState

    from .bracket import brackets, evidence
    from .protocol import chance_text, nothing_above_chance
    from .validation import record_chance

    folder = study_folder(out, name)
    meta, store, rows = read_meta(folder), storage(folder), []
    state = brackets(folder) if meta.get("pruner") == "sync" else {}
    for model in meta["models"]:
        study = optuna.load_study(study_name=model, storage=store)
        trials = study.get_trials(deepcopy=False)
        count = {s: sum(t.state == s for t in trials) for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
        done = [t for t in trials if t.state == TrialState.COMPLETE]
        picked = [t for t in done if t.user_attrs.get("picked")]  # a sync bracket's pick (its selection may be a two-seed mean)
        best = picked[0] if picked else (max(done, key=lambda t: (t.value, -t.number)) if done else None)
        b = state.get(model) or {}
        row = {
            "model": model,
            "complete": count[TrialState.COMPLETE],
            "pruned": count[TrialState.PRUNED],
            "failed": sum(t.user_attrs.get("outcome") == "failed" for t in trials),
            "best": dict(best.params) if best else None,
            "val": best.user_attrs.get("selection", best.value) if best else None,
            "record": best.user_attrs.get("record") if best else None,
            "trials": [(dict(t.params), t.value) for t in done],
            "flags": list(b.get("flags") or []),
            "diverged": {_values_text(t.params): t.user_attrs["diverged"] for t in trials if t.user_attrs.get("diverged")},
            "evidence": b.get("evidence") or (evidence(meta, b) if b.get("done") and b.get("pick") else None) or _one_seed(meta, best),
            "nothing_learned": b.get("nothing_learned"),
        }
        if row["nothing_learned"] is None and best is not None:
            chance = record_chance(out, row["record"], meta.get("objective"))
            scores = [
                v
                for t in trials
                if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                for v in [t.value, *t.intermediate_values.values(), t.user_attrs.get("second_seed")]
            ]
            if nothing_above_chance(scores, chance):
                row["nothing_learned"] = {
                    "chance": {"level": chance[0], "n": chance[1], "strategy": chance[2]},
                    "best": max(v for v in scores if v is not None),
                    "why": f"no score of any trial clears the trivial level ({chance_text(chance)})",
                }
        if row["nothing_learned"] is not None:
            if best is None and done:  # a sync bracket that picked nothing: its best score, shown beside the chance level
                top = max(done, key=lambda t: (t.value, -t.number))
                row["val"], row["record"] = top.value, top.user_attrs.get("record")
            row["best"] = None
        rows.append(row)
    return rows


def _one_seed(meta: dict, best) -> dict | None:
    """The evidence of a pick made on one trial (another pruner's study): its values and its score on the study's seed."""
    if best is None:
        return None
    return {"pick": {"config": _values_text(best.params), "seeds": {str(meta["seed"]): best.value}, "selection": best.value}}
