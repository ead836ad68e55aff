"""The generated-data cache: reused while the fingerprint matches, regenerated when it does not;
the fingerprint sees every constructor argument of a task, however the task was built."""

import numpy as np
import pytest

import bench
from bench.data import _columns, cache_root, fingerprint, load_split
from bench.tasks.base import TaskError
from bench.tasks.copy import Copy
from bench.tasks.formal_languages import D2, Parity

SMALL = dict(n_train=40, n_val=10, n_test=10, bin1_max_len=20)


def test_cache_is_reused_and_keyed_by_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    task = Parity(max_len=12, **SMALL)  # built directly: no registry, nobody sets params by hand
    first = load_split(task, "train")
    calls = []
    original = Parity.generate
    monkeypatch.setattr(Parity, "generate", lambda self, split, rng: calls.append(split) or original(self, split, rng))
    again = load_split(task, "train")
    assert calls == [] and again["tokens"] == first["tokens"]  # read from disk, not generated
    same = Parity(max_len=12, **SMALL)
    assert fingerprint(same, "train") == fingerprint(task, "train")  # equal arguments share an entry
    longer = Parity(max_len=16, **SMALL)  # one data parameter differs, seed and sizes equal
    assert fingerprint(longer, "train") != fingerprint(task, "train")
    data = load_split(longer, "train")
    assert calls == ["train"]  # generated, not read from the first task's folder
    assert max(data["length"]) > 12 >= max(first["length"])  # the longer task's own data
    assert fingerprint(Parity(max_len=12, data_seed=7, **SMALL), "train") != fingerprint(task, "train")
    assert fingerprint(task, "bin0") != fingerprint(task, "train")  # each split has its own seed and entry
    folders = sorted(p.name for p in (cache_root() / "parity").iterdir() if p.is_dir())
    assert len(folders) == 2 and all(f.startswith("train-") for f in folders)
    leftovers = [p for p in cache_root().rglob(".*") if p.is_dir()]
    assert leftovers == []  # no half-written temporary folders


def test_reading_a_cached_split_leaves_no_semaphore_for_the_resource_tracker(tmp_path, monkeypatch):
    """datasets.load_from_disk runs tqdm's thread_map, which would create tqdm's lock as a
    multiprocessing RLock (a named semaphore): a grid cell stopped by a signal could leave it
    behind, and the tracker's warning would follow the grid's last line. Reading gives tqdm a
    thread lock first: nothing is registered with the tracker, in a process with no tqdm lock yet."""
    from multiprocessing import resource_tracker

    from tqdm import tqdm
    from tqdm.std import TqdmDefaultWriteLock

    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    task = Parity(max_len=12, **SMALL)
    load_split(task, "train")  # generated and written
    monkeypatch.delattr(tqdm, "_lock", raising=False)  # as in a fresh process
    monkeypatch.delattr(TqdmDefaultWriteLock, "mp_lock", raising=False)
    registered = []
    monkeypatch.setattr(resource_tracker, "register", lambda name, rtype: registered.append(rtype))
    load_split(task, "train")  # read from disk
    assert registered == [] and not isinstance(tqdm.get_lock(), TqdmDefaultWriteLock)


def test_a_default_is_part_of_the_key():
    """A parameter left at its default and the same value given explicitly are one entry; a
    different value of a parameter that was never passed is still seen (defaults are recorded)."""
    assert fingerprint(Parity(bin_width=10), "train") == fingerprint(Parity(), "train")
    assert fingerprint(Parity(bin_width=5), "train") != fingerprint(Parity(), "train")


def test_params_are_the_bound_constructor_arguments():
    task = Copy(20, pattern_len=4, max_len=24, test_lengths=(24,))  # positional, a tuple
    assert task.params == {
        "n_symbols": 20,
        "pattern_len": 4,
        "max_len": 24,
        "test_lengths": [24],
        "n_train": 6400,
        "n_val": 500,
        "n_test": 500,
        "data_seed": 1234,
    }
    assert task.name == "copy"
    # D2 forwards **kwargs to FormalLanguage: the parent's defaults are recorded too
    d2 = D2(max_len=30)
    assert d2.params == {
        "n_train": 5000,
        "n_val": 500,
        "n_test": 1000,
        "max_len": 30,
        "min_len": None,
        "bin1_max_len": None,
        "bin_width": 10,
        "start_symbol": False,
        "data_seed": 1234,
    }
    assert D2.build("d2-short", {"max_len": 30}).name == "d2-short"
    with pytest.raises(TypeError, match="Parity: .*'colour'"):
        Parity(colour=1)
    with pytest.raises(TypeError, match="not a JSON value"):
        Parity(n_train=object())


def test_registry_tasks_carry_their_resolved_parameters():
    task = bench.build_task("parity", preset="smoke", n_train=77)
    assert task.params["n_train"] == 77 and task.params["bin1_max_len"] == 24 and task.params["bin_width"] == 10
    other = bench.build_task("parity", preset="smoke", n_train=78)
    assert fingerprint(task, "train") != fingerprint(other, "train")


def test_generate_returns_columns_and_bad_shapes_are_refused():
    ok = {"tokens": [[1, 2], [2]], "label": np.array([0, 1])}
    assert _columns(ok) is ok
    with pytest.raises(TypeError, match="dict of columns"):
        _columns([{"tokens": [1], "label": 0}])  # rows are not the contract
    with pytest.raises(ValueError, match="different lengths"):
        _columns({"tokens": [[1], [2]], "label": [0]})
    with pytest.raises(TaskError, match="empty split"):
        _columns({"tokens": [], "label": []})
