"""Names are names, and the new families' settings are checked before anything is built: each bad
input run as a user types it (``bench.cli.main``), refused in one line with exit status 2, and
nothing written under --out. The rule itself: bench/parsing.py (``check_name``)."""

from pathlib import Path

import pytest
from inputs_helpers import one_line, run_cli

from bench.parsing import NAME_MAX, NAME_RULE, check_name
from bench.registry import Registry

ROOT = Path(__file__).resolve().parent.parent
LONG = "m" * 300
SMOKE = ["--task", "parity", "--preset", "smoke"]


def written(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


# ---- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,why",
    [
        ("../../x", "path separator"),
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        (".", "names a folder"),
        ("..", "names a folder"),
        ("", "it is empty"),
        ("a,b", "holds a comma"),
        (LONG, "it has 300 characters"),
        ("-x", "it starts with '-'"),
        (".hidden", "it starts with '.'"),
        ("a b", "it holds ' '"),
        ("café", "it holds 'é'"),
        (12, "it is int 12"),
    ],
)
def test_a_name_outside_the_rule_is_refused_saying_why(name, why):
    with pytest.raises(Exception) as info:
        check_name(name, "model", "r.yaml")
    text = str(info.value)
    assert type(info.value).__name__ == "UserError" and "\n" not in text, text
    assert text.startswith("r.yaml: model name ") and why in text and f"at most {NAME_MAX} characters" in text, text


@pytest.mark.parametrize(
    "name", ["lstm", "rsa-transformer-I", "_linear", "mamba2-neg", "a" * NAME_MAX, "x1.5+b_c", "halt-table1-cpu--set-0659ea9c"]
)
def test_names_in_the_rule_pass(name):
    assert check_name(name, "model") == name


def test_every_shipped_and_committed_name_follows_the_rule():
    registry = Registry()
    names = [*registry.raw_models, *registry.raw_tasks]  # "_" entries (abstract bases) included
    names += [p.stem for p in (ROOT / "bench" / "tables").glob("*.yaml")]
    names += [p.parent.name for p in ROOT.glob("results/**/studies/*/study.json")]
    names += [p.stem for p in ROOT.glob("results/reproduce/*.md")]  # table[--preset][--set-TAG]
    names += [p.name for p in ROOT.glob("results/runs/*/*/*") if p.is_dir()]  # the models with records
    assert len(names) > 100
    bad = [n for n in names if not (NAME_RULE.fullmatch(n) and len(n) <= NAME_MAX)]
    assert bad == []


# ---- names where they enter: the registry, the command line ---------------------------------------


@pytest.mark.parametrize(
    "name,why",
    [("../../x", "holds a path separator"), (".", "names a folder"), (LONG, "has 300 characters"), ("a,b", "holds a comma")],
    ids=["dotdot", "dot", "300", "comma"],
)
def test_a_registry_entry_that_is_not_a_name_is_refused_before_any_run(name, why, tmp_path, capsys):
    reg = tmp_path / "r.yaml"
    reg.write_text(f"models:\n  '{name}': {{base: lstm}}\n")
    out = tmp_path / "out"
    line = one_line(*run_cli(capsys, "--registry", reg, "run", "--model", name, *SMOKE, "--out", out)[::2], why)
    assert "r.yaml: model name" in line
    assert not out.exists()
    assert written(tmp_path) == [reg]


def test_a_task_entry_that_is_not_a_name_is_refused(tmp_path, capsys):
    reg = tmp_path / "r.yaml"
    reg.write_text("tasks:\n  ../t: {base: parity}\n")
    one_line(*run_cli(capsys, "--registry", reg, "list")[::2], "r.yaml: task name '../t' is not a name")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["run", "--model", "../x", *SMOKE], "--model: model name '../x' is not a name: it holds a path separator"),
        (["run", "--model", "lstm", "--task", "..", "--preset", "smoke"], "--task: task name '..' is not a name"),
        (["compare", "--models", f"lstm,{LONG}", "--tasks", "parity"], "--models: model name 'mmmm"),
        (["reproduce", "../../x"], "table name '../../x' is not a name"),
        (["tune", "--task", "parity", "--preset", "smoke", "--models", "lstm", "--study", "../s"], "--study: study name '../s'"),
        (["tune", "--task", "parity", "--preset", "smoke", "--models", "lstm", "--study", "."], "study name '.' is not a name"),
        (["tune", "--task", "parity", "--preset", "smoke", "--models", "lstm", "--study", LONG], "it has 300 characters"),
    ],
    ids=["run-model", "run-task", "compare-models", "reproduce", "study-path", "study-dot", "study-300"],
)
def test_a_name_on_the_command_line_is_refused_and_nothing_is_written(argv, message, tmp_path, capsys, monkeypatch):
    if argv[0] == "tune":
        pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    one_line(*run_cli(capsys, *argv, "--out", out)[::2], message)
    assert written(tmp_path) == []


