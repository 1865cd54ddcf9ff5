"""The crawl's dupefilter: a Redis set of request fingerprints, or a Bloom filter.

One per shard: a URL's fingerprint lives in the shard of its host, beside its
host queue, so the step that queues a URL checks it in the same slot.
Fingerprints are Scrapy's own (``crawler.request_fingerprinter``), stored as
raw 20-byte digests.  The scheduler checks them in batches inside the queue's
push script; :meth:`request_seen` is the one-request path for other callers.
Closing a worker never deletes the set: it belongs to the whole crawl
(``webcrawl reset`` clears it).

``FRONTIER_EXPECTED_URLS`` chooses between the two and sizes the filter
(:func:`dupefilter_class`); which one a crawl was created with is recorded in
its meta hash (:meth:`RedisDupeFilter.layout`), and a worker with another is
refused at start (a set and a filter, or two filters of other sizes, do not
know each other's URLs).
"""

from __future__ import annotations

import logging

import redis
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.dupefilters import BaseDupeFilter
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object
from scrapy.utils.request import RequestFingerprinterProtocol

from webcrawl.frontier.bloom import BloomParams
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.settings_check import non_negative_int, positive_float, positive_int
from webcrawl.urls.scope import scope_key

logger = logging.getLogger(__name__)

# FRONTIER_EXPECTED_URLS up to this keeps the exact set (~70 bytes a URL: 0.7 GB of
# Redis at the limit); beyond it, a Bloom filter (~3.6 bytes a URL at 0.1 %)
EXACT_LIMIT = 10_000_000
EXACT = "webcrawl.frontier.dupefilter.RedisDupeFilter"
BLOOM = "webcrawl.frontier.dupefilter.RedisBloomDupeFilter"


