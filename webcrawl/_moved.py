"""Old module paths that settings files may still name: they warn and forward."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from scrapy.exceptions import ScrapyDeprecationWarning


def forward(old_module: str, new_module: str, names: tuple[str, ...]) -> Any:
    """A module ``__getattr__`` for ``old_module``: ``names`` come from ``new_module``."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        warnings.warn(
            f"{old_module}.{name} moved to {new_module}.{name}; the old path will go away: "
            "update SCHEDULER / SCHEDULER_QUEUE_CLASS / DUPEFILTER_CLASS in your settings",
            ScrapyDeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_module), name)

    return __getattr__
