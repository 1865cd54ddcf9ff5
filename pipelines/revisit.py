"""Revisits: when should each page be fetched again, and put it in the crawl's schedule.

For each page, :func:`webcrawl.incremental.revisit.plan` reads its visit history (filled
in by the change pipeline, which must run first) and gives the change
period, interval and next visit; they go into the page's row
(``revisit_interval``, ``next_visit``, ``revisit_method``).  Once the row
is stored (``item_scraped``) the revisit goes into the crawl's revisit
schedule in Redis, one entry per URL, with the conditional headers of the
stored version (``If-None-Match``, ``If-Modified-Since``): when it falls
due, a worker moves it into its host queue, past the dupefilter.  With
``WEBCRAWL_CONTINUOUS`` workers stay up and crawl pages as they fall due;
otherwise a later ``scrapy crawl`` of the same crawl picks up those due.

Stats: ``revisit/planned``, ``revisit/method/<method>``, and the
scheduler's ``revisit/scheduled`` and ``revisit/due``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler

from webcrawl.frontier.scheduler import frontier_of
from webcrawl.incremental.revisit import plan, visits_from_history
from webcrawl.page import Page
from webcrawl.settings_check import revisit_params as params_from_settings

logger = logging.getLogger(__name__)


def revisit_request(page: Page, spider: Any) -> Request:
    """The request that fetches ``page`` again, conditional on its stored version."""
    headers = {}
    if page.etag:
        headers["If-None-Match"] = page.etag
    if page.last_modified:
        headers["If-Modified-Since"] = page.last_modified
    meta = {
        "depth": page.depth,
        "revisit": True,
        "revisit_length": page.content_length,
        "revisit_last_modified": page.last_modified,
    }
    make = getattr(spider, "request_for", None)
    base = make(page.url) if make else Request(page.url)
    # not dont_filter: the schedule bypasses the dupefilter already, and
    # dont_filter would exempt the revisit from failed-path filtering
    return base.replace(headers=headers, meta={**base.meta, **meta}, priority=-page.depth)


class RevisitPipeline:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.enabled = crawler.settings.getbool("REVISIT_ENABLED")
        self.params = params_from_settings(crawler.settings)
        self._warned = False
        crawler.signals.connect(self._scraped, signal=signals.item_scraped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RevisitPipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        if not self.enabled or not isinstance(item, Page):
            return item
        revisit = plan(visits_from_history(item.visits), time.time(), self.params)
        item.revisit_interval = round(revisit.interval, 3)
        item.next_visit = round(revisit.due, 3)
        item.revisit_method = revisit.method
        self.stats.inc_value("revisit/planned")
        self.stats.inc_value(f"revisit/method/{revisit.method}")
        return item

    def _scraped(self, item: Any, response: Any = None, spider: Any = None) -> None:
        """The row is stored: put the revisit in the crawl's schedule."""
        if not self.enabled or not isinstance(item, Page) or item.next_visit is None:
            return
        frontier = frontier_of(self.crawler)
        if frontier is None:
            if not self._warned:
                logger.warning(
                    "Revisits are planned in the rows but not scheduled: the scheduler"
                    " is not webcrawl.frontier.scheduler.Scheduler"
                )
                self._warned = True
            return
        frontier.schedule_revisit(revisit_request(item, self.crawler.spider), item.next_visit)
