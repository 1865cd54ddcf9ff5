"""Redirect loops end at their first repeat, as a recorded failure.

Scrapy's RedirectMiddleware follows ``A -> B -> A`` by scheduling ``A`` again,
which the dupefilter then drops as already seen: the page is never recorded,
and a loop through new URLs runs to REDIRECT_MAX_TIMES.  This middleware sits
above it (610: it sees the 3xx first) and turns a redirect back to a URL of the
request's own chain into a failure with the chain as its reason
(``RedirectLoop``), which the spider's errback stores; counted in
``hostile/redirect_loop``.
"""

from __future__ import annotations

import logging
from urllib.parse import urljoin

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from w3lib.url import safe_url_string

from webcrawl.middlewares.schemes import REDIRECTS

logger = logging.getLogger(__name__)


class RedirectLoop(Exception):
    """A redirect back to a URL already in the request's redirect chain."""


def _plain(url: str) -> str:
    return safe_url_string(url).split("#", 1)[0]


class RedirectLoopMiddleware:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedirectLoopMiddleware:
        return cls(crawler.stats)

    def process_response(
        self, request: Request, response: Response, spider: object = None
    ) -> Response:
        location = response.headers.get("Location")
        if response.status not in REDIRECTS or not location or request.meta.get("dont_redirect"):
            return response
        target = _plain(urljoin(request.url, safe_url_string(location.decode("latin-1"))))
        chain = [str(u) for u in request.meta.get("redirect_urls", [])] + [request.url]
        if target not in {_plain(u) for u in chain}:
            return response
        self.stats.inc_value("hostile/redirect_loop")
        path = " -> ".join([*chain, target])
        logger.info("Redirect loop: %s", path[:500])
        raise RedirectLoop(f"redirect loop: {path[:500]}")
