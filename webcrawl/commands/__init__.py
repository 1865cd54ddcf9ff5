"""The ``webcrawl`` command's commands, one module each (as ``scrapy/commands/``).

Each module has ``HELP`` (its line in ``webcrawl --help``), ``add_arguments(parser)``
and ``run(args, settings) -> int``; ``CRAWL_OPTIONS`` says whether it takes ``-s`` and
``--crawl``.  What they share is here: the settings as ``scrapy crawl`` reads them, a
Redis session, the crawl's keys.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from scrapy.settings import Settings

from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.redisconn import CrawlRedis
from webcrawl.settings_check import environment_overridden

# in the order `webcrawl --help` lists them
COMMANDS = (
    "status",
    "monitor",
    "show",
    "warc",
    "failpaths",
    "submit",
    "reset",
    "demo",
    "serve_demo",
    "deploy",
    "hbase",
    "bench",
)


def load_settings(overrides: list[str] | None = None) -> Settings:
    """The project's settings (as ``scrapy crawl`` sees them) plus ``-s`` overrides."""
    from scrapy.utils.project import get_project_settings

    from webcrawl.addon import apply
    from webcrawl.settings_check import refuse_unsupported

    settings = get_project_settings()  # sets SCRAPY_SETTINGS_MODULE from a scrapy.cfg
    if not os.environ.get("SCRAPY_SETTINGS_MODULE"):
        # not inside a project (or a scrapy.cfg naming no settings): this project's
        settings.setmodule("webcrawl.settings.base", priority="project")
    if not apply(settings):
        raise SystemExit(
            "webcrawl: the project's ADDONS do not include webcrawl.Addon (its settings "
            f"module is {os.environ.get('SCRAPY_SETTINGS_MODULE') or 'from scrapy.cfg'})"
        )
    for item in overrides or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"webcrawl: -s expects NAME=VALUE, got {item!r}")
        settings.set(name, value, priority="cmdline")
    refuse_unsupported(settings)
    for message in environment_overridden(settings, os.environ):
        print(f"webcrawl: warning: {message}", file=sys.stderr)
    return settings


def crawl_name(args: argparse.Namespace, settings: Settings) -> str:
    return args.crawl or settings.get("WEBCRAWL_CRAWL") or "web"


def crawl(args: argparse.Namespace, settings: Settings, client: Any) -> CrawlKeys:
    return crawl_keys(client, crawl_name(args, settings), settings)


def crawl_keys(client: Any, crawl: str, settings: Settings) -> CrawlKeys:
    """The crawl's keys, with the shard count it was created with (FRONTIER_SHARDS if
    it does not exist yet)."""
    from webcrawl.frontier.layout import existing_crawl

    try:
        return existing_crawl(client, crawl, settings.getint("FRONTIER_SHARDS"))[0]
    except ValueError as exc:
        raise SystemExit(f"webcrawl: {exc}") from None


class Session:
    """Redis and store for one command, closed (embedded Redis left) at the end."""

    def __init__(self, settings: Settings) -> None:
        self.redis = CrawlRedis.from_settings(settings, timeout=30.0)  # not a reactor: patience
        self.redis.open()
        self.client = self.redis.client

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.redis.close()


def ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"
