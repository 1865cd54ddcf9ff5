"""Only http and https are ever fetched: a redirect elsewhere is refused and recorded.

Scrapy's RedirectMiddleware does not follow a ``Location`` (or meta refresh) to
``file:``, ``ftp:``, ``data:`` or any other scheme, but it hands the 3xx response on
as if it were a page.  This middleware (below it, so it sees what it hands on)
turns such a redirect into a failure with the reason (``BlockedScheme``), which the
spider's errback stores, and counts it (``security/blocked_scheme``).
"""

from __future__ import annotations

import logging
from urllib.parse import urljoin, urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from w3lib.url import safe_url_string

logger = logging.getLogger(__name__)

FETCHED_SCHEMES = frozenset({"http", "https"})
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class BlockedScheme(Exception):
    """A redirect to a scheme other than http or https."""


class SchemeGuardMiddleware:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SchemeGuardMiddleware:
        return cls(crawler.stats)

    def process_response(
        self, request: Request, response: Response, spider: object = None
    ) -> Response:
        location = response.headers.get("Location")
        if response.status not in REDIRECTS or not location:
            return response
        target = urljoin(request.url, safe_url_string(location.decode("latin-1")))
        scheme = urlsplit(target).scheme.lower()
        if scheme in FETCHED_SCHEMES:
            return response
        self.stats.inc_value("security/blocked_scheme")
        logger.info(
            "Refused a redirect from %s to %s (only http and https are fetched)",
            request.url,
            target[:200],
        )
        raise BlockedScheme(f"redirect to a {scheme or 'bad'}: URL refused: {target[:200]}")
