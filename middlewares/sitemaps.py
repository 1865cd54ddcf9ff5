"""Sitemap downloads: within the worker's sitemap memory, and at most
``SITEMAP_MAX_BYTES`` of each, as it comes and after decompression.

:class:`SitemapMemoryMiddleware` (605, above Scrapy's RedirectMiddleware): a sitemap
leaves for the downloader only when its host has no other in flight, and holds the
bytes it receives (from its ``Content-Length`` when it has one) in the spider's
:class:`~webcrawl.sitemaps.memory.SitemapMemory` (``SITEMAP_MAX_MEMORY``) until the
spider has read it; one that finds the memory taken is stopped (before its body, when
its length is known) and goes back to the frontier for ``WAIT`` seconds
(``sitemap/deferred``), or, with Scrapy's own scheduler, is crawled again after as
long.  A sitemap that has no answer yet holds nothing: hosts that hang keep nobody
else's waiting.  Any answer but a 2xx (a redirect included: its new request, which may
go to another worker, is admitted on its own) and any error free its share at once.

:class:`SitemapLimitMiddleware` (596): a sitemap is an untrusted file that may be huge
or a bomb: the download stops at ``SITEMAP_MAX_BYTES`` and a ``Content-Encoding`` is
decoded only that far (:mod:`webcrawl.middlewares.bodylimit`; flags ``sitemap_cut``,
``sitemap_undecodable``). A gzip *file* (``sitemap.xml.gz``, no Content-Encoding) is
inflated, just as far, by the reader (:mod:`webcrawl.sitemaps.parse`). Scrapy's own
``DOWNLOAD_MAXSIZE``, which would drop the whole file, is lifted here for sitemap
requests (``download_maxsize`` 0 as they leave): this bound replaces it. A 2xx body goes
on to the spider in ``meta["sitemap_body"]``, not in the response (see
:meth:`SitemapLimitMiddleware.process_response`).
"""

from __future__ import annotations

from typing import Any, NoReturn

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured, StopDownload
from scrapy.http import Response

from webcrawl.middlewares.bodylimit import BodyLimitMiddleware
from webcrawl.settings_check import positive_int
from webcrawl.sitemaps.scope import origin_of

WAIT = 5.0  # seconds a sitemap that found the memory taken waits in the frontier
GRANT = 1 << 20  # bytes a sitemap of unknown length holds at first (doubled as it comes)
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
        self._parked = 0  # sitemaps waiting to be crawled again (Scrapy's own scheduler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SitemapMemoryMiddleware:
        middleware = cls(crawler)
        connect = crawler.signals.connect
        connect(middleware._headers_received, signal=signals.headers_received)
        connect(middleware._bytes_received, signal=signals.bytes_received)
        connect(middleware._left, signal=signals.request_left_downloader)
        connect(middleware._idle, signal=signals.spider_idle)
        return middleware

    def process_request(self, request: Request, spider: Any = None) -> None:
        memory = self._memory(request)
        if memory is None:
            return
        token = memory.admit(request.meta.get(TOKEN), origin_of(request.url))
        if token is None:
            request.meta.pop(TOKEN, None)
            self._wait(request, "its host has a sitemap in flight, or the memory is taken")
        request.meta[TOKEN] = token

    def _headers_received(
        self, headers: Any, body_length: Any, request: Request, spider: Any = None
    ) -> None:
        memory = self._memory(request)
        if memory is None:
            return
        known = isinstance(body_length, int) and body_length >= 0
        size = min(body_length if known else GRANT, self.max_bytes)
        if not memory.reserve(request.meta.get(TOKEN), size):
            raise SitemapBusy  # (before its body: nothing downloaded in vain)

    def _bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        memory = self._memory(request)
        if memory is None:
            return
        received = self._received.get(request, 0) + len(data)
        self._received[request] = received
        token = request.meta.get(TOKEN)
        held = memory.held_by(token)
        if received <= held or received > self.max_bytes:
            return  # (past SITEMAP_MAX_BYTES, SitemapLimitMiddleware cuts it)
        ahead = min(self.max_bytes, max(received, 2 * held))  # (fewer calls)
        if not (memory.reserve(token, ahead) or memory.reserve(token, received)):
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
            self._wait(request, "the sitemap memory is taken")

    def _wait(self, request: Request, why: str) -> NoReturn:
        """Send ``request`` back to wait ``WAIT`` seconds."""
        from webcrawl.frontier.scheduler import frontier_of  # late: installs a reactor

        self.crawler.stats.inc_value("sitemap/deferred")
        frontier = frontier_of(self.crawler)
        if frontier is None or not frontier.requeue(request, WAIT, why):
            from twisted.internet import reactor  # late: importing it installs one

            self._parked += 1  # (not waiting in the downloader, where it would hold one
            reactor.callLater(WAIT, self._unpark, request)  # of CONCURRENT_REQUESTS)
        raise SitemapWait(f"{why}: back in {WAIT:.0f} s")

    def _unpark(self, request: Request) -> None:
        self._parked -= 1
        engine = self.crawler.engine
        if engine is not None and engine.running:
            engine.crawl(request)

    def _idle(self, spider: Any = None) -> None:
        if self._parked:
            raise DontCloseSpider

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
        response = super().process_response(request, response, spider)
        if self.applies(request) and 200 <= response.status < 300:
            # the body rides in meta to the spider, off Scrapy's scraper slot: the scraper
            # stops every download while more than SCRAPER_SLOT_MAX_ACTIVE_SIZE (5 MB) of
            # responses wait for their callbacks, so a 50 MiB sitemap would hold the
            # worker still as long as it is read; its memory is bounded by the slots
            request.meta["sitemap_body"] = response.body
            memory = getattr(self.crawler.spider, "sitemap_memory", None)
            if memory is not None:  # its decoded body, in memory now
                memory.reserve(request.meta.get(TOKEN), len(response.body), force=True)
            response = response.replace(body=b"")
        return response
