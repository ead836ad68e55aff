"""Every committed table under results/reproduce/ rebuilds byte-identically from the committed
records: each table's Markdown names the command that made it; that command runs again (never
with --run) in a temporary folder whose results/runs (and results/studies, for tuned rows) is the
checkout's (read only through a link) and whose results/reproduce starts with only the committed cost measurements, and every
file it writes must equal the committed one. Nothing is written into the checkout.

A table is built from what its records hold: a committed table rebuilds with the model classes
unimportable and run resolution refused. Whether a record is stale (made with settings the
registry no longer gives) is the stale check's question (bench/report/stale.py), asked here of
every committed table's records: none may be."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results" / "reproduce"
TABLES = sorted(p.stem for p in COMMITTED.glob("*.md"))
# tables that cannot rebuild identically, with the reason (none today)
SKIP: dict[str, str] = {}


def command_of(stem: str) -> list[str]:
    """The `bench reproduce ...` arguments written on the table's third line."""
    line = (COMMITTED / f"{stem}.md").read_text().splitlines()[2].strip("`")
    args = shlex.split(line)
    assert args[:2] == ["bench", "reproduce"] and "--run" not in args, line
    return args[1:]


def owner(name: str) -> str | None:
    """The table a file of results/reproduce belongs to: the longest table name it starts with,
    followed by "." or "--" (halt-table1-cpu--set-0659ea9c.csv is that set's, not halt-table1-cpu's)."""
    return max((t for t in TABLES if name.startswith((t + ".", t + "--"))), key=len, default=None)


def own_files(stem: str) -> set[str]:
    """The committed files of one table: NAME.md, .csv, .png, --claims.csv, --measured.json."""
    return {p.name for p in COMMITTED.iterdir() if owner(p.name) == stem}


def test_every_committed_file_belongs_to_a_table():
    assert [p.name for p in COMMITTED.iterdir() if owner(p.name) is None] == []


@pytest.mark.parametrize("stem", TABLES)
def test_a_committed_table_rebuilds_byte_identically(stem, tmp_path, monkeypatch, capsys):
    if stem in SKIP:
        pytest.skip(SKIP[stem])
    (tmp_path / "results" / "reproduce").mkdir(parents=True)
    (tmp_path / "results" / "runs").symlink_to(ROOT / "results" / "runs", target_is_directory=True)
    if (ROOT / "results" / "studies").is_dir():  # a table with tuned rows reads its studies' best values
        (tmp_path / "results" / "studies").symlink_to(ROOT / "results" / "studies", target_is_directory=True)
    for measured in COMMITTED.glob(f"{stem}--measured.json"):  # a cost table is rebuilt from its measurements
        shutil.copy(measured, tmp_path / "results" / "reproduce" / measured.name)
    monkeypatch.chdir(tmp_path)
    assert main(command_of(stem)) == 0
    capsys.readouterr()
    rebuilt = {p.name for p in (tmp_path / "results" / "reproduce").iterdir()}
    assert rebuilt == own_files(stem)
    differ = [
        name for name in sorted(rebuilt) if (tmp_path / "results" / "reproduce" / name).read_bytes() != (COMMITTED / name).read_bytes()
    ]
    assert not differ, f"{stem}: rebuilt {', '.join(differ)} differ from the committed files (bench reproduce without --run, then commit)"


def results_link(tmp_path: Path, stem: str) -> None:
    """tmp_path/results as test_a_committed_table_rebuilds_byte_identically lays it out for ``stem``."""
    (tmp_path / "results" / "reproduce").mkdir(parents=True)
    (tmp_path / "results" / "runs").symlink_to(ROOT / "results" / "runs", target_is_directory=True)
    if (ROOT / "results" / "studies").is_dir():
        (tmp_path / "results" / "studies").symlink_to(ROOT / "results" / "studies", target_is_directory=True)


#: run in a fresh interpreter: the model families, the runner and Lightning cannot be imported, and
#: resolving a run raises; then the table's own command (argv[1:]) runs
BLOCKED = """
import sys
from importlib.abc import MetaPathFinder

REFUSED = ("bench.models", "bench.runner", "bench.cost", "lightning", "pytorch_lightning")


class Refuse(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == r or name.startswith(r + ".") for r in REFUSED):
            raise ImportError(f"building a table imported {name}")
        return None


sys.meta_path.insert(0, Refuse())
import bench.config


def refused(*args, **kwargs):
    raise AssertionError("building a table resolved a run")


for name in ("resolve_run", "resolve_model", "resolve_task", "resolve_train"):
    setattr(bench.config, name, refused)
from bench.cli import main

raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("stem", ["halt-table1-cpu", "probes-cpu"])
def test_a_committed_table_builds_from_its_records_with_model_imports_blocked(stem, tmp_path):
    """halt-table1-cpu (claims, paired tests on per-example outcomes) and probes-cpu (a length-averaged
    metric, whose per-example bins come from the task the record names, and a state column) rebuild
    to their committed Markdown with bench.models, the runner, cost and Lightning refused
    and bench.config's resolvers raising: the table reads the records' resolved configs."""
    results_link(tmp_path, stem)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, *command_of(stem)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    md = f"{stem}.md"
    assert (tmp_path / "results" / "reproduce" / md).read_text() == (COMMITTED / md).read_text()


def test_the_stale_check_keeps_the_records_a_committed_table_keeps():
    """The stale check (bench reproduce --check-stale: each cell resolved as bench run would today)
    and the records-only rule of a table's build (a cell counts the records made with its run's
    newest settings) keep the same records in every cell of every committed table, and no cell is
    left with stale records only: a preset or default changed under the committed records would
    leave the tables describing other settings than bench run's, and fails here."""
    from bench.cli.parser import build_parser
    from bench.registry import Registry
    from bench.report import reproduce
    from bench.report.results_table import _fresh_records
    from bench.report.tuned import apply_tuned

    differ, out = [], ROOT / "results"
    for line in sorted({" ".join(command_of(stem)) for stem in TABLES}):
        args = build_parser().parse_args(shlex.split(line))
        models = args.models.split(",") if args.models else None
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
        table, preset, own = reproduce.select_table(args.table, Registry(), args.preset, models, seeds, args.set, out)
        stale = reproduce.stale_records(table, own, preset, out)
        if table.kind != "results":
            assert not stale, f"{line}: stale records {stale}"
            continue
        apply_tuned(table, out, preset)
        for row in table.rows:
            for col in table.columns:
                kept, _, _, _ = _fresh_records(table, row, col, out, preset, None, {})
                checked, _, _, mark = _fresh_records(table, row, col, out, preset, stale, {})
                if mark or [r["seed"] for r in kept] != [r["seed"] for r in checked]:
                    differ.append(
                        f"{line}: {row.label} on {col.label}: {stale.get((row.model, col.task, tuple(sorted(table.cell_set(row, col)))))}"
                    )
    assert not differ, "\n".join(differ)
