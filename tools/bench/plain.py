"""The plain Scrapy spider of the comparisons: what a user writes with Scrapy alone."""

from __future__ import annotations

import os
import sys
from pathlib import Path

PLAIN_SPIDER = [
    # what `scrapy startproject` sets; what every setup shares
    "ROBOTSTXT_OBEY=True",
    "DOWNLOAD_DELAY=0",
    "CONCURRENT_REQUESTS=16",
    "CONCURRENT_REQUESTS_PER_DOMAIN=16",
    "LOG_LEVEL=INFO",
]


def plain_command(seeds: list[str], data_dir: Path, *overrides: str) -> list[str]:
    """``scrapy runspider`` of the plain spider with :data:`PLAIN_SPIDER`'s settings (run
    from ``data_dir`` with :func:`plain_env`: outside any project, Scrapy's defaults)."""
    from tools.bench import plain_spider

    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "runspider",
        plain_spider.__file__,
        "-a",
        "seeds=" + ",".join(seeds),
        "-o",
        str(data_dir / "items.jsonl"),
    ]
    for item in (*PLAIN_SPIDER, *overrides):
        cmd += ["-s", item]
    return cmd


def plain_env() -> dict[str, str]:
    """The plain spider's environment: no project's settings."""
    return {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
