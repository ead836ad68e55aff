"""What the commands share: notes on stderr, the run summary table, descriptions cut to the
terminal, and the checks on seeds, names and Lightning options."""

from __future__ import annotations

import logging
import sys

from .. import parsing


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record comes (a redirected stderr, a test's capture)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler.__init__ sets it: always sys.stderr here
        pass


def notes_to_stderr() -> None:
    """The library's notes, warnings and progress lines (``bench.*`` loggers, INFO and up) on stderr,
    as written (they carry their own ``bench: ...`` prefixes); installed once per process."""
    notes = logging.getLogger("bench")
    if not any(isinstance(h, _Stderr) for h in notes.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        notes.addHandler(handler)
    if notes.level == logging.NOTSET or notes.level > logging.INFO:
        notes.setLevel(logging.INFO)


def parse_seeds(args) -> list[int]:
    return parsing.parse_seeds(getattr(args, "seeds", None), getattr(args, "seed", None))


_names = parsing.parse_names


def _trainer_kwargs(args) -> dict:
    return parsing.trainer_kwargs(*(getattr(args, key, None) for key in ("accelerator", "devices", "strategy", "num_nodes")))


def _check_names(registry, models: list[str], tasks: list[str]) -> None:
    """Each name follows the names rule (``parsing.check_name``) and is a registry entry."""
    for m in models:
        registry.model_entry(parsing.check_name(m, "model", "--model"))
    for t in tasks:
        registry.task_entry(parsing.check_name(t, "task", "--task"))


def _print_summary(records: list[dict]) -> None:
    from tabulate import tabulate

    rows = []
    for rec in records:
        if rec["status"] != "ok":
            rows.append([rec["seed"], "FAIL", rec.get("error", "")])
            continue
        for split in ["val", *rec["test_splits"]]:
            res = rec["metrics"][split]
            rows.append([rec["seed"], split, *(f"{100 * res[m]:.1f}" for m in rec["report_metrics"]), res["n"]])
    ok = next((r for r in records if r["status"] == "ok"), None)
    metrics = ok["report_metrics"] if ok else ["metric"]
    print(f"\n{records[0]['model']} on {records[0]['task']} ({records[0]['preset']} preset)")
    print(tabulate(rows, headers=["seed", "split", *(f"{m} % ↑" for m in metrics), "n"], tablefmt="simple"))
    if ok:
        print(
            f"params {ok['param_count']:,}  best epoch {ok['best_epoch']}  wall {ok['wall_time_s']:.1f}s  "
            f"train {ok['train_tokens_per_s'] or 0:,.0f} tokens/s"
        )


def _fit(rows: list[list[str]], headers: list[str], full: bool) -> list[list[str]]:
    """The last column (a description) cut with '...' so that a row fits the terminal's width
    (100 columns when the output is not a terminal); ``full`` keeps every word."""
    import shutil

    if full or not rows:
        return rows
    width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
    lead = sum(max(*(len(str(r[i])) for r in rows), len(headers[i]) + 2) + 2 for i in range(len(headers) - 1))  # tabulate pads headers by 2
    room = max(20, width - lead)
    return [[*r[:-1], r[-1] if len(r[-1]) <= room else r[-1][: room - 3].rstrip() + "..."] for r in rows]
