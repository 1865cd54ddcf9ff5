"""Fails, before anything is sent, the request that records a refused queue entry.

The scheduler refuses a queue entry it reads from Redis or the store when the
entry names a URL of another scheme, a class not allowed, or meta that chooses
where a worker connects (:mod:`webcrawl.frontier.entry`).  When the entry names an
http(s) page, the scheduler hands the engine a bare request for it marked with the
reason; this middleware, first of all, fails it with
:class:`~webcrawl.frontier.entry.RefusedQueueEntry`, so the spider's errback stores
the page as failed with the reason.  The download handler refuses such a request
too, should this middleware be disabled.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler

from webcrawl.frontier.entry import REFUSED_META, RefusedQueueEntry


class RefusedEntryMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RefusedEntryMiddleware:
        return cls()

    def process_request(self, request: Request, spider: object = None) -> None:
        reason = request.meta.get(REFUSED_META)
        if reason is not None:
            raise RefusedQueueEntry(f"queue entry refused: {reason}")
