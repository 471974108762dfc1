"""Attribute docstrings of config dataclasses, for ``--help`` (they are not kept at runtime)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from functools import cache


@cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` from the string literal following each annotated field."""
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
    """Lines ``prefix.key = default  # doc`` for every field of dataclass ``cls``."""
    docs = field_docs(cls)
    obj = instance if instance is not None else cls()
    lines = []
    for f in dataclasses.fields(cls):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            continue
        lines.append(f"  {prefix}.{f.name}={value!s:<14} {docs.get(f.name, '')}")
    return lines
