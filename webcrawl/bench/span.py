"""A Scrapy extension the crawl benchmarks add to every crawl they run: when its first
and its last response came (stats ``bench/first_response`` and ``bench/last_response``,
Unix times), so that pages/s leaves out start-up and end-of-crawl detection.

It imports nothing of webcrawl: the benchmarks copy this file beside each crawl
(:func:`webcrawl.bench.crawl.span_settings`), so it also runs in another spider's crawl
and in another checkout's (``--project``)."""

from __future__ import annotations

import time
from typing import Any

from scrapy import signals

MODULE = "webcrawl_bench_span"  # the name of the copy


class ResponseSpan:
    def __init__(self, stats: Any) -> None:
        self.stats = stats
        self.started = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> ResponseSpan:
        extension = cls(crawler.stats)
        crawler.signals.connect(extension.received, signal=signals.response_received)
        return extension

    def received(self) -> None:
        now = time.time()
        if not self.started:
            self.started = True
            self.stats.set_value("bench/first_response", now)
        self.stats.set_value("bench/last_response", now)
