"""Typed parameters: one loader and one validation for every source of the deploy node's parameters.

The node's parameters arrive from a ROS 2 params file (``--params`` or ``--ros-args
--params-file``), ``--ros-args -p``, ``--set key=value`` and the node's own options. All of them
pass through :func:`from_flat`, which checks each value against its dataclass field's type
(a string where a bool is declared is refused, not read as true) and names the key and the fix.
Nested dataclasses map to dotted ROS names (``safety.max_tilt``, ``qos.imu.depth``).

Numpy-free and torch-free: the robot computer imports it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, get_args, get_origin

# -- the loader ------------------------------------------------------------------------------------


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def check_value(key: str, value: Any, tp: Any) -> Any:
    """``value`` as the declared type ``tp`` (int -> float allowed); ValueError naming ``key`` otherwise."""
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is str:
        if isinstance(value, str):
            return value
    elif get_origin(tp) is list:
        (item,) = get_args(tp)
        if isinstance(value, list | tuple):
            return [check_value(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
    else:  # pragma: no cover - a field type this loader was not written for
        raise TypeError(f"parameter {key}: unsupported declared type {tp}")
    example = {bool: "true or false", float: "a number", int: "an integer", str: "a string"}.get(tp, _type_name(tp))
    raise ValueError(f"parameter {key} must be {example}, got {value!r} ({type(value).__name__})")


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def nest(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{'safety.max_tilt': 0.6}`` -> ``{'safety': {'max_tilt': 0.6}}`` (nested mappings pass through)."""
    out: dict[str, Any] = {}
    for key, v in values.items():
        head, _, rest = key.partition(".")
        if rest or isinstance(v, Mapping):
            sub = out.setdefault(head, {})
            if not isinstance(sub, dict):
                raise ValueError(f"parameter {head} is not a group, but {key} was given")
            _merge(sub, nest({rest: v}) if rest else nest(v))
        else:
            out[key] = v
    return out


def _merge(into: dict[str, Any], new: Mapping[str, Any]) -> None:
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def from_flat(cls: type, values: Mapping[str, Any], prefix: str = "") -> Any:
    """An instance of dataclass ``cls`` from dotted or nested values; unknown keys and wrong types
    are errors that name the key, and the dataclass's own ``__post_init__`` checks ranges."""
    nested = nest(values)
    hints = _hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(nested) - set(known))
    if unknown:
        names = [f"{prefix}{k}" for k in unknown]
        raise ValueError(f"unknown parameter(s) {names}; known here: {[f'{prefix}{k}' for k in known]}")
    kwargs: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, v in nested.items():
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            if not isinstance(v, Mapping):
                raise ValueError(f"parameter {prefix}{name} is a group: give {prefix}{name}.<key> values")
            f = fields[name]  # a partial group keeps this field's own defaults for the keys not given
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else tp()
            kwargs[name] = from_flat(tp, {**to_flat(default), **nest_flat(v)}, f"{prefix}{name}.")
        else:
            kwargs[name] = check_value(f"{prefix}{name}", v, tp)
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise ValueError(f"{prefix.rstrip('.') + ': ' if prefix else ''}{e}") from None


def nest_flat(values: Mapping[str, Any]) -> dict[str, Any]:
    """Nested or dotted values -> dotted names (the inverse of :func:`nest`)."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        if isinstance(v, Mapping):
            out.update({f"{k}.{kk}": vv for kk, vv in nest_flat(v).items()})
        else:
            out[k] = v
    return out


def to_flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted ROS names -> values, for declaring the parameters on a node or printing them."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            out.update(to_flat(v, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = list(v) if isinstance(v, tuple | list) else v
    return out


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (the string literal after each field), by field name, for help texts."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # pragma: no cover - source not available
        return {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for a, b in zip(body, body[1:], strict=False):
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr) \
                and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
            docs[a.target.id] = " ".join(b.value.value.split())
    return docs
