"""Attribute docstrings of config dataclasses, for ``--help`` (they are not kept at runtime)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from functools import cache


@cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` from the string literal following each annotated field, inherited
    ones included (a subclass that redeclares a field only to change its default keeps the
    description of the class that declared it)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass) and klass is not object:
            docs.update(_own_field_docs(klass))
    return docs


@cache
def _own_field_docs(cls: type) -> dict[str, str]:
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        is_field = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        is_doc = isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)
        if is_field and is_doc:
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def describe(cls: type, prefix: str, instance: object | None = None) -> list[str]:
    """Lines ``prefix.key=value  doc`` for every field of dataclass ``cls`` (values of ``instance``,
    else the defaults)."""
    docs = field_docs(cls)
    obj = instance if instance is not None else cls()
    lines = []
    for f in dataclasses.fields(cls):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            continue
        text = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        lines.append(f"  {prefix}.{f.name}={text:<14} {docs.get(f.name, '')}")
    return lines
