"""Registration by import: the registries (learners, tasks, training loops) load their package's modules once."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache


@cache
def import_package_modules(package: str, skip_missing: bool = False) -> None:
    """Import every module of ``package`` and of its subpackages once (each registers what it defines).
    ``skip_missing``: a module whose dependencies are not installed (ImportError) is left out instead of
    failing (a subpackage that cannot import: all of it)."""
    pkg = importlib.import_module(package)
    for mod in pkgutil.iter_modules(pkg.__path__):
        try:
            importlib.import_module(f"{package}.{mod.name}")
            if mod.ispkg:
                import_package_modules(f"{package}.{mod.name}", skip_missing)
        except ImportError:
            if not skip_missing:
                raise
