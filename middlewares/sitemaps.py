"""Reads at most ``SITEMAP_MAX_BYTES`` of a sitemap, as it comes and after decompression.

A sitemap is an untrusted file that may be huge or a bomb.  Like
:class:`~webcrawl.middlewares.robotstxt.RobotsTxtLimitMiddleware` it sits above Scrapy's
HttpCompressionMiddleware (590), so it sees the body as it came: the download stops
once ``SITEMAP_MAX_BYTES`` arrived (``bytes_received``; StopDownload keeps what came,
and the response is flagged ``sitemap_cut``), and a ``Content-Encoding`` is decoded here
only as far as ``SITEMAP_MAX_BYTES`` (an undecodable body becomes empty, flagged
``sitemap_undecodable``).  A gzip *file* (``sitemap.xml.gz``, no Content-Encoding) is
inflated, just as far, by the reader (:mod:`webcrawl.sitemaps.parse`).  Scrapy's own
``DOWNLOAD_MAXSIZE``, which would drop the whole file, is lifted here for sitemap
requests (``download_maxsize`` 0 as they leave): this bound replaces it.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured, StopDownload
from scrapy.http import Response

from webcrawl.safety.robots import decompress_prefix
from webcrawl.settings_check import positive_int


class SitemapLimitMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("SITEMAP_ENABLED"):
            raise NotConfigured
        self.max_bytes = positive_int(crawler.settings, "SITEMAP_MAX_BYTES")
        self._received: dict[Request, int] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SitemapLimitMiddleware:
        middleware = cls(crawler)
        crawler.signals.connect(middleware._bytes_received, signal=signals.bytes_received)
        crawler.signals.connect(middleware._left, signal=signals.request_left_downloader)
        return middleware

    def _left(self, request: Request, spider: Any = None) -> None:
        # (a redirect's response never reaches process_response here: RedirectMiddleware,
        # nearer the downloader, answers it with a new request)
        self._received.pop(request, None)

    def _bytes_received(self, data: bytes, request: Request, spider: Any) -> None:
        if "sitemap" not in request.meta:
            return
        received = self._received.get(request, 0) + len(data)
        self._received[request] = received
        if received > self.max_bytes:
            del self._received[request]
            request.meta["sitemap_cut"] = True
            raise StopDownload(fail=False)

    def process_request(self, request: Request, spider: Any = None) -> None:
        if "sitemap" in request.meta:  # this bound replaces Scrapy's, which drops the file
            request.meta["download_maxsize"] = 0
            request.meta["download_warnsize"] = 0

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        self._received.pop(request, None)

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        if "sitemap" not in request.meta:
            return response
        self._received.pop(request, None)
        flags = list(response.flags)
        if request.meta.pop("sitemap_cut", False):
            flags.append("sitemap_cut")
        encodings = [e.decode("latin-1") for e in response.headers.getlist("Content-Encoding")]
        encodings = [p for e in encodings for p in e.split(",") if p.strip()]
        body = response.body
        if encodings:
            try:
                body = decompress_prefix(body, encodings, self.max_bytes + 1)
            except ValueError:
                body, flags = b"", [*flags, "sitemap_undecodable"]
            response.headers.pop(b"Content-Encoding", None)
        if len(body) > self.max_bytes:
            body, flags = body[: self.max_bytes], [*flags, "sitemap_cut"]
        return response.replace(body=body, flags=flags)
