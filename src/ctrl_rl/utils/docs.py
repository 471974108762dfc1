"""Attribute docstrings of config dataclasses, for ``--help`` (they are not kept at runtime)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from functools import cache

HELP_WIDTH = 100
"""Columns of ``--help`` and ``ctrl-rl list`` (a test keeps every line within it)."""


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


def plain(text: str) -> str:
    """Docstring markup as plain text: ````x```` and ``:role:`x``` become ``x``."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return re.sub(r"``([^`]+)``", r"\1", text)


def wrap(text: str, indent: int = 0, width: int = HELP_WIDTH) -> list[str]:
    """``text`` as plain lines of at most ``width`` columns, continuation lines indented 2 more."""
    pad = " " * indent
    return textwrap.wrap(plain(text), width, initial_indent=pad, subsequent_indent=pad + "  ",
                         break_on_hyphens=False) or [pad]


def help_table(rows: list[tuple[str, str]], indent: int = 2, width: int = HELP_WIDTH, max_key: int = 34) -> list[str]:
    """``key  description`` rows in two aligned columns within ``width``: descriptions wrap in their
    column; a key longer than ``max_key`` (a long value) takes its own lines and its description
    starts below it, in the column."""
    if not rows:
        return []
    column = indent + min(max(len(key) for key, _ in rows), max_key) + 2
    lines = []
    for key, doc in rows:
        body = textwrap.wrap(plain(doc), width - column, break_on_hyphens=False)
        head = textwrap.wrap(key, width, initial_indent=" " * indent, subsequent_indent=" " * (indent + 4),
                             break_long_words=True, break_on_hyphens=False)
        if len(head) == 1 and len(head[0]) + 2 <= column and body:
            lines.append(f"{head[0]:<{column}}{body[0]}")
            body = body[1:]
        else:
            lines += head
        lines += [" " * column + line for line in body]
    return lines


def field_rows(cls: type, prefix: str, instance: object | None = None) -> list[tuple[str, str]]:
    """Rows ``(prefix.key=value, description)`` for every field of dataclass ``cls`` (values of
    ``instance``, else the defaults), for :func:`help_table`."""
    docs = field_docs(cls)
    obj = instance if instance is not None else cls()
    rows = []
    for f in dataclasses.fields(cls):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            continue
        rows.append((f"{prefix}.{f.name}={value_text(value)}", docs.get(f.name, "")))
    return rows


def value_text(value: object) -> str:
    """A config value as it is written on the command line (``null``, ``true``)."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
