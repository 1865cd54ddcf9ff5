"""Names of a crawl's Redis keys, and the shard each host belongs to.

The frontier is ``shards`` shards.  A host lives in exactly one (a stable hash
of its host key): its queue, politeness turn, delay, retries, leases, revisits
and its URLs' fingerprints.  A shard's keys share one Redis Cluster hash tag,
``webcrawl:{<crawl>:<shard>[.<n>]}:...`` (``n`` spreads the shards evenly over
the slots), so every Lua step touches one slot; the
crawl-wide keys (workers, submitted seeds, scope, counters) share the tag
``{<crawl>}`` and stay off the per-page path.  The same layout serves the
embedded Redis, one Redis server and a Redis Cluster.
"""

from __future__ import annotations

import re
import zlib
from binascii import crc_hqx
from dataclasses import dataclass
from functools import cached_property, lru_cache

DEFAULT_SHARDS = 16
MAX_SHARDS = 4096
SLOTS = 16384  # Redis Cluster's hash slots
# Up to this many shards, each shard's hash tag is chosen to fall in its own
# 1/shards of the slot range (see :func:`shard_tag`); beyond, the plain tags are
# spread evenly enough by chance.
SPREAD_SHARDS = 256

# a crawl name becomes part of every key and of a hash tag: no braces (they would
# end the tag early), no glob characters (``reset`` matches keys by pattern), no slash
# (it ends the crawl's part of a store row key: webcrawl/frontier/cold.py)
_BAD_NAME = re.compile(r"[{}*?\[\]\\\s/]")
# "web:1" would be shard 1 of crawl "web", and "web:1.5" a spread shard's tag of it
_SHARD_LIKE = re.compile(r":\d+(\.\d+)?$")


def check_crawl_name(crawl: str) -> str:
    """``crawl`` if it can name a crawl's keys, else ValueError."""
    if not crawl or _BAD_NAME.search(crawl) or _SHARD_LIKE.search(crawl):
        raise ValueError(
            f"crawl name {crawl!r} cannot name Redis keys: use letters, digits and . _ - : "
            "(no braces, spaces, slashes or * ? [ ], and no :<number> or :<number>.<number> at "
            "the end, which would read as a shard of another crawl)"
        )
    return crawl


def shard_of(host: str, shards: int) -> int:
    """The shard of ``host`` (a host key, see :func:`webcrawl.urls.scope.scope_key`):
    CRC-32 of its UTF-8 bytes modulo ``shards``, the same in every process."""
    return zlib.crc32(host.encode("utf-8", "surrogatepass")) % shards


def hash_slot(tag: str) -> int:
    """The Redis Cluster slot of a hash tag (CRC16-XMODEM modulo 16384)."""
    return crc_hqx(tag.encode(), 0) % SLOTS


