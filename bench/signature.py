"""A class's constructor parameters, following ``**kwargs`` up the class hierarchy: a subclass
that forwards ``**kwargs`` to its parent takes the parent's parameters too. The registry checks
model and task parameters with it; a task records its arguments with it (bench/tasks/base.py)."""

from __future__ import annotations

import inspect


def constructor_params(cls: type, skip: tuple[str, ...] = ("self",)) -> dict:
    """{name: default (inspect.Parameter.empty if none)} of the keyword parameters of ``cls``'s
    constructor (the nearest ``__init__`` in its MRO), without ``skip``; where that constructor
    takes ``**kwargs``, the parameters of the next constructor up the MRO are added, and so on."""
    owner = next(klass for klass in cls.__mro__ if "__init__" in klass.__dict__)
    parameters = inspect.signature(owner.__dict__["__init__"]).parameters.values()
    out = {p.name: p.default for p in parameters if p.name not in skip and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    if any(p.kind == p.VAR_KEYWORD for p in parameters) and owner is not object:
        for name, default in constructor_params(owner.__mro__[1], skip).items():
            out.setdefault(name, default)
    return out


def constructor_defaults(cls: type) -> dict:
    """{name: default} of ``cls``'s constructor parameters that have one (``constructor_params``)."""
    return {name: default for name, default in constructor_params(cls).items() if default is not inspect.Parameter.empty}
