"""Sitemap downloads: within the worker's sitemap memory, and at most
``SITEMAP_MAX_BYTES`` of each, as it comes and after decompression.

:class:`SitemapMemoryMiddleware` (605, above Scrapy's RedirectMiddleware): a sitemap
leaves for the downloader only when its host has no other in flight and the spider's
:class:`~webcrawl.sitemaps.memory.SitemapMemory` (``SITEMAP_MAX_MEMORY``) is not all
taken (else it goes back to the frontier for a while, ``sitemap/deferred``: from
``HOST_WAIT``, doubling, when its host is busy; ``WAIT`` for the memory); it then
holds the bytes it receives until the spider has read it.  One whose bytes stop fitting
is stopped, claims the memory it needs, and goes back to the
frontier for ``WAIT`` seconds (``sitemap/deferred``), or, with Scrapy's own scheduler,
is crawled again after as long.  A sitemap that has no answer yet holds nothing: hosts
that hang keep nobody else's waiting.  Any answer but a 2xx (a redirect included: its
new request, which may go to another worker, is admitted on its own) and any error free
its share at once.  A refresh over its payer's file budget does not leave at all.

:class:`SitemapLimitMiddleware` (596): a sitemap is an untrusted file that may be huge
or a bomb: the download stops at ``SITEMAP_MAX_BYTES`` (:mod:`webcrawl.middlewares.bodylimit`;
flag ``sitemap_cut``). Its body goes on to the spider as it came, in
``meta["sitemap_body"]`` (not in the response: see
:meth:`SitemapLimitMiddleware.process_response`), with its ``Content-Encoding`` in
``meta["sitemap_encodings"]``: the spider decodes it on its sitemaps thread, as far as
``SITEMAP_MAX_BYTES``, while it reads it (so that a decoded body is in memory one at a
time, not one per download), as it inflates a gzip *file*
(:mod:`webcrawl.sitemaps.parse`). Scrapy's own ``DOWNLOAD_MAXSIZE``, which would drop
the whole file, is lifted here for sitemap requests (``download_maxsize`` 0 as they
leave): this bound replaces it.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured, StopDownload
from scrapy.http import Response

from webcrawl.frontier.signals import crawl_may_end
from webcrawl.middlewares.bodylimit import BodyLimitMiddleware, content_encodings
from webcrawl.settings_check import positive_int
from webcrawl.sitemaps.scope import origin_of

logger = logging.getLogger(__name__)

WAIT = 5.0  # seconds a sitemap that found the memory taken waits in the frontier
# seconds one whose host had another in flight waits first, then twice as long each time
# up to WAIT: that one is usually read within a second, and a flat 5 s lost again and
# again to the host's other sitemaps, whose refreshes came at the right time (one of 4
# files read once in 12 s, refreshes every 2 s); the doubling keeps a host whose
# sitemaps hang from spending its turns on them
HOST_WAIT = 1.0
HOST_WAITS = "sitemap_host_waits"  # meta: how often it found its host busy


def host_wait(times: int) -> float:
    """Seconds a sitemap waits the ``times``-th time it finds its host busy (from 0)."""
    return min(WAIT, HOST_WAIT * 2 ** min(times, 8))


TOKEN = "sitemap_token"  # its share of the memory, in its request's meta


class SitemapWait(IgnoreRequest):
    """The sitemap went back to the frontier: its host has one in flight, or the worker's
    sitemap memory is taken."""


class SitemapBusy(StopDownload):
    """Stops a sitemap download whose bytes do not fit in the worker's sitemap memory."""

    def __init__(self) -> None:
        super().__init__(fail=True)


class SitemapMemoryMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("SITEMAP_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.max_bytes = positive_int(crawler.settings, "SITEMAP_MAX_BYTES")
        self._received: dict[Request, int] = {}
        self._parked: set[Any] = set()  # (Scrapy's own scheduler) calls that crawl again

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SitemapMemoryMiddleware:
        middleware = cls(crawler)
        connect = crawler.signals.connect
        connect(middleware._bytes_received, signal=signals.bytes_received)
        connect(middleware._left, signal=signals.request_left_downloader)
        connect(middleware._idle, signal=signals.spider_idle)
        connect(middleware._idle, signal=crawl_may_end)  # (the frontier's: a finite crawl's end)
        connect(middleware._closed, signal=signals.spider_closed)
        return middleware

    def process_request(self, request: Request, spider: Any = None) -> None:
        memory = self._memory(request)
        if memory is None:
            return
        may_leave = getattr(self.crawler.spider, "sitemap_may_leave", None)
        if TOKEN not in request.meta and may_leave is not None and not may_leave(request):
            raise IgnoreRequest(f"{request.url}: over its payer's SITEMAP_MAX_FILES_PER_HOST")
        origin = origin_of(request.url)
        token = memory.admit(request.meta.get(TOKEN), origin, listed_url(request))
        if token is None:
            request.meta.pop(TOKEN, None)
            if memory.host_busy(origin):
                times = int(request.meta.get(HOST_WAITS) or 0)
                request.meta[HOST_WAITS] = times + 1
                self._wait(request, "its host has a sitemap in flight", host_wait(times))
            self._wait(request, "the sitemap memory is taken")
        request.meta[TOKEN] = token

    def _bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        memory = self._memory(request)
        if memory is None:
            return
        received = self._received.get(request, 0) + len(data)
        self._received[request] = received
        token = request.meta.get(TOKEN)
        if not memory.holds(token):  # taken back as stale (a long wait in Scrapy's queue)
            token = memory.admit(None, origin_of(request.url), listed_url(request))
            if token is None:
                request.meta.pop(TOKEN, None)
                raise SitemapBusy
            request.meta[TOKEN] = token
        held = memory.held_by(token)
        if received <= held or received > self.max_bytes:
            return  # (past SITEMAP_MAX_BYTES, SitemapLimitMiddleware cuts it)
        ahead = min(self.max_bytes, max(received, 2 * held))  # (fewer calls)
        if memory.hold(token, ahead) or memory.hold(token, received):
            return
        need = min(self.max_bytes, 2 * received)
        memory.stopped(token, listed_url(request), need, most=self.max_bytes)
        request.meta.pop(TOKEN, None)
        raise SitemapBusy

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        self._received.pop(request, None)
        if not 200 <= response.status < 300:  # nothing to read: a redirect's request, a
            self._release(request)  # retry is admitted on its own
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        self._received.pop(request, None)
        self._release(request)
        if isinstance(exception, SitemapBusy):
            self._wait(request, "its bytes do not fit in the sitemap memory")

    def _wait(self, request: Request, why: str, seconds: float = WAIT) -> NoReturn:
        """Send ``request`` back to wait ``seconds``."""
        from webcrawl.frontier.scheduler import frontier_of  # late: installs a reactor

        self.crawler.stats.inc_value("sitemap/deferred")
        waits = getattr(self.crawler.spider, "sitemap_waits", None)
        if waits is not None:
            waits(request)
        frontier = frontier_of(self.crawler)
        if frontier is None or not frontier.requeue(request, seconds, why):
            from twisted.internet import reactor  # late: importing it installs one

            # (not waiting in the downloader, where it would hold one of
            # CONCURRENT_REQUESTS)
            call = reactor.callLater(seconds, self._unpark, request)
            self._parked.add(call)
            call.request = request
        raise SitemapWait(f"{why}: back in {seconds:g} s")

    def _unpark(self, request: Request) -> None:
        self._parked = {call for call in self._parked if call.active()}
        engine = self.crawler.engine
        if engine is not None and engine.running and engine.spider is not None:
            engine.crawl(request)
        else:
            self._lost([request])

    def _idle(self, spider: Any = None) -> None:
        """spider_idle, and the frontier's crawl_may_end: sitemaps parked here for memory
        keep this worker open, and its failed-path middleware from the final re-probe,
        until they are read.  (The frontier takes most sitemaps back, with a lease, and
        counts them as work; parked here are those it could not.)"""
        if any(call.active() for call in self._parked):
            raise DontCloseSpider

    def _closed(self, spider: Any = None, reason: str = "") -> None:
        pending = [call for call in self._parked if call.active()]
        for call in pending:
            call.cancel()
        self._parked.clear()
        self._lost([call.request for call in pending])

    def _lost(self, requests: list[Request]) -> None:
        if requests:
            self.crawler.stats.inc_value("sitemap/lost_waiting", len(requests))
            logger.info(
                "%d sitemaps waiting for memory were not read: the crawl ended first (%s...)",
                len(requests),
                requests[0].url,
            )

    def _left(self, request: Request, spider: Any = None) -> None:
        self._received.pop(request, None)

    def _memory(self, request: Request) -> Any:
        if "sitemap" not in request.meta:
            return None
        return getattr(self.crawler.spider, "sitemap_memory", None)

    def _release(self, request: Request) -> None:
        memory = self._memory(request)
        if memory is not None:
            memory.release(request.meta.pop(TOKEN, None))


def listed_url(request: Request) -> str:
    """The sitemap's URL as it was listed (the first of its redirects)."""
    redirects = request.meta.get("redirect_urls")
    return str(redirects[0]) if redirects else request.url


class SitemapLimitMiddleware(BodyLimitMiddleware):
    flag = "sitemap"

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("SITEMAP_ENABLED"):
            raise NotConfigured
        super().__init__(crawler)
        self.crawler = crawler
        self.max_bytes = positive_int(crawler.settings, "SITEMAP_MAX_BYTES")

    def applies(self, request: Request) -> bool:
        return "sitemap" in request.meta

    def process_request(self, request: Request, spider: Any = None) -> None:
        if self.applies(request):  # this bound replaces Scrapy's, which drops the file
            request.meta["download_maxsize"] = 0
            request.meta["download_warnsize"] = 0

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        if not self.applies(request) or not 200 <= response.status < 300:
            return super().process_response(request, response, spider)
        self._received.pop(request, None)
        flags = list(response.flags)
        if request.meta.pop("sitemap_cut", False):
            flags.append("sitemap_cut")
        # the body rides in meta to the spider, off Scrapy's scraper slot: the scraper
        # stops every download while more than SCRAPER_SLOT_MAX_ACTIVE_SIZE (5 MB) of
        # responses wait for their callbacks, so a 50 MiB sitemap would hold the worker
        # still as long as it is read; its memory is the sitemap memory's
        body = response.body
        request.meta["sitemap_body"] = body
        request.meta["sitemap_encodings"] = content_encodings(response)
        response.headers.pop(b"Content-Encoding", None)  # (decoded by the spider)
        memory = getattr(self.crawler.spider, "sitemap_memory", None)
        if memory is not None:  # what it holds: its body (the bytes were held ahead)
            memory.hold(request.meta.get(TOKEN), len(body), force=True)
        return response.replace(body=b"", flags=flags)
