"""Lazy package exports: a package's names resolved from its submodules on first use."""

from __future__ import annotations

import importlib
from typing import Any


def lazy(package: str, exports: dict[str, str]) -> Any:
    """A package ``__getattr__``: each name in ``exports`` comes from the submodule it maps
    to, imported on first use (keeps heavy imports, and ``python -m`` runs of a submodule,
    out of the package's own import)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
