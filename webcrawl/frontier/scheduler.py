"""The crawl's scheduler: scrapy-redis's Scheduler, made safe to share.

What it changes from ``scrapy_redis.scheduler.Scheduler``:

- **No wipe on close.** A worker closing never deletes the shared queue or
  dupefilter (``SCHEDULER_PERSIST=False`` fails at start); ``webcrawl reset`` does.
- **No I/O in the factory.** ``from_crawler`` only reads settings; the Redis
  connection (and the embedded server, with no ``REDIS_URL``) is opened in
  :meth:`open`, off the reactor thread.
- **Batched enqueue.** Requests are buffered and pushed, dupefilter check
  included, in one round trip per batch; the buffer is flushed before every
  pop, so nothing waits in it while the worker looks for work.
- **Crawl-wide idle.** A worker closes when the crawl has no work left
  anywhere (nothing queued, no submitted seeds, no live worker busy), not
  when its own queue looks empty, and not on a timer started at import time.
  ``WEBCRAWL_CONTINUOUS`` keeps workers waiting for work instead.
- **Heartbeats** for ``webcrawl status``.
- **Requests that cannot be shared stay here.** A request whose callback is not a
  spider method (a lambda, ``scrapy fetch``'s and ``scrapy shell``'s own) or whose meta
  is not JSON cannot be written to Redis: this worker fetches it itself (paced like any,
  deduplicated in this worker alone, lost if it dies), and says so once
  (``scheduler/local``), instead of dropping it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy_redis.scheduler import Scheduler as RedisScheduler
from twisted.internet import task, threads
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from webcrawl.frontier.dupefilter import dupefilter_class
from webcrawl.frontier.entry import (
    DEFAULT_REQUEST_CLASSES,
    REFUSED_META,
    UNTRUSTED_META,
    EntryRules,
    RefusedEntry,
)
from webcrawl.frontier.far_revisits import FAR_REVISIT_LIMIT, FarRevisits
from webcrawl.frontier.keys import MAX_SHARDS, CrawlKeys
from webcrawl.frontier.known import SeenCache, by_url, url_key, url_key_of
from webcrawl.frontier.layout import join_crawl
from webcrawl.frontier.outbox import Outbox
from webcrawl.frontier.ownership import owned
from webcrawl.frontier.queue import HostQueue, StepResult
from webcrawl.frontier.redisconn import CrawlRedis, RoundTrips
from webcrawl.frontier.requeue import Requeue
from webcrawl.frontier.signals import crawl_may_end, crawl_out_of_work
from webcrawl.frontier.workers import WorkerRegistry, new_worker_id, popping, worker_info
from webcrawl.settings_check import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    refuse_unsupported,
)
from webcrawl.store import StoreError, open_store, store_url_from_settings
from webcrawl.urls.scope import scope_key

logger = logging.getLogger(__name__)


def frontier_of(crawler: Crawler) -> Scheduler | None:
    """The crawl's open webcrawl scheduler, or None (Scrapy's own scheduler, or closing)."""
    try:
        engine = crawler.engine
    except RuntimeError:  # Scrapy 2.19: not set before the crawl starts
        return None
    scheduler = engine.scheduler if engine else None
    if not isinstance(scheduler, Scheduler) or scheduler.keys is None or scheduler.closed:
        return None
    return scheduler


def entry_rules(settings: Any) -> EntryRules:
    """What queue entries may hold (FRONTIER_REQUEST_CLASSES, FRONTIER_SCHEMES,
    FRONTIER_TRUSTED_META), checked at start."""
    schemes = frozenset(s.lower() for s in settings.getlist("FRONTIER_SCHEMES"))
    if not schemes:
        raise ValueError("FRONTIER_SCHEMES: at least one scheme (default: http, https)")
    trusted = frozenset(settings.getlist("FRONTIER_TRUSTED_META"))
    if trusted - UNTRUSTED_META:
        unknown = ", ".join(sorted(trusted - UNTRUSTED_META))
        known = ", ".join(sorted(UNTRUSTED_META))
        raise ValueError(f"FRONTIER_TRUSTED_META: {unknown} is not one of {known}")
    return EntryRules(frozenset(request_classes(settings)), schemes, trusted)


def refusal_request(exc: RefusedEntry, spider: Any) -> Request:
    """The request that records a refused queue entry's page as failed: the refused-entry
    middleware (and, behind it, the download handler) fails it before anything is sent,
    so the spider's errback stores the reason."""
    assert exc.url is not None
    return Request(
        exc.url,
        callback=NO_CALLBACK,
        errback=getattr(spider, "failed", None),
        dont_filter=True,
        meta={REFUSED_META: str(exc), "dont_obey_robotstxt": True, "failpath": False},
    )


