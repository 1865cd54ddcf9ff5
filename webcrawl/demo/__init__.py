"""The demo web: a generated multi-host site to crawl, test and benchmark against.

:mod:`~webcrawl.demo.web` serves it (faults on demand), :mod:`~webcrawl.demo.changes`
makes its pages change on a fast clock, :mod:`~webcrawl.demo.nginx` exports it for
nginx, and :mod:`~webcrawl.demo.command` is ``webcrawl demo``.  A tool beside the
product: nothing in the crawler imports it.
"""

from __future__ import annotations

import importlib
from typing import Any

# exported lazily: ``python -m webcrawl.demo.web`` must not find the module
# already imported by its package
_EXPORTS = {"DemoWeb": "web", "crawl_command": "command", "demo_server": "command",
            "run": "command", "scrapy_env": "command"}  # fmt: skip
__all__ = ["DemoWeb", "crawl_command", "demo_server", "run", "scrapy_env"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
