"""Write-ups with generated numbers (bench/report/writeup.py), and the provenance marks of records."""

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from bench.cli import main
from bench.errors import UserError
from bench.records import base_record, record_path, write_json_atomic
from bench.records import git_commit as real_git_commit
from bench.report import writeup
from bench.report.reproduce import WRITEUP_BLOCKS, blocks_tables, build, fill_writeups, load_table

ROOT = Path(__file__).resolve().parent.parent


def write_record(out, model, task, seed, metrics, preset="paper", git=None, **extra):
    rec = base_record(model, task, preset, seed, [])
    rec.update(
        status="ok",
        primary_metric="acc",
        report_metrics=["acc"],
        test_splits=list(metrics),
        metrics={s: {"n": 10, "acc": v} for s, v in metrics.items()},
        **extra,
    )
    if git is not None:
        rec["git"] = git
    write_json_atomic(record_path(out, model, task, preset, seed), rec)


BEFORE = "# A write-up\n\nProse with 12.5 typed by hand stays.\n\n"
AFTER = "\n\nMore prose, 7 of 9, stays too.\n"


def test_reproduce_fills_the_block_of_its_table_from_the_records_and_nothing_else(tmp_path):
    for seed, acc in enumerate(
        [0.2, 0.3, 0.4]
    ):  # mean 30, sample std 10: 95% t half-width 4.303 * 10 / sqrt(3) = 24.8; se sqrt(.3 * .7 / 10) = 14.5
        write_record(tmp_path, "transformer", "parity", seed, {"bin0": acc, "bin1": 0.0})
    other = "<!-- bench:table halt-table1-cpu -->\nkept as it is 1.0\n<!-- /bench -->"
    page = tmp_path / "page.md"
    page.write_text(BEFORE + "<!-- bench:table rsa-table2 -->\nold 99.9\n<!-- /bench -->" + AFTER + other + "\n")
    plain = tmp_path / "plain.md"
    plain.write_text("no blocks, 3.5\n")
    assert main(["reproduce", "rsa-table2", "--out", str(tmp_path)]) == 0
    text = page.read_text()
    assert text.startswith(BEFORE + "<!-- bench:table rsa-table2 -->\n\n") and text.endswith(AFTER + other + "\n")
    body = text[len(BEFORE) :].split("<!-- /bench -->")[0]
    assert "old 99.9" not in body and "| parity  | transformer         | 30.0 ± 24.8 (3, se 14.5)" in body
    assert "`bench reproduce rsa-table2 --out" in body and "# [RSA Table 2]" not in body  # the command, not the title
    generated = (tmp_path / "reproduce" / "rsa-table2.md").read_text()
    assert body == "<!-- bench:table rsa-table2 -->" + writeup.table_block(generated)
    assert plain.read_text() == "no blocks, 3.5\n"


def test_a_value_block_shows_one_field_of_a_record(tmp_path):
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.877, "bin1": 0.0}, train_time_s=386.4, steps_run=10000)
    rec = "runs/parity/paper/transformer/seed0.json"
    page = tmp_path / "page.md"
    page.write_text(
        f"train <!-- bench:value {rec} train_time_s .0f -->808<!-- /bench --> s "
        f"(<!-- bench:value {rec} train_time_s min -->8<!-- /bench --> min), "
        f"<!-- bench:value {rec} steps_run , -->1<!-- /bench --> steps, "
        f"bin 0 <!-- bench:value {rec} metrics.bin0.acc pct -->0<!-- /bench --> %.\n"
    )
    assert fill_writeups(tmp_path) == [page]
    assert page.read_text() == (
        f"train <!-- bench:value {rec} train_time_s .0f -->386<!-- /bench --> s "
        f"(<!-- bench:value {rec} train_time_s min -->6.4<!-- /bench --> min), "
        f"<!-- bench:value {rec} steps_run , -->10,000<!-- /bench --> steps, "
        f"bin 0 <!-- bench:value {rec} metrics.bin0.acc pct -->87.7<!-- /bench --> %.\n"
    )
    assert fill_writeups(tmp_path) == []  # filled: nothing changes


