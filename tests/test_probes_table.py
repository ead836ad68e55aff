"""The probe table's parts (bench/tables/probes-cpu.yaml): columns with their own metric (the Chomsky
tasks' length-averaged accuracy), the state column, claims beside open questions printed as
measured; from fake run records (no training), and the shipped table's names and claims."""

import functools

import pytest

from bench.cli import main
from bench.records import base_record, record_path, write_json_atomic
from bench.report import reproduce
from bench.report.tables import load_table

TABLE = """
title: "probes, tiny"
source: "test"
preset: smoke
seeds: [0, 1, 2]
metric: token_acc
columns:
  - {task: mqar, split: L48_kv8, label: "mqar 8 pairs"}
  - {task: modular-arithmetic, split: ood, label: "modular ood", metric: length_avg_token_acc}
state: [mqar]
rows:
  - model: transformer
  - model: lstm
  - model: gut
claims:
  - {text: "the Transformer recalls more than the LSTM", source: "[Zoology]", split: "mqar 8 pairs", better: transformer, than: lstm}
questions:
  - {text: "does GUT beat the Transformer on modular arithmetic?", source: "open", split: "modular ood", better: gut, than: transformer}
"""

# per model: mqar token_acc per seed; modular arithmetic per-length token_acc (lengths 11, 16) per seed; state bytes
RUNS = {
    "transformer": ([0.90, 0.92, 0.94], [(0.2, 0.4), (0.3, 0.5), (0.2, 0.6)], 6144),
    "lstm": ([0.30, 0.32, 0.34], [(0.9, 0.7), (1.0, 0.8), (0.9, 0.9)], 512),
    "gut": ([0.80, 0.85, 0.90], [(0.3, 0.5), (0.4, 0.4), (0.5, 0.7)], 4096),
}


def write(out, model, task, seed, metrics, state):
    rec = base_record(model, task, "smoke", seed, [])
    rec.update(
        status="ok",
        primary_metric="token_acc",
        report_metrics=["token_acc", "acc"],
        test_splits=list(metrics),
        metrics={"val": {"n": 10, "token_acc": 0.5}, **metrics},
        stream_state={"bytes": state, "length": 48, "batch": 1},
    )
    write_json_atomic(record_path(out, model, task, "smoke", seed, []), rec)


@pytest.fixture
def probe_runs(tmp_path, monkeypatch):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "probes-tiny.yaml").write_text(TABLE)
    monkeypatch.setattr(reproduce, "load_table", functools.partial(load_table, folder=tmp_path / "tables"))
    for model, (recall, by_length, state) in RUNS.items():
        for seed in range(3):
            bins = {"11": {"n": 4, "token_acc": by_length[seed][0]}, "16": {"n": 12, "token_acc": by_length[seed][1]}}
            write(tmp_path, model, "mqar", seed, {"L48_kv8": {"n": 64, "token_acc": recall[seed]}}, state)
            # the pooled token_acc (0.99) is not what the column reads: the mean over the lengths' bins is
            write(tmp_path, model, "modular-arithmetic", seed, {"ood": {"n": 16, "token_acc": 0.99, "by_length": bins}}, state)
    return tmp_path


