"""webcrawl as a Scrapy add-on: ``ADDONS = {"webcrawl.Addon": 0}`` in any project.

It turns on the shared frontier (scheduler, queue, dupefilter), webcrawl's downloader
middlewares, pipelines, download handlers and metrics extension, and every default of
:mod:`webcrawl.settings.defaults`, at add-on priority: the project's own settings, a
spider's ``custom_settings`` and ``-s`` still win.  Component lists are merged: the
project's own entries stay, and a component it already lists (by path or class) keeps
the project's order, ``None`` included.
"""

from __future__ import annotations

from typing import Any

from scrapy.settings import BaseSettings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

# settings whose value is a dict of components: merged entry by entry, not replaced
COMPONENT_DICTS = ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS")
# a dict keyed by URL scheme, merged the same way
KEYED_DICTS = ("DOWNLOAD_HANDLERS",)


def defaults() -> dict[str, Any]:
    """Every default of :mod:`webcrawl.settings.defaults`, by name."""
    from webcrawl.settings import defaults as module

    return {name: getattr(module, name) for name in dir(module) if name.isupper()}


class Addon:
    """The Scrapy add-on (``webcrawl.Addon``).

    Scrapy asks it twice: before the crawler exists (so that a spider's ``from_crawler``
    reads webcrawl's defaults too), and again once a spider's ``custom_settings`` are in;
    applying the defaults twice changes nothing."""

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        for name, value in defaults().items():
            if name in COMPONENT_DICTS or name in KEYED_DICTS:
                _merge(settings, name, value)
            else:
                settings.set(name, value, "addon")

    def update_settings(self, settings: BaseSettings) -> None:
        self.update_pre_crawler_settings(settings)


def _merge(settings: BaseSettings, name: str, ours: dict[str, Any]) -> None:
    """Add our entries to the dict setting ``name`` where it has none for that key (a
    component path, or a class whose path it is; a URL scheme), at its own priority.
    Nothing is imported here: a middleware imported before Scrapy installs its reactor
    would install Twisted's default one."""
    current = settings.getdict(name)
    have = {_path(key) for key in current}
    merged = {**current, **{key: v for key, v in ours.items() if key not in have}}
    if merged != current:
        settings.set(name, merged, settings.getpriority(name) or 0)


def _path(key: Any) -> Any:
    return f"{key.__module__}.{key.__qualname__}" if isinstance(key, type) else key


def apply(settings: BaseSettings) -> bool:
    """Apply the add-on to settings read outside a crawl (``webcrawl status``, ...),
    as a crawler would if ``ADDONS`` lists it; whether it does."""
    for path in build_component_list(settings.getdict("ADDONS")):
        addon = load_object(path)
        if isinstance(addon, type) and issubclass(addon, Addon):
            addon().update_settings(settings)
            return True
    return False
