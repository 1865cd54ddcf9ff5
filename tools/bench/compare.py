"""``python -m tools.bench compare``: ``webcrawl bench crawl``'s table, with a plain Scrapy
spider, the ``web`` spider on Scrapy's own scheduler and on stock scrapy-redis first.

- plain Scrapy spider: what a user writes with Scrapy alone
  (:mod:`tools.bench.plain_spider`: a ``CrawlSpider`` following every link on the
  seeds' hosts, an item a page to a JSON lines feed, Scrapy's default settings and
  memory scheduler); the "x first" column divides by it;
- the ``web`` spider with all our pipelines (SimHash, store, revisits) on Scrapy's own
  scheduler and dupefilter (memory queues);
- the same on stock scrapy-redis: its scheduler, dupefilter and (pickle) queue over TCP;
- then webcrawl's own setups (:mod:`webcrawl.bench.crawl`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tools.bench.plain import plain_command, plain_env
from webcrawl.bench.crawl import Setup, run_crawl

SCRAPY_QUEUE = (
    "SCHEDULER=scrapy.core.scheduler.Scheduler",
    "DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter",
)
STOCK_REDIS = (
    "SCHEDULER=scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS=scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_QUEUE_CLASS=scrapy_redis.queue.PriorityQueue",
    "SCHEDULER_SERIALIZER=scrapy_redis.picklecompat",
    "SCHEDULER_PERSIST=False",
)


def plain(seeds: list[str], data: Path, log: Path) -> tuple[list[str], dict[str, str], Path]:
    """The plain spider's crawl, run from its data dir: no project, Scrapy's defaults."""
    return plain_command(seeds, data, f"LOG_FILE={log}"), plain_env(), data


def comparisons(url: str) -> list[Setup]:
    return [
        Setup("plain Scrapy spider", command=plain),
        Setup("web spider, Scrapy's queue", SCRAPY_QUEUE),
        Setup("stock scrapy-redis (TCP)", (*STOCK_REDIS, f"REDIS_URL={url}"), redis=True),
    ]


def run(args: argparse.Namespace) -> int:
    return run_crawl(args, before=comparisons)