# ---- the registry's other holes -------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"], ids=["empty", "comment", "blank"])
def test_an_empty_registry_file_is_refused(text, tmp_path, capsys):
    reg = tmp_path / "r.yaml"
    reg.write_text(text)
    one_line(*run_cli(capsys, "--registry", reg, "list")[::2], "is empty", "'models:' and/or a 'tasks:' section")


def test_an_explicitly_empty_section_is_still_a_registry(tmp_path, capsys):
    reg = tmp_path / "r.yaml"
    reg.write_text("models: {}\n")
    assert run_cli(capsys, "--registry", reg, "list")[0] == 0


def test_overriding_a_shipped_entry_by_its_own_name_says_it_replaces_it(tmp_path, capsys):
    reg = tmp_path / "r.yaml"
    reg.write_text("models:\n  gut: {base: gut}\n")
    one_line(
        *run_cli(capsys, "--registry", reg, "run", "--model", "gut", *SMOKE, "--out", tmp_path / "out")[::2],
        "models.gut inherits from itself (gut -> gut)",
        "replaces registry.yaml's gut",
        "gut-mine: {base: gut}",
    )
    assert written(tmp_path) == [reg]


def test_a_cycle_between_two_new_entries_has_no_replacement_hint(tmp_path, capsys):
    reg = tmp_path / "r.yaml"
    reg.write_text("models:\n  a: {base: b}\n  b: {base: a}\n")
    line = one_line(
        *run_cli(capsys, "--registry", reg, "run", "--model", "a", *SMOKE, "--out", tmp_path / "out")[::2], "inherits from itself"
    )
    assert "replaces" not in line


def test_a_registry_folder_is_named_a_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BENCH_REGISTRY", str(tmp_path))
    one_line(*run_cli(capsys, "list")[::2], f"registry file {str(tmp_path)!r} is a folder; pass a YAML file")


def test_a_class_that_cannot_be_imported_says_how_to_make_it_importable(tmp_path, capsys, monkeypatch):
    (tmp_path / "mymodels.py").write_text("class Mine:\n    pass\n")
    reg = tmp_path / "r.yaml"
    reg.write_text("models:\n  mine: {target: 'mymodels:Mine'}\n")
    monkeypatch.chdir(ROOT)  # the user's folder is not on the import path
    one_line(
        *run_cli(capsys, "--registry", reg, "run", "--model", "mine", *SMOKE, "--out", tmp_path / "out")[::2],
        "No module named 'mymodels'",
        "the module must be importable",
        "PYTHONPATH",
    )
    assert not (tmp_path / "out").exists()


# ---- the new families' settings, checked before anything is built ---------------------------------


FAMILY_SETTINGS = [
    ("mamba2", "model.d_state=0", "model.d_state=0: must be >= 1"),
    ("mamba2", "model.d_state=-1", "model.d_state=-1: must be >= 1"),
    ("mamba2", "model.expand=0", "model.expand=0: must be >= 1"),
    ("mamba2", "model.conv_size=0", "model.conv_size=0: must be >= 1"),
    ("mamba2-neg", "model.d_state=0", "model.d_state=0: must be >= 1"),
    ("gla", "model.expand_k=0", "model.expand_k=0: must be a finite number > 0"),
    ("gla", "model.expand_k=-5", "model.expand_k=-5: must be a finite number > 0"),
    ("rwkv7", "model.lora_rank=0", "model.lora_rank=0: must be >= 1"),
    ("mlstm", "model.qkv_block=0", "model.qkv_block=0: must be >= 1"),
    ("mlstm", "model.proj_factor=0", "model.proj_factor=0: must be a finite number > 0"),
    ("deltanet", "model.beta_range=3", "model.beta_range=3: must be in (0, 2]"),
    ("deltanet", "model.conv_size=-1", "model.conv_size=-1: must be >= 0"),
    ("gated-deltanet", "model.beta_range=0", "model.beta_range=0: must be in (0, 2]"),
    ("hgrn2", "model.chunk_size=0", "model.chunk_size=0: must be >= 1"),
    ("retnet", "model.n_heads=0", "model.n_heads=0: must be >= 1"),
    ("gla-attention", "model.mixer.params.expand_k=0", "model.mixer.params.expand_k=0: must be a finite number > 0"),
    ("gla-attention", "model.mixer.params.chunk_size=0", "model.mixer.params.chunk_size=0: must be >= 1"),
]


