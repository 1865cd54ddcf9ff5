"""The crawl's dupefilter: a Redis set of request fingerprints, or a Bloom filter.

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

from webcrawl.frontier.bloom import BloomParams
from webcrawl.settings_check import positive_float, positive_int

logger = logging.getLogger(__name__)


class RedisDupeFilter(BaseDupeFilter):
    """Exact: a Redis set of fingerprints (~67 bytes per URL, measured)."""

    mode = "set"
    key_suffix = "seen"

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

    def prepare(self) -> None:
        """Called once Redis is reachable, before the first request."""

    def fingerprint(self, request: Request) -> bytes:
        return self.fingerprinter.fingerprint(request)

    def member(self, request: Request) -> bytes:
        """What the queue's script records for ``request`` (see its ``mode``)."""
        return self.fingerprint(request)

    def request_seen(self, request: Request) -> bool:
        if self.server is None or self.key is None:
            raise RuntimeError("the dupefilter was used before the scheduler attached it to Redis")
        return self.server.sadd(self.key, self.member(request)) == 0

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


class RedisBloomDupeFilter(RedisDupeFilter):
    """Approximate: a Bloom filter in a plain Redis string (no module needed).

    ``BLOOM_CAPACITY`` URLs at ``BLOOM_ERROR_RATE`` false positives cost
    about 1.8 bytes per URL at 0.1 %.  A false positive is a new URL taken
    for seen: it is not crawled.  Past its capacity the error rate grows.
    """

    mode = "bloom"
    key_suffix = "bloom"

    def __init__(
        self, fingerprinter: RequestFingerprinterProtocol, params: BloomParams, debug: bool = False
    ) -> None:
        super().__init__(fingerprinter, debug)
        self.params = params

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisBloomDupeFilter:
        settings = crawler.settings
        params = BloomParams(
            positive_int(settings, "BLOOM_CAPACITY"), positive_float(settings, "BLOOM_ERROR_RATE")
        )
        return cls(crawler.request_fingerprinter, params, settings.getbool("DUPEFILTER_DEBUG"))

    def prepare(self) -> None:
        # Allocate the whole bitmap at once: grown by SETBIT, Redis doubles a
        # string under 1 MiB and adds 1 MiB above, so it would hold up to
        # twice the bits it needs.
        self.server.set(self.key, bytes(-(-self.params.bits // 8)), nx=True)

    def member(self, request: Request) -> bytes:
        return ",".join(map(str, self.params.offsets(self.fingerprint(request)))).encode()

    def request_seen(self, request: Request) -> bool:
        if self.server is None or self.key is None:
            raise RuntimeError("the dupefilter was used before the scheduler attached it to Redis")
        pipe = self.server.pipeline()
        for offset in self.params.offsets(self.fingerprint(request)):
            pipe.setbit(self.key, offset, 1)
        return all(pipe.execute())

    def __len__(self) -> int:
        """Estimated number of URLs seen."""
        if self.server is None:
            return 0
        return self.params.estimated_count(int(self.server.bitcount(self.key)))
