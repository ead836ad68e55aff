import os
import sys
from pathlib import Path

import pytest

# `make test` runs the suite in PYTEST_XDIST_WORKER_COUNT processes (pytest-xdist): the cores are shared
# among them. $OMP_NUM_THREADS holds each worker's share, before torch is imported: torch's own default,
# the runs' train.num_threads=0 (bench/cpus.py default_threads) and the processes the tests start read it.
# Without it a run in a worker took every core beside the other worker (tiny ops then ran up to 80x slower).
_SHARE = max(1, min(2, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
os.environ["OMP_NUM_THREADS"] = str(_SHARE)
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# One generated-data cache for the whole test session (never the user's).
os.environ.setdefault("BENCH_DATA_DIR", str(ROOT / ".cache" / "test-data"))
torch.set_num_threads(_SHARE)


@pytest.fixture(autouse=True)
def clean_checkout(monkeypatch):
    """Records made in tests name a clean commit, whatever state the checkout is in: tables mark
    records of a dirty tree (‡), and a test's tables must not change with uncommitted edits."""
    import bench.records

    monkeypatch.setattr(bench.records, "git_commit", lambda root=None: {"commit": "0" * 40, "dirty": False})


@pytest.fixture(scope="session")
def registry():
    from bench.registry import Registry

    return Registry()


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models stepped token by token: a second thread only adds synchronisation.
    The streaming tests take it for every test of their module (``pytestmark``)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def readme_example(tmp_path, monkeypatch, file_name: str, section: str, package: str) -> tuple[dict, dict]:
    """The worked example `bench/<section>/<file_name>` of docs/adding-a-model.md (section ``models``)
    or docs/adding-a-task.md (``tasks``) installed as ``package.<module>`` under tmp_path, and the
    registry with the page's entries for it added: (registry, entries). A task's page gives its
    entry as the file beside its module (`bench/tasks/<module>.yaml`): written there, and the
    registry names only the target (the Registry reads the rest from that file)."""
    import re

    import yaml

    page = (ROOT / "docs" / {"models": "adding-a-model.md", "tasks": "adding-a-task.md"}[section]).read_text()
    code = re.search(rf"`bench/{section}/{file_name}`:\n\n```python\n(.*?)```", page, re.S).group(1)
    module = file_name.removesuffix(".py")
    where = rf"under `{section}:`" if section == "models" else rf"`bench/tasks/{module}.yaml`.*?:"
    entry = re.search(rf"{where}\n\n```yaml\n(.*?)```", page, re.S).group(1)
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / file_name).write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    text = entry.replace(f"bench.{section}.{module}", f"{package}.{module}")
    entries = yaml.safe_load(text)
    reg = yaml.safe_load((ROOT / "bench" / "registry.yaml").read_text())
    if section == "tasks":
        (tmp_path / package / f"{module}.yaml").write_text(text)
        entries = entries["tasks"]
        reg[section].update({name: {"target": e["target"]} for name, e in entries.items()})
    else:
        reg[section].update(entries)
    return reg, entries


# ---- one unit's checks: `make test-family NAME=...` / `make test-task NAME=...` ------------------------
# ``--family NAME`` / ``--task NAME`` keep the conformance cases of that registry entry (tests marked
# ``conformance``, tests/conformance.py) and every test of the unit's own files: tests/test_<name>.py
# (dashes as underscores) and tests/test_<module>.py, <module> the file its class lives in
# (bench/models/universal.py: tests/test_universal.py). Other files are not collected.


def pytest_addoption(parser):
    group = parser.getgroup("bench units")
    group.addoption("--family", metavar="NAME", help="only the checks model NAME (a registry entry) must pass")
    group.addoption("--task", metavar="NAME", help="only the checks task NAME (a registry entry) must pass")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "conformance(family=PARAM, task=PARAM): a check every model / task passes; PARAM holds the registry name"
    )
    config.bench_unit = _unit(config)


def _unit(config) -> tuple[str, str, set[str]] | None:
    """(``"family"`` or ``"task"``, the registry name, its own test files' names), or None without --family / --task."""
    family, task = config.getoption("--family"), config.getoption("--task")
    if family and task:
        raise pytest.UsageError("give --family NAME or --task NAME, not both")
    if not (family or task):
        return None
    from bench.registry import Registry

    reg = Registry()
    kind, name = ("family", family) if family else ("task", task)
    names = reg.model_names() if family else reg.task_names()
    if name not in names:
        raise pytest.UsageError(f"--{kind} {name}: not a registry {'model' if family else 'task'}; choose one of {', '.join(names)}")
    entry = reg.model_entry(name) if family else reg.task_entry(name)
    module = entry["target"].split(":")[0].rsplit(".", 1)[-1]
    return kind, name, {f"test_{name.replace('-', '_')}.py", f"test_{module}.py"}


def _is_conformance_file(path: Path) -> bool:
    return "pytest.mark.conformance(" in path.read_text()


def pytest_ignore_collect(collection_path, config):
    unit = config.bench_unit
    if unit is None or collection_path.is_dir() or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    if collection_path.name in unit[2] or _is_conformance_file(collection_path):
        return None
    return True


def pytest_collection_modifyitems(config, items):
    unit = config.bench_unit
    if unit is None:
        return
    kind, name, own = unit
    kept, dropped = [], []
    for item in items:
        marker = item.get_closest_marker("conformance")
        param = marker.kwargs.get(kind) if marker else None
        callspec = getattr(item, "callspec", None)
        if item.path.name in own or (param and callspec is not None and callspec.params.get(param) == name):
            kept.append(item)
        else:
            dropped.append(item)
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)
