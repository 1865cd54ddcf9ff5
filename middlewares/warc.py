"""Archive each redirect's exchange before it is followed.

A 3xx that Scrapy's RedirectMiddleware follows never reaches the spider, so no page
carries it to the WARC pipeline; yet replaying the URL that was asked for needs its
``response`` record.  This middleware sits above the redirect middlewares (620: it sees
the 3xx first) and has the WARC pipeline write the redirect's records before the
redirect is followed: the request that follows it is made, and this one acknowledged,
only once they are on disk.  Redirect records are written in full (no revisits: a 3xx
is its headers and a few bytes).  Should the write fail (a full disk), the request goes
back to the frontier, as a page's would.
"""

from __future__ import annotations

import time

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response

from webcrawl.frontier.requeue import Requeue
from webcrawl.middlewares.schemes import REDIRECTS
from webcrawl.page import Page, attach_wire
from webcrawl.pipelines.warc import WarcPipeline
from webcrawl.warc.capture import capture_of


class WarcRedirectsMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("WARC_ENABLED"):
            raise NotConfigured("WARC_ENABLED is off")
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcRedirectsMiddleware:
        return cls(crawler)

    async def process_response(self, request: Request, response: Response) -> Response:
        if response.status not in REDIRECTS or b"Location" not in response.headers:
            return response
        if request.method == "HEAD":  # a revisit's pre-check, not a capture to replay
            return response
        capture = capture_of(request)
        pipeline = WarcPipeline.of(self.crawler)
        if capture is None or capture.archived or pipeline is None:
            return response
        page = Page(
            url=request.url,
            final_url=request.url,
            status=response.status,
            fetched_at=time.time(),
            depth=int(request.meta.get("depth", 0)),
            kind="redirect",
        )
        attach_wire(page, capture)
        try:
            await pipeline.process_item(page)
        except Requeue as exc:
            from webcrawl.frontier.scheduler import frontier_of  # late: it imports a reactor

            frontier = frontier_of(self.crawler)
            if frontier is not None:
                frontier.requeue(request, exc.wait, str(exc))
            raise IgnoreRequest(f"redirect not archived: {exc}") from None
        return response
