"""The package's import graph against the layering of docs/architecture.md ("Layers").

Every ``import ctrl_rl...`` in ``src/ctrl_rl`` (at module level or inside a function: both run) is
read with ``ast``; each module belongs to the layer of its folder (the modules directly in
``src/ctrl_rl`` are ``core``; ``__main__`` is the CLI, so ``app``), or to a layer the table names by
a dotted path inside a folder (``sims.torch_backend``: a part of a folder that a higher layer builds
on). An import into a layer that the table does not allow fails, and so does a table with a cycle, a
folder it does not place or a dotted layer that names no module.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "ctrl_rl"
DOC = ROOT / "docs" / "architecture.md"


@cache
def allowed_imports() -> dict[str, set[str]]:
    """``layer: may import these`` from the ```layers block of the design page."""
    block = re.search(r"```layers\n(.*?)```", DOC.read_text(), re.S)
    assert block, "docs/architecture.md lost its ```layers block"
    table = {}
    for line in block.group(1).splitlines():
        if line.strip():
            layer, _, below = line.partition(":")
            table[layer.strip()] = set(below.split("#")[0].split())
    return table


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "app" if parts[-1] == "__main__" else "core"
    for part in (p for p in allowed_imports() if "." in p):  # a part of a folder placed on its own
        if module == f"ctrl_rl.{part}" or module.startswith(f"ctrl_rl.{part}."):
            return part
    return parts[1] if (PACKAGE / parts[1]).is_dir() else "core"


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def imports(path: Path, module: str | None = None) -> set[str]:
    """The ``ctrl_rl`` modules ``path`` (module ``module``, default: its place) imports, relative
    imports resolved."""
    here = (module or module_name(path)).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            found.add(".".join([*base, node.module] if node.module else base))
    return {m for m in found if m == "ctrl_rl" or m.startswith("ctrl_rl.")}


def import_edges() -> list[tuple[str, str, str]]:
    """``(from layer, to layer, where)`` for every import that crosses layers."""
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = layer_of(module_name(path))
        for target in imports(path):
            dst = layer_of(target)
            if dst != src:
                edges.append((src, dst, f"{path.relative_to(ROOT)} imports {target}"))
    return edges


def test_the_layer_table_is_acyclic_and_places_every_folder():
    table = allowed_imports()
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders | {"core"} <= set(table), f"place {sorted(folders - set(table))} in docs/architecture.md's layers"
    for part in (p for p in table if "." in p):
        path = PACKAGE.joinpath(*part.split("."))
        assert path.is_dir() or path.with_suffix(".py").is_file(), f"layer {part} names no module of the package"
    assert all(set(v) <= set(table) for v in table.values()), table
    done: set[str] = set()

    def visit(layer: str, path: tuple[str, ...]) -> None:
        assert layer not in path, f"the layers form a cycle: {' -> '.join((*path, layer))}"
        if layer not in done:
            for lower in table[layer]:
                visit(lower, (*path, layer))
            done.add(layer)

    for layer in table:
        visit(layer, ())


def test_every_import_follows_the_layers():
    table = allowed_imports()
    wrong = [where for src, dst, where in import_edges() if dst not in table[src]]
    assert not wrong, "imports against docs/architecture.md's layers:\n" + "\n".join(wrong)


def test_the_checker_sees_a_violation(tmp_path):
    """A learner importing a runner or the application, inside a function or relatively, is caught."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ctrl_rl.runners import make_runner\n    from ..app import session\n")
    found = imports(probe, "ctrl_rl.algos.probe")
    assert found == {"ctrl_rl.runners", "ctrl_rl.app"}, found
    table = allowed_imports()
    assert [layer_of(m) for m in sorted(found) if layer_of(m) not in table["algos"]] == ["app", "runners"]


ENV_BUILDER = "ctrl_rl.sims.build"
"""The one module that builds an env from a config (``sim.*``, memory check, threads)."""
BACKEND_DISPATCH = {"ctrl_rl.sims", "ctrl_rl.sims.isaacgym"}
"""``make_env`` itself, which hands Isaac Gym's tasks to its adapter, and the adapter's own
``make_env`` around legged_gym's ``task_registry.make_env``."""


def make_env_callers() -> set[str]:
    """The package's modules that call or import a function named ``make_env``."""
    callers = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            called = isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None))
            imported = isinstance(node, ast.ImportFrom) and any(a.name == "make_env" for a in node.names)
            if called == "make_env" or imported:
                callers.add(module_name(path))
    return callers


def test_only_the_env_builder_calls_make_env():
    """Commands and runners get their env from ``sims/build.py: build_env``, so every env (training's,
    an offline runner's evaluation env) has the config's ``sim.*`` options; none calls ``make_env``."""
    assert make_env_callers() - BACKEND_DISPATCH == {ENV_BUILDER}


FUNCTION_IMPORTS_MAX = 30
"""Imports of the package's own modules inside functions (issue 50): each one an optional extra or
start-up time, said on its line."""


def function_level_imports() -> list[tuple[str, int, str]]:
    """``(file, line, text)`` of every import of a ``ctrl_rl`` module inside a function (relative ones
    included), once each however deeply the functions nest."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Import | ast.ImportFrom) and imports_of(node):
                        found.add((str(path.relative_to(ROOT)), node.lineno, lines[node.lineno - 1].strip()))
    return sorted(found)


def imports_of(node: ast.Import | ast.ImportFrom) -> bool:
    """Whether ``node`` imports one of the package's own modules."""
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "ctrl_rl"
    return any(a.name.split(".")[0] == "ctrl_rl" for a in node.names)


def test_imports_inside_functions_are_few_and_each_says_why():
    """A module imports its own package at the top; inside a function only for an optional extra
    (``# optional ...``: mujoco, cyclonedds, rclpy, onnx, ...) or start-up time (``# start-up: ...``:
    the CLI's parser and ``ctrl-rl deploy`` never import torch)."""
    found = function_level_imports()
    listing = "\n".join(f"{f}:{n}: {text}" for f, n, text in found)
    assert len(found) <= FUNCTION_IMPORTS_MAX, f"{len(found)} imports inside functions:\n{listing}"
    silent = [f"{f}:{n}: {text}" for f, n, text in found
              if not re.search(r"#\s*(optional|start-up)\b", text)]
    assert not silent, "say why each import is inside a function (# optional ... / # start-up: ...):\n" + \
        "\n".join(silent)


def test_the_import_counter_sees_a_function_level_import():
    tree = ast.parse("def f():\n    from .robot import X\n    import os\n")
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [imports_of(n) for n in nodes] == [True, False]
