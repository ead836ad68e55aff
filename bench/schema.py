"""Typed schemas, each with one loader.

- ``load_yaml(source, what)``: the one YAML reader for the user's files (registry layers, tables,
  SLURM profiles): numbers in any YAML 1.1 or 1.2 spelling, and one error format,
  ``<what> is not valid YAML at line N, column C: <problem>``.
- ``Domain``: the values a numeric setting may take (``lr`` finite and > 0, ``batch_size`` >= 1),
  with the words the one-line error says; attached to dataclass fields with ``setting(...)``.
- ``type_problem`` / ``check_domain``: one value against its default's type / its domain, the
  one-line errors that ``bench run --set``, the registry's entries and its presets give
  (bench/config.py's ``check_overrides`` adds a train setting's ``Literal`` choices).
- ``Schema``: a dataclass with ``from_mapping(data, where)``, refusing unknown keys (with a
  "did you mean") and wrong types in one line.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
import re
import types
import typing
from pathlib import Path

import yaml

from .errors import UserError


def suggest(name: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"valid: {', '.join(sorted(valid))}{hint}"


# ---- YAML ------------------------------------------------------------------------------------


class _NoDuplicateKeys:
    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True) if key_node.tag != "tag:yaml.org,2002:merge" else None
                if key is None or not isinstance(key, typing.Hashable):
                    continue
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first at line {seen[key].line + 1}); keep one of them", key_node.start_mark
                    )
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep)


class YAMLLoader(_NoDuplicateKeys, yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats: ``3e-4``, ``1E-3`` and ``5e+2`` are numbers
    (YAML 1.1, PyYAML's default, wants a dot, ``3.0e-4``, and reads the others as strings), and
    no duplicate keys in a mapping, at any depth (PyYAML keeps the last one silently)."""


#: the same with libyaml's parser where PyYAML has it (10-30x faster: the registry and the tables
#: are read by every command; the lines and columns of its errors are the same, their words libyaml's)
FastYAMLLoader = (
    type("FastYAMLLoader", (_NoDuplicateKeys, yaml.CSafeLoader), {"__doc__": YAMLLoader.__doc__})
    if hasattr(yaml, "CSafeLoader")
    else YAMLLoader
)
#: the largest YAML file read (the shipped registry is 40 KB): a bigger one is refused at once, not parsed for minutes
MAX_YAML_BYTES = 4 * 2**20

for _loader in {YAMLLoader, FastYAMLLoader}:
    _loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                     |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                     |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                     |[-+]?\.(?:inf|Inf|INF)
                     |\.(?:nan|NaN|NAN))$""",
            re.X,
        ),
        list("-+0123456789."),
    )


def parse_yaml(text: str):
    """YAML text -> Python values, numbers in any YAML 1.1 or 1.2 spelling read as numbers
    (raises yaml.YAMLError: for callers that fall back to the text, like ``--set`` values)."""
    try:
        return yaml.load(text, Loader=FastYAMLLoader)  # noqa: S506 - a SafeLoader subclass
    except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise yaml.YAMLError(f"a number too large to read ({str(exc).splitlines()[0]})") from None


def load_yaml(source: str | os.PathLike, what: str | None = None, *, missing_text: str | None = None):
    """A YAML file (a Path) or YAML text (a str) -> Python values; a file that cannot be read or
    is not valid YAML is one UserError line naming ``what`` (default: the file) and, for YAML, the
    line and column of the problem: ``<what> is not valid YAML at line N, column C: <problem>``.
    ``missing_text``: the whole message for a file that does not exist."""
    is_path = isinstance(source, os.PathLike)
    what = what or (repr(str(source)) if is_path else "YAML text")
    if is_path:
        try:
            size = Path(source).stat().st_size if Path(source).is_file() else 0
            if size > MAX_YAML_BYTES:
                raise UserError(
                    f"{what} is {size / 2**20:,.1f} MiB, more than a YAML file bench reads ({MAX_YAML_BYTES // 2**20} MiB; "
                    f"the shipped registry is 40 KB); is it the file you meant? A registry layer holds only the entries it "
                    f"adds or changes"
                )
            source = Path(source).read_text()
        except FileNotFoundError as exc:
            raise UserError(missing_text or f"{what} cannot be read ({exc.strerror}); pass an existing YAML file") from None
        except OSError as exc:
            raise UserError(f"{what} cannot be read ({exc.strerror or exc}); pass an existing YAML file") from None
        except UnicodeDecodeError as exc:
            raise UserError(
                f"{what} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
            ) from None
    try:
        return parse_yaml(source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{what} is not valid YAML{at}: {problem}") from None


# ---- settings: type, choices, domain ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Domain:
    """The values a numeric setting may take: ``ok(value)``, and ``text`` for the message."""

    ok: typing.Callable[[float], bool]
    text: str

    @classmethod
    def finite(cls, low: float, strict: bool, text: str | None = None) -> Domain:
        test = (lambda v: math.isfinite(v) and v > low) if strict else (lambda v: math.isfinite(v) and v >= low)
        return cls(test, text or f"{'>' if strict else '>='} {low:g}")


AT_LEAST_1, AT_LEAST_0 = Domain.finite(1, False), Domain.finite(0, False)
POSITIVE = Domain.finite(0, True, "a finite number > 0")
FRACTION = Domain(lambda v: 0 <= v < 1, "in [0, 1)")


def setting(default, domain: Domain | None = None, identity: bool = True, **kw):
    """A dataclass field with a default (lists copied per instance), an optional domain, and
    whether the setting is part of a run's identity (bench/records.py: overrides_tag)."""
    meta = {**({"domain": domain} if domain else {}), **({} if identity else {"identity": False})}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta, **kw)
    return dataclasses.field(default=default, metadata=meta, **kw)


