"""robots.txt: fetched once per host for the whole crawl, politely, as RFC 9309 says.

Replaces Scrapy's RobotsTxtMiddleware, where every worker fetches each host's
robots.txt itself at once (two workers: two requests 3 ms apart) and any
answer, a 503 included, is parsed as if it were the file.

- **Once a day per crawl.**  The rules that apply to us go to Redis
  (``<crawl>:robots:<scheme://host:port>``, fetched again after 24 h) and every worker
  reads them there; the one that finds none takes a lock (a
  :class:`~webcrawl.frontier.lock.RedisLock`, renewed while the fetch runs, let
  go only by its holder) and fetches the file, the others wait for its entry.
  Each worker keeps what it read (up to 10 000 hosts) until the entry's time is
  up.
- **Politely.**  The fetch is paced by the frontier like any request to the
  host (``meta["robots_txt"]``, see webcrawl/handlers/politeness.py): it takes the
  host's turn, and the request that needed it waits for the next one.
- **RFC 9309** (the rules: :mod:`webcrawl.safety.robots`): only the first
  500 KiB are read, after decompression (``RobotsTxtLimitMiddleware`` below);
  at most five redirects; 4xx (but 429): everything allowed; 5xx, 429 or no
  answer: nothing allowed, the host's requests go back to the frontier until
  the file is tried again ``ROBOTSTXT_UNREACHABLE_WAIT`` seconds later, up to
  ``ROBOTSTXT_UNREACHABLE_TRIES`` times (Nutch's defaults); after that they
  fail with the reason, recorded like any failure, for the entry's 24 hours.
  A copy known from before (a refetch after 24 h) is kept instead, up to 48 h
  old, and tried again every ``ROBOTSTXT_UNREACHABLE_WAIT`` (RFC 9309 2.4): one
  failed refetch neither stops nor kills a site that is crawled well.
- **No answer at all** (no connection, DNS, or none within the failed-path
  filter's wait) with ``FAILPATH_ENABLED``: the site is dead, not waiting.
  Its requests are dropped with
  :class:`~webcrawl.middlewares.failpath.SiteUnanswered` (the failed-path filter
  records the site dead and remembers them), so a crawl does not wait for a
  host that is gone; a failed-path re-probe's requests fetch the file again
  at once, and a site that answers gets its URLs back.  A failure while Redis
  was not answering is not the site's: it waits, as for a 5xx.

Concurrent waiters in one worker share the fetch (Scrapy 2.19's middleware
let all but the first through unchecked: ``tests/test_robotstxt.py``).

Stats: ``robotstxt/request_count``, ``robotstxt/response_status_count/<n>``,
``robotstxt/shared`` (rules another worker fetched), ``robotstxt/forbidden``,
``robotstxt/unreachable``, ``robotstxt/deferred`` (requests sent back to wait),
``robotstxt/given_up``, ``robotstxt/unanswered`` (requests dropped: no answer),
``robotstxt/truncated``.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import load_object
from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from webcrawl.frontier.lock import RedisLock
from webcrawl.frontier.redisconn import RoundTrips
from webcrawl.middlewares.bodylimit import BodyLimitMiddleware
from webcrawl.middlewares.failpath import FAILURES, FailPathMiddleware, SiteUnanswered
from webcrawl.safety import robots
from webcrawl.settings_check import positive_float, positive_int

logger = logging.getLogger(__name__)

LOCAL_HOSTS = 10_000  # hosts whose rules a worker keeps in memory
POLL = 0.25  # seconds between two looks at Redis while another worker fetches
# Failures of a robots.txt fetch that make the file unavailable (everything allowed),
# not unreachable: redirects refused (an address, a scheme, a loop).
UNAVAILABLE = ("BlockedAddress", "BlockedScheme", "RedirectLoop")


# Sent by the worker that fetched a host's robots.txt for the crawl, once the entry is
# shared (``origin``: scheme://host:port, ``entry``: the RobotsEntry, ``depth``: of the
# request that needed it): the sitemaps it lists are read from there
# (spiders/sitemaps.py).  Not sent for a copy read in Redis.
robots_fetched = object()


class RobotsTxtUnreachable(Exception):
    """A host's robots.txt gave no usable answer too many times: its requests fail."""


