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
    registry with the page's entries for it added: (registry, entries)."""
    import re

    import yaml

    page = (ROOT / "docs" / {"models": "adding-a-model.md", "tasks": "adding-a-task.md"}[section]).read_text()
    code = re.search(rf"`bench/{section}/{file_name}`:\n\n```python\n(.*?)```", page, re.S).group(1)
    entry = re.search(rf"under `{section}:`\n\n```yaml\n(.*?)```", page, re.S).group(1)
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / file_name).write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = file_name.removesuffix(".py")
    entries = yaml.safe_load(entry.replace(f"bench.{section}.{module}", f"{package}.{module}"))
    reg = yaml.safe_load((ROOT / "bench" / "registry.yaml").read_text())
    reg[section].update(entries)
    return reg, entries
