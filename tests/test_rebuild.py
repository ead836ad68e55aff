"""Every committed table under results/reproduce/ rebuilds byte-identically from the committed
records: each table's Markdown names the command that made it; that command runs again (never
with --run) in a temporary folder whose results/runs (and results/studies, for tuned rows) is the
checkout's (read only through a link) and whose results/reproduce starts with only the committed cost measurements, and every
file it writes must equal the committed one. Nothing is written into the checkout."""

import shlex
import shutil
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
