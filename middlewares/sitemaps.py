"""Sitemap downloads: at most ``SITEMAP_CONCURRENT_FILES`` at once, and at most
``SITEMAP_MAX_BYTES`` of each, as it comes and after decompression.

:class:`SitemapSlotsMiddleware` (605, above Scrapy's RedirectMiddleware): a sitemap
leaves for the downloader only with one of the worker's slots
(:mod:`webcrawl.sitemaps.slots`, the spider's), kept until the spider has read it; with
none free it goes back to the frontier for ``WAIT`` seconds (``sitemap/deferred``), or,
with Scrapy's own scheduler, waits here. A host holds at most one slot (one whose
sitemaps hang until ``DOWNLOAD_TIMEOUT`` keeps the other hosts' waiting for one slot at
most). Any answer but a 2xx (a redirect included: its new request, which may go to
another worker, takes a slot of its own) and any error free the slot at once.

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

from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from webcrawl.middlewares.bodylimit import BodyLimitMiddleware
from webcrawl.settings_check import positive_int
from webcrawl.sitemaps.scope import origin_of

WAIT = 5.0  # seconds a sitemap that found no free slot waits in the frontier


class SitemapWait(IgnoreRequest):
    """The sitemap went back to the frontier: the worker's sitemap slots were all taken."""


class SitemapSlotsMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("SITEMAP_ENABLED"):
            raise NotConfigured
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SitemapSlotsMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        slots = self._slots(request)
        if slots is None:
            return
        while True:
            token = slots.acquire(request.meta.get("sitemap_slot"), origin_of(request.url))
            if token is not None:
                request.meta["sitemap_slot"] = token
                return
            self.crawler.stats.inc_value("sitemap/deferred")
            if self._requeue(request):
                raise SitemapWait(f"{slots.limit} sitemaps read at once: back in {WAIT:.0f} s")
            from twisted.internet import reactor  # late: importing it installs one

            await maybe_deferred_to_future(deferLater(reactor, 1.0, lambda: None))

    def _requeue(self, request: Request) -> bool:
        from webcrawl.frontier.scheduler import frontier_of  # late: installs a reactor

        frontier = frontier_of(self.crawler)
        return frontier is not None and frontier.requeue(request, WAIT, "sitemap slots taken")

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        if not 200 <= response.status < 300:  # nothing to read: a redirect's request, a
            self._release(request)  # retry takes a slot of its own
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        self._release(request)

    def _slots(self, request: Request) -> Any:
        if "sitemap" not in request.meta:
            return None
        return getattr(self.crawler.spider, "sitemap_slots", None)

    def _release(self, request: Request) -> None:
        slots = self._slots(request)
        if slots is not None:
            slots.release(request.meta.pop("sitemap_slot", None))


class SitemapLimitMiddleware(BodyLimitMiddleware):
    flag = "sitemap"

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("SITEMAP_ENABLED"):
            raise NotConfigured
        super().__init__(crawler)
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
            response = response.replace(body=b"")
        return response
