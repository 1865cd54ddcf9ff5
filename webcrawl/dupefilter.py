"""The crawl's dupefilter: a Redis set of request fingerprints.

Fingerprints are Scrapy's own (``crawler.request_fingerprinter``), stored as
raw 20-byte digests.  The scheduler checks them in batches inside the queue's
push script; :meth:`request_seen` is the one-request path for other callers.
Closing a worker never deletes the set: it belongs to the whole crawl
(``webcrawl reset`` clears it).
"""

from __future__ import annotations

import logging

import redis
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.request import RequestFingerprinterProtocol

logger = logging.getLogger(__name__)


class RedisDupeFilter(BaseDupeFilter):
    def __init__(self, fingerprinter: RequestFingerprinterProtocol, debug: bool = False) -> None:
        self.fingerprinter = fingerprinter
        self.debug = debug
        self.server: redis.Redis | None = None
        self.key: str | None = None
        self._logged = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisDupeFilter:
        return cls(crawler.request_fingerprinter, crawler.settings.getbool("DUPEFILTER_DEBUG"))

    def attach(self, server: redis.Redis, key: str) -> None:
        """Use the set at ``key`` (called by the scheduler when it opens)."""
        self.server, self.key = server, key

    def fingerprint(self, request: Request) -> bytes:
        return self.fingerprinter.fingerprint(request)

    def request_seen(self, request: Request) -> bool:
        if self.server is None or self.key is None:
            raise RuntimeError("RedisDupeFilter used before the scheduler attached it to Redis")
        return self.server.sadd(self.key, self.fingerprint(request)) == 0

    def __len__(self) -> int:
        return int(self.server.scard(self.key)) if self.server is not None else 0

    def clear(self) -> None:
        if self.server is not None:
            self.server.delete(self.key)

    def log(self, request: Request, spider: object = None) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request})
        elif not self._logged:
            logger.debug(
                "Filtered duplicate request: %(request)s - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request},
            )
            self._logged = True
