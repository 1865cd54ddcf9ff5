"""Reads at most so many bytes of some responses, as they come and after decompression.

The base of :class:`~webcrawl.middlewares.robotstxt.RobotsTxtLimitMiddleware` (robots.txt,
500 KiB) and :class:`~webcrawl.middlewares.sitemaps.SitemapLimitMiddleware` (sitemaps,
``SITEMAP_MAX_BYTES``).  It sits above Scrapy's HttpCompressionMiddleware (590), so it
sees the body as it came: the download stops once ``max_bytes`` arrived
(``bytes_received``; StopDownload keeps what came, and the response is flagged
``<flag>_cut``), and a ``Content-Encoding`` is decoded here only as far as ``max_bytes``
(an undecodable body becomes empty, flagged ``<flag>_undecodable``).  The body handed on
is at most ``max_bytes`` long, and ``spare`` bytes more.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import StopDownload
from scrapy.http import Response

from webcrawl.safety.robots import decompress_prefix


class BodyLimitMiddleware:
    """Subclasses set ``max_bytes``, ``flag`` (and ``spare``) and say which requests it
    ``applies`` to."""

    max_bytes: int
    flag: str
    spare = 0  # bytes kept past max_bytes (robots.txt: one, to tell it was cut)
    decoded_spare = 1  # bytes decoded past max_bytes (sitemaps: one, to flag the cut)

    def __init__(self, crawler: Crawler) -> None:
        self._received: dict[Request, int] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        middleware = cls(crawler)
        crawler.signals.connect(middleware._bytes_received, signal=signals.bytes_received)
        crawler.signals.connect(middleware._left, signal=signals.request_left_downloader)
        return middleware

    def applies(self, request: Request) -> bool:
        raise NotImplementedError

    def _bytes_received(self, data: bytes, request: Request, spider: Any) -> None:
        if not self.applies(request):
            return
        received = self._received.get(request, 0) + len(data)
        self._received[request] = received
        if received > self.max_bytes:
            del self._received[request]
            request.meta[f"{self.flag}_cut"] = True
            raise StopDownload(fail=False)

    def _left(self, request: Request, spider: Any = None) -> None:
        # (a redirect's response never reaches process_response here: RedirectMiddleware,
        # nearer the downloader, answers it with a new request)
        self._received.pop(request, None)

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        self._received.pop(request, None)

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        if not self.applies(request):
            return response
        self._received.pop(request, None)
        flags = list(response.flags)
        if request.meta.pop(f"{self.flag}_cut", False):
            flags.append(f"{self.flag}_cut")
        encodings = content_encodings(response)
        body = response.body
        if encodings:
            try:
                body = decompress_prefix(body, encodings, self.max_bytes + self.decoded_spare)
            except ValueError:
                body, flags = b"", [*flags, f"{self.flag}_undecodable"]
            response.headers.pop(b"Content-Encoding", None)
        if len(body) > self.max_bytes and f"{self.flag}_cut" not in flags:
            flags.append(f"{self.flag}_cut")
        return response.replace(body=body[: self.max_bytes + self.spare], flags=flags)


def content_encodings(response: Response) -> list[str]:
    """The codings of a response's ``Content-Encoding`` headers, in the order applied."""
    values = [e.decode("latin-1") for e in response.headers.getlist("Content-Encoding")]
    return [part.strip() for value in values for part in value.split(",") if part.strip()]
