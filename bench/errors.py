"""User-facing errors: the CLI prints their message as one line and exits with status 2; a run
stopped by a signal. Plain Python, no torch or Lightning: the CLI imports this module up front."""

import signal
import sys


class UserError(Exception):
    """Bad input from the user (names, registry, overrides, paths). Never a traceback."""


class Incompatible(UserError):
    """A model that cannot run a task (a causal task, a model without a causal mode): neither is
    wrong, the pair is (``bench validate`` does not count it as a registry problem)."""


class RunFailed(Exception):
    """A run started but could not finish (NaN loss, ...): recorded as failed, not a crash."""


class RunInterrupted(BaseException):
    """A run stopped by a signal after writing its last checkpoint (the same command resumes)."""

    def __init__(self, signum: int, step: int, checkpoint: str):
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        name = signal.Signals(signum).name
        super().__init__(f"{name} at step {step}: checkpoint {checkpoint}; run the same command again to resume")

    @property
    def exit_status(self) -> int:
        return 128 + self.signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them


class RunPaused(BaseException):
    """A tuning trial's run paused at a rung of a synchronous bracket (bench/tune/sync.py), after its
    last checkpoint was written at that validation: the same run resumes from it when the bracket
    lets it go on. Not an interruption of the user's: nothing is printed for it."""

    def __init__(self, step: int, checkpoint: str):
        self.step, self.checkpoint = step, checkpoint
        super().__init__(f"paused at step {step}: checkpoint {checkpoint}")


def one_line_exit(exc: BaseException) -> int:
    """Print the one line a command ends with for a UserError (status 2) or a RunInterrupted (128 +
    the signal) and return the status; any other exception is raised again. The CLI and a tune
    worker (``python -m bench.tune``) end this way."""
    if isinstance(exc, UserError):
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    if isinstance(exc, RunInterrupted):
        print(f"bench: stopped by {exc}", file=sys.stderr)
        return exc.exit_status
    raise exc
