"""The demo web: a generated multi-host site to crawl, test and benchmark against.

:mod:`~webcrawl.demo.web` serves it (faults on demand), :mod:`~webcrawl.demo.changes`
makes its pages change on a fast clock, :mod:`~webcrawl.demo.nginx` exports it for
nginx, and :mod:`~webcrawl.demo.command` is ``webcrawl demo``.  A tool beside the
product: nothing in the crawler imports it.
"""

from webcrawl._lazy import lazy

# exported lazily: ``python -m webcrawl.demo.web`` must not find the module
# already imported by its package
_EXPORTS = {
    "DemoWeb": "web",
    "crawl_command": "command",
    "demo_server": "command",
    "run": "command",
    "scrapy_env": "command",
}
__all__ = ["DemoWeb", "crawl_command", "demo_server", "run", "scrapy_env"]

__getattr__ = lazy(__name__, _EXPORTS)
