"""The Lightning callbacks of one run: what makes it resumable, interruptible and readable.

- ``RNGState``: the global RNG states (torch, numpy, python) in every checkpoint, restored before
  the first resumed batch (Lightning saves none of them; dropout draws from torch's).
- ``ValidationHistory``: one entry per validation (epoch, step, metric), kept in checkpoints.
- ``GracefulStop``: SIGINT / SIGTERM set a flag; after the current batch every rank writes the
  last checkpoint and the run raises ``RunInterrupted`` (Lightning alone turns Ctrl-C into exit 1
  and SIGTERM mid-validation into exit 0); ``signals_stop`` covers the rest of fit and test.
- ``LineProgress``: one line per validation when stdout is not a terminal (no carriage returns),
  logged to ``bench.progress`` (the CLI writes it to stderr).
- ``TrialPruning``: a tuning trial's validations reported to it, and the run stopped when its
  pruner says so (``bench tune``; the run is then recorded with status ``pruned``).
"""

from __future__ import annotations

import logging
import random
import signal
import time
from contextlib import contextmanager

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException

from ..errors import RunInterrupted, RunPaused  # defined there, so the CLI catches it without Lightning
from ..logs import eta_text


class RNGState(L.Callback):
    def __init__(self):
        self._pending = None

    def state_dict(self) -> dict:
        # tensors, ints and strings only: the checkpoint stays loadable with torch.load(weights_only=True)
        name, keys, pos, has_gauss, gauss = np.random.get_state()
        return {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
            "python": random.getstate(),
        }

    def load_state_dict(self, state: dict) -> None:
        self._pending = state  # applied when training starts, after everything that builds or loads

    def on_train_start(self, trainer, module):
        if self._pending is None:
            return
        state, self._pending = self._pending, None
        torch.set_rng_state(state["torch"])
        name, keys, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
        random.setstate(state["python"])
        if state["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])


class ValidationHistory(L.Callback):
    def __init__(self, metric: str):
        self.metric = metric
        self.entries: list[dict] = []

    def on_validation_end(self, trainer, module):
        if trainer.sanity_checking or 0 not in module.last_eval:
            return
        self.entries.append(
            {"epoch": trainer.current_epoch, "step": trainer.global_step, self.metric: module.last_eval[0][self.metric], **module.watched()}
        )

    def best(self) -> dict | None:
        """The first validation with the highest metric (ModelCheckpoint keeps the same one: it
        replaces its best only on a strictly better value)."""
        return max(self.entries, key=lambda e: e[self.metric], default=None)

    def state_dict(self) -> dict:
        return {"entries": self.entries}

    def load_state_dict(self, state: dict) -> None:
        self.entries = list(state["entries"])


class GracefulStop(Checkpoint):
    """A Checkpoint subclass only so that Lightning orders it after the ModelCheckpoints: a stop
    right after a validation then finds that validation's checkpoints already written."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    ignore_late_signals = False  # set by a grid's forked cell (bench/grid/local.py), a process that ends with its run

    def __init__(self, last_checkpoint: str):
        self.last_checkpoint = last_checkpoint
        self.signum = 0
        self.pause = False  # set by TrialPruning: stop after this validation's checkpoints (RunPaused)
        self._previous: dict = {}

    def _handler(self, signum, frame):
        self.signum = self.signum or signum

    def setup(self, trainer, module, stage):
        # ours only set a flag, acted on between training batches
        if stage == "fit" and not self._previous:
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handler)

    def _own_the_signals(self) -> None:
        # Lightning registers its SIGTERM handler after setup, calling ours from its own: left
        # there, it would also end a validation at once (SIGTERMException: exit 0, no checkpoint)
        for sig in self.SIGNALS:
            signal.signal(sig, self._handler)

    def on_sanity_check_start(self, trainer, module):
        self._own_the_signals()

    def on_train_start(self, trainer, module):
        self._own_the_signals()

    def teardown(self, trainer, module, stage):
        for sig, handler in self._previous.items():
            # in a process that exits after this run (a grid's forked cell), a stop under way: a
            # second SIGTERM with the default action (the grid forwards one, the fork server's
            # death sends another) would end it before it says what it wrote, so it is ignored
            stopping = self.ignore_late_signals and self.signum and handler == signal.SIG_DFL
            signal.signal(sig, signal.SIG_IGN if stopping else handler)
        self._previous = {}

    def on_exception(self, trainer, module, exception):
        self.teardown(trainer, module, "fit")

    def _agreed_signal(self, trainer, module) -> int:
        if trainer.world_size > 1:  # every rank stops at the same point
            return int(trainer.strategy.reduce(torch.tensor(float(self.signum), device=module.device), reduce_op="max"))
        return self.signum

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        signum = self._agreed_signal(trainer, module)
        if not signum:
            return
        loop = trainer.fit_loop
        if loop.epoch_loop._should_check_val_fx(loop._data_fetcher):
            return  # a validation is due after this batch: stop after it (on_validation_end)
        trainer.save_checkpoint(self.last_checkpoint)
        raise RunInterrupted(signum, trainer.global_step, self.last_checkpoint)

    def on_validation_end(self, trainer, module):
        if trainer.sanity_checking or not trainer.training and trainer.state.fn != "fit":
            return
        signum = self._agreed_signal(trainer, module)
        if signum:  # the ModelCheckpoints before us have just written this validation's last.ckpt
            raise RunInterrupted(signum, trainer.global_step, self.last_checkpoint)
        if self.pause:
            self.pause = False
            raise RunPaused(trainer.global_step, self.last_checkpoint)


@contextmanager
def signals_stop(trainer: L.Trainer, checkpoint: str):
    """SIGINT / SIGTERM during the ``trainer.fit`` / ``trainer.test`` inside end the run with
    RunInterrupted, whichever sees them: GracefulStop while training (after a checkpoint), else a
    handler that raises at once (setting up or testing: nothing new to save), or Lightning's own
    SIGTERM check (SIGTERMException, a SystemExit that would end the process with status 0 and
    not a word). On the way out the handlers found on entry are back, whatever Lightning restored."""
    previous = {sig: signal.getsignal(sig) for sig in GracefulStop.SIGNALS}

    def at_once(signum, frame):
        raise RunInterrupted(signum, trainer.global_step, checkpoint)

    for sig in GracefulStop.SIGNALS:
        signal.signal(sig, at_once)
    try:
        yield
    except SIGTERMException:
        raise RunInterrupted(signal.SIGTERM, trainer.global_step, checkpoint) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class LineProgress(L.Callback):
    """One line per validation: step, epoch, train loss, validation metric, elapsed, ETA; and, when
    validations are far apart (a 10k-step epoch), a training line at most every ``every_s`` seconds."""

    def __init__(self, metric: str, every_s: float = 30.0, notes: logging.Logger | None = None):
        self.metric, self.total, self.every_s = metric, 0, every_s
        self.notes = notes or logging.getLogger("bench.progress")
        self._t0 = self._step0 = self._last = None

    def on_train_start(self, trainer, module):
        self._t0, self._step0 = time.perf_counter(), trainer.global_step
        self._last, self.total = self._t0, module.total_steps

    def _line(self, trainer, extra: list[str], loss=None):
        now = time.perf_counter()
        step, elapsed = trainer.global_step, now - self._t0
        done = step - self._step0
        loss = trainer.callback_metrics.get("train_loss") if loss is None else loss
        parts = [
            f"step {step}/{self.total}",
            f"epoch {trainer.current_epoch}",
            f"loss {float(loss):.4f}" if loss is not None else "loss -",
            *extra,
            f"elapsed {elapsed:.0f}s",
            eta_text(elapsed, done, self.total - step) if self.total > 0 else "eta -",
        ]
        self.notes.info("  ".join(parts))
        self._last = now

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if self.every_s > 0 and trainer.is_global_zero and time.perf_counter() - self._last >= self.every_s:
            self._line(trainer, ["training"], loss=module.running_loss())  # loss: mean since the last validation

    def on_validation_end(self, trainer, module):
        if trainer.sanity_checking or not trainer.is_global_zero or 0 not in module.last_eval or self._t0 is None:
            return
        self._line(trainer, [f"val {self.metric} {100 * module.last_eval[0][self.metric]:.1f}"])


class TrialPruning(L.Callback):
    """A tuning trial's report and stop: after every validation ``report(step, value)`` hands the
    trial's score to the study (Optuna's ``trial.report`` / ``trial.should_prune``, in bench/tune)
    and returns whether the trial is pruned; a pruned run stops there (``trainer.should_stop``)
    and is recorded with status ``pruned`` and its curve; the validation after the last step is
    reported but never prunes (the training is done). ``report`` may instead return ``"pause"``
    (a synchronous bracket's rung, bench/tune/sync.py): the run stops after this validation's
    checkpoints with RunPaused, and the same run resumes from them later. The score is the run's
    validation metric, or ``objective(scores)`` of the validation's scores (the metric a table
    reports, bench/tune/protocol.py), which is then kept in the validation history as
    ``objective``. A resumed run first reports the validations of its checkpoint."""

    def __init__(self, report, objective=None):
        self.report, self.objective = report, objective
        self.pruned_step: int | None = None
        self.total_steps: int | None = None  # the run's steps, known when training starts (a rung is a fraction of them)

    def on_train_start(self, trainer, module):
        self.total_steps = int(trainer.estimated_stepping_batches)
        history = next((c for c in trainer.callbacks if isinstance(c, ValidationHistory)), None)
        verdict = None
        for entry in history.entries if history is not None else []:
            verdict = self.report(entry["step"], entry.get("objective", entry[history.metric]) if self.objective else entry[history.metric])
        if verdict == "pause":  # resumed at the rung it pauses at (its pause was not yet taken in): pause again, untrained
            stop = next(c for c in trainer.callbacks if isinstance(c, GracefulStop))
            raise RunPaused(history.entries[-1]["step"], stop.last_checkpoint)

    def on_validation_end(self, trainer, module):
        if trainer.sanity_checking or trainer.state.fn != "fit" or 0 not in module.last_eval:
            return
        history = next(c for c in trainer.callbacks if isinstance(c, ValidationHistory))
        value = module.last_eval[0][history.metric]
        if self.objective is not None:
            value = float(self.objective(module.last_eval[0]))
            if history.entries and history.entries[-1]["step"] == trainer.global_step:
                history.entries[-1]["objective"] = value
        finished = trainer.global_step >= trainer.estimated_stepping_batches  # the last validation: nothing left to save
        verdict = self.report(trainer.global_step, value)
        if verdict == "pause" and not finished:
            next(c for c in trainer.callbacks if isinstance(c, GracefulStop)).pause = True
        elif verdict and verdict != "pause" and not finished:
            self.pruned_step = trainer.global_step
            trainer.should_stop = True
