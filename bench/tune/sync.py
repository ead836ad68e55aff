"""The synchronous bracket (``--pruner sync``): the tuning protocol of bench/tune/protocol.py run
with bench runs, by one or more workers sharing ``OUT/studies/<study>/bracket.json``.

Per model (a table's row) the grid's configurations form one bracket. At each rung every live
configuration trains to the rung's step (its run pauses there with RunPaused, after its
checkpoint) and reports the study's objective; only when every one has reported does a worker
apply ``protocol.rung_survivors`` (top 1/eta, ties and every configuration within the noise of the
best kept; nobody stopped at a rung where no configuration clears the validation's chance level,
which ``validation.validation_chance`` computes from the split once per bracket); the others are
stopped (their checkpoints stay, unused). At the last rung, when no score the bracket has clears
the chance level the model has learned nothing: no second seed, no pick. Otherwise the
configurations within the noise of the best are trained again on the study's second seed (the best
one too when it is alone: every pick is confirmed on the second seed), and again until every
configuration within the noise of the best mean has both seeds; the best mean is the pick. A pick
at the edge of a numeric axis brings the axis's next value through the same rungs
(``protocol.edge_step``, checked against the setting's domain), unless the pick only ties
another configuration (every one at chance: first by the grid's order). When the bracket is done,
each run is checked for divergence (``protocol.diverged``: a failed run, a training loss ending
above its first value, read from the run's metrics.csv, a validation fallen back to the chance
level): a pick that diverged, or whose grid neighbour did, is flagged and gives way to a stable
neighbour within the noise of it (``protocol.stable_pick``); the pick's evidence (its seeds and
scores, the other contenders', the flags) is kept in the bracket.
Every row of a study has the same configurations and rungs, and each prints the steps it trained.
A worker takes the first free task in the rows' order: while a row waits at its barrier for another
worker's configuration, it trains the next row's (no worker idles while any row has work).

Why not Optuna's pruners: SuccessiveHalvingPruner / HyperbandPruner are asynchronous (a trial is
compared with the trials that reached the rung before it: with one worker the first trial always
runs to the end, and later ones are stopped on gaps below the validation noise), and they compare
ranks, not noise. Optuna keeps the record: when a bracket is done its configurations are written
into the model's Optuna study in the journal (``add_trial``: values, each rung's score, COMPLETE or
PRUNED, the pick marked), which ``bench tune``'s table, ``--report`` and best.json read.

bracket.json is read and written under ``ask.lock`` only (by rename); a configuration a worker is
training names that worker, whose lock (``workers/<id>.lock``) is held while it lives: a killed
worker's configuration is trained again by the next worker, resuming its run's checkpoint.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from pathlib import Path

from ..config import canonical_text
from ..errors import RunInterrupted, RunPaused, UserError
from ..records import record_path, write_json_atomic
from .bracket import brackets, budget, evidence, evidence_text, tuning_seeds  # noqa: F401 - read here and from here
from .protocol import (
    chance_text,
    diverged,
    edge_step,
    nothing_above_chance,
    objective_value,
    rung_fractions,
    rung_survivors,
    stable_pick,
    within_noise,
)
from .study import StudyWorker, space_of, trial_overrides, worker_alive
from .validation import validation_chance

log = logging.getLogger("bench.tune")

ETA, Z = 2, 2.0
WAIT_S = 1.0


def key_of(values: dict) -> str:
    return " ".join(f"{k}={canonical_text(v)}" for k, v in sorted(values.items()))


def configurations(meta: dict) -> list[dict]:
    """The grid's configurations, in the grid's order (every one reaches each rung: order does not decide)."""
    params = space_of(meta)
    return [dict(zip([p.key for p in params], combo)) for combo in itertools.product(*[p.args for p in params])]


def ext_key(c: dict) -> str:
    return key_of(c["values"])


def new_bracket(meta: dict) -> dict:
    configs = configurations(meta)
    return {
        "fractions": rung_fractions(len(configs), ETA),
        "steps": {},
        "n": None,
        "rung": 0,
        "done": False,
        "configs": {key_of(v): {"values": v, "alive": True, "scores": {}, "holder": None, "record": None} for v in configs},
        "decisions": [],
        "second": {},
        "extension": None,
        "pick": None,
        "trained_steps": 0,
        "full_steps": None,
        "phase": "rungs",
    }


class SyncWorker(StudyWorker):
    """One worker of a sync study: trains the tasks of each model's bracket until every bracket is done."""

    def __init__(self, out: Path, name: str, registry=None, index: int = 0, threads: int | None = None, trainer_kwargs: dict | None = None):
        super().__init__(out, name, registry, index, threads, trainer_kwargs)
        self.path = self.folder / "bracket.json"

    # ---- shared state ----------------------------------------------------------------------
    def _load(self) -> dict:
        if not self.path.exists():
            return {}
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(
                f"{self.path} cannot be read ({exc}); remove it to start the brackets over (finished runs are read back, not trained again)"
            ) from None

    def _alive(self, worker: str | None) -> bool:
        if not worker or worker == self.id:
            return worker == self.id
        return worker_alive(self.folder, worker)

    def _work(self) -> None:
        """Train the models' brackets until all are done. A worker takes the first free task of the
        first model that has one: while a model waits at its barrier for another worker's
        configuration (a rung, the second seed), this worker trains the next model's instead of idling."""
        from filelock import FileLock

        ask = FileLock(str(self.folder / "ask.lock"))
        recorded: set[str] = set()
        while True:
            with ask:
                state = self._load()
                model, task, done = self._task(state)
                write_json_atomic(self.path, state)
                for m in done:
                    if m not in recorded:
                        record_trials(self.folder, self.meta, m, state[m])
                        recorded.add(m)
            if task is None:
                if len(done) == len(self.meta["models"]):
                    return
                time.sleep(WAIT_S)  # every model waits at its barrier for other workers' configurations
                continue
            kind, entry, rung = task
            b = state[model]
            try:
                result = self._train(model, entry["values"], entry.get("seed", self.meta["seed"]), b, rung if kind == "rung" else None)
            except BaseException:
                with ask:
                    state = self._load()
                    self._entry(state[model], kind, entry)["holder"] = None
                    write_json_atomic(self.path, state)
                raise
            with ask:
                state = self._load()
                b = state[model]
                e = self._entry(b, kind, entry)
                e["holder"] = None
                self._store(b, kind, e, rung, result)
                write_json_atomic(self.path, state)

    def _task(self, state: dict) -> tuple[str | None, tuple | None, list[str]]:
        """(model, task, the models whose brackets are done): the first free task in the models'
        order, held for this worker in ``state``; a killed worker's configurations are freed first."""
        done = []
        for model in self.meta["models"]:
            b = state.setdefault(model, new_bracket(self.meta))
            for c in [*b["configs"].values(), *b["second"].values()]:
                if c.get("holder") and not self._alive(c["holder"]):
                    c["holder"] = None  # its worker was killed: the next worker resumes the run
            task = None if b["done"] else self._next(model, b)
            if b["done"]:
                done.append(model)
            elif task is not None:
                task[1]["holder"] = self.id
                return model, task, done
        return None, None, done

    @staticmethod
    def _entry(b: dict, kind: str, entry: dict) -> dict:  # the entry's current copy in ``b``
        key = key_of(entry["values"])
        return b["second"][key] if kind == "second" else b["configs"][key]

    # ---- what to train next ------------------------------------------------------------------
    def _next(self, model: str, b: dict):
        """The next task of the bracket (kind, entry, rung), deciding what every configuration has
        reported; None while the bracket waits for another worker's configuration, or is done."""
        last = len(b["fractions"]) - 1
        while True:
            phase = b["phase"]
            if phase == "rungs":
                r = b["rung"]
                live = {k: c for k, c in b["configs"].items() if c["alive"] and not c.get("extension")}
                todo = [c for c in live.values() if str(r) not in c["scores"]]
                if todo:
                    free = [c for c in todo if not c["holder"]]
                    return ("rung", free[0], r) if free else None
                if r < last:
                    self._decide(model, b, r, live)
                    continue
                self._contention(model, b)
                b["phase"] = "second"
            elif phase == "second":
                pending = [c for c in b["second"].values() if "score" not in c]
                if pending:
                    free = [c for c in pending if not c["holder"]]
                    return ("second", free[0], None) if free else None
                if self._more_contenders(model, b):
                    continue
                self._pick(model, b)
                b["phase"] = "extension" if b["extension"] is None else "done"
            elif phase == "extension":
                if b["extension"] is None and not self._extend(model, b):
                    b["phase"] = "done"
                    continue
                ext = b["configs"][b["extension"]["config"]]
                r = ext["rung"]
                if str(r) not in ext["scores"]:
                    return None if ext["holder"] else ("rung", ext, r)
                if r < last:
                    scores = {k: c["scores"][str(r)] for k, c in b["configs"].items() if str(r) in c["scores"]}
                    if ext_key(ext) not in rung_survivors(scores, b["n"], self._chance(model, b), ETA, Z)[0]:
                        ext["alive"], ext["stopped_at"] = False, b["steps"].get(str(r))
                        log.info(f"tune: {model}: the extension {ext_key(ext)} is stopped at rung {r + 1} (step {b['steps'].get(str(r))})")
                        b["phase"] = "done"
                    else:
                        ext["rung"] = r + 1
                    continue
                self._contention(model, b)
                b["phase"] = "second"
            else:
                self._settle(model, b)
                b["done"] = True
                return None

    def _chance(self, model: str, b: dict):
        """The chance level of the objective on the bracket's validation, (level, n, strategy), or
        None: computed once from the split (``validation_chance``) and kept in ``b["chance"]``."""
        if "chance" not in b:
            found = validation_chance(self.registry, self.meta, model)
            b["chance"] = None if found is None else {"level": found[0], "n": found[1], "strategy": found[2]}
            if found is not None:
                log.info(f"tune: {model}: the validation's chance level of {self.meta['objective']}: {chance_text(found)}")
        c = b["chance"]
        return None if c is None else (c["level"], b.get("n") or c["n"], c["strategy"])

    def _decide(self, model: str, b: dict, r: int, live: dict) -> None:
        scores = {k: c["scores"][str(r)] for k, c in live.items()}
        kept, passed = rung_survivors(scores, b["n"], self._chance(model, b), ETA, Z)
        best = max(scores.values())
        for k in live:
            if k not in kept:
                b["configs"][k]["alive"] = False
                b["configs"][k]["stopped_at"] = b["steps"].get(str(r))
        decision = {"rung": r, "step": b["steps"].get(str(r)), "scores": scores, "kept": kept, "n": b["n"], "z": Z, "eta": ETA}
        if passed:
            decision["passed"] = passed
        b["decisions"].append(decision)
        if passed:
            log.info(f"tune: {model}: rung {r + 1} (step {b['steps'].get(str(r))}): all {len(scores)} configuration(s) reported; {passed}")
        else:
            log.info(
                f"tune: {model}: rung {r + 1} (step {b['steps'].get(str(r))}): all {len(scores)} configuration(s) reported; "
                f"{len(kept)} go on ({', '.join(kept)}), {len(scores) - len(kept)} stopped "
                f"(outside the top 1/{ETA} and more than {Z:g} SE of the difference below the best, {100 * best:.1f}, at n={b['n']})"
            )
        b["rung"] = r + 1

    def _selection(self, b: dict) -> dict:
        """Each configuration with a full-run score (the last rung's, not failed): the mean of its
        seeds' scores (one seed, or the study's two)."""
        last = str(len(b["fractions"]) - 1)
        out = {}
        for k, c in b["configs"].items():
            if last not in c["scores"] or c.get("failed"):
                continue
            second = b["second"].get(k, {}).get("score")
            out[k] = c["scores"][last] if second is None else (c["scores"][last] + second) / 2
        return out

    def _contention(self, model: str, b: dict) -> None:
        """At the last rung: nothing learned when no score of the bracket (any configuration, any
        rung) clears the chance level; else the configurations within the noise of the best get the
        second seed (``_more_contenders``)."""
        last = str(len(b["fractions"]) - 1)
        finished = {k: c["scores"][last] for k, c in b["configs"].items() if last in c["scores"] and not c.get("failed")}
        every = [v for c in b["configs"].values() if not c.get("failed") for v in c["scores"].values()]
        chance = self._chance(model, b)
        if finished and nothing_above_chance(every, chance):
            b["contention"] = []
            b["nothing_learned"] = {
                "chance": b["chance"],
                "best": max(finished.values()),
                "why": f"no score of any configuration at any rung clears the trivial level ({chance_text(chance)})",
            }
            log.info(
                f"tune: {model}: nothing learned: {b['nothing_learned']['why']}; best {100 * max(finished.values()):.1f}: "
                "no second seed, no pick"
            )
            return
        self._more_contenders(model, b)

    def _more_contenders(self, model: str, b: dict) -> bool:
        """The configurations within the noise of the best selection (``_selection``: a seed's
        score, or the two seeds' mean) that lack the second seed get it, the best one too when it
        is alone: no pick is final on one seed (a lucky or failed seed would decide it). True when
        any was added (their runs come next)."""
        if b.get("nothing_learned"):
            return False
        selection = self._selection(b)
        near = within_noise(selection, b["n"], Z) if selection else []
        b["contention"] = near
        seed = tuning_seeds(self.meta)[1]
        added = [k for k in near if k not in b["second"]]  # a lone finalist too: no pick rests on one seed
        for k in added:
            b["second"][k] = {"values": b["configs"][k]["values"], "seed": seed, "holder": None}
        if added and len(added) < len(near):
            log.info(f"tune: {model}: {', '.join(added)} within the noise of the best selection too: trained on seed {seed}")
        return bool(added)

    def _pick(self, model: str, b: dict) -> None:
        if b.get("nothing_learned"):
            b["pick"], b["selection"] = None, {}
            return
        selection = self._selection(b)
        if not selection:
            b["pick"], b["selection"] = None, {}
            log.info(f"tune: {model}: no configuration finished")
            return
        near = within_noise(selection, b["n"], Z)
        order = list(b["configs"])
        pick = max(near, key=lambda k: (selection[k], -order.index(k)))  # a tie: the grid's order, never arrival
        b["contention"] = near
        b["pick"], b["selection"] = pick, {k: selection[k] for k in selection if k in near or k in b["second"]}
        log.info(
            f"tune: {model}: picked {pick} (objective {100 * selection[pick]:.1f}"
            + (f", the mean of seeds {tuning_seeds(self.meta)}" if pick in b["second"] else ", one seed")
            + ")"
        )

    def _settle(self, model: str, b: dict) -> None:
        """The bracket's last step: every run checked for divergence (``protocol.diverged``, marked
        ``diverged`` on its configuration), the pick made stable (``protocol.stable_pick``: flagged
        when it or a grid neighbour diverged, a stable neighbour within the noise taken instead),
        and the pick's evidence kept (``evidence``)."""
        if b.get("settled"):
            return
        b["settled"] = True
        chance = self._chance(model, b)
        seed2 = tuning_seeds(self.meta)[1]
        unstable = {}
        for k, c in b["configs"].items():
            reason = diverged(_curve(c), _losses(c), chance, c.get("failed"))
            second = b["second"].get(k) or {}
            if reason is None and "score" in second:
                reason = diverged(_curve(second), _losses(second), chance, second.get("failed"))
                reason = reason and f"on seed {seed2}, {reason}"
            if reason:
                c["diverged"] = unstable[k] = reason
                log.info(f"tune: {model}: {k} diverged: {reason}")
        if b["pick"] is not None:
            pick, flags = stable_pick(b["pick"], self._selection(b), b["n"], {k: c["values"] for k, c in b["configs"].items()}, unstable, Z)
            b["flags"] = flags
            for flag in flags:
                log.info(f"tune: {model}: the pick {b['pick']} is flagged: {flag}")
            if pick != b["pick"]:
                b["unstable_pick"], b["pick"] = b["pick"], pick
                b["selection"].setdefault(pick, self._selection(b)[pick])
        b["evidence"] = evidence(self.meta, b)

    def _extend(self, model: str, b: dict) -> bool:
        """A pick at the edge of a numeric axis: the axis's next value goes through the same rungs,
        kept at each only if it would have survived it (and through the second seed when in
        contention); False when there is nothing to extend (said in the log and bracket.json)."""
        if b["pick"] is None:
            return False
        tied = [k for k, v in (b.get("selection") or {}).items() if k != b["pick"] and v >= b["selection"][b["pick"]]]
        if tied:  # its place at the edge is the grid order's (the tie-break), not its score's
            b["extension"] = {"none": f"the pick ties with {', '.join(tied)}"}
            log.info(
                f"tune: {model}: the pick {b['pick']} ties with {', '.join(tied)} (the same objective): "
                "it is first by the grid's order, not ahead, so the grid is not extended"
            )
            return False
        values = b["configs"][b["pick"]]["values"]
        for p in space_of(self.meta):
            out = edge_step(list(p.args), values[p.key])
            if out is None:
                continue
            new = {**values, p.key: out}
            try:
                from ..config import resolve_run
                from ..runner.build import _registry

                resolve_run(_registry(self.registry), model, self.meta["task"], self.meta["preset"], trial_overrides(self.meta, new))
            except UserError as exc:
                b["extension"] = {"key": p.key, "value": out, "refused": str(exc)}
                log.info(
                    f"tune: {model}: {p.key}={canonical_text(values[p.key])} is at the grid's edge, and {canonical_text(out)} is "
                    f"outside the setting's domain ({exc}): not extended"
                )
                return False
            key = key_of(new)
            b["extension"] = {"key": p.key, "value": out, "from": b["pick"], "config": key}
            b["configs"][key] = {"values": new, "alive": True, "scores": {}, "holder": None, "record": None, "extension": True, "rung": 0}
            log.info(
                f"tune: {model}: the best {p.key}={canonical_text(values[p.key])} is at the grid's edge: "
                f"extending the grid one step, to {canonical_text(out)}"
            )
            return True
        b["extension"] = {"none": "the pick is inside the grid"}
        return False

    # ---- training -----------------------------------------------------------------------------
    def _train(self, model: str, values: dict, seed: int, b: dict, rung: int | None) -> dict:
        """Train ``values`` at ``seed`` to the rung (paused there) or to the end; returns the
        objective at the rung's step (or the record's, at the end), n, the steps trained."""
        from ..runner import run
        from ..runner.callbacks import TrialPruning

        meta = self.meta
        overrides = trial_overrides(meta, values)
        path = record_path(self.out, model, meta["task"], meta["preset"], seed, overrides)
        fraction = b["fractions"][rung] if rung is not None else 1.0
        final = fraction >= 1.0
        seen: dict = {}
        sizes: list[int] = []

        def objective(scores: dict) -> float:
            sizes.append(int(scores.get("n", 0)))
            return objective_value(scores, meta["objective"])

        def report(step: int, value: float):
            seen[step] = value
            total = pruning.total_steps or 0
            return "pause" if not final and step >= fraction * total - 1e-9 else False

        pruning = TrialPruning(report, objective=objective)
        run_overrides = overrides + ([f"train.num_threads={self.threads}"] if self.threads else [])
        log.info(f"tune: {model}: {key_of(values)} seed {seed}: training to {'the end' if final else f'{fraction:g} of the run'} ({path})")
        try:
            rec = run(
                model,
                meta["task"],
                meta["preset"],
                seed,
                self.out,
                run_overrides,
                registry=self.registry,
                trainer_kwargs=self.trainer_kwargs,
                progress="none",
                callbacks=[pruning],
            )
        except RunPaused as paused:
            self.trained += 1
            return {
                "step": paused.step,
                "score": seen[paused.step],
                "n": sizes[-1] if sizes else None,
                "total": pruning.total_steps,
                "record": str(path.relative_to(self.out)),
                "trained_from": min(seen) if seen else 0,
                "curve": dict(seen),
                "losses": train_losses(path, paused.step),
            }
        except (RunInterrupted, KeyboardInterrupt):
            raise
        if not rec.get("skipped"):
            self.trained += 1
        total = rec.get("steps_run")
        if rec["status"] != "ok":
            return {
                "step": total,
                "score": 0.0,
                "failed": rec.get("error", rec["status"]),
                "n": None,
                "total": total,
                "record": str(path.relative_to(self.out)),
                "curve": dict(seen),
                "losses": train_losses(path, total),
            }
        curve = {e["step"]: e.get("objective", e[rec["primary_metric"]]) for e in rec.get("val_history", [])}
        if not final:  # a finished record found: the rung's score from its validation history
            step = next(e["step"] for e in rec["val_history"] if e["step"] >= fraction * total - 1e-9)
            entry = next(e for e in rec["val_history"] if e["step"] == step)
            return {
                "step": step,
                "score": entry.get("objective", entry[rec["primary_metric"]]),
                "n": rec["metrics"]["val"].get("n"),
                "total": total,
                "record": str(path.relative_to(self.out)),
                "curve": {s: v for s, v in curve.items() if s <= step},
                "losses": train_losses(path, step),
            }
        return {
            "step": total,
            "score": objective_value(rec["metrics"]["val"], meta["objective"]),
            "n": rec["metrics"]["val"].get("n"),
            "total": total,
            "record": str(path.relative_to(self.out)),
            "curve": curve,
            "losses": train_losses(path, total),
        }

    def _store(self, b: dict, kind: str, e: dict, rung: int | None, result: dict) -> None:
        b["n"] = b["n"] or result.get("n")
        b["full_steps"] = b["full_steps"] or result.get("total")
        if result.get("curve"):
            e.setdefault("curve", {}).update({str(step): v for step, v in result["curve"].items()})
        if result.get("losses") is not None:
            e["losses"] = {str(step): v for step, v in result["losses"].items()}
        if kind == "second":
            e["score"], e["record"] = result["score"], result["record"]
            if result.get("failed"):
                e["failed"] = result["failed"]
            b["trained_steps"] += result.get("total") or 0
            return
        before = max([0, *(int(b["steps"][str(i)]) for i in e["scores"] if str(i) in b["steps"])])
        e["scores"][str(rung)] = result["score"]
        e["record"] = result["record"]
        b["steps"].setdefault(str(rung), result["step"])
        b["trained_steps"] += max(0, (result["step"] or 0) - before)
        if result.get("failed"):
            e["alive"], e["failed"] = False, result["failed"]