def field_default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def choices_of(cls) -> dict[str, tuple]:
    """{field: its Literal's values} for the fields of dataclass ``cls`` typed ``Literal[...]``."""
    hints = typing.get_type_hints(cls)
    return {name: typing.get_args(t) for name, t in hints.items() if typing.get_origin(t) is typing.Literal}


def domains_of(cls) -> dict[str, Domain]:
    return {f.name: f.metadata["domain"] for f in dataclasses.fields(cls) if "domain" in f.metadata}


def not_identity_of(cls) -> list[str]:
    """The fields of dataclass ``cls`` that are not part of a run's identity (``setting(..., identity=False)``)."""
    return [f.name for f in dataclasses.fields(cls) if not f.metadata.get("identity", True)]


def defaults_of(cls) -> dict:
    return {f.name: field_default(f) for f in dataclasses.fields(cls)}


def check_domain(label: str, value, domain: Domain | None, where: str = "") -> None:
    """``label=value (from where): must be <domain>`` for a number outside its domain."""
    if domain is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not domain.ok(value):
        raise UserError(f"{label}={value!r}{f' (from {where})' if where and where != '--set' else ''}: must be {domain.text}")


def type_ok(default, value) -> bool:
    """Whether ``value`` has the type of a parameter's ``default`` (anything goes for a default
    of None or a parameter without one; an int is a fine float, a bool is never an int)."""
    import inspect

    if default is None or default is inspect.Parameter.empty:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


def type_problem(label: str, value, default) -> str | None:
    """'label=value: expected int (like 2), got str' when ``value`` lacks the type of ``default``."""
    if type_ok(default, value):
        return None
    return f"{label}={value!r}: expected {type(default).__name__} (like {default!r}), got {type(value).__name__}"


# ---- typed objects from mappings -------------------------------------------------------------


class Schema:
    """Mixin for a dataclass read from a mapping (a YAML entry): ``from_mapping`` refuses a
    non-mapping, unknown keys (with a "did you mean"), missing required keys and values of the
    wrong type, each in one UserError line starting with ``where`` (and, given ``shape``, e.g.
    "a row is {model, label, set, paper}", saying it with the entry). ``check_keys`` does the key
    check alone (a file whose required keys may come from its base)."""

    #: how an unknown key is named ({keys}: all of them, {first}: the first, quoted)
    UNKNOWN = "unknown key(s) {keys}"

    @classmethod
    def check_keys(cls, data, where: str, shape: str | None = None) -> None:
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        said = f"{shape}, got {data!r}" if shape else None
        if not isinstance(data, dict):
            raise UserError(f"{where}: {said}" if said else f"{where} must be a mapping ({', '.join(names)}), got {type(data).__name__}")
        unknown = sorted(str(k) for k in data if k not in names)
        if unknown:
            unknown_text = cls.UNKNOWN.format(keys=", ".join(unknown), first=repr(unknown[0]))
            raise UserError(f"{where}: {said + ': ' if said else ''}{unknown_text}; {suggest(unknown[0], names)}")

    @classmethod
    def from_mapping(cls, data, where: str, shape: str | None = None):
        cls.check_keys(data, where, shape)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        missing = [
            f.name for f in fields if f.name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise UserError(f"{where}: {f'{shape}, got {data!r}: ' if shape else ''}missing {', '.join(map(repr, missing))}")
        hints = _type_hints(cls)
        for name, value in data.items():
            if not _is_a(value, hints[name]):
                raise UserError(f"{where}: {name} must be {_type_text(hints[name])}, got {value!r}")
        return cls(**data)


@functools.cache
def _type_hints(cls) -> dict:
    """``typing.get_type_hints`` of a schema class, read once (the registry checks its entries often)."""
    return typing.get_type_hints(cls)


def _is_a(value, hint) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin is typing.Literal:
        return value in args
    if origin in (typing.Union, types.UnionType):
        return any(_is_a(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    base = origin or hint
    if base in (list, tuple):
        return isinstance(value, (list, tuple)) and (not args or all(_is_a(v, args[0]) for v in value))
    if base is dict:
        return isinstance(value, dict)
    return isinstance(value, base) if isinstance(base, type) else True


def _type_text(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return "one of " + ", ".join(map(str, args))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in args)
    if hint is type(None):
        return "null"
    if origin in (list, tuple):
        return f"a list of {_type_text(args[0])}" if args else "a list"
    return getattr(origin or hint, "__name__", str(hint))