def shard_tag(crawl: str, shard: int, shards: int) -> str:
    """The hash tag of a shard: ``<crawl>:<shard>``, or ``<crawl>:<shard>.<n>`` with the
    smallest n that puts it near the centre of the shard's own 1/shards of the slot range.

    A cluster's masters serve contiguous slot ranges of about equal size, so
    shards spread evenly over the slots are spread evenly over the masters (16
    shards on 3 masters: 5, 6 and 5).  Plain tags fall where their CRC puts
    them: 8, 5 and 3 in one measured case, the busiest master serving 50 % of
    the commands instead of a third.
    """
    tag = f"{crawl}:{shard}"
    if shards > SPREAD_SHARDS:
        return tag
    # the middle quarter of the shard's share of the slots: where the shares of
    # two masters meet, a shard goes to the master its centre is in
    low = (8 * shard + 3) * SLOTS // (8 * shards)
    high = max(low + 1, (8 * shard + 5) * SLOTS // (8 * shards))
    n = 0
    while not low <= hash_slot(tag) < high:
        n += 1
        tag = f"{crawl}:{shard}.{n}"
    return tag


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard of a crawl."""

    crawl: str
    shard: int
    tag: str = ""  # the hash tag (:func:`shard_tag`); "" for ``<crawl>:<shard>``

    @cached_property
    def prefix(self) -> str:
        return f"webcrawl:{{{self.tag or f'{self.crawl}:{self.shard}'}}}:"

    @property
    def host_queue_prefix(self) -> str:
        """``<prefix>hq:<host>``: a host's requests, by priority then arrival."""
        return self.prefix + "hq:"

    def host_queue(self, host: str) -> str:
        return self.host_queue_prefix + host

    @property
    def cold(self) -> str:
        """Hash host -> its requests in the cold tier: in the store, or spilling to it."""
        return self.prefix + "cold"

    @property
    def cold_total(self) -> str:
        """Counter of the shard's requests in the cold tier."""
        return self.prefix + "cold_n"

    @property
    def spill(self) -> str:
        """Sorted set of requests on their way to the store (host, score and request), by
        when a worker may take them (a claim that is not completed expires)."""
        return self.prefix + "spill"

    @property
    def spilling(self) -> str:
        """Hash host -> its requests in :attr:`spill` (no refill before they are stored)."""
        return self.prefix + "spill_n"

    @property
    def spill_claim(self) -> str:
        """Hash spill entry -> the token of the claim that is storing it."""
        return self.prefix + "spill_claim"

    @property
    def spill_live(self) -> str:
        """Set of spill claims in progress (taken, not completed by SPILLED, not dead: a
        claim leaves it when one of its entries is claimed again).  Only these complete;
        a refill leaves their rows in the store until they do."""
        return self.prefix + "spill_live"

    @property
    def spill_done(self) -> str:
        """Hash completed spill claim -> its rows not refilled yet: a refill moves only rows
        of these (a row of any other claim, dead or unknown, is garbage)."""
        return self.prefix + "spill_done"

    @property
    def replicated(self) -> str:
        """Counter bumped by a check (CLAIMED) whose ``WAIT`` must cover writes made on
        another connection: ``WAIT`` counts the replicas that have the connection's own
        last write, and every write before it."""
        return self.prefix + "replicated"

    @property
    def refill_wait(self) -> str:
        """Sorted set of hosts whose queue wants a refill from the store, by when they asked."""
        return self.prefix + "refill_wait"

    @property
    def refilling(self) -> str:
        """Sorted set of hosts being refilled, by the deadline of the refill's lease."""
        return self.prefix + "refilling"

    @property
    def refill(self) -> str:
        """Hash host -> ``<token>|<room>|<its rows in the store then>`` of its refill lease
        (``<token>|0|0`` once REFILL ran, until REFILLED ends it)."""
        return self.prefix + "refill"

    @property
    def reserved(self) -> str:
        """Counter of queue places promised to refills in progress (FRONTIER_HOT_BUDGET)."""
        return self.prefix + "reserved"

    @property
    def moved_prefix(self) -> str:
        """``<prefix>moved:<host>``: store rows a refill put in the host's queue but has not
        deleted from the store yet (none is put there twice)."""
        return self.prefix + "moved:"

    @property
    def host_pages(self) -> str:
        """Hash: per host, the new URLs it took (FRONTIER_MAX_PAGES_PER_HOST)."""
        return self.prefix + "host_pages"

    @property
    def over_budget(self) -> str:
        """Set of the hosts that had new URLs dropped over FRONTIER_MAX_PAGES_PER_HOST."""
        return self.prefix + "over_budget"

    @property
    def ready(self) -> str:
        """Sorted set of hosts with queued requests, by the time they may be fetched from."""
        return self.prefix + "ready"

    @property
    def next(self) -> str:
        """Hash host -> earliest time its next request may be sent (its last turn taken or
        answer in, + its delay)."""
        return self.prefix + "next"

    @property
    def turn_holds(self) -> str:
        """Hash host -> ``<deadline> <holder>``: a request to the host is in flight, and
        no other leaves before its answer (or the deadline, pushed back while it lasts)."""
        return self.prefix + "turn_holds"

    @property
    def delay(self) -> str:
        """Hash host -> politeness delay in seconds, where it differs from the default."""
        return self.prefix + "delay"

    @property
    def delay_hold(self) -> str:
        """Hash host -> time until which its back-off delay may not be lowered."""
        return self.prefix + "delay_hold"

    @property
    def queued(self) -> str:
        """Counter of requests in the shard's host queues."""
        return self.prefix + "queued"

    @property
    def delayed(self) -> str:
        """Sorted set of requests not to be fetched before a time (retries with back-off)."""
        return self.prefix + "delayed"

    @property
    def leases(self) -> str:
        """Sorted set of lease ids by deadline: popped requests not yet acknowledged."""
        return self.prefix + "leases"

    @property
    def leased(self) -> str:
        """Hash lease id -> host, score and request of a leased request."""
        return self.prefix + "leased"

    @property
    def lease_seq(self) -> str:
        return self.prefix + "lease_seq"

    @property
    def popped(self) -> str:
        """When a worker last popped the shard (Redis's clock), or else when it first took
        work: its owner keeps it fresh, others help a shard left stale."""
        return self.prefix + "popped"

    @property
    def seq(self) -> str:
        """Counter that orders requests of equal priority first-in first-out."""
        return self.prefix + "seq"

    @property
    def seen(self) -> str:
        """Set of request fingerprints (the exact dupefilter)."""
        return self.prefix + "seen"

    @property
    def bloom(self) -> str:
        """The shard's Bloom filter (the approximate dupefilter)."""
        return self.prefix + "bloom"

    @property
    def revisits(self) -> str:
        """Sorted set of URL keys by the time their page is due for a revisit."""
        return self.prefix + "revisits"

    @property
    def revisit_requests(self) -> str:
        """Hash URL key -> host, priority and request of a scheduled revisit."""
        return self.prefix + "revisit_req"


@lru_cache(maxsize=64)
def _shard_keys(crawl: str, shards: int) -> tuple[ShardKeys, ...]:
    """Every shard's keys (256 tags take ~0.1 s to find: once per process)."""
    return tuple(ShardKeys(crawl, i, shard_tag(crawl, i, shards)) for i in range(shards))


@dataclass(frozen=True)
class CrawlKeys:
    """A crawl's keys: crawl-wide ones as properties, a shard's through :meth:`shard`."""

    crawl: str
    shards: int = DEFAULT_SHARDS

    def __post_init__(self) -> None:
        check_crawl_name(self.crawl)
        if not 1 <= self.shards <= MAX_SHARDS:
            raise ValueError(f"a crawl has 1 to {MAX_SHARDS} shards, not {self.shards}")

    @cached_property
    def _shards(self) -> tuple[ShardKeys, ...]:
        return _shard_keys(self.crawl, self.shards)

    def shard(self, index: int) -> ShardKeys:
        return self._shards[index]

    def shard_of(self, host: str) -> int:
        return shard_of(host, self.shards)

    def shard_for(self, host: str) -> ShardKeys:
        """The keys of ``host``'s shard."""
        return self._shards[shard_of(host, self.shards)]

    def all_shards(self) -> tuple[ShardKeys, ...]:
        return self._shards

    @cached_property
    def prefix(self) -> str:
        """The crawl-wide keys' prefix (hash tag ``{<crawl>}``)."""
        return f"webcrawl:{{{self.crawl}}}:"

    @property
    def meta(self) -> str:
        """Hash of what the crawl was created with (``shards``, ``layout``)."""
        return self.prefix + "meta"

    @property
    def start(self) -> str:
        """List of seed URLs submitted to a running crawl (``webcrawl submit``, which binds
        their hosts in :attr:`seed_bindings`)."""
        return self.prefix + "start"

    @property
    def scope(self) -> str:
        """Set of scope keys (hosts or domains) the crawl's seeds put in scope."""
        return self.prefix + "scope"

    @property
    def seed_bindings(self) -> str:
        """Hash of the seeds' ``host|port`` to the addresses they were bound to when first
        seeded, sealed (JSON ``{"addresses": [...], "seal": ...}``; the first binding
        stays: :mod:`webcrawl.safety.addresses`, :mod:`webcrawl.safety.seal`)."""
        return self.prefix + "seed_bindings"

    def robots(self, origin: str) -> str:
        """A host's robots.txt rules (``scheme://host:port``; JSON, expires after 24 h;
        :mod:`webcrawl.safety.robots`)."""
        return self.prefix + "robots:" + origin

    def robots_lock(self, origin: str) -> str:
        """Held (with an expiry) by the worker fetching ``origin``'s robots.txt."""
        return self.prefix + "robots_lock:" + origin

    def sitemap_listers(self, sitemap_url: str) -> str:
        """Set of the origins whose robots.txt lists ``sitemap_url`` (a cross-submission:
        each may be listed in it; expires with the robots.txt entries)."""
        return self.prefix + "sitemap_listers:" + sitemap_url

    def sitemap_seen(self, sitemap_url: str) -> str:
        """Set (with an expiry of 1.5 SITEMAP_REFRESH + 1 s, renewed as it is read again or
        waits) once a worker queued ``sitemap_url``: a sitemap is queued once per
        refresh, apart from the page dupefilter (a page may link to it)."""
        return self.prefix + "sitemap_seen:" + sitemap_url

    def sitemap_charged(self, sitemap_url: str) -> str:
        """Set (for a refresh window, 0.9 SITEMAP_REFRESH) once a refresh of
        ``sitemap_url`` was charged to its payer's file budget: once a refresh window,
        however often it leaves (a sitemap sent back to wait leaves again)."""
        return self.prefix + "sitemap_charged:" + sitemap_url

    def sitemap_budget(self, origin: str) -> str:
        """Counter of the URLs taken from ``origin``'s sitemaps (a refresh
        window: from its first count, 0.9 SITEMAP_REFRESH)."""
        return self.prefix + "sitemap_budget:" + origin

    def sitemap_probes(self, origin: str) -> str:
        """Counter of the claims of ``origin``'s sitemaps refetched to test them (a refresh
        window: from its first count, 0.9 SITEMAP_REFRESH)."""
        return self.prefix + "sitemap_probes:" + origin

    def sitemap_files(self, origin: str) -> str:
        """Counter of the sitemap files of ``origin`` queued or scheduled again (a refresh
        window: from its first count, 0.9 SITEMAP_REFRESH)."""
        return self.prefix + "sitemap_files:" + origin

    @property
    def sitemap_trust(self) -> str:
        """Hash of origin -> its sitemap lastmod's record (``confirmed refuted claims``:
        :mod:`webcrawl.sitemaps.trustbook`)."""
        return self.prefix + "sitemap_trust"

    @property
    def failed(self) -> str:
        """Counter of URLs that failed for good."""
        return self.prefix + "failed"

    @property
    def workers(self) -> str:
        """Set of worker ids that have registered."""
        return self.prefix + "workers"

    @property
    def revisit_mover(self) -> str:
        """The worker moving revisits that fall due soon from the store to Redis (a lease)."""
        return self.prefix + "revisit_mover"

    @property
    def busy(self) -> str:
        """Hash of worker id -> time it became busy, for workers not idle."""
        return self.prefix + "busy"

    @property
    def worker_prefix(self) -> str:
        return self.prefix + "worker:"

    def worker(self, worker_id: str) -> str:
        """A worker's heartbeat (JSON, expires when the worker stops beating)."""
        return self.worker_prefix + worker_id

    @property
    def failpath_links_prefix(self) -> str:
        """``<prefix>fpl:<site>``: links that failed or were dropped under a dead path
        (``depth url``, by time), the failed-path re-probe's samples."""
        return self.prefix + "fpl:"

    @property
    def failpath_probe(self) -> str:
        """Held (with an expiry of FAILPATH_PROBE_INTERVAL) by the worker running a re-probe."""
        return self.prefix + "failpath_probe"

    def all_patterns(self) -> list[str]:
        """SCAN patterns matching every key of the crawl (crawl-wide, shards); they may
        match other crawls' keys too (a crawl ``a`` and one named ``a:1``): keep only the
        names :meth:`owns`."""
        return [self.prefix + "*", f"webcrawl:{{{self.crawl}:*}}:*"]

    def owns(self, name: str | bytes) -> bool:
        """Whether the key ``name`` belongs to this crawl."""
        if isinstance(name, bytes):
            name = name.decode("utf-8", "surrogateescape")
        if name.startswith(self.prefix):
            return True
        head = f"webcrawl:{{{self.crawl}:"
        if not name.startswith(head):
            return False
        shard, sep, _ = name[len(head) :].partition("}:")
        return bool(sep) and shard.replace(".", "", 1).isdigit()