class ForbiddenByRobotsTxt(IgnoreRequest):
    """robots.txt disallows the request; ``fresh``: by rules fetched for this very request
    (the host has just answered), not a copy."""

    def __init__(self, message: str, fresh: bool = False) -> None:
        super().__init__(message)
        self.fresh = fresh


class RobotsTxtWait(IgnoreRequest):
    """The request went back to the frontier until the host's robots.txt is tried again."""


class RobotsTxtMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        self.user_agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        self.wait = positive_float(settings, "ROBOTSTXT_UNREACHABLE_WAIT")
        self.max_tries = positive_int(settings, "ROBOTSTXT_UNREACHABLE_TRIES")
        # an unanswered robots.txt makes the site dead for the failed-path filter, whose
        # workers read its counts again this often: so do we, an unanswered entry
        self.failpath = _failpath_on(settings)
        self.unanswered_ttl = settings.getfloat("FAILPATH_CACHE_TTL", 5.0)
        self.lock_seconds = 2 * settings.getfloat("DOWNLOAD_TIMEOUT") + settings.getfloat(
            "ADAPTIVE_DELAY_MAX", 60.0
        )
        # origin -> (entry, parser, local expiry), least recently used first
        self._known: OrderedDict[str, tuple[robots.RobotsEntry, Any, float]] = OrderedDict()
        self._fetching: dict[str, list[Deferred[None]]] = {}  # origin -> local waiters

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsTxtMiddleware:
        return cls(crawler)

    # -- a request ---------------------------------------------------------------

    async def process_request(self, request: Request) -> None:
        meta = request.meta
        if meta.get("dont_obey_robotstxt") or meta.get("robots_txt"):
            return
        parsed = urlparse_cached(request)
        if parsed.scheme not in ("http", "https"):
            return
        origin = f"{parsed.scheme}://{parsed.netloc.lower()}"
        probe, fetched, started = bool(meta.get("failpath_probe")), False, time.time()
        while True:
            entry, parser = await self._entry(origin)
            # (a request opted out of the failed-path filter waits, as RFC 9309 says)
            silent = entry is not None and entry.unanswered and meta.get("failpath") is not False
            if self.failpath and silent:
                # a re-probe's request tries the file again at once (so does any request
                # once its wait is over: the site's counts were cleared meanwhile)
                if not fetched and (probe or time.time() >= entry.retry_at):
                    fetched = True
                    await self._fetch_once(origin, entry, request)
                    continue
                self.stats.inc_value("robotstxt/unanswered")
                raise SiteUnanswered(
                    f"robots.txt of {origin} gets no answer ({entry.reason})", entry.fetched_at
                )
            action, wait = robots.verdict(entry, time.time(), self.max_tries)
            if action == "check":
                assert entry is not None
                self._check(request, entry, parser, fresh=fetched and entry.fetched_at >= started)
                return
            if action == "give_up":
                assert entry is not None
                self.stats.inc_value("robotstxt/given_up")
                raise RobotsTxtUnreachable(
                    f"robots.txt of {origin} unreachable {entry.tries} times "
                    f"(last: {entry.reason}): nothing of the host is fetched for now"
                )
            if action == "wait":
                if await self._defer(request, wait, origin):
                    raise RobotsTxtWait(f"robots.txt of {origin} unreachable: back in {wait:.0f} s")
                continue
            fetched = True
            await self._fetch_once(origin, entry, request)

    def _check(self, request: Request, entry: Any, parser: Any, fresh: bool) -> None:
        if parser is None or parser.can_fetch(request.url, self.user_agent):
            return
        logger.debug("Forbidden by robots.txt: %s", request)
        self.stats.inc_value("robotstxt/forbidden")
        raise ForbiddenByRobotsTxt("Forbidden by robots.txt", fresh=fresh)

    async def _defer(self, request: Request, wait: float, origin: str) -> bool:
        """Send ``request`` back to the frontier for ``wait`` seconds (True), or, when it is
        not the frontier's, wait here (False: look again)."""
        from twisted.internet import reactor  # late: importing it installs one

        self.stats.inc_value("robotstxt/deferred")
        frontier = self._frontier()
        reason = f"robots.txt of {origin} unreachable"
        if frontier is not None and frontier.requeue(request, wait, reason):
            return True
        await maybe_deferred_to_future(deferLater(reactor, min(wait, 60.0), lambda: None))
        return False

    # -- the crawl's entry ---------------------------------------------------------

    async def _entry(self, origin: str) -> tuple[robots.RobotsEntry | None, Any]:
        """The host's entry (local copy, else Redis) and its parser."""
        known = self._known.get(origin)
        now = time.time()
        if known is not None and now < known[2]:
            self._known.move_to_end(origin)
            return known[0], known[1]
        frontier = self._frontier()
        if frontier is None:
            return None, None
        try:
            raw = frontier.server.get(frontier.keys.robots(origin))
        except RedisError as exc:
            logger.warning("Could not read the robots.txt rules of %s in Redis: %s", origin, exc)
            return (known[0], known[1]) if known else (None, None)
        entry = robots.RobotsEntry.loads(raw) if raw is not None else None
        if entry is None:
            return None, None
        self.stats.inc_value("robotstxt/shared")
        return entry, await self._remember(origin, entry, fetched=False)

    async def _remember(self, origin: str, entry: robots.RobotsEntry, fetched: bool) -> Any:
        parser = entry.parser()
        if entry.unanswered and self.failpath:  # a re-probe may bring the site back
            expiry = min(entry.retry_at, time.time() + self.unanswered_ttl)
        elif entry.state == robots.UNREACHABLE:
            expiry = entry.retry_at
        else:  # fresh for 24 h; a copy kept while the file is unreachable, until its retry
            expiry = max(entry.fetched_at + robots.CACHE_SECONDS, entry.retry_at)
        self._known[origin] = (entry, parser, expiry)
        self._known.move_to_end(origin)
        while len(self._known) > LOCAL_HOSTS:
            self._known.popitem(last=False)
        if parser is not None:  # the adaptive delay reads Crawl-delay from it
            request = Request(
                origin + "/robots.txt", callback=NO_CALLBACK, meta={"robots_txt_fetched": fetched}
            )
            await self.crawler.signals.send_catch_log_async(
                signal=signals.robots_parsed, robotparser=parser, request=request
            )
        return parser

    async def _fetch_once(
        self, origin: str, previous: robots.RobotsEntry | None, request: Request
    ) -> None:
        """Fetch the file unless this worker or another is already fetching it; return
        when there is (probably) a newer entry to look at."""
        from twisted.internet import reactor  # late: importing it installs one

        waiters = self._fetching.get(origin)
        if waiters is not None:  # this worker is fetching it: wait for that
            waiter: Deferred[None] = Deferred()
            waiters.append(waiter)
            await maybe_deferred_to_future(waiter)
            return
        self._known.pop(origin, None)
        frontier = self._frontier()
        lock = renew = None
        if frontier is not None:
            lock = RedisLock(
                frontier.server,
                frontier.keys.robots_lock(origin),
                self.lock_seconds,
                owner=frontier.worker_id,
            )
            try:
                got = lock.acquire()
            except RedisError as exc:  # fetch it without the lock (and share it if we can)
                logger.warning("Could not lock the robots.txt of %s in Redis: %s", origin, exc)
                got, lock = True, None
            if not got:  # another worker fetches it: look again soon
                await maybe_deferred_to_future(deferLater(reactor, POLL, lambda: None))
                return
        self._fetching[origin] = []
        try:
            if lock is not None:  # the host's turn, redirects and timeouts can outlast it
                renew = task.LoopingCall(self._renew, lock, origin)
                renew.start(self.lock_seconds / 3, now=False)
            entry = await self._fetch(origin, previous, request)
            if entry.unanswered and self.failpath and not request.meta.get("failpath_probe"):
                # once more before the site is taken for dead: one lost connection or
                # one slow answer must not drop its URLs (a re-probe's try is enough)
                self.stats.inc_value("robotstxt/unanswered_retries")
                entry = await self._fetch(origin, previous, request)
            if frontier is not None:
                self._share(frontier, origin, entry)
            await self._remember(origin, entry, fetched=True)
            await self.crawler.signals.send_catch_log_async(
                signal=robots_fetched,
                origin=origin,
                entry=entry,
                depth=int(request.meta.get("depth", 0) or 0),
            )
        finally:
            if renew is not None and renew.running:
                renew.stop()
            if lock is not None:
                self._release(lock, origin)
            for waiter in self._fetching.pop(origin):
                waiter.callback(None)

    def _share(self, frontier: Any, origin: str, entry: robots.RobotsEntry) -> None:
        try:
            frontier.server.set(
                frontier.keys.robots(origin), entry.dumps(), ex=_shared_seconds(entry)
            )
        except RedisError as exc:  # kept locally; another worker will fetch it too
            logger.warning("Could not share the robots.txt rules of %s in Redis: %s", origin, exc)

    @staticmethod
    def _renew(lock: RedisLock, origin: str) -> None:
        """Keep the fetch lock while the fetch runs (said once if it was lost)."""
        if not lock.held:
            return
        try:
            if not lock.extend():
                logger.warning(
                    "The robots.txt lock of %s expired during its fetch: another "
                    "worker may fetch it too",
                    origin,
                )
        except RedisError as exc:
            logger.warning("Could not extend the robots.txt lock of %s: %s", origin, exc)

    @staticmethod
    def _release(lock: RedisLock, origin: str) -> None:
        """Let the fetch lock go, if it is still ours (another worker's stays)."""
        if not lock.held:
            return
        try:
            lock.release()
        except RedisError as exc:  # it expires on its own
            logger.warning("Could not release the robots.txt lock of %s: %s", origin, exc)

    async def _fetch(
        self, origin: str, previous: robots.RobotsEntry | None, request: Request
    ) -> robots.RobotsEntry:
        """Fetch the file for ``request`` (a failed-path re-probe's fetch gets the
        re-probe's wait)."""
        url = origin + "/robots.txt"
        fetch = Request(
            url,
            priority=1000,
            dont_filter=True,
            callback=NO_CALLBACK,
            meta={
                "robots_txt": True,
                "dont_obey_robotstxt": True,
                "dont_retry": True,
                "redirect_ttl": robots.MAX_REDIRECTS,
                "download_maxsize": 0,
                "download_warnsize": 0,
                "failpath_probe": bool(request.meta.get("failpath_probe")),
            },
        )
        self.stats.inc_value("robotstxt/request_count")
        sent = time.monotonic()
        try:
            response = await self.crawler.engine.download_async(fetch)
        except Exception as exc:  # every failure is an answer for RFC 9309
            return self._failed(url, origin, exc, previous, sent)
        now = time.time()
        self.stats.inc_value("robotstxt/response_count")
        self.stats.inc_value(f"robotstxt/response_status_count/{response.status}")
        entry = robots.from_response(
            response.status, response.body, now, self.user_agent, previous, self.wait
        )
        if entry.truncated:
            self.stats.inc_value("robotstxt/truncated")
            logger.info("robots.txt of %s is over 500 KiB: read its first 500 KiB", origin)
        if "robots_undecodable" in response.flags:
            logger.info("robots.txt of %s could not be decoded: everything allowed", origin)
        if entry.state == robots.UNREACHABLE or entry.retry_at > now:
            self._log_unreachable(origin, entry)
        elif entry.state == robots.ALLOW_ALL:
            logger.debug("robots.txt of %s: %s, everything allowed", origin, entry.reason)
        return entry

    def _failed(
        self,
        url: str,
        origin: str,
        exc: Exception,
        previous: robots.RobotsEntry | None,
        sent: float,
    ) -> robots.RobotsEntry:
        now = time.time()
        reason = f"{type(exc).__name__}: {exc}"[:300]
        if isinstance(exc, IgnoreRequest) or type(exc).__name__ in UNAVAILABLE:
            # too many redirects, a loop, or one we refuse: unavailable (RFC 9309 2.3.1.2)
            logger.info("robots.txt of %s unavailable (%s): everything allowed", origin, reason)
            return robots.unavailable(reason, now)
        # no answer at all, unless Redis stopped answering meanwhile (its calls block the
        # reactor, the download with them: the failure may be ours, as for failed paths)
        unanswered = isinstance(exc, FAILURES) and RoundTrips.last_error < sent
        entry = robots.unreachable(reason, now, previous, self.wait, unanswered=unanswered)
        if entry.unanswered and self.failpath:
            self.stats.inc_value("robotstxt/unreachable")
            logger.info(
                "robots.txt of %s gets no answer (%s): the site's URLs are dropped until a "
                "failed-path re-probe finds it answering",
                origin,
                reason,
            )
        else:
            self._log_unreachable(origin, entry)
        return entry

    def _log_unreachable(self, origin: str, entry: robots.RobotsEntry) -> None:
        self.stats.inc_value("robotstxt/unreachable")
        if entry.state != robots.UNREACHABLE:  # a copy is kept (RFC 9309 2.4)
            hours = (time.time() - entry.fetched_at) / 3600
            logger.info(
                "robots.txt of %s: %s; its copy of %.0f h ago is used until it is tried "
                "again in %.0f s",
                origin,
                entry.reason,
                hours,
                self.wait,
            )
            return
        if entry.tries >= self.max_tries:
            logger.warning(
                "robots.txt of %s unreachable %d times (%s): the host's requests fail from now on",
                origin,
                entry.tries,
                entry.reason,
            )
        else:
            logger.info(
                "robots.txt of %s unreachable (%s): nothing of the host is fetched "
                "before it is tried again in %.0f s (try %d of %d)",
                origin,
                entry.reason,
                self.wait,
                entry.tries,
                self.max_tries,
            )

    def _frontier(self) -> Any:
        from webcrawl.frontier.scheduler import frontier_of  # late: installs a reactor

        return frontier_of(self.crawler)