def test_a_value_block_steps_into_a_list_by_index(tmp_path):
    curve = [{"step": 235, "acc": 0.711}, {"step": 470, "acc": 0.912}]
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.9, "bin1": 0.0}, val_history=curve)
    rec = "runs/parity/paper/transformer/seed0.json"
    page = tmp_path / "page.md"
    page.write_text(
        f"at step <!-- bench:value {rec} val_history.1.step -->?<!-- /bench -->: "
        f"<!-- bench:value {rec} val_history.1.acc pct -->?<!-- /bench --> %\n"
    )
    fill_writeups(tmp_path)
    assert writeup.BLOCK.sub(lambda m: m["body"], page.read_text()) == "at step 470: 91.2 %\n"
    page.write_text(f"<!-- bench:value {rec} val_history.2.acc pct -->?<!-- /bench -->\n")  # past the end: one line
    with pytest.raises(UserError, match=r"has no 'val_history.2.acc' \(stopped at '2'\)"):
        fill_writeups(tmp_path)


def test_a_value_or_leaderboard_cell_from_other_code_is_marked(tmp_path):
    from bench.report.cells import load_records
    from bench.report.leaderboard import table

    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.5, "bin1": 0.0}, git={"commit": "a" * 40, "dirty": True})
    write_record(tmp_path, "lstm", "parity", 0, {"bin0": 1.0, "bin1": 1.0}, git={"commit": "a" * 40, "dirty": False})
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- bench:value runs/parity/paper/transformer/seed0.json metrics.bin0.acc pct --><!-- /bench --> "
        "<!-- bench:value runs/parity/paper/lstm/seed0.json metrics.bin0.acc pct --><!-- /bench -->\n"
    )
    fill_writeups(tmp_path)
    assert writeup.BLOCK.sub(lambda m: m["body"], page.read_text()) == "50.0 ‡ 100.0\n"
    _, rows = table(load_records(tmp_path, ["transformer", "lstm"], ["parity"], "paper"), ["transformer", "lstm"], ["parity"])
    assert [row[1] for row in rows] == ["50.0 ‡", "100.0"]


def test_a_bad_block_is_one_line_and_writes_nothing(tmp_path, capsys):
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.5, "bin1": 0.0})
    good = tmp_path / "a.md"
    good.write_text("<!-- bench:value runs/parity/paper/transformer/seed0.json metrics.bin0.acc pct -->?<!-- /bench -->\n")
    bad = tmp_path / "b.md"
    bad.write_text("<!-- bench:value runs/parity/paper/transformer/seed0.json metrics.bin9.acc pct -->?<!-- /bench -->\n")
    assert main(["reproduce", "rsa-table2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "b.md" in err and "metrics.bin9.acc" in err
    assert good.read_text().count("?") == 1  # not half-written


def test_writeups_rebuilds_every_named_table_by_its_own_command(tmp_path, capsys):
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.2, "bin1": 0.0})
    assert main(["reproduce", "rsa-table2", "--out", str(tmp_path), "--models", "transformer", "--seeds", "0,1"]) == 0
    page = tmp_path / "page.md"
    page.write_text(BEFORE + "<!-- bench:table rsa-table2 -->\n<!-- /bench -->" + AFTER)
    write_record(tmp_path, "transformer", "parity", 1, {"bin0": 0.4, "bin1": 0.0})  # a new record since the table was made
    assert main(["reproduce", "--writeups", "--out", str(tmp_path)]) == 0
    text = page.read_text()
    assert text.startswith(BEFORE) and text.endswith(AFTER)
    assert "30.0 ± 127.1 (2, se 14.5)" in text  # mean 30, std 14.14: t(.975, 1) 12.706 * 14.14 / sqrt(2)
    assert "2/12 runs present" in text  # seeds 0 and 1: the command's --seeds kept
    assert "rsa-transformer-I" not in text  # and its --models
    (tmp_path / "missing.md").write_text("<!-- bench:table halt-table2-cpu -->\n<!-- /bench -->\n")
    assert main(["reproduce", "--writeups", "--out", str(tmp_path)]) == 2
    assert "no " + str(tmp_path / "reproduce" / "halt-table2-cpu.md") in capsys.readouterr().err


