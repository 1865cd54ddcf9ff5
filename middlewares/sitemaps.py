"""Reads at most ``SITEMAP_MAX_BYTES`` of a sitemap, as it comes and after decompression.

A sitemap is an untrusted file that may be huge or a bomb: the download stops at
``SITEMAP_MAX_BYTES`` and a ``Content-Encoding`` is decoded only that far
(:mod:`webcrawl.middlewares.bodylimit`; flags ``sitemap_cut``, ``sitemap_undecodable``).
A gzip *file* (``sitemap.xml.gz``, no Content-Encoding) is inflated, just as far, by the
reader (:mod:`webcrawl.sitemaps.parse`).  Scrapy's own ``DOWNLOAD_MAXSIZE``, which would
drop the whole file, is lifted here for sitemap requests (``download_maxsize`` 0 as they
leave): this bound replaces it.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from webcrawl.middlewares.bodylimit import BodyLimitMiddleware
from webcrawl.settings_check import positive_int


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
