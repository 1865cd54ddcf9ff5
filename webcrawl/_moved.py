"""Module attributes resolved on first use: lazy package exports, and old module paths
that settings files may still name (they warn and forward)."""

from __future__ import annotations

import importlib
import warnings
from typing import Any


def forward(old_module: str, new_module: str, names: tuple[str, ...]) -> Any:
    """A module ``__getattr__`` for ``old_module``: ``names`` come from ``new_module``."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        from scrapy.exceptions import ScrapyDeprecationWarning  # shown by default

        warnings.warn(
            f"{old_module}.{name} moved to {new_module}.{name}; the old path will go away: "
            "update SCHEDULER / SCHEDULER_QUEUE_CLASS / DUPEFILTER_CLASS in your settings",
            ScrapyDeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_module), name)

    return __getattr__


def lazy(package: str, exports: dict[str, str]) -> Any:
    """A package ``__getattr__``: each name in ``exports`` comes from the submodule it maps
    to, imported on first use (keeps heavy imports, and ``python -m`` runs of a submodule,
    out of the package's own import)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