def request_classes(settings: Any) -> list[str]:
    """The request classes queue entries may name: scrapy's own and FRONTIER_REQUEST_CLASSES
    (dotted paths, e.g. ``myproject.requests.SignedRequest``: each must be importable and a
    subclass of scrapy.Request, checked at start)."""
    names = list(DEFAULT_REQUEST_CLASSES)
    for name in settings.getlist("FRONTIER_REQUEST_CLASSES"):
        try:
            cls = load_object(name)
        except (ImportError, AttributeError, ValueError, NameError) as exc:
            raise ValueError(f"FRONTIER_REQUEST_CLASSES: cannot import {name!r}: {exc}") from None
        if not (isinstance(cls, type) and issubclass(cls, Request)):
            raise ValueError(f"FRONTIER_REQUEST_CLASSES: {name!r} is not a scrapy.Request class")
        names.append(f"{cls.__module__}.{cls.__name__}")  # the name entries carry
    return names


def shard_settings(settings: Any) -> tuple[int, int, float]:
    """FRONTIER_SHARDS, FRONTIER_REDIS_WAIT_REPLICAS, FRONTIER_REDIS_WAIT_TIMEOUT, checked."""
    shards = positive_int(settings, "FRONTIER_SHARDS")
    if shards > MAX_SHARDS:
        raise ValueError(f"FRONTIER_SHARDS must be at most {MAX_SHARDS}, got {shards}")
    return (
        shards,
        non_negative_int(settings, "FRONTIER_REDIS_WAIT_REPLICAS"),
        positive_float(settings, "FRONTIER_REDIS_WAIT_TIMEOUT"),
    )


def tier_settings(settings: Any) -> tuple[int, int, float]:
    """FRONTIER_HOT_PER_HOST, FRONTIER_HOT_BUDGET and FRONTIER_REVISIT_HORIZON, checked."""
    per_host = non_negative_int(settings, "FRONTIER_HOT_PER_HOST")
    budget = non_negative_int(settings, "FRONTIER_HOT_BUDGET")
    if budget and not per_host:
        raise ValueError(
            "FRONTIER_HOT_BUDGET needs FRONTIER_HOT_PER_HOST > 0 (0 keeps every "
            "queued request in Redis)"
        )
    return per_host, budget, non_negative_float(settings, "FRONTIER_REVISIT_HORIZON")


def check_no_cold_tier(client: Any, keys: CrawlKeys) -> None:
    """Refuse FRONTIER_HOT_PER_HOST=0 for a crawl with requests in the store's tier: no
    worker would bring them back (and the crawl would wait for them forever)."""
    pipe = client.pipeline(transaction=False)
    for k in keys.all_shards():
        pipe.get(k.cold_total)
    cold = sum(int(n or 0) for n in pipe.execute())
    if cold > 0:
        raise ValueError(
            f"crawl {keys.crawl!r} has {cold} queued requests in the store: "
            "FRONTIER_HOT_PER_HOST must be > 0 to bring them back"
        )


def crawl_name(settings: Any, spider_name: str) -> str:
    """The crawl's namespace in Redis: ``WEBCRAWL_CRAWL``, else the spider's name."""
    return settings.get("WEBCRAWL_CRAWL") or spider_name


def _check(settings: Any) -> None:
    """What would make a crawl unsafe or misleading fails at start, naming the setting."""
    from webcrawl.handlers.http import check_handlers

    refuse_unsupported(settings)
    check_handlers(settings)


def one_off(spider: Spider) -> bool:
    """Whether this is a Scrapy command's own crawl (``scrapy fetch``, ``view``, ``parse``,
    ``shell``: Scrapy's DefaultSpider, or a spider whose ``start`` the command replaced):
    its requests are fetched by its worker alone, and it takes nothing of the shared
    crawl, whose entries its spider may not even have the callbacks of."""
    from scrapy.utils.spider import DefaultSpider

    start = getattr(type(spider), "start", None)
    command = getattr(start, "__module__", "") or ""
    return isinstance(spider, DefaultSpider) or command.startswith("scrapy.commands.")


# request meta of a request kept in its worker (the download handler paces it too)
LOCAL_META = "frontier_local"


def lease_settings(settings: Any) -> tuple[float, float, float]:
    """FRONTIER_LEASE_TIMEOUT, STATUS_HEARTBEAT_INTERVAL and STATUS_HEARTBEAT_TTL, checked:
    leases (and turn holds) are renewed with each heartbeat."""
    lease_timeout = positive_float(settings, "FRONTIER_LEASE_TIMEOUT")
    interval = positive_float(settings, "STATUS_HEARTBEAT_INTERVAL")
    ttl = positive_float(settings, "STATUS_HEARTBEAT_TTL")
    if ttl <= interval:
        raise ValueError(
            f"STATUS_HEARTBEAT_TTL ({ttl}) must be longer than "
            f"STATUS_HEARTBEAT_INTERVAL ({interval})"
        )
    if lease_timeout <= interval:
        raise ValueError(
            f"FRONTIER_LEASE_TIMEOUT ({lease_timeout}) must be longer than "
            f"STATUS_HEARTBEAT_INTERVAL ({interval}): leases are renewed with each heartbeat"
        )
    return lease_timeout, interval, ttl


def _held(answers: list[tuple[Any, Any]]) -> bool:
    """Whether a handler of a signal raised DontCloseSpider (send_catch_log's answers)."""
    return any(isinstance(a, Failure) and a.check(DontCloseSpider) for _, a in answers)


