"""HEAD pre-check of revisits (``REVISIT_HEAD_PRECHECK``, off by default).

Before the GET of a revisit, send a HEAD; when its Content-Length and
Last-Modified both equal the stored ones, skip the GET and answer the
request with a 304 of our own (flag ``head-precheck``): the page counts
as not modified and costs no body and no parse.  Any other outcome (a
header missing or different, an error) lets the GET go ahead.  Servers
that answer conditional GETs with 304 make this unnecessary; it helps with
those that ignore If-None-Match and If-Modified-Since.  The HEAD is a request
to the host like any other: it takes the host's politeness turn (the
download handler paces it), and a GET that follows takes the next one.

Stats: ``revisit/head_precheck`` (HEADs sent), ``revisit/head_skipped``.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response

logger = logging.getLogger(__name__)


class RevisitPrecheckMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("REVISIT_HEAD_PRECHECK"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RevisitPrecheckMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> Response | None:
        meta = request.meta
        if not meta.get("revisit") or meta.get("revisit_head") or request.method != "GET":
            return None
        length, modified = meta.get("revisit_length"), meta.get("revisit_last_modified")
        if length is None or not modified:
            return None  # nothing to compare with
        head = Request(
            request.url,
            method="HEAD",
            dont_filter=True,
            meta={
                "revisit_head": True,
                "dont_retry": True,
                "failpath": False,
                "dont_redirect": True,
            },
        )
        self.stats.inc_value("revisit/head_precheck")
        try:
            answer = await self.crawler.engine.download_async(head)
        except IgnoreRequest:
            raise
        except Exception as exc:
            logger.debug("HEAD pre-check of %s failed (%s): fetching it", request.url, exc)
            return None
        if answer.status == 200 and same(answer, length, modified):
            self.stats.inc_value("revisit/head_skipped")
            return Response(
                request.url,
                status=304,
                request=request,
                flags=["head-precheck"],
                headers={"Last-Modified": modified},
            )
        return None


def same(answer: Response, length: Any, modified: str) -> bool:
    """Whether a HEAD answer's Content-Length and Last-Modified equal the stored ones."""
    got_length = answer.headers.get(b"Content-Length")
    got_modified = answer.headers.get(b"Last-Modified")
    if got_length is None or got_modified is None:
        return False
    return got_length.decode("latin-1").strip() == str(length) and (
        got_modified.decode("latin-1").strip() == modified.strip()
    )