def train_losses(record: Path, upto: int | None = None) -> dict[int, float]:
    """A run's training loss at each validation (the mean since the previous one), {step: loss}, from
    the metrics.csv beside its record (bench/runner/trainer.py's CSV logger; {} without one), up
    to step ``upto``."""
    import csv

    from ..records import run_folder

    path = run_folder(Path(record)) / "metrics.csv"
    out: dict[int, float] = {}
    try:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                step, loss = row.get("global_step") or row.get("step"), row.get("train_loss")
                if step and loss:
                    out[int(float(step))] = float(loss)
    except (OSError, ValueError):
        return {}
    return {s: v for s, v in sorted(out.items()) if upto is None or s <= upto}


def _curve(entry: dict) -> list[float]:
    """A run's validation curve in the bracket, in step order (its rung scores for a bracket that kept no curve)."""
    if entry.get("curve"):
        return [v for _, v in sorted(entry["curve"].items(), key=lambda kv: int(kv[0]))]
    return [v for _, v in sorted((entry.get("scores") or {}).items(), key=lambda kv: int(kv[0]))]


def _losses(entry: dict) -> list[float]:
    return [v for _, v in sorted((entry.get("losses") or {}).items(), key=lambda kv: int(kv[0]))]


def record_trials(folder: Path, meta: dict, model: str, b: dict) -> None:
    """The finished bracket as Optuna trials of the model's study (once): each configuration with
    its rung scores as intermediate values, COMPLETE with its last-rung score or PRUNED, the pick
    and the second seed's score in user attributes."""
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    from .study import storage

    study = optuna.load_study(study_name=model, storage=storage(folder))
    if study.get_trials(deepcopy=False):
        return
    last = str(len(b["fractions"]) - 1)
    axes: dict = {}
    for c in b["configs"].values():
        for k, v in c["values"].items():
            axes.setdefault(k, [])
            if v not in axes[k]:
                axes[k].append(v)
    for key, c in b["configs"].items():
        steps = {int(b["steps"][r]): v for r, v in c["scores"].items() if r in b["steps"]}
        done = last in c["scores"] and not c.get("failed")
        attrs = {"record": c["record"], "picked": key == b["pick"], "protocol": "sync"}
        if key in b["second"]:
            attrs["second_seed"] = b["second"][key].get("score")
            attrs["second_record"] = b["second"][key].get("record")
        if key in (b.get("selection") or {}):
            attrs["selection"] = b["selection"][key]
        if c.get("failed"):
            attrs["outcome"] = "failed"
        if c.get("diverged"):
            attrs["diverged"] = c["diverged"]
        if key == b["pick"] and b.get("flags"):
            attrs["flags"] = b["flags"]
        study.add_trial(
            create_trial(
                params=c["values"],
                distributions={k: CategoricalDistribution(axes[k]) for k in c["values"]},
                value=c["scores"][last] if done else None,
                intermediate_values=steps,
                state=TrialState.COMPLETE if done else (TrialState.FAIL if c.get("failed") else TrialState.PRUNED),
                user_attrs=attrs,
            )
        )