def _failpath_on(settings: Any) -> bool:
    """Whether the failed-path filter runs (FAILPATH_ENABLED, and its middleware, or a
    subclass, enabled): it records the sites whose URLs SiteUnanswered drops."""
    if not settings.getbool("FAILPATH_ENABLED"):
        return False
    for path, order in settings.getwithbase("DOWNLOADER_MIDDLEWARES").items():
        if order is None:  # disabled: not imported (Scrapy imports none of those)
            continue
        cls = load_object(path) if isinstance(path, str) else path
        if isinstance(cls, type) and issubclass(cls, FailPathMiddleware):
            return True
    return False


def _shared_seconds(entry: robots.RobotsEntry) -> int:
    """How long Redis keeps ``entry``: a copy of the file until it is too old to be kept
    (:data:`~webcrawl.safety.robots.KEEP_SECONDS`), an unreachable one 24 h (it counts
    the tries)."""
    if entry.state == robots.UNREACHABLE:
        return int(robots.CACHE_SECONDS)
    return max(1, int(entry.fetched_at + robots.KEEP_SECONDS - time.time()))


class RobotsTxtLimitMiddleware(BodyLimitMiddleware):
    """Reads at most 500 KiB of a robots.txt, after decompression (RFC 9309 2.5), so
    neither a 100 MB file nor a gzip bomb costs more (:mod:`webcrawl.middlewares.bodylimit`:
    an undecodable file is flagged ``robots_undecodable``)."""

    max_bytes = robots.MAX_BYTES
    flag = "robots"
    spare = 1  # (the reader tells a cut file by its 500 KiB + 1 bytes)
    decoded_spare = 0

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        super().__init__(crawler)

    def applies(self, request: Request) -> bool:
        return bool(request.meta.get("robots_txt"))