class RedisDupeFilter(BaseDupeFilter):
    """Exact: a Redis set of fingerprints (~67 bytes per URL, measured)."""

    mode = "set"
    key_suffix = "seen"

    def __init__(self, fingerprinter: RequestFingerprinterProtocol, debug: bool = False) -> None:
        self.fingerprinter = fingerprinter
        self.debug = debug
        self.server: redis.Redis | redis.RedisCluster | None = None
        self.keys: CrawlKeys | None = None
        self._logged = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisDupeFilter:
        return cls(crawler.request_fingerprinter, crawler.settings.getbool("DUPEFILTER_DEBUG"))

    def attach(self, server: redis.Redis | redis.RedisCluster, keys: CrawlKeys) -> None:
        """Use the crawl's shards (called by the scheduler when it opens)."""
        self.server, self.keys = server, keys

    def _attached(self) -> CrawlKeys:
        if self.keys is None:
            raise RuntimeError("the dupefilter was used before the scheduler attached it to Redis")
        return self.keys

    def key_for(self, shard: int) -> str:
        """The shard's set (or filter)."""
        return getattr(self._attached().shard(shard), self.key_suffix)

    def key_of(self, request: Request) -> str:
        return self.key_for(self._attached().shard_of(scope_key(request.url, "host")))

    def _per_shard(self, command: str) -> list[int]:
        if self.server is None or self.keys is None:
            return []
        pipe = self.server.pipeline(transaction=False)
        for shard in range(self.keys.shards):
            pipe.execute_command(command, self.key_for(shard))
        return [int(n or 0) for n in pipe.execute()]

    def prepare(self) -> None:
        """Called once Redis is reachable, before the first request."""

    def layout(self) -> dict[str, str]:
        """What the crawl's meta hash records of this dupefilter (see
        :func:`webcrawl.frontier.layout.join_crawl`)."""
        return {"dupefilter": self.mode}

    def fingerprint(self, request: Request) -> bytes:
        return self.fingerprinter.fingerprint(request)

    def member(self, request: Request) -> bytes:
        """What the queue's script records for ``request`` (see its ``mode``)."""
        return self.fingerprint(request)

    def request_seen(self, request: Request) -> bool:
        key = self.key_of(request)
        return self.server.sadd(key, self.member(request)) == 0

    def __len__(self) -> int:
        return sum(self._per_shard("SCARD"))

    def clear(self) -> None:
        self._per_shard("DEL")

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
    """Approximate: a Bloom filter per shard in a plain Redis string (no module needed).

    ``BLOOM_CAPACITY`` URLs at ``BLOOM_ERROR_RATE`` false positives cost
    about 1.8 bytes per URL at 0.1 %.  A false positive is a new URL taken
    for seen: it is not crawled.  Past its capacity the error rate grows.
    Each shard's filter is sized by :func:`shard_bloom_params`: twice its even
    share of the capacity, plus two hosts at their full page budget.
    """

    mode = "bloom"
    key_suffix = "bloom"

    def __init__(
        self,
        fingerprinter: RequestFingerprinterProtocol,
        params: BloomParams,
        debug: bool = False,
        capacity: int | None = None,
    ) -> None:
        super().__init__(fingerprinter, debug)
        self.params = params  # each shard's filter
        self.capacity = capacity or params.capacity  # the crawl's, over all its shards

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisBloomDupeFilter:
        settings = crawler.settings
        capacity, params = bloom_params(settings)
        return cls(
            crawler.request_fingerprinter, params, settings.getbool("DUPEFILTER_DEBUG"), capacity
        )

    def layout(self) -> dict[str, str]:
        return {
            "dupefilter": self.mode,
            "bloom_capacity": str(self.capacity),
            "bloom_error_rate": repr(self.params.error_rate),
            "bloom_shard_capacity": str(self.params.capacity),
        }

    def prepare(self) -> None:
        """Allocate each shard's whole bitmap at once, where it has none yet: grown by
        SETBIT, Redis doubles a string under 1 MiB and adds 1 MiB above, so it would
        hold up to twice the bits it needs.  A SETRANGE of the last byte makes a new
        string of exactly that length (checked first: on an existing filter it would
        clear bits), and each worker sends a byte a shard, not the bitmaps (a crawl
        of ten million URLs over 128 shards has 80 MB of them)."""
        last = -(-self.params.bits // 8) - 1
        pipe = self.server.pipeline(transaction=False)
        for shard in range(self.keys.shards):
            # (by name: redis-py's ClusterPipeline has no eval(); it routes EVAL by its key)
            pipe.execute_command("EVAL", _ALLOCATE, 1, self.key_for(shard), last)
        pipe.execute()

    def member(self, request: Request) -> bytes:
        return ",".join(map(str, self.params.offsets(self.fingerprint(request)))).encode()

    def request_seen(self, request: Request) -> bool:
        key = self.key_of(request)
        pipe = self.server.pipeline(transaction=False)
        for offset in self.params.offsets(self.fingerprint(request)):
            pipe.setbit(key, offset, 1)
        return all(pipe.execute())

    def __len__(self) -> int:
        """Estimated number of URLs seen."""
        return sum(self.params.estimated_count(bits) for bits in self._per_shard("BITCOUNT"))


# the atomic part of RedisBloomDupeFilter.prepare: a filter's bytes, made only if missing
_ALLOCATE = (
    "if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SETRANGE', KEYS[1], ARGV[1], '\\0') end"
)


def shard_bloom_params(
    capacity: int, error_rate: float, shards: int, host_budget: int
) -> BloomParams:
    """Each shard's Bloom filter, for a crawl of ``capacity`` URLs over ``shards``: twice
    its even share, for hosts spread unevenly over the shards, plus two hosts at their
    full ``host_budget`` (FRONTIER_MAX_PAGES_PER_HOST: the most URLs one host puts in
    its shard's filter, 0: no limit), for a shard that holds some of the crawl's
    largest hosts (at 128 shards the even share of ten million URLs is 78 000, less
    than one such host); but only one such host beyond twice the share again, so that
    the filters hold at most four times the crawl's capacity, or twice it and a host's
    budget a shard (with many shards, few of them can get a large host); at most
    the whole capacity."""
    share = -(-2 * capacity // shards)
    extra = min(2 * host_budget, max(share, host_budget))
    return BloomParams(min(capacity, share + extra), error_rate)


def dupefilter_class(settings: BaseSettings) -> type[RedisDupeFilter]:
    """The crawl's dupefilter class: ``DUPEFILTER_CLASS``; with ``FRONTIER_EXPECTED_URLS``
    set (> 0), the exact set up to :data:`EXACT_LIMIT` URLs and a Bloom filter beyond
    (sized by :func:`bloom_size`; also below the limit if DUPEFILTER_CLASS names it)."""
    name = settings.get("DUPEFILTER_CLASS")
    if isinstance(name, type):  # settings may hold the class itself
        name = f"{name.__module__}.{name.__qualname__}"
    expected = non_negative_int(settings, "FRONTIER_EXPECTED_URLS")
    if expected:
        if name not in (EXACT, BLOOM):
            raise ValueError(
                f"FRONTIER_EXPECTED_URLS ({expected}) chooses between webcrawl's exact set and "
                f"Bloom filter, but DUPEFILTER_CLASS is {name!r}: unset one of them"
            )
        # a Bloom filter beyond the limit, or when DUPEFILTER_CLASS asks for one
        name = BLOOM if expected > EXACT_LIMIT or name.endswith(".RedisBloomDupeFilter") else EXACT
    cls = load_object(name)
    if not (isinstance(cls, type) and issubclass(cls, RedisDupeFilter)):
        raise ValueError(
            "DUPEFILTER_CLASS must be webcrawl.frontier.dupefilter.RedisDupeFilter (or a "
            f"subclass) with SCHEDULER = webcrawl.frontier.scheduler.Scheduler, got {cls!r}"
        )
    return cls


def bloom_params(settings: BaseSettings) -> tuple[int, BloomParams]:
    """The crawl's Bloom filter: the URLs it is sized for (:func:`bloom_size`), and each
    shard's filter (:func:`shard_bloom_params`); one too large for Redis fails naming the
    settings."""
    capacity, error_rate = bloom_size(settings)
    shards = positive_int(settings, "FRONTIER_SHARDS")
    budget = non_negative_int(settings, "FRONTIER_MAX_PAGES_PER_HOST")
    try:
        return capacity, shard_bloom_params(capacity, error_rate, shards, budget)
    except ValueError as exc:
        raise ValueError(
            f"the Bloom dupefilter for {capacity} URLs (FRONTIER_EXPECTED_URLS, or "
            f"BLOOM_CAPACITY) at BLOOM_ERROR_RATE {error_rate} over FRONTIER_SHARDS "
            f"{shards}, with FRONTIER_MAX_PAGES_PER_HOST {budget}: {exc}; use more "
            "shards or fewer URLs"
        ) from None


def bloom_size(settings: BaseSettings) -> tuple[int, float]:
    """(URLs, false-positive rate) the crawl's Bloom filter is sized for:
    ``FRONTIER_EXPECTED_URLS`` if set, else ``BLOOM_CAPACITY``; ``BLOOM_ERROR_RATE``."""
    expected = non_negative_int(settings, "FRONTIER_EXPECTED_URLS")
    capacity = expected or positive_int(settings, "BLOOM_CAPACITY")
    return capacity, positive_float(settings, "BLOOM_ERROR_RATE")