def printed_rows(text):
    return [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| ")]


def test_the_table_prints_ours_the_state_column_claims_and_measured_questions(probe_runs, capsys):
    assert main(["reproduce", "probes-tiny", "--out", str(probe_runs)]) == 0  # reads probe_runs/runs
    text = capsys.readouterr().out
    rows = printed_rows(text)
    header = rows[0]
    assert header == ["row", "mqar 8 pairs", "modular ood", "mqar state @48"]  # no paper columns: the table has no paper numbers
    cells = {r[0]: r for r in rows[1:] if r[0] in RUNS}
    assert cells["transformer"][1].startswith("92.0 ± ") and cells["transformer"][1].endswith("(3)")
    # modular arithmetic: the mean over seeds of each seed's unweighted mean over its two lengths' bins
    lstm_mod = sum((a + b) / 2 for a, b in RUNS["lstm"][1]) / 3
    assert cells["lstm"][2].startswith(f"{100 * lstm_mod:.1f} ± ")
    assert [cells[m][3] for m in ("transformer", "lstm", "gut")] == ["6.0 KiB", "512 B", "4.0 KiB"]
    claims = {r[0]: r for r in rows if len(r) == 6}
    claim = claims["the Transformer recalls more than the LSTM"]
    assert claim[2] == "holds" and "Δ +60.0" in claim[3]
    question = claims["does GUT beat the Transformer on modular arithmetic?"]
    assert question[2] == "measured" and question[4] == "open question"
    gut = sum((a + b) / 2 for a, b in RUNS["gut"][1]) / 3
    tf = sum((a + b) / 2 for a, b in RUNS["transformer"][1]) / 3
    assert f"Δ {100 * (gut - tf):+.1f} [90% CI" in question[3] and "p = " in question[3]
    assert not any(word in question[3] for word in ("holds", "does not hold", "inconclusive", "of 1 pairs"))
    assert "open questions: each pair tested" in text and "state = the bytes of the row's streaming state" in text
    assert "Δ = ours - paper" not in text  # no paper numbers: no difference to them


def test_a_question_with_a_ratio_or_a_state_task_not_in_the_columns_is_one_line(probe_runs, capsys):
    bad = TABLE.replace("state: [mqar]", "state: [s5]")
    (probe_runs / "tables" / "probes-tiny.yaml").write_text(bad)
    assert main(["reproduce", "probes-tiny", "--out", str(probe_runs)]) == 2
    err = capsys.readouterr().err
    assert "state lists column tasks" in err and len(err.strip().splitlines()) == 1
    bad = TABLE.replace("better: gut, than: transformer}", "better: gut, than: transformer, ratio_at_most: 2}")
    (probe_runs / "tables" / "probes-tiny.yaml").write_text(bad)
    assert main(["reproduce", "probes-tiny", "--out", str(probe_runs)]) == 2
    err = capsys.readouterr().err
    assert "question 1: an open question compares cells" in err and len(err.strip().splitlines()) == 1


def test_the_probe_table_names_registry_cells_and_cites_each_claim():
    from bench.registry import Registry

    table = load_table("probes-cpu")
    reproduce.check_names(table, Registry())
    assert len(table.rows) == 15 and table.seeds == [0, 1, 2, 3, 4] and table.state
    assert all(c.source.strip() for c in table.claims)
    assert any(c.question for c in table.claims) and any(not c.question for c in table.claims)


def test_plot_state_is_the_width_sweep(tmp_path, capsys):
    """--plot state: every family at d 16 / 32 (--at), its state bytes measured; no records yet: no plot."""
    out = tmp_path / "out"
    assert (
        main(
            [
                "compare",
                "--models",
                "transformer,lstm",
                "--tasks",
                "flipflop",
                "--preset",
                "smoke",
                "--plot",
                "state",
                "--at",
                "16,32",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "flipflop lstm d=16: d_model=16" in text and "flipflop transformer d=32: d_model=32" in text
    assert (
        main(
            [
                "compare",
                "--models",
                "transformer,lstm",
                "--tasks",
                "flipflop",
                "--preset",
                "smoke",
                "--plot",
                "state",
                "--budget",
                "params",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "--plot state draws the width sweep" in capsys.readouterr().err


TINY_RUNS_TABLE = """
title: "probes, tiny runs"
source: "test"
preset: smoke
seeds: [0, 1]
metric: token_acc
columns:
  - {task: z60, split: len16, label: "z60 2x"}
state: [z60]
rows:
  - model: transformer
  - model: lstm
questions:
  - {text: "does the LSTM track Z60 at 2x better than the Transformer?", source: "open", split: "z60 2x", better: lstm, than: transformer}
"""


@pytest.mark.slow
def test_reproduce_run_trains_tiny_runs_and_prints_the_state_and_a_measured_question(tmp_path, monkeypatch, capsys):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "probes-tiny.yaml").write_text(TINY_RUNS_TABLE)
    monkeypatch.setattr(reproduce, "load_table", functools.partial(load_table, folder=tmp_path / "tables"))
    sets = ["train.max_steps=2", "train.val_every_steps=2", "model.d_model=8", "data.n_train=64"]
    assert main(["reproduce", "probes-tiny", "--run", "--jobs", "1", "--out", str(tmp_path), *(w for s in sets for w in ("--set", s))]) == 0
    rows = printed_rows(capsys.readouterr().out)
    assert rows[0] == ["row", "z60 2x", "z60 state @32"]
    cells = {r[0]: r for r in rows[1:3]}
    # two seeds each; after two steps both sit at the accuracy of guessing the commonest state (the runs'
    # own token_majority), so the chance rule marks them
    assert "(2, 0 learned) ~" in cells["transformer"][1] and "(2, 0 learned) ~" in cells["lstm"][1]
    # the state each run measured: the LSTM's h and c in each of its 2 layers at d 8 in float32 (128 B);
    # the Transformer's keys and values in each of its 2 layers after 32 tokens at d 8 (4,096 B)
    assert cells["lstm"][2] == "128 B" and cells["transformer"][2] == "4.0 KiB"
    question = next(r for r in rows if r[0].startswith("does the LSTM"))
    assert question[2] == "measured" and question[3].endswith(": no test") and "both at chance" in question[3]  # nothing to compare