def test_records_of_a_dirty_tree_or_another_commit_are_marked(tmp_path):
    clean = {"commit": "a" * 40, "dirty": False}
    write_record(tmp_path, "transformer", "parity", 0, {"bin0": 0.5, "bin1": 0.0}, git=clean)
    write_record(tmp_path, "transformer", "d2", 0, {"bin0": 0.5, "bin1": 0.0}, git={**clean, "dirty": True, "diff_sha256": "0" * 64})
    write_record(tmp_path, "transformer", "d4", 0, {"bin0": 0.5, "bin1": 0.0}, git={**clean, "note": "ran 29c021a"})
    result = build(load_table("rsa-table2"), tmp_path, "paper")
    ours = {r[0]: r[2] for r in result["rows"] if r[1] == "transformer"}
    assert ours == {
        "parity": "50.0 (1, se 15.8)",
        "d2": "50.0 (1, se 15.8) ‡",
        "d4": "50.0 (1, se 15.8) ‡",
        "tomita3": "—",
        "tomita5": "—",
        "tomita6": "—",
    }
    assert result["other_code"].startswith("‡ = records made from code their named commit does not give")
    write_record(tmp_path, "transformer", "d2", 0, {"bin0": 0.5, "bin1": 0.0}, git=clean)
    write_record(tmp_path, "transformer", "d4", 0, {"bin0": 0.5, "bin1": 0.0}, git=clean)
    assert build(load_table("rsa-table2"), tmp_path, "paper")["other_code"] == ""


def test_git_commit_names_the_diff_of_a_dirty_tree(tmp_path):
    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, check=True).stdout

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    git("init", "-q")
    git("add", "pyproject.toml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    head = git("rev-parse", "HEAD").decode().strip()
    assert real_git_commit(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "untracked.txt").write_text("not code yet\n")
    assert real_git_commit(tmp_path) == {"commit": head, "dirty": False}  # untracked files are not the tree's code
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "bracket.json").write_text("{}\n")
    git("add", "results/bracket.json")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a study's file")
    head = git("rev-parse", "HEAD").decode().strip()
    (tmp_path / "results" / "bracket.json").write_text('{"rung": 1}\n')  # a study writing its tracked state
    assert real_git_commit(tmp_path) == {"commit": head, "dirty": False}  # results/ is not the tree's code
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    diff = b"diff --git a/pyproject.toml b/pyproject.toml\n"
    got = real_git_commit(tmp_path)
    code_diff = git("diff", "HEAD", "--binary", "--", ".", ":(exclude)results")
    assert got["dirty"] is True and got["diff_sha256"] == hashlib.sha256(code_diff).hexdigest()
    assert git("diff", "HEAD", "--binary").startswith(diff) and b"-name = 'x'\n+name = 'y'" in git("diff", "HEAD", "--binary")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'z'\n")
    assert real_git_commit(tmp_path)["diff_sha256"] != got["diff_sha256"]  # another diff, another hash


# ---- the committed results ---------------------------------------------------------------------


def committed_records():
    for path in sorted((ROOT / "results" / "runs").rglob("*.json")):
        rec = json.loads(path.read_text())
        if isinstance(rec, dict) and "git" in rec:
            yield path, rec


def test_every_committed_record_of_other_code_says_so():
    dirty = [p for p, r in committed_records() if r["git"].get("dirty")]
    noted = {str(p.relative_to(ROOT)): r["git"]["note"] for p, r in committed_records() if r["git"].get("note")}
    assert len(dirty) == 51
    assert list(noted) == ["results/runs/flipflop/paper/transformer/seed0.json"]  # fc1585a named, 29c021a ran
    assert "29c021a" in noted["results/runs/flipflop/paper/transformer/seed0.json"]


