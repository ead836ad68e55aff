"""`make test-family NAME=...` / `make test-task NAME=...` (pytest --family / --task, tests/conftest.py)
keep exactly one unit's checks: its conformance cases, whose ids carry its registry name, and the tests
of its own files; a name the registry lacks is refused in one line."""

import pytest
from conftest import ROOT

FILES = ["tests/test_streaming.py", "tests/test_linear_families.py", "tests/test_universal.py", "tests/test_chunked.py"]


class Collected:
    """A plugin that keeps the ids a pytest run selects."""

    def __init__(self):
        self.ids: list[str] = []

    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]


def collect(*args) -> tuple[int, list[str]]:
    """What ``pytest --collect-only ARGS`` selects, run in this process (the modules are imported already)."""
    plugin = Collected()
    rc = pytest.main(["-p", "no:xdist", "-o", "addopts=", "--collect-only", "-qq", "--rootdir", str(ROOT), *args], plugins=[plugin])
    return int(rc), plugin.ids


def test_a_family_keeps_its_conformance_cases_and_its_own_file():
    rc, ids = collect("--family", "deltanet", *FILES)
    assert rc == 0, ids
    assert ids and all(i.endswith("[deltanet]") or "-deltanet]" in i for i in ids), ids  # not deltanet-neg's, not gated-deltanet's
    assert {i.split("::")[0] for i in ids} == {"tests/test_streaming.py", "tests/test_linear_families.py"}  # no chunk case, no UT test


def test_a_task_keeps_its_cases_and_an_unknown_name_is_refused():
    rc, ids = collect("--task", "parity", "tests/test_task_contract.py", "tests/test_streaming.py", "tests/test_formal_languages.py")
    assert rc == 0, ids
    contract = [i for i in ids if i.startswith("tests/test_task_contract.py::")]
    assert contract and all(i.endswith("[parity]") for i in contract)
    assert {i.split("::")[0] for i in ids} == {"tests/test_task_contract.py", "tests/test_formal_languages.py"}  # its module's own tests
    rc, _ = collect("--family", "no-such-model", "tests/test_streaming.py")
    assert rc == pytest.ExitCode.USAGE_ERROR
