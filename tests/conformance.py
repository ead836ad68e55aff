"""The registry's units and what their classes declare: every check a model family or a task must
pass takes its cases from here, the registry's names filtered by their classes' declarations
(bench/models/base.py ``Backbone``: supports_causal / supports_bidirectional / supports_streaming,
recurrence, bounded_state; bench/tasks/base.py ``Task``: requires_causal, reads_user_files), never
from a list of names. A conformance check carries ``@pytest.mark.conformance(family=PARAM)`` (or
``task=PARAM``): PARAM is its parameter holding the registry name, which is also the case's id, and
``--family NAME`` / ``--task NAME`` (tests/conftest.py; `make test-family NAME=...`) keep that unit's
cases.
"""

from __future__ import annotations

import functools

from bench.registry import Registry
from bench.targets import import_target

REG = Registry()
MODELS = REG.model_names()
TASKS = REG.task_names()


@functools.cache
def model_class(name: str):
    return import_target(REG.model_entry(name)["target"], name)


@functools.cache
def task_class(name: str):
    return import_target(REG.task_entry(name)["target"], name)


@functools.cache
def declared(name: str, attr: str):
    """What model ``name`` declares as ``attr``: its class's value, or, where the class computes it from
    its settings (a property: XL's recurrence needs its memory), the value of a tiny causal build of the entry."""
    value = getattr(model_class(name), attr)
    if isinstance(value, property):
        from streaming_helpers import build

        return getattr(build(name), attr)
    return value


def models(**want) -> list[str]:
    """The registry's models whose declarations equal ``want`` (e.g. ``recurrence="chunk"``), in registry order."""
    return [m for m in MODELS if all(declared(m, k) == v for k, v in want.items())]