class Scheduler(RedisScheduler):
    # the mover thread (spills, refills, revisit moves: store I/O off the reactor), made
    # on first use, and the revisit move it runs
    _mover: ThreadPoolExecutor | None = None
    _revisit_move: Future[None] | None = None
    one_off = False  # a Scrapy command's own crawl (set when opened)

    def __init__(self, crawler: Crawler, redis: CrawlRedis) -> None:
        settings = crawler.settings
        dupefilter_cls = dupefilter_class(settings)
        queue_cls = load_object(settings.get("SCHEDULER_QUEUE_CLASS"))
        if not (isinstance(queue_cls, type) and issubclass(queue_cls, HostQueue)):
            raise ValueError(
                "SCHEDULER_QUEUE_CLASS must be webcrawl.frontier.queue.HostQueue (or a subclass) "
                f"with SCHEDULER = webcrawl.frontier.scheduler.Scheduler, got {queue_cls!r}"
            )
        super().__init__(
            server=redis.client,
            persist=True,
            flush_on_start=settings.getbool("SCHEDULER_FLUSH_ON_START"),
            queue_cls=queue_cls,
            dupefilter=build_from_crawler(dupefilter_cls, crawler),
        )
        _check(settings)
        self.crawler = crawler
        self.redis = redis
        self.stats = crawler.stats
        self.continuous = settings.getbool("WEBCRAWL_CONTINUOUS")
        self.batch_size = positive_int(settings, "FRONTIER_BATCH_SIZE")
        self.shard_batch = positive_int(settings, "FRONTIER_SHARD_BATCH")
        self.shard_wait = non_negative_float(settings, "FRONTIER_SHARD_WAIT")
        self.prefetch = min(positive_int(settings, "FRONTIER_PREFETCH"), 20)
        self.seen_cache_size = positive_int(settings, "FRONTIER_SEEN_CACHE_SIZE")
        # what this worker knows to be in the crawl's seen set: a plain GET by its URL's
        # hash (with Scrapy's fingerprinter, the URL decides the fingerprint; a false
        # match is one in 2**64 / the cache's size), any other request by its fingerprint
        self._seen = SeenCache(self.seen_cache_size)
        self._by_url = by_url(type(crawler.request_fingerprinter))
        self.idle_poll = positive_float(settings, "FRONTIER_IDLE_POLL_INTERVAL")
        self.start_grace = non_negative_float(settings, "FRONTIER_START_GRACE")
        self.host_delay = non_negative_float(settings, "FRONTIER_HOST_DELAY")
        self.delay_slack = non_negative_float(settings, "FRONTIER_DELAY_SLACK")
        self.hot_per_host, self.hot_budget, self.revisit_horizon = tier_settings(settings)
        self.max_pages_per_host = non_negative_int(settings, "FRONTIER_MAX_PAGES_PER_HOST")
        # the crawl's store (the pipelines' one, the cold tier's): connected in open(), off
        # the reactor, and checked to be the one the crawl records
        self.store = open_store(store_url_from_settings(settings))
        self.store_connect_wait = non_negative_float(settings, "STORE_CONNECT_WAIT")
        self.entry_rules = entry_rules(settings)
        self.lease_timeout, self.heartbeat_interval, self.heartbeat_ttl = lease_settings(settings)
        self.shards, self.wait_replicas, self.wait_timeout = shard_settings(settings)
        self.worker_id = new_worker_id()
        self.keys: CrawlKeys | None = None
        self.closed = False
        # revisits beyond the horizon: stored on the mover thread before their pages'
        # leases end
        self._far = FarRevisits(self._put_far, self._submit)
        self.outbox: Outbox | None = None  # pushes, revisits, leases done with (opened)
        self._leases: dict[Request, str] = {}  # handed to the engine, not yet finished
        self._prefetched: deque[tuple[Request, str]] = deque()  # popped, not yet handed out
        # host -> holder: the turns this worker's requests in flight hold (handlers/politeness)
        self.turn_holds: dict[str, str] = {}
        self._refusals: deque[Request] = deque()  # refused entries' pages, to record as failed
        self._local: deque[Request] = deque()  # requests that cannot be shared (see the module)
        self._local_seen: set[bytes] = set()
        self._local_said = False
        self._submitted_said = False
        self._refused_logged: set[str] = set()  # kinds of refused entries logged
        self._wake_call: Any = None
        self._idle = self._busy_marked = False
        self._waiting_logged = False
        self._outage_logged = False
        self._started = time.time()
        self._last_beat = (self._started, 0)
        self._loops: list[task.LoopingCall] = []

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Scheduler:
        scheduler = cls(crawler, CrawlRedis.from_settings(crawler.settings))
        crawler.signals.connect(scheduler._on_idle, signal=signals.spider_idle)
        crawler.signals.connect(scheduler._on_dropped, signal=signals.item_dropped)
        return scheduler

    # -- lifecycle ---------------------------------------------------------

    def open(self, spider: Spider) -> Deferred[None]:
        self.spider = spider
        self.one_off = one_off(spider)
        crawl = crawl_name(self.crawler.settings, spider.name)
        CrawlKeys(crawl, self.shards)  # a name that cannot name keys fails here

        def connect() -> CrawlKeys:
            from webcrawl.frontier.layout import store_record

            self.store.connect(self.store_connect_wait)
            store = store_record(self.store)
            self.redis.open()
            keys = join_crawl(self.redis.client, crawl, self.shards, self.df.layout(), store)
            if not self.hot_per_host:
                check_no_cold_tier(self.redis.client, keys)
            return keys

        d = threads.deferToThread(connect)
        d.addCallback(self._opened)
        return d

    def _opened(self, keys: CrawlKeys) -> None:
        self.server = self.redis.client
        self.queue = self.queue_cls(
            self.server,
            self.spider,
            keys,
            self.entry_rules,
            wait_replicas=self.wait_replicas,
            wait_timeout=self.wait_timeout,
            store=self.store,
            hot_per_host=self.hot_per_host,
            hot_budget=self.hot_budget,
            max_pages_per_host=self.max_pages_per_host,
            mover=self._submit_move,
        )
        self.outbox = Outbox(self.queue, self._far, self.shard_batch, self.shard_wait)
        self.df.attach(self.server, keys)
        self.registry = WorkerRegistry(self.server, keys)
        self.keys = keys
        if self.flush_on_start:
            logger.warning("SCHEDULER_FLUSH_ON_START: clearing crawl %r", self.keys.crawl)
            self.flush()
        self.df.prepare()
        self._beat()
        queued = len(self.queue)
        logger.info(
            "Worker %s joined crawl %r on %s (%d shards, %d requests queued, %d seen)",
            self.worker_id,
            self.keys.crawl,
            self.redis.description,
            self.shards,
            queued,
            len(self.df),
        )
        for interval, func in ((self.heartbeat_interval, self._beat), (self.idle_poll, self._poll)):
            loop = task.LoopingCall(self._guarded, func)
            loop.start(interval, now=False)
            self._loops.append(loop)

    def close(self, reason: str) -> Deferred[None]:
        self.closed = True
        for loop in self._loops:
            if loop.running:
                loop.stop()
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        if self.keys is None:  # never opened (Redis unreachable, a bad setting)
            return threads.deferToThread(self._close_connections)
        try:
            self._hand_back_prefetched()
            self._far.flush(timeout=60)
            self._flush()
            self.registry.remove(self.worker_id)
        except Exception:
            logger.exception(
                "Could not hand %d buffered requests back to Redis", self.outbox.held()
            )
        self.stats.set_value("frontier/redis_round_trips", RoundTrips.count)
        self._tier_stats()
        self.queue.close()
        return threads.deferToThread(self._close_connections)

    def _hand_back_prefetched(self) -> None:
        """Requests popped but not handed to the engine: their leases end now, and the
        next step that pops their shard queues them again (closing, or paused)."""
        if self._prefetched:
            self.queue.renew([lease for _, lease in self._prefetched], 0.0)
            self._prefetched.clear()

    def _submit(self, func: Any) -> Future[None]:
        """Run ``func`` (store I/O, with the store's retries) on the mover thread, off the
        reactor: a worker frozen in a store call would let its leases and its heartbeat
        lapse.  One thread: moves run in the order they were handed out."""
        if self._mover is None:
            self._mover = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webcrawl-mover")
        return self._mover.submit(func)

    def _submit_move(self, move: Any) -> None:
        """A spill or refill, on the mover thread (errors logged there); then the engine
        is woken: a refill may have given a host work (an engine whose last ask found
        none would wait for Scrapy's 5 s heartbeat)."""
        from twisted.internet import reactor  # the one Scrapy installed

        def run() -> None:
            self._guarded(move)
            if not self.closed:
                reactor.callFromThread(self._wake_engine)

        self._submit(run)

    def _put_far(self, revisits: Any) -> None:
        self.queue.put_far_revisits(revisits)

    def _close_connections(self) -> None:
        if self._mover is not None:  # the moves handed out so far end first
            self._mover.shutdown(wait=True)
        self.redis.close()
        if self.store is not None:
            self.store.close()

    def _move_revisits_up(self) -> None:
        """Off the reactor, on the mover thread, unless the last move is still running."""
        if self.store is None:
            return
        self._far.store()
        if self._revisit_move is not None and not self._revisit_move.done():
            return
        self._revisit_move = self._submit(lambda: self._guarded(self._move_revisits_up_now))

    def _move_revisits_up_now(self) -> None:
        """Revisits the store holds that fall due within the horizon: into Redis (all of
        them with FRONTIER_REVISIT_HORIZON = 0: none waits in the store then, and those
        an earlier run put there are not stranded)."""
        try:
            moved = self.queue.move_revisits_up(self.revisit_horizon or float("inf"))
        except StoreError as exc:
            logger.warning("Could not read the revisits in the store: %s", exc)
            return
        if moved:
            self.stats.inc_value("revisit/within_horizon", moved)

    def _tier_stats(self) -> None:
        """What this worker moved between Redis and the store (the cold tier)."""
        tiers = self.queue.tier_stats
        for name, value in (
            ("spilled", tiers.spilled),
            ("refilled", tiers.refilled),
            ("tier_errors", tiers.errors),
            ("tier_outages", tiers.outages),
            ("tier_unreadable", tiers.unreadable),
        ):
            if value:
                self.stats.set_value(f"frontier/{name}", value)
        if self._far.stored:
            self.stats.set_value("revisit/beyond_horizon", self._far.stored)

    # -- scheduler interface -------------------------------------------------

    def enqueue_request(self, request: Request) -> bool:
        if self.one_off:
            return self._keep_local(request, b"", None)
        return self._enqueue_shared(request)

    def _enqueue_shared(self, request: Request) -> bool:
        key: bytes | int | None = None  # what _seen will know it by
        fingerprint = b""
        if not request.dont_filter:
            key = url_key(request) if self._by_url else None
            if key is not None and self._known(key):
                return self._filtered(request)  # known: no fingerprint, serialisation, Redis
            fingerprint = self.df.member(request)
            if key is None:
                key = fingerprint
                if self._known(key):
                    return self._filtered(request)
        try:  # a redirect can name no host (http:///x, http://@/x) or a bad port
            host = scope_key(request.url, "host")
        except ValueError as exc:
            host = ""
            logger.debug("No host in %s: %s", request.url, exc)
        if not host:  # it cannot be fetched, nor queued (a host's queue and rows need one)
            logger.error("Dropped %s: its URL names no host", request)
            self.stats.inc_value("scheduler/no_host")
            return False
        scheme = request.url.partition(":")[0].lower()
        if scheme not in self.entry_rules.schemes:  # every worker would refuse its entry
            logger.error("Dropped %s: scheme %r is not in FRONTIER_SCHEMES", request, scheme)
            self.stats.inc_value("scheduler/bad_scheme")
            return False
        try:
            data = self.queue.encode(request)
        except (TypeError, ValueError) as exc:
            return self._keep_local(request, fingerprint, exc)
        # a retry's back-off: this worker's clock set it, so it leaves as a duration
        wait = float(request.meta.get("frontier_not_before", 0)) - time.time()
        pushes = self.outbox.pushes
        pushes.append((fingerprint, host, request.priority, max(0.0, wait), data, key))
        if len(pushes) >= self.batch_size and self.outbox.ripe():  # a shard's batch is due
            self._step(pop=False)
        return True

    def _filtered(self, request: Request) -> bool:
        self.stats.inc_value("dupefilter/filtered")
        self.df.log(request, self.spider)
        return False

    def knows_url(self, url: str) -> bool:
        """Whether a plain GET of ``url`` is known to be in the crawl's seen set (what
        this worker stored, or holds to store; False when unsure): the spider asks before
        it makes a Request."""
        return self._by_url and self._known(url_key_of(url))

    def _known(self, key: Any) -> bool:
        """In the crawl's seen set as far as this worker knows, or held to go there."""
        return key in self._seen or (self.outbox is not None and self.outbox.holds(key))

    def schedule_revisit(self, request: Request, due: float) -> None:
        """Fetch ``request`` again at ``due`` (Unix time), whichever worker is free then.

        One entry per URL in the crawl's revisit schedule (a new schedule
        replaces the old); it goes to Redis with this worker's next round
        trip, and into its host queue, past the dupefilter, when due.
        """
        data = self.queue.encode(request)
        key = hashlib.sha1(request.url.encode()).hexdigest()[:20]
        host = scope_key(request.url, "host")
        if self.revisit_horizon and due - time.time() > self.revisit_horizon:
            # beyond the horizon: in the store, brought to Redis as it comes near
            if not 0 <= due < FAR_REVISIT_LIMIT:  # a store key cannot say when
                logger.error(
                    "Dropped the revisit of %s: due at %r, not a Unix time", request.url, due
                )
                self.stats.inc_value("revisit/bad_due")
                return
            self._far.add((key, host, request.priority, due, data))
            if len(self._far.pending) >= self.batch_size:
                self._far.store()
            return
        # ``due`` is this worker's clock: it goes to Redis as seconds from now
        revisits = self.outbox.revisits
        revisits.append((key, host, request.priority, max(0.0, due - time.time()), data))
        if len(revisits) >= self.batch_size:
            self._step(pop=False)

    def _refused(self, exc: RefusedEntry) -> None:
        """A queue entry refused when read: never imported nor fetched, its lease acked
        with the next step; counted, logged once per kind, and its page (if it names
        one) recorded as failed with the reason (:func:`refusal_request`)."""
        self.stats.inc_value(f"security/refused_entry/{exc.kind}")
        if exc.kind not in self._refused_logged:
            self._refused_logged.add(exc.kind)
            logger.error(
                "Refused a queue entry of crawl %r (%s): %s; further ones of this kind are "
                "counted in security/refused_entry/%s",
                self.keys.crawl,
                exc.kind,
                exc,
                exc.kind,
            )
        if exc.url is not None:
            try:
                self._refusals.append(refusal_request(exc, self.spider))
            except ValueError as bad:  # a URL Request will not take: counted and logged only
                logger.debug("No failed page for a refused entry (%s): %s", exc.url, bad)

    def next_request(self) -> Request | None:
        if self._refusals:
            return self._refusals.popleft()
        if self._local and (self.one_off or not self._prefetched):  # leased ones first
            if self.outbox.ripe():
                self._step(pop=False)  # the shared links and acks do not wait for them
            self._mark_busy()
            self._idle = False
            return self._local.popleft()
        if self.one_off:
            return None  # a Scrapy command's own crawl takes nothing of the shared one
        if not self._prefetched:
            result = self._step(pop=self.prefetch)
            if result is None:
                return None  # Redis unreachable: the engine asks again on its next loop
            if not result.popped:
                if self.outbox.held():  # this worker's links may be what the crawl waits for
                    self._step(pop=False, flush=True)
                if result.next_ready is not None:
                    self._wake_in(result.next_ready)
                return None
            self._prefetched.extend(result.popped)
            self._mark_busy()
        request, lease = self._prefetched.popleft()
        self._idle = False
        self._waiting_logged = False
        self._leases[request] = lease
        self.stats.inc_value("scheduler/dequeued/redis")
        return request

    def has_pending_requests(self) -> bool:
        """Whether this worker has requests to hand out, or a step may pop one within a
        second (as far as it knows: :meth:`HostQueue.has_work`, which reads Redis no more
        often than its looks).  Scrapy asks whenever it finds nothing in flight, about
        once a second for a worker with little to do; no: the engine sends spider_idle,
        whose check (:meth:`_on_idle`) keeps the worker open while the crawl has work
        anywhere, and sends crawl_out_of_work when it has none."""
        if self._prefetched or self._refusals or self._local:
            return True
        if self.one_off:
            return False
        if self.outbox.held():
            self._step(pop=False, flush=True)
            if self.outbox.held():
                return True  # Redis is unreachable and we hold requests
        try:
            return self.queue.has_work(seeds=False, within=self.queue.refresh)
        except RedisError as exc:
            self._outage("ask whether the crawl has work now", exc)
            return True  # do not let an outage look like the end of the crawl

    def __len__(self) -> int:
        held = self.outbox.held() + len(self._prefetched) + len(self._refusals)
        return len(self.queue) + held + len(self._local)

    # -- internals -----------------------------------------------------------

    def _keep_local(self, request: Request, fingerprint: bytes, why: Exception | None) -> bool:
        """A request that cannot be shared (``why``), or of a Scrapy command's own crawl
        (None): fetched by this worker (see the module)."""
        if fingerprint and not request.dont_filter:
            if fingerprint in self._local_seen:
                return self._filtered(request)
            self._local_seen.add(fingerprint)
        if why is not None and not self._local_said:
            self._local_said = True
            logger.warning(
                "Kept %s in this worker, not in the shared frontier: %s (such requests are "
                "fetched here, paced like any, and lost if this worker dies; further ones "
                "are counted in scheduler/local)",
                request,
                why,
            )
        request.meta[LOCAL_META] = True
        self._local.append(request)
        self.stats.inc_value("scheduler/local")
        return True

    def _finished(self) -> list[Request]:
        """Leased requests whose outcome is final: the engine is done with them.

        A request stays in the engine's in-progress set until its download
        and the handling of the spider's output (the links it found) are
        complete, whatever the outcome: a request that leaves it has its
        outlinks in the outbox, and its lease is acknowledged in the step after
        the one that stored them (:class:`Outbox`).
        """
        slot = getattr(self.crawler.engine, "_slot", None)
        inprogress = getattr(slot, "inprogress", None)
        if inprogress is None:  # no engine slot (closing): nothing is in progress
            return list(self._leases)
        return [r for r in self._leases if r not in inprogress]

    def _step(self, pop: bool, *, flush: bool = False) -> StepResult | None:
        """One round trip per Redis node: push the links due to leave (``flush``: all the
        outbox holds), acknowledge the leases whose outlinks an earlier step stored,
        maybe pop (:class:`Outbox`)."""
        for request in self._finished():
            self.outbox.finished(self._leases.pop(request))
        try:
            sent = self.outbox.step(
                pop=pop,
                flush=flush,
                in_progress=list(self._leases.values()),
                default_delay=self.host_delay,
                lease_timeout=self.lease_timeout,
                slack=self.delay_slack,
                seen_mode=self.df.mode,
            )
        except RedisError as exc:
            self._outage("reach the frontier (requests kept, will retry)", exc)
            return None
        result = sent.result
        if result.failed:  # those shards' parts were kept for the next step
            self._outage(
                f"reach {len(result.failed)} frontier shards (their requests kept, will retry)",
                next(iter(result.failed.values())),
            )
        else:
            self._outage_logged = False
        if result.unconfirmed:
            self.stats.inc_value("frontier/unreplicated_leases", sent.unreplicated)
            logger.warning(
                "%d shards' writes were not confirmed by %d replicas: %d pages will "
                "be fetched again when their leases expire",
                len(result.unconfirmed),
                self.wait_replicas,
                sent.unreplicated,
            )
        self._count(result, sent.pushes, sent.revisits, sent.nacks, sent.merged)
        return result

    def _count(
        self, result: StepResult, batch: list, revisits: list, nacks: list, merged: int
    ) -> None:
        """Stats and logs of a step; ``batch``: the pushes that were applied; ``merged``:
        the links the outbox dropped, their requests held already."""
        for _, refused in result.refused:
            self._refused(refused)
        if nacks and not result.failed:
            self.stats.inc_value("frontier/requeued", len(nacks))
        # Every fingerprint of the batch is in the crawl's seen set now (ours or
        # another worker's), and fingerprints are never removed while it runs; or was
        # dropped over its host's budget (kept out of the seen set), and would be again.
        self._seen.update(entry[5] for entry in batch if entry[5] is not None)
        if result.added:
            self.stats.inc_value("scheduler/enqueued/redis", result.added)
        if result.over_budget:
            self.stats.inc_value("traps/host_budget", result.over_budget)
        filtered = len(batch) - result.added - result.over_budget + merged
        if filtered > 0:
            self.stats.inc_value("dupefilter/filtered", filtered)
        if revisits:
            self.stats.inc_value("revisit/scheduled", len(revisits) - len(self.outbox.revisits))
        if result.revisited:
            self.stats.inc_value("revisit/due", result.revisited)
        if result.requeued:
            self.stats.inc_value("frontier/lease_expired", result.requeued)
            # (a request handed back to wait, frontier/requeued, is one of them when its
            # wait ends: a nack is a shorter lease)
            logger.info("Requeued %d requests whose lease ran out", result.requeued)

    def _flush(self) -> bool:
        """Hand everything held to the frontier (two steps: the links, then the
        acknowledgements); False if Redis did not take it all."""
        for _ in range(3):
            if self._step(pop=False, flush=True) is None:
                return False
            if not self.outbox.pending():
                return True
        return not self.outbox.pending()

    def _mark_busy(self) -> None:
        if self._busy_marked or self.one_off:  # (a scrapy shell never goes idle: it
            return  # would keep the crawl open for as long as it is left open)
        try:
            self.registry.mark_busy(self.worker_id, time.time())
            self._busy_marked = True
        except RedisError as exc:
            self._outage("mark this worker busy", exc)

    def is_leased(self, request: Request) -> bool:
        """Whether ``request`` came from the frontier (and is still in progress)."""
        return request in self._leases

    def requeue(self, request: Request, wait: float, reason: str) -> bool:
        """Hand ``request``'s lease back instead of acknowledging it: the request goes
        back to its host queue in ``wait`` seconds (for this worker or another).
        False if it is not a request of the frontier."""
        lease = self._leases.pop(request, None)
        if lease is None:
            return False
        self.outbox.nack(lease, wait)
        logger.debug("Requeued %s in %.1f s: %s", request, wait, reason)
        return True

    def _on_dropped(
        self, item: Any, response: Any, exception: BaseException, spider: Spider
    ) -> None:
        """item_dropped: a :class:`~webcrawl.frontier.requeue.Requeue` puts the item's request
        back."""
        if not isinstance(exception, Requeue):
            return
        request = getattr(response, "request", None)  # a Response, or an errback's Failure
        if request is None or not self.requeue(request, exception.wait, str(exception)):
            self.stats.inc_value("frontier/requeue_lost")
            logger.error(
                "Could not requeue the request of %s (not from the frontier): %s",
                getattr(item, "url", item),
                exception,
            )

    def _wake_in(self, delay: float) -> None:
        """Wake the engine when the next host becomes ready (not on its 5 s heartbeat)."""
        from twisted.internet import reactor  # the one Scrapy installed

        delay = max(0.0, delay)
        call = self._wake_call
        if call is not None and call.active():
            if call.getTime() <= reactor.seconds() + delay:
                return
            call.cancel()
        self._wake_call = reactor.callLater(delay, self._wake_engine)

    def _on_idle(self, spider: Spider) -> None:
        """spider_idle: close only when the whole crawl has no work left."""
        if self.one_off:
            return  # its own requests are done
        if not self._flush():
            raise DontCloseSpider("Redis unreachable")
        try:
            queued, submitted, busy, leased = self.queue.idle_check(self.worker_id)
        except RedisError as exc:
            self._outage("check whether the crawl is done", exc)
            raise DontCloseSpider("Redis unreachable") from None
        self._busy_marked = False
        self._idle = True
        if self.continuous:
            raise DontCloseSpider("WEBCRAWL_CONTINUOUS: waiting for work")
        if submitted and not getattr(self.crawler.spider, "takes_submitted_seeds", False):
            if not self._submitted_said:
                self._submitted_said = True
                logger.warning(
                    "Crawl %r has %d seeds submitted with `webcrawl submit`: the web spider "
                    "reads them, spider %r does not (they are left where they are)",
                    self.keys.crawl,
                    submitted,
                    self.crawler.spider.name,
                )
            submitted = 0
        if queued or submitted or busy or leased:
            if not self._waiting_logged:
                # (queued and leased are not counted while other workers are busy)
                logger.info(
                    "Nothing to do here for now; crawl %r has %s%d submitted seeds, "
                    "%d other busy workers: waiting",
                    self.keys.crawl,
                    "" if busy else f"{queued} queued, {leased} leased, ",
                    submitted,
                    busy,
                )
                self._waiting_logged = True
            raise DontCloseSpider("other workers are busy")
        unseeded = getattr(self.crawler.spider, "seeds", None) is None  # no -a seeds=
        if unseeded and time.time() - self._started < self.start_grace and self._crawl_is_new():
            # workers started together (scrapyd, a deploy): the one with the seeds
            # may still be starting; closing now would leave it alone
            raise DontCloseSpider("the crawl has no URL yet: waiting for its seeds")
        send = self.crawler.signals.send_catch_log
        if _held(send(crawl_may_end, spider=spider, dont_log=DontCloseSpider)):
            raise DontCloseSpider("a component may still add work")
        if _held(send(crawl_out_of_work, spider=spider, dont_log=DontCloseSpider)):
            raise DontCloseSpider("work to do before the crawl ends")
        logger.info("Crawl %r has no work left anywhere: closing this worker", self.keys.crawl)

    def _crawl_is_new(self) -> bool:
        """Whether no URL has entered the crawl yet (its dupefilter is empty)."""
        try:
            return len(self.df) == 0
        except RedisError as exc:
            self._outage("check whether the crawl has begun", exc)
            return True

    def _outage(self, what: str, exc: Exception) -> None:
        """Redis is unreachable: log once per outage, count every failure."""
        self.stats.inc_value("scheduler/redis_errors")
        if not self._outage_logged:
            logger.warning(
                "Could not %s: %s: retrying until %s is back", what, exc, self.redis.description
            )
            self._outage_logged = True

    def _poll(self) -> None:
        """Links that have waited FRONTIER_SHARD_WAIT leave (a worker whose downloads are
        slow steps seldom); while idle, wake the engine as soon as there is work, or when
        the crawl is done (so the spider_idle check closes this worker), not on Scrapy's
        5 s heartbeat."""
        if self.outbox.held() and self.outbox.ripe():
            self._step(pop=False)
        if not self._idle:
            return
        if self.queue.has_work():
            self._wake_engine()
        elif not self.continuous and self.queue.crawl_done(self.worker_id):
            self._busy_marked = False
            # the last busy worker just finished: close now, not on the next heartbeat
            self._wake_engine()

    def _wake_engine(self) -> None:
        # Scrapy has no public "work is available" call; nextcall is what its
        # own heartbeat schedules.  Without it we only lose latency.
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _beat(self) -> None:
        now = time.time()
        stats = self.stats.get_stats()
        last_time, last_pages = self._last_beat
        pages = int(stats.get("response_received_count", 0))
        rate = (pages - last_pages) / max(now - last_time, 1e-9)
        self._last_beat = (now, pages)
        pops = self.pops()
        info = worker_info(self._started, stats, now, rate, idle=self._idle, pops=pops)
        self.registry.beat(self.worker_id, info, self.heartbeat_ttl)
        if not pops:  # paused: what it popped for later goes to the others now
            self._hand_back_prefetched()
        self.stats.set_value("frontier/redis_round_trips", RoundTrips.count)  # for the metrics
        self._tier_stats()
        leases = [
            *self._leases.values(),
            *(lease for _, lease in self._prefetched),
            *self.outbox.in_progress(),
        ]
        # first: nothing below may skip it
        self.queue.renew(leases, self.lease_timeout, holds=list(self.turn_holds.items()))
        self._move_revisits_up()
        self._own(pops)

    def pops(self) -> bool:
        """Whether this worker pops the shared crawl now, as its heartbeat says: not a
        Scrapy command's own crawl (``scrapy shell``), and its engine not paused (a store
        or WARC outage, pipelines/outage.py).  A worker that does not pop owns no shard:
        the others share its shards from their next heartbeat, so that its hosts do not
        wait for it (help from busy workers comes only to a shard whose owner neglects
        it, and a worker with work of its own does not give it)."""
        return not self.one_off and not getattr(self.crawler.engine, "paused", False)

    def _own(self, pops: bool) -> None:
        """The shards this worker pops first, from the live workers in the registry (on
        a failure, those it had: a preference is never worth a failed heartbeat)."""
        if not pops:  # a scrapy shell, or paused: the others share its shards (its
            self.stats.set_value("frontier/owned_shards", 0)  # heartbeat says it does not
            return  # pop); a paused worker's own view is kept for when it resumes
        try:
            live = popping(self.registry.live())
        except (RedisError, ValueError, KeyError, TypeError) as exc:
            logger.warning("Could not read the live workers (shards owned unchanged): %s", exc)
            return
        mine = owned(self.worker_id, live, self.keys.shards)
        self.queue.prefer(mine, workers=len(live))
        self.stats.set_value("frontier/owned_shards", len(mine))

    def _guarded(self, func: Any) -> None:
        """Run a periodic task; a Redis outage is logged once and the loop goes on."""
        try:
            func()
        except RedisError as exc:
            self._outage(f"run {func.__name__.strip('_')}", exc)
        except Exception:
            logger.exception("Scheduler task %s failed (will run again)", func.__name__)