@pytest.mark.parametrize("model,setting,message", FAMILY_SETTINGS, ids=[f"{m}-{s}" for m, s, _ in FAMILY_SETTINGS])
def test_a_family_setting_outside_its_domain_is_one_line_and_leaves_no_run_folder(model, setting, message, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", "--model", model, "--task", "mqar", "--preset", "smoke", "--set", setting, "--out", out]
    one_line(*run_cli(capsys, *argv)[::2], message)
    assert not out.exists()  # no run folder, no lock


def test_the_family_domains_are_declared_by_the_mixer_and_taken_by_the_family():
    from bench.models.deltanet import DeltaNet, DeltaRuleAttention
    from bench.models.gated_deltanet import GatedDeltaNet
    from bench.models.gla import GLA, GatedLinearAttention
    from bench.models.mamba2 import SSD, Mamba2

    assert Mamba2.setting_domains is SSD.setting_domains and GLA.setting_domains is GatedLinearAttention.setting_domains
    assert DeltaNet.setting_domains is GatedDeltaNet.setting_domains is DeltaRuleAttention.setting_domains
    beta = DeltaRuleAttention.setting_domains["beta_range"]
    assert [beta.ok(v) for v in (0, 0.5, 1, 2, 2.01)] == [False, True, True, True, False]  # eq. (3): r in (0, 2]
    assert DeltaRuleAttention.setting_domains["conv_size"].ok(0)  # 0: no convolution


# ---- the smaller items ----------------------------------------------------------------------------


@pytest.mark.parametrize("seeds", ["0,,1", "0,1,", ",0", "0-2"])
def test_a_seed_list_with_an_empty_or_odd_item_is_refused(seeds, tmp_path, capsys):
    out = tmp_path / "out"
    line = one_line(*run_cli(capsys, "run", "--model", "lstm", *SMOKE, "--seeds", seeds, "--out", out)[::2], repr(seeds))
    assert "e.g. 0,1,2" in line
    assert not out.exists()


def test_report_to_problems_name_to_not_out(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    out = tmp_path / "out"
    line = one_line(*run_cli(capsys, "report", "--out", out, "--to", a_file / "r.html")[::2], "is a file; pass another --to")
    assert "--out" not in line
    one_line(*run_cli(capsys, "report", "--out", out, "--to", "")[::2], "--to is empty")
    one_line(*run_cli(capsys, "report", "--out", out, "--to", " ")[::2], "--to is empty")
    assert written(tmp_path) == [a_file]


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_data_check_of_a_root_that_is_no_folder_says_so_once(kind, tmp_path, capsys):
    root = tmp_path / "lra"
    if kind == "file":
        root.write_text("")
    line = one_line(*run_cli(capsys, "data", "check", "--task", "lra", "--root", root)[::2], f"--root {str(root)!r} is")
    assert ("a file" if kind == "file" else "not there") in line


def test_cells_skipped_for_missing_files_are_named_once_per_task(tmp_path, capsys, monkeypatch):
    """halt-table4-cpu's file columns without $BENCH_LRA_DIR: one note per task naming what is
    missing and the models skipped, and the grid line counting them (run_grid stands in: the
    generated columns' cells would train)."""
    from bench.cli import train
    from bench.report import reproduce
    from bench.report.tables import load_table

    monkeypatch.delenv("BENCH_LRA_DIR", raising=False)
    monkeypatch.setattr("bench.grid.run_grid", lambda *a, **k: [])
    registry = Registry()
    table = load_table("halt-table4-cpu")
    todo, incompatible = reproduce.plan(table, registry, table.preset, ROOT / "results")  # reads the committed records and studies
    assert len(incompatible) == 15  # 5 rows x Text, Retrieval, Image

    class Args:
        out, jobs, launcher, runs_per_gpu, rerun = tmp_path, 1, "local", 1, False
        accelerator = devices = strategy = num_nodes = None

    assert train._train_grid(Args, registry, [], incompatible, None) == []
    err = capsys.readouterr().err.splitlines()
    skipped = [ln for ln in err if ln.startswith("skipped: ")]
    assert [ln.split(": ")[1] for ln in skipped] == [
        f"transformer, ut, gut, tlb, gutlb on {t}" for t in ("lra-text", "lra-retrieval", "lra-image")
    ]
    assert all("$BENCH_LRA_DIR" in ln and "bench data check" in ln for ln in skipped)
    assert "grid: 0 to train, 15 skipped (above)" in err