def test_the_committed_writeups_show_their_tables_and_records():
    """Every block of results/*.md holds what `bench reproduce --writeups` would put there from the
    committed tables under results/reproduce/ (which rebuild from the records) and records."""
    out = ROOT / "results"
    pages = [p for p in writeup.writeups(out) if "<!-- bench:" in p.read_text()]
    assert {p.name for p in pages} >= {"halt_cpu.md", "halt_flipflop.md", "halt_tuned.md", "rsa_formal_languages.md"}
    tables = {name: path.read_text() for name, path in blocks_tables(out).items()}
    for page in pages:
        text = page.read_text()
        assert writeup.fill(text, tables, out, str(page), WRITEUP_BLOCKS) == text, (
            f"{page.name} is not filled: bench reproduce --writeups --out results"
        )


def test_the_stale_committed_tables_are_gone_or_rebuilt():
    made = {p.name for p in (ROOT / "results" / "reproduce").iterdir()}
    assert not any(name.startswith("halt-table1--small") for name in made)
    median = (ROOT / "results" / "reproduce" / "halt-table3-median.md").read_text()
    assert "1/18 runs present" in median and re.search(r"\| transformer +\| 100\.0 \(1\)", median) and "88.7" not in median


@pytest.mark.parametrize("table", ["halt-table3-cpu-tuned", "halt-table1-cpu-tuned"])
def test_the_tuned_tables_are_as_complete_as_halt_tuned_says(table):
    """halt_tuned.md's State section says both tuned tables are complete and no verdict is
    provisional; the committed tables (rebuilt from the records by test_rebuild) must agree."""
    state = (ROOT / "results" / "halt_tuned.md").read_text().split("## State: ")[1].split("\n")[0]
    made = (ROOT / "results" / "reproduce" / f"{table}.md").read_text()
    assert state == "both tables complete"
    assert "40/40 runs present (seeds 0,1,2,3,4 per cell)" in made
    seeds = re.findall(r"\((\d+), (?:\d+ learned, )?se", made)  # each cell's (n, k learned, se ...)
    assert seeds and set(seeds) == {"5"}  # every cell 5 seeds
    assert "provisional" not in made


OVERCLAIMS = {  # what the write-ups said by hand before their numbers were generated
    "halt_flipflop.md": ["27.5 steps/s", "8 min", "808 s", "train 808"],
    "halt_cpu.md": ["halting pays for itself (holds)", "the sizes match the paper's", "**holds**", "**does not hold**"],
    "rsa_formal_languages.md": ["**cause**", "Both checks hold", "comes from the paper's stated initialisation"],
    "halt_logic_proxy.md": ["is the one difference large\nenough", "**With the lr fixed, the paper's ranking partly shows.**"],
    "halt_tuned.md": ["now holds", "no longer holds", "**changed**", "**same**"],  # changes are the verdicts blocks' only
    "budget_flipflop.md": ["**above**", "**below**"],  # which family is ahead is the against blocks' to say
}


@pytest.mark.parametrize("name", sorted(OVERCLAIMS))
def test_the_writeups_prose_types_no_result_and_no_verdict(name):
    """Outside the blocks a write-up names settings, commands and record paths, not results: no
    mean ± std, no percentage, no measured time, and none of the claims it used to overstate."""
    import re

    prose = writeup.BLOCK.sub("", (ROOT / "results" / name).read_text())
    assert not [claim for claim in OVERCLAIMS[name] if claim in prose]
    prose = re.sub(r"`[^`]*`|    .*", "", prose)  # commands and paths, inline and indented
    typed = re.findall(r"\d+\.\d+ ± |\d ?%|\d+(?:\.\d+)? ?(?:min\b|s of|h of|steps/s)", prose)
    assert typed == [], f"{name}: numbers typed by hand outside the blocks: {typed}"


def test_writeups_without_a_folder_is_refused_in_one_line(capsys):
    assert main(["reproduce", "--writeups"]) == 2  # rewriting the checkout's write-ups is asked for by name only
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--out results" in err
