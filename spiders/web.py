"""The ``web`` spider: fetch seeds, record every page, follow in-scope links, read the
hosts' sitemaps (:mod:`webcrawl.spiders.sitemaps`).

    scrapy crawl web -a seeds=https://example.com/
    scrapy crawl web -a seeds=seeds.txt -a scope=domain

Seeds come from ``-a seeds=`` (a file, one URL per line, or comma-separated
URLs) and from ``webcrawl submit`` (the crawl's start key in Redis, polled
every ``WEBCRAWL_SUBMIT_POLL_INTERVAL`` seconds).  Bad seed lines are logged
with their line number and skipped.  Seeds go through the dupefilter like any
link, so a page linking back to a seed does not fetch it again.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.utils.misc import load_object
from twisted.internet import task
from twisted.python.failure import Failure

from webcrawl.frontier.known import by_url, url_key, url_key_of
from webcrawl.page import Page, attach_wire, page_from_response
from webcrawl.safety.bindings import SeedBindings, bind_seeds
from webcrawl.safety.policy import address_policy
from webcrawl.safety.seal import Seal
from webcrawl.safety.traps import TrapRules
from webcrawl.settings_check import (
    check_choice,
    choice,
    environment_overridden,
    non_negative_int,
    positive_float,
    positive_int,
)
from webcrawl.spiders.sitemaps import SitemapReading
from webcrawl.urls.scope import MODES, Scope
from webcrawl.urls.seeds import parse_seed_lines, read_seeds
from webcrawl.warc.capture import capture_of

logger = logging.getLogger(__name__)


def refused_answer(exc: BaseException) -> tuple[str, str] | None:
    """The stat and reason to record for an IgnoreRequest that is the server's doing (None: a
    decision of ours, not recorded): a body over DOWNLOAD_MAXSIZE once decompressed
    (Scrapy's HttpCompressionMiddleware raises IgnoreRequest from its private
    ``_DecompressionMaxSizeExceeded``: ``tests/test_hostile.py`` notices if that
    changes), or more redirects than REDIRECT_MAX_TIMES."""
    if type(exc.__cause__).__name__ == "_DecompressionMaxSizeExceeded":
        return "too_large", f"TooLarge: {str(exc)[:300]}"
    if str(exc) == "max redirections reached":
        return "too_many_redirects", "TooManyRedirects: more redirects than REDIRECT_MAX_TIMES"
    return None


class WebSpider(SitemapReading, Spider):
    name = "web"
    takes_submitted_seeds = True  # it polls the crawl's `webcrawl submit` list

    def __init__(self, seeds: str | None = None, scope: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = seeds
        self.scope_arg = scope

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> WebSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        if spider.scope_arg is not None:  # -a scope= wins over the setting
            spider.scope = Scope(check_choice("-a scope", spider.scope_arg, MODES))
        else:
            spider.scope = Scope(choice(crawler.settings, "WEBCRAWL_SCOPE", MODES))
        spider.submit_poll = positive_float(crawler.settings, "WEBCRAWL_SUBMIT_POLL_INTERVAL")
        spider.keep_content = crawler.settings.getbool("STORE_CONTENT")
        # as LinkExtractor(deny_extensions=...) takes them: ".png" is a suffix of the path
        spider.deny_extensions = tuple(
            {f".{e}" for e in crawler.settings.getlist("LINKS_DENY_EXTENSIONS")}
        )
        # URLs handed to Scrapy's own scheduler (the frontier knows its own)
        spider._scheduled = set()
        spider._scheduled_limit = positive_int(crawler.settings, "FRONTIER_SEEN_CACHE_SIZE")
        # (crawler.request_fingerprinter is set only after the spider is made)
        spider._by_url = by_url(load_object(crawler.settings.get("REQUEST_FINGERPRINTER_CLASS")))
        spider._scope_refreshed = spider._seed_hosts_read = 0.0
        spider.trap_rules = TrapRules(
            non_negative_int(crawler.settings, "TRAPS_MAX_URL_LENGTH"),
            non_negative_int(crawler.settings, "TRAPS_MAX_SEGMENT_REPEATS"),
        )
        for message in environment_overridden(crawler.settings, os.environ):
            logger.warning(message)
        spider.address_policy = address_policy(crawler)
        spider.address_policy.refresh = spider._shared_bindings
        spider._bad_seeds = 0
        spider._bindings = None
        spider.seed_urls = spider._read_seeds()
        spider._poll = task.LoopingCall(spider._pull_submitted)
        spider._start_sitemaps(crawler)
        crawler.signals.connect(spider._on_idle, signal=signals.spider_idle)
        crawler.signals.connect(spider._on_closed, signal=signals.spider_closed)
        if spider._by_url and not _is_webcrawl_scheduler(crawler.settings):  # it knows its own
            crawler.signals.connect(spider._on_scheduled, signal=signals.request_scheduled)
        return spider

    # -- the shared frontier, when the scheduler is webcrawl's ---------------

    @property
    def _frontier(self) -> Any:
        from webcrawl.frontier.scheduler import (
            frontier_of,  # late: importing it early installs a reactor
        )

        return frontier_of(self.crawler)  # None: Scrapy's own scheduler, local scope only

    def _seed_bindings(self) -> SeedBindings | None:
        """The seeds' bindings in the crawl's Redis, sealed (None: Scrapy's own scheduler)."""
        frontier = self._frontier
        if frontier is None:
            return None
        if self._bindings is None or self._bindings.server is not frontier.server:
            # one for the crawl: it says once what does not verify
            seal = self._seal(frontier)
            self._bindings = SeedBindings(frontier.server, frontier.keys.seed_bindings, seal)
        return self._bindings

    def _seal(self, frontier: Any) -> Seal:
        return Seal(
            self.crawler.settings.get("WEBCRAWL_SECRET") or "",
            local=frontier.redis.embedded is not None,
        )

    async def _bind_seeds(self, urls: list[str]) -> None:
        """Bind the seeds' hosts to their addresses now (or to the crawl's first binding
        of them, in Redis): the address policy allows a seed's host at those only."""
        await bind_seeds(self.address_policy, urls, self._seed_bindings())

    def _share_scope(self, urls: list[str]) -> None:
        """Put ``urls``' hosts in scope here and, for the other workers, in Redis."""
        self.scope.add_urls(urls)
        frontier = self._frontier
        if frontier is not None and self.scope.mode != "broad":
            keys = {self.scope.key(u) for u in urls}
            try:
                if keys:
                    frontier.server.sadd(frontier.keys.scope, *keys)
            except RedisError as exc:
                logger.warning("Could not share the seeds' scope in Redis: %s", exc)
            self._refresh_scope(force=True)

    def _shared_bindings(self) -> dict[tuple[str, int], list[str]]:
        """The seeds' bindings other workers recorded in Redis that this one can trust
        (read at most once a second: the address policy asks before it refuses a host)."""
        bindings = self._seed_bindings()
        now = time.monotonic()
        if bindings is None or now - self._seed_hosts_read < 1.0:
            return {}
        self._seed_hosts_read = now
        try:
            return bindings.all()
        except RedisError as exc:
            logger.warning("Could not read the crawl's seed hosts from Redis: %s", exc)
            return {}

    def _refresh_scope(self, force: bool = False) -> None:
        """Add the scope other workers' seeds put in Redis (at most once a second)."""
        frontier = self._frontier
        now = time.monotonic()
        if frontier is None or (not force and now - self._scope_refreshed < 1.0):
            return
        self._scope_refreshed = now
        try:
            shared = frontier.server.smembers(frontier.keys.scope)
        except RedisError as exc:
            logger.warning("Could not read the crawl's scope from Redis: %s", exc)
            return
        self.scope.keys |= {k.decode() for k in shared}

    def in_scope(self, url: str) -> bool:
        """Whether the canonical ``url`` is in the crawl's scope."""
        if self.scope.allows_canonical(url):
            return True
        self._refresh_scope()  # another worker may have added seeds
        return self.scope.allows_canonical(url)

    # -- seeds ---------------------------------------------------------------

    def _read_seeds(self) -> list[str]:
        """Parse ``-a seeds=``; a missing seed file fails the crawl at start."""
        if not self.seeds:
            return []
        try:
            urls, bad = read_seeds(self.seeds)
        except OSError as exc:
            raise ValueError(f"-a seeds: {exc}") from None
        for seed in bad:
            logger.warning("Skipping bad seed %s", seed)
        self._bad_seeds = len(bad)
        if bad and not urls:
            logger.error("None of the %d seeds is a valid http(s) URL", len(bad))
        return urls

    async def start(self) -> AsyncIterator[Request]:
        urls = self.seed_urls
        self.crawler.stats.inc_value("seeds/invalid", self._bad_seeds)
        self.crawler.stats.inc_value("seeds/valid", len(urls))
        self._share_scope(urls)
        if not urls:
            logger.info("No seeds given: working on what crawl already has queued")
        if self._frontier is not None:
            self._poll.start(self.submit_poll, now=False)
        await self._bind_seeds(urls)  # all first: a page's link may lead to any seed's host
        for url in urls:
            yield self.request_for(url)

    def request_for(self, url: str) -> Request:
        return Request(url, callback=self.parse, errback=self.failed)

    def _pull_submitted(self) -> None:
        """Move seeds from ``webcrawl submit`` into the crawl.  Their hosts are bound by
        ``webcrawl submit`` itself (sealed, in Redis): a URL pushed there by anyone else
        is crawled with no special-use address allowed."""
        frontier = self._frontier
        if frontier is None:
            return
        try:
            raw = frontier.server.lpop(frontier.keys.start, 100) or []
        except RedisError as exc:
            logger.warning("Could not read submitted seeds: %s", exc)
            return
        if not raw:
            return
        urls, bad = parse_seed_lines([r.decode("utf-8", "replace") for r in raw], "submitted")
        for seed in bad:
            logger.warning("Skipping bad submitted seed %s", seed)
        self.crawler.stats.inc_value("seeds/invalid", len(bad))
        self.crawler.stats.inc_value("seeds/submitted", len(urls))
        self._share_scope(urls)
        for url in urls:
            self.crawler.engine.crawl(self.request_for(url))
        logger.info("Took %d submitted seeds", len(urls))

    def _on_idle(self, spider: Spider) -> None:
        self._pull_submitted()

    def _on_closed(self, spider: Spider, reason: str) -> None:
        if self._poll.running:
            self._poll.stop()
        self._close_sitemaps()

    # -- pages -----------------------------------------------------------------

    def failed(self, failure: Failure) -> Iterator[Page]:
        """A request that failed for good (after its retries): record why."""
        reason = f"{type(failure.value).__name__}: {failure.getErrorMessage()}"
        if failure.check(IgnoreRequest):
            refused = refused_answer(failure.value)
            if refused is None:
                return  # robots.txt, offsite, sent back to wait: nothing wrong with the site
            self.crawler.stats.inc_value(f"hostile/{refused[0]}")
            reason = refused[1]
        request = failure.request
        redirects = [str(u) for u in request.meta.get("redirect_urls", [])]
        self.crawler.stats.inc_value("pages/failed")
        frontier = self._frontier
        if frontier is not None:
            try:
                frontier.server.incr(frontier.keys.failed)
            except RedisError as exc:
                logger.warning("Could not count a failed page in Redis: %s", exc)
        page = Page(
            url=redirects[0] if redirects else request.url,
            final_url=request.url,
            status=0,
            fetched_at=time.time(),
            depth=int(request.meta.get("depth", 0)),
            kind="failed",
            redirects=redirects,
            error=reason,
        )
        capture = capture_of(request)
        if capture is not None and capture.truncated:  # archived as received, cut short
            attach_wire(page, capture)
        yield page

    def parse(self, response: Response) -> Iterator[Page | Request]:
        page = page_from_response(
            response, keep_content=self.keep_content, deny_extensions=self.deny_extensions
        )
        if page.kind != "html" or not 200 <= page.status < 300:  # recorded, not parsed
            yield page
            return
        outlinks = []
        for url in page.outlinks:
            trap = self.trap_rules.why(url)
            if trap is not None:  # neither followed nor kept as an outlink
                self.crawler.stats.inc_value(f"traps/{trap}")
                continue
            outlinks.append(url)
        page.outlinks = outlinks
        yield page
        known, n_known, n_out = self._known_urls(), 0, 0
        for url in outlinks:
            if known(url):  # the crawl has it: no Request, no fingerprint, no queue entry
                n_known += 1
            elif not self.in_scope(url):
                n_out += 1
            else:
                yield self.request_for(url)
        stats = self.crawler.stats
        stats.inc_value("links/found", len(outlinks))
        stats.inc_value("links/known", n_known)
        stats.inc_value("links/out_of_scope", n_out)

    def _known_urls(self) -> Callable[[str], bool]:
        """Whether a canonical URL is known to be in the crawl already: asked of the
        frontier (what it stored), or of the URLs given to Scrapy's own scheduler."""
        frontier = self._frontier
        if frontier is not None:
            return frontier.knows_url
        if not self._by_url:  # another fingerprinter may tell requests of one URL apart
            return _never
        scheduled = self._scheduled
        return lambda url: url_key_of(url) in scheduled

    def _on_scheduled(self, request: Request, spider: Spider) -> None:
        key = url_key(request)
        if key is not None:
            if len(self._scheduled) >= self._scheduled_limit:
                self._scheduled.clear()
            self._scheduled.add(key)


def _never(url: str) -> bool:
    return False


def _is_webcrawl_scheduler(settings: Any) -> bool:
    from webcrawl.frontier.scheduler import Scheduler  # late: it installs a reactor

    scheduler = settings.get("SCHEDULER")
    cls = load_object(scheduler) if isinstance(scheduler, str) else scheduler
    return isinstance(cls, type) and issubclass(cls, Scheduler)
