"""The plain Scrapy spider ``python -m tools.bench compare`` measures webcrawl against.

What a Scrapy user writes to crawl a site, with nothing of ours: a
``CrawlSpider`` whose one rule follows every link (``LinkExtractor``),
``allowed_domains`` set to the seeds' hosts (Scrapy's offsite filter),
Scrapy's scheduler and dupefilter in memory, and
yields an item per page, written to a JSON lines feed.  The benchmark
runs it with ``scrapy runspider`` outside the project, so Scrapy's default
settings apply, and sets what ``scrapy startproject`` would (robots.txt
obeyed) and what every setup shares (concurrency, no delay).

    scrapy runspider tools/bench/plain_spider.py -a seeds=http://127.0.0.2:8080/
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class PlainSpider(CrawlSpider):
    name = "plain"

    def __init__(self, seeds: str = "", *args: Any, **kwargs: Any) -> None:
        self.start_urls = [s for s in seeds.split(",") if s]
        self.allowed_domains = sorted({urlsplit(s).hostname or "" for s in self.start_urls})
        # allowed_domains keeps the crawl on the seeds' hosts (Scrapy's offsite filter)
        self.rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)
        super().__init__(*args, **kwargs)

    def parse_start_url(self, response: Response, **kwargs: Any) -> Iterator[dict]:
        return self.parse_page(response)

    def parse_page(self, response: Response) -> Iterator[dict]:
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(default="").strip(),
        }
