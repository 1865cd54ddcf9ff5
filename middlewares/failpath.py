"""Failed-path filtering and elastic waiting: the Scrapy adapter.

The rules are in :mod:`webcrawl.failpath`; this middleware reads each site's
counts from the store's failpaths table (cached per worker, see
:class:`~webcrawl.failpath.CountsCache`), drops URLs under dead paths with
``IgnoreRequest``, gives every request its elastic ``download_timeout``,
records outcomes, and runs the periodic sampled re-probe.

- It sits first (95: before robots.txt, 100, so that no URL of a dead site
  waits for its robots.txt; the download timeout it sets is kept by Scrapy's
  DownloadTimeoutMiddleware, 350) and below the retry middleware (550), so
  each link counts once, as Zhan et al.'s rules count links: a failure or an answer
  the retry middleware turns into a retry stops there, and only the outcome
  of a link's last attempt reaches this middleware.  Retries still pass
  through ``process_request``: they get a fresh wait, and are dropped under
  a dead path.
- robots.txt fetches (``meta["robots_txt"]``) get the site level's wait too
  and are never dropped.  When one gets no answer (the failures below), the
  robots.txt middleware drops the site's URLs with :class:`SiteUnanswered`
  (nothing of the site may be fetched before robots.txt is read, and a finite
  crawl must not wait for it): the first makes the site dead here
  (:meth:`FailPathPolicy.record_unanswered`), and each is remembered like any
  dropped link.  A re-probe's links make it fetch robots.txt again, and a site
  that answers gets its URLs back.  A 5xx or 429 is an answer: RFC 9309's
  wait, as before.
- A failure is a DNS error, a refused, reset or lost connection, or no
  answer within the wait.  Any HTTP answer (a 404, a 503 too) means the path
  is alive.
- ``dont_filter=True`` requests are never dropped (as with the dupefilter
  and the offsite check) but still get the elastic wait and are recorded;
  Scrapy's retries are ``dont_filter`` too, and they are dropped (a retry
  into a dead path is exactly what the filter saves);
  ``meta["failpath"] = False`` opts a request out entirely.  A
  ``download_timeout`` set in a request's meta by the spider is kept.
- Store calls run in a thread and never block the reactor; a store error
  (or any error reading the filter list) is logged and counted
  (``failpath/store_errors``) and the URL is fetched: the filter list is an
  aid, and an outage of it must not lose pages.
- Links that fail or are dropped are remembered in Redis (``fpl:<site>``, at
  most ``FAILPATH_REMEMBER_LINKS`` per site) as the re-probe's samples.  A
  re-probe puts the links of recovered levels back into the crawl, and then
  every dropped link that no dead level blocks any more (one dropped while its
  site's death was being recorded, by a write that failed or a worker that
  died, or by a worker's stale copy of a cleared row); at most
  one runs at a time in the whole crawl (:class:`ProbeTurns`): one per
  ``FAILPATH_PROBE_INTERVAL``, and one more when a finite crawl runs out of
  work, which waits for a re-probe still running on another worker.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from redis.exceptions import RedisError
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    CannotResolveHostError,
    DontCloseSpider,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotConfigured,
)
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import task, threads
from twisted.internet.defer import DeferredList
from twisted.internet.error import (
    ConnectError,
    ConnectionDone,
    ConnectionLost,
    DNSLookupError,
    TimeoutError,
)
from twisted.web._newclient import ResponseFailed, ResponseNeverReceived

from webcrawl.failpath import (
    FAIL,
    OK,
    SITE,
    TALLIES,
    CountsCache,
    FailPathParams,
    FailPathPolicy,
    ProbeRound,
    level_contains,
    path_levels,
    probe_rounds,
    site_of,
)
from webcrawl.frontier.lock import RedisLock
from webcrawl.frontier.redisconn import RoundTrips
from webcrawl.frontier.signals import crawl_out_of_work
from webcrawl.settings_check import non_negative_float, positive_float, positive_int
from webcrawl.store import open_store, store_url_from_settings
from webcrawl.store.base import StoreError

logger = logging.getLogger(__name__)

#: What counts as a path failure (HTTP answers never do).  Scrapy 2.19 wraps the
#: download handler's errors in its own exceptions; Twisted's are for other handlers.
FAILURES = (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    DNSLookupError,
    ConnectError,
    ConnectionLost,
    ConnectionDone,
    TimeoutError,
    ResponseNeverReceived,
    ResponseFailed,
)


#: Seconds a re-probe holds the crawl's re-probe lock unless its worker renews it (every
#: few seconds while the probe runs): a worker that dies mid-probe frees it that late.
PROBE_LEASE = 60.0


class SiteUnanswered(IgnoreRequest):
    """The site's robots.txt got no answer (since ``since``, Unix time): the request is
    dropped, and the site is dead until a re-probe finds it answering."""

    def __init__(self, message: str, since: float) -> None:
        super().__init__(message)
        self.since = since


class ProbeTurns:
    """Who runs a re-probe, across the workers of a crawl (Redis keys under ``key``).

    ``key``: the periodic turn, taken once per ``interval``; ``key:final``: the
    final re-probe of a finite crawl, taken once (both plain expiring markers, never
    released); ``key:running``: the lock (:class:`~webcrawl.frontier.lock.RedisLock`)
    held while a re-probe runs, whichever, so that two never run together (and send
    the same links back twice).  It expires after ``lease`` seconds unless renewed,
    and only its holder renews or releases it.
    """

    STARTED, BUSY, TAKEN = "started", "busy", "taken"

    def __init__(
        self, server: Any, key: str, owner: str, interval: float, lease: float = PROBE_LEASE
    ) -> None:
        self.server = server
        self.key = key
        self.owner = owner
        self.interval_ms = int(interval * 1000)
        self.lock = RedisLock(server, key + ":running", lease, owner=owner)

    def take(self, final: bool = False) -> str:
        """STARTED: the lock and the turn are ours (run, then :meth:`release`); BUSY:
        another re-probe is running; TAKEN: this turn was used by another."""
        turn = self.key + ":final" if final else self.key
        if self.server.exists(turn):  # (most calls: one read, no lock taken and let go)
            return self.TAKEN
        if self.lock.held or not self.lock.acquire():  # ours runs, or another's
            return self.BUSY
        try:
            took = self.server.set(turn, self.owner, nx=True, px=self.interval_ms)
        except RedisError:
            self.release()
            raise
        if not took:
            self.release()
            return self.TAKEN
        return self.STARTED

    def renew(self) -> bool:
        """Extend the lease of the lock we hold; False if it is not ours (any more)."""
        return self.lock.extend()

    def release(self) -> bool:
        """Let the lock go, if it is still ours (True); False if it was not (expired,
        maybe taken by another worker, whose lock stays)."""
        return self.lock.release()


def params_from_settings(settings: Any) -> FailPathParams:
    """The five FAILPATH_* parameters, each checked under its own name."""
    try:
        return FailPathParams(
            min_delay=positive_float(settings, "FAILPATH_MIN_DELAY"),
            max_delay=positive_float(settings, "FAILPATH_MAX_DELAY"),
            heighten=positive_int(settings, "FAILPATH_HEIGHTEN"),
            probe_interval=positive_float(settings, "FAILPATH_PROBE_INTERVAL"),
            success_scale=positive_int(settings, "FAILPATH_SUCCESS_SCALE"),
        )
    except ValueError as exc:
        raise ValueError(f"bad failed-path setting: {exc}") from None


class FailPathMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("FAILPATH_ENABLED"):
            raise NotConfigured("FAILPATH_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.params = params_from_settings(settings)
        self.policy = FailPathPolicy(self.params)
        self.cache = CountsCache(positive_float(settings, "FAILPATH_CACHE_TTL"), time.monotonic)
        self.remember = int(non_negative_float(settings, "FAILPATH_REMEMBER_LINKS"))
        self.default_timeout = settings.getfloat("DOWNLOAD_TIMEOUT")
        self.store = open_store(store_url_from_settings(settings))
        self.rng = random.Random()
        self._sites: dict[str, str] = {}  # scheme://netloc -> row key
        self._refreshing: set[str] = set()
        # per site, bumped when a re-probe deletes its counts: a store read begun before
        # that must not put the dead counts back into the cache when it completes
        self._epoch: dict[str, int] = {}
        self._logged: set[tuple[str, str]] = set()
        self._pending_ok: dict[str, int] = {}  # successes not yet added to the site's #ok
        self._dying: set[str] = set()  # sites whose unanswered robots.txt is being recorded
        self._loops: list[task.LoopingCall] = []
        self._turns: ProbeTurns | None = None
        self._probing = False
        self._final_probe = False  # done, or taken by another worker
        self._final_waiting = False
        self._late: list[tuple[Any, Any]] = []  # (delayed call, its function): send-backs
        self._sending: set[Any] = set()  # send-backs running (their Deferreds)
        self._wake: Any = None  # the engine's wake-up while a final re-probe waits

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FailPathMiddleware:
        middleware = cls(crawler)
        crawler.signals.connect(middleware._opened, signal=signals.spider_opened)
        crawler.signals.connect(middleware._closed, signal=signals.spider_closed)
        crawler.signals.connect(middleware._idle, signal=signals.spider_idle)
        crawler.signals.connect(middleware._out_of_work, signal=crawl_out_of_work)
        return middleware

    # -- lifecycle ------------------------------------------------------------

    def _opened(self, spider: Spider) -> None:
        for interval, func in (
            (min(self.params.probe_interval, 5.0), self._maybe_probe),
            (self.cache.ttl, self._flush_ok),
        ):
            loop = task.LoopingCall(func)
            loop.start(interval, now=False)
            self._loops.append(loop)

    async def _closed(self, spider: Spider) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        for call, _ in self._late:
            if call.active():
                call.cancel()
        if self._wake is not None and self._wake.active():
            self._wake.cancel()
        pending, self._pending_ok = self._pending_ok, {}

        def flush_and_close() -> None:
            try:
                for site, n in pending.items():
                    self.store.failpath_add(site, OK, n)
            except StoreError as exc:
                logger.warning("Could not record the successes of %d sites: %s", len(pending), exc)
            self.store.close()

        await maybe_deferred_to_future(threads.deferToThread(flush_and_close))

    def _flush_ok(self) -> None:
        """Add pending successes to the #ok of sites that have failures (the others'
        wait in memory: a share of working links only matters once some fail)."""
        for site in list(self._pending_ok):
            counts, _ = self.cache.get(site)
            if counts and counts.get(FAIL, 0) > 0:
                n = self._pending_ok.pop(site)
                self._write(site, lambda site=site, n=n: {OK: self.store.failpath_add(site, OK, n)})

    def _frontier(self) -> Any:
        from webcrawl.frontier.scheduler import (
            frontier_of,  # late: importing it early installs a reactor
        )

        return frontier_of(self.crawler)

    # -- per request ----------------------------------------------------------

    def _site(self, url: str) -> str:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        site = self._sites.get(origin)
        if site is None:
            site = self._sites[origin] = site_of(origin + "/")
        return site

    async def _counts(self, site: str) -> dict[str, int]:
        counts, stale = self.cache.get(site)
        epoch = self._epoch.get(site, 0)
        if counts is None:
            try:
                counts = await maybe_deferred_to_future(
                    threads.deferToThread(self.store.failpath_row, site)
                )
            except Exception as exc:  # StoreError, or anything: never fail the request
                self._store_error("read", site, exc)
                return {}
            self._put(site, counts, epoch)
        elif stale and site not in self._refreshing:
            self._refreshing.add(site)
            d = threads.deferToThread(self.store.failpath_row, site)
            d.addCallbacks(
                lambda fresh: self._put(site, fresh, epoch),
                lambda f: self._store_error("read", site, f.value),
            )
            d.addBoth(lambda _: self._refreshing.discard(site))
        return counts

    def _put(self, site: str, counts: dict[str, int], epoch: int) -> None:
        """Cache a row read in ``epoch``, unless a re-probe deleted levels since."""
        if self._epoch.get(site, 0) == epoch:
            self.cache.put(site, counts)

    async def process_request(self, request: Request) -> None:
        if request.meta.get("failpath") is False:
            return
        site = self._site(request.url)
        counts = await self._counts(site)
        probe = bool(request.meta.get("failpath_probe"))
        if request.meta.get("robots_txt"):  # the site's wait; never dropped
            wait = self.policy.probe_wait() if probe else self.policy.wait([SITE], counts)
            request.meta.setdefault("download_timeout", wait)
            request.meta["failpath_sent"] = time.monotonic()
            return
        # a site with no record (most) needs no path levels: the shortest wait
        levels = path_levels(request.url) if counts else [SITE]
        # dont_filter is an opt-out, but Scrapy marks its retries dont_filter too
        exempt = request.dont_filter and not request.meta.get("retry_times")
        if counts and not probe and not exempt:
            level = self.policy.blocking_level(levels, counts)
            if level is not None:
                self._drop(request, site, level, counts[level])
        wait = self.policy.probe_wait() if probe else self.policy.wait(levels, counts)
        # ours to set unless the spider chose one (a retry carries our last wait)
        current = request.meta.get("download_timeout")
        if current in (None, self.default_timeout, request.meta.get("failpath_wait")):
            request.meta["download_timeout"] = wait
        request.meta["failpath_wait"] = wait
        request.meta["failpath_sent"] = time.monotonic()

    def _drop(self, request: Request, site: str, level: str, count: int) -> None:
        self.stats.inc_value("failpath/filtered")
        self._remember_link(site, request, dropped=True)
        if (site, level) not in self._logged:
            self._logged.add((site, level))
            logger.info(
                "Dropping URLs under %s %s (%d failures): first %s", site, level, count, request.url
            )
        raise IgnoreRequest(f"failed path {site} {level} ({count} failures)")

    def process_response(self, request: Request, response: Response) -> Response:
        meta = request.meta
        if meta.get("failpath") is False or meta.get("failpath_probe") or meta.get("robots_txt"):
            return response
        self.stats.inc_value("failpath/ok")
        site = self._site(request.url)
        self._pending_ok[site] = self._pending_ok.get(site, 0) + 1
        counts, _ = self.cache.get(site)
        if counts:  # only a site with records can have a count to lower
            levels = path_levels(request.url)
            if counts.get(levels[-1], 0) > 0:
                self._write(
                    site, lambda: self.policy.record_success(levels, counts, self._adder(site))
                )
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        meta = request.meta
        # (a robots.txt that gets no answer makes the robots.txt middleware drop the
        # site's requests: the first SiteUnanswered records the site dead, below)
        if meta.get("failpath") is False or meta.get("failpath_probe") or meta.get("robots_txt"):
            return
        if isinstance(exception, SiteUnanswered):  # by the robots.txt middleware
            site = self._site(request.url)
            self._unanswered(site, exception)
            self.stats.inc_value("failpath/filtered")
            self._remember_link(site, request, dropped=True)
            return
        if not isinstance(exception, FAILURES):
            return
        if RoundTrips.last_error >= request.meta.get("failpath_sent", float("inf")):
            # Redis stopped answering while this request was out: every Redis call then
            # blocked the reactor (and the download) for up to FRONTIER_REDIS_TIMEOUT,
            # so the failure may be ours; the frontier's outage is not the site's
            self.stats.inc_value("failpath/excused")
            return
        self.stats.inc_value("failpath/failures")
        site = self._site(request.url)
        levels = path_levels(request.url)
        self._remember_link(site, request)
        pending_ok = self._pending_ok.pop(site, 0)

        def write() -> dict[str, int]:
            add = self._adder(site)
            written = self.policy.record_failure(levels, add)
            written[FAIL] = add(FAIL, 1)
            if pending_ok:
                written[OK] = add(OK, pending_ok)
            return written

        self._write(site, write, given_up_check=True)

    def _unanswered(self, site: str, exception: SiteUnanswered) -> None:
        """The site's robots.txt got no answer: the site is dead (recorded once)."""
        counts, _ = self.cache.get(site)
        counts = counts or {}
        if counts.get(SITE, 0) > self.params.heighten or site in self._dying:
            return
        logger.warning(
            "Giving up %s: %s; its URLs are dropped until a re-probe finds it answering",
            site,
            exception,
        )
        self.stats.inc_value("failpath/sites_given_up")
        self._dying.add(site)
        since = int(exception.since)
        self._write(
            site,
            lambda: self.policy.record_unanswered(counts, self._adder(site), since),
            then=lambda: self._dying.discard(site),
        )

    # -- writes, off the reactor ----------------------------------------------

    def _adder(self, site: str) -> Any:
        return lambda column, delta: self.store.failpath_add(site, column, delta)

    def _write(self, site: str, func: Any, given_up_check: bool = False, then: Any = None) -> None:
        """Run ``func`` (store writes returning the values written) off the reactor, then
        update the cache; ``then()`` runs after either outcome."""
        d = threads.deferToThread(func)

        def done(written: dict[str, int]) -> None:
            self.cache.update(site, written)
            if given_up_check:
                self._check_given_up(site)

        d.addCallbacks(done, lambda f: self._store_error("write", site, f.value))
        if then is not None:
            d.addBoth(lambda _: then())

    def _check_given_up(self, site: str) -> None:
        counts, _ = self.cache.get(site)
        if not counts or counts.get(SITE, 0) > self.params.heighten:
            return
        if not self.policy.site_given_up(counts):
            return
        logger.warning(
            "Giving up %s: %d of %d fetches failed",
            site,
            counts.get(FAIL, 0),
            counts.get(FAIL, 0) + counts.get(OK, 0),
        )
        self.stats.inc_value("failpath/sites_given_up")
        delta = self.params.heighten + 1 - counts.get(SITE, 0)
        self._write(site, lambda: {SITE: self.store.failpath_add(site, SITE, delta)})

    def _store_error(self, what: str, site: str, exc: BaseException) -> None:
        self.stats.inc_value("failpath/store_errors")
        message = str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
        logger.warning("Could not %s the failpaths of %s: %s", what, site, message)

    def _remember_link(self, site: str, request: Request, dropped: bool = False) -> None:
        """Remember a link that failed, or that was ``dropped`` (never tried: the sweep
        sends it back once nothing blocks it)."""
        frontier = self._frontier()
        if frontier is None or not self.remember:
            return
        key = frontier.keys.failpath_links_prefix + site
        member = Remembered(int(request.meta.get("depth", 0)), request.url, dropped).member
        try:
            pipe = frontier.server.pipeline(transaction=False)
            pipe.zadd(key, {member: time.time()})
            pipe.zremrangebyrank(key, 0, -self.remember - 1)
            pipe.execute()
        except RedisError as exc:
            logger.warning(
                "Could not remember %s for the failed-path re-probe: %s", request.url, exc
            )

    # -- the re-probe -----------------------------------------------------------

    def _idle(self, spider: Spider) -> None:
        """A worker with nothing to do now (Scrapy's spider_idle: while others crawl, too)
        stays while its re-probe runs, or while it has links of recovered paths to send
        back (at their time: other workers' copies of the site's counts must have been
        read again first)."""
        if self._probing:
            raise DontCloseSpider("failed-path re-probe running")
        if self._sending or any(call.active() for call, _ in self._late):
            raise DontCloseSpider("sending back the links of recovered paths")

    def _out_of_work(self, spider: Spider) -> None:
        """Before a finite crawl ends (the scheduler's crawl_out_of_work: no work left
        anywhere): the links of recovered paths waiting to be sent back go now, and then
        one last re-probe (one worker per interval, after any re-probe still running):
        paths that recovered since their last probe come back instead of being lost.
        Not while this worker's own re-probe or send-backs run (they wake the engine
        when they end)."""
        if self._probing or self._sending:
            raise DontCloseSpider("failed-path re-probe or send-back running")
        if self._run_late():
            raise DontCloseSpider("sending back the links of recovered paths")
        frontier = self._frontier()
        if self._final_probe or frontier is None or frontier.continuous:
            return
        try:
            turn = self._probe_turns(frontier).take(final=True)
        except RedisError as exc:
            self._final_probe = True
            logger.warning("Could not take the final failed-path re-probe turn: %s", exc)
            return
        if turn == ProbeTurns.BUSY:
            if not self._final_waiting:
                self._final_waiting = True
                logger.info(
                    "The crawl is out of work: waiting for the failed-path re-probe "
                    "running on another worker, then re-probing once more"
                )
            from twisted.internet import reactor  # the running one (installed by now)

            if self._wake is None or not self._wake.active():  # (one: each wake is a check)
                self._wake = reactor.callLater(1.0, frontier._wake_engine)  # soon, not in 5 s
            raise DontCloseSpider("waiting for the failed-path re-probe of another worker")
        self._final_probe = True
        if turn == ProbeTurns.STARTED:
            logger.info("The crawl is out of work: re-probing its dead paths once more")
            self._start_probe(frontier)
            raise DontCloseSpider("failed-path re-probe running")

    def _probe_turns(self, frontier: Any) -> ProbeTurns:
        if self._turns is None:
            self._turns = ProbeTurns(
                frontier.server,
                frontier.keys.failpath_probe,
                frontier.worker_id,
                self.params.probe_interval,
            )
        return self._turns

    def _maybe_probe(self) -> None:
        frontier = self._frontier()
        if frontier is None:
            return
        try:
            turns = self._probe_turns(frontier)
            if self._probing:  # ours runs: keep the lock (said once if it was lost)
                if turns.lock.held and not turns.renew():
                    logger.warning(
                        "The failed-path re-probe lock expired while the re-probe "
                        "ran: another may run beside it"
                    )
            elif turns.take() == ProbeTurns.STARTED:
                self._start_probe(frontier)
        except RedisError as exc:
            logger.warning("Could not take the failed-path re-probe turn: %s", exc)

    def _start_probe(self, frontier: Any) -> None:
        self._probing = True
        d = deferred_from_coro(self.probe(frontier))
        d.addErrback(lambda f: logger.error("Failed-path re-probe failed:\n%s", f.getTraceback()))
        d.addBoth(lambda _: self._probe_done(frontier))

    def _probe_done(self, frontier: Any) -> None:
        self._probing = False
        try:
            turns = self._probe_turns(frontier)
            if turns.lock.held and not turns.release():
                logger.warning(
                    "The failed-path re-probe lock had expired when the re-probe "
                    "ended (left to whoever holds it now)"
                )
        except RedisError as exc:  # it expires on its own
            logger.warning("Could not release the failed-path re-probe lock: %s", exc)
        frontier._wake_engine()  # links may be back; an idle engine looks again now

    async def probe(self, frontier: Any) -> None:
        """One re-probe round over every site with levels over the threshold."""
        try:
            rows = await maybe_deferred_to_future(
                threads.deferToThread(lambda: list(self.store.failpath_rows()))
            )
        except StoreError as exc:
            self._store_error("read", "any site", exc)
            return
        rounds = probe_rounds(self.policy, rows)
        if rounds:
            logger.info("Failed-path re-probe: %d sites with dead paths", len(rounds))
        # sites in parallel; the levels of a site one after the other (each depends on the last)
        await maybe_deferred_to_future(
            DeferredList(
                [deferred_from_coro(self._probe_site(frontier, r)) for r in rounds],
                consumeErrors=True,
            )
        )
        # once every worker's cache has read the store again: links dropped under no
        # dead level go back (see _sweep)
        self._later(2 * self.cache.ttl + 1, self._sweep, frontier)

    async def _probe_site(self, frontier: Any, probe_round: ProbeRound) -> None:
        site = probe_round.site
        key = frontier.keys.failpath_links_prefix + site
        links = _remembered(frontier, key)

        def under(level: str) -> list[str]:
            return [link.url for link in links if level_contains(level, link.url)]

        while (sample := probe_round.next_sample(under, self.rng)) is not None:
            level, urls = sample
            self.stats.inc_value("failpath/probes", len(urls))
            outcomes = await maybe_deferred_to_future(
                DeferredList([deferred_from_coro(self._probe_one(u)) for u in urls])
            )
            ok = sum(result for _, result in outcomes)
            recovered = probe_round.report(level, ok)
            logger.info(
                "Re-probe of %s %s: %d of %d answered%s",
                site,
                level,
                ok,
                len(urls),
                ": recovered" if recovered else "",
            )
            if not recovered:
                continue
            self.stats.inc_value("failpath/recovered")
            columns = [level, *TALLIES] if level == SITE else [level]
            self._epoch[site] = self._epoch.get(site, 0) + 1
            await maybe_deferred_to_future(
                threads.deferToThread(self.store.failpath_delete, site, columns)
            )
            self._epoch[site] += 1
            self.cache.drop(site)
            back = [link for link in links if level_contains(level, link.url)]
            links = [link for link in links if link not in back]
            self._send_back(frontier, key, back)
            # workers' caches (this one's too, until now) still held the level as dead
            # for up to FAILPATH_CACHE_TTL, and dropped (remembered) links meanwhile:
            # once every cache has read the store again, those go back too
            self._later(2 * self.cache.ttl + 1, self._send_back_unblocked, frontier, site)

    async def _probe_one(self, url: str) -> int:
        from webcrawl.middlewares.robotstxt import ForbiddenByRobotsTxt  # (it imports this module)

        request = Request(url, dont_filter=True, meta={"failpath_probe": True, "dont_retry": True})
        try:
            await self.crawler.engine.download_async(request)
        except ForbiddenByRobotsTxt as exc:  # an answer only if robots.txt was read now
            return int(exc.fresh)
        except IgnoreRequest:
            return 0
        except Exception as exc:
            logger.debug("Re-probe of %s failed: %s", url, exc)
            return 0
        return 1

    def _later(self, delay: float, func: Any, *args: Any) -> None:
        """Run ``func(*args)`` (a coroutine) in ``delay`` seconds, or when the crawl runs out
        of work, whichever comes first."""
        from twisted.internet import reactor  # the running one (installed by now)

        def run() -> None:
            d = deferred_from_coro(func(*args))
            d.addErrback(
                lambda f: logger.error("Failed-path send-back failed:\n%s", f.getTraceback())
            )
            if not d.called:  # running: the worker stays until it ends
                self._sending.add(d)
                d.addBoth(lambda _: self._sent(d))

        self._late = [(c, f) for c, f in self._late if c.active()]
        self._late.append((reactor.callLater(delay, run), run))

    def _sent(self, d: Any) -> None:
        self._sending.discard(d)
        frontier = self._frontier()
        if frontier is not None:
            frontier._wake_engine()  # an idle engine looks again now

    def _run_late(self) -> bool:
        """Run the pending delayed send-backs now; whether there were any."""
        pending = [(c, f) for c, f in self._late if c.active()]
        self._late = []
        for call, run in pending:
            call.cancel()
            run()
        return bool(pending)

    async def _send_back_unblocked(
        self, frontier: Any, site: str, dropped_only: bool = False
    ) -> None:
        """Send back the remembered links of ``site`` that no dead level blocks now (those
        that were ``dropped_only``)."""
        try:
            counts = await maybe_deferred_to_future(
                threads.deferToThread(self.store.failpath_row, site)
            )
        except StoreError as exc:
            self._store_error("read", site, exc)
            return
        key = frontier.keys.failpath_links_prefix + site
        try:
            links = _remembered(frontier, key)
        except RedisError as exc:
            logger.warning("Could not read the remembered links of %s: %s", site, exc)
            return
        back = [
            link
            for link in links
            if (link.dropped or not dropped_only)
            and self.policy.blocking_level(path_levels(link.url), counts) is None
        ]
        self._send_back(frontier, key, back)

    async def _sweep(self, frontier: Any) -> None:
        """Send back, on every site, the remembered links that were dropped and that no
        dead level blocks now: dropped while the site's death was being recorded (a
        store write that failed, a worker that died before it), or by a worker's copy of
        a row that a re-probe had cleared meanwhile.  Otherwise they would wait for the
        re-probe of a level that is not dead, which never comes."""
        prefix = frontier.keys.failpath_links_prefix
        try:
            keys = [k.decode() for k in frontier.server.scan_iter(match=prefix + "*", count=500)]
        except RedisError as exc:
            logger.warning("Could not list the remembered links of the failed-path filter: %s", exc)
            return
        for key in keys:
            await self._send_back_unblocked(frontier, key[len(prefix) :], dropped_only=True)

    def _send_back(self, frontier: Any, key: str, links: list[Remembered]) -> None:
        spider = self.crawler.spider
        make = getattr(spider, "request_for", None) or Request
        for link in links:
            request = make(link.url).replace(dont_filter=True)
            request.meta["depth"] = link.depth
            self.crawler.engine.crawl(request)
        if links:
            frontier.server.zrem(key, *[link.member for link in links])
            self.stats.inc_value("failpath/sent_back", len(links))
            logger.info("Sent %d links under a recovered path back into the crawl", len(links))


class Remembered(NamedTuple):
    """A link remembered for the re-probe: ``<depth>[d] <url>`` in Redis (``d``: dropped
    under a dead level, never tried; else it failed)."""

    depth: int
    url: str
    dropped: bool

    @property
    def member(self) -> str:
        return f"{self.depth}{'d' if self.dropped else ''} {self.url}"

    @classmethod
    def parse(cls, member: str) -> Remembered:
        depth, _, url = member.partition(" ")
        return cls(int(depth.removesuffix("d")), url, depth.endswith("d"))


def _remembered(frontier: Any, key: str) -> list[Remembered]:
    """The links remembered under ``key``."""
    return [Remembered.parse(m.decode()) for m in frontier.server.zrange(key, 0, -1)]
