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

A new page a sitemap named takes its entry's ``lastmod`` (else ``changefreq``) as the
prior of its first interval (method ``sitemap``: :func:`webcrawl.sitemaps.trust.
prior_interval`).  A fetch that tested a sitemap's claim of a change (``sitemap.claim``)
tells the host's trust whether the page had changed (``sitemap/claims_confirmed``,
``sitemap/claims_refuted``).

Stats: ``revisit/planned``, ``revisit/method/<method>``, and the
scheduler's ``revisit/scheduled`` and ``revisit/due``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request, signals
from scrapy.crawler import Crawler

from webcrawl.frontier.scheduler import frontier_of
from webcrawl.incremental.revisit import plan, visits_from_history
from webcrawl.page import Page
from webcrawl.settings_check import revisit_params as params_from_settings
from webcrawl.settings_check import trust_params
from webcrawl.sitemaps.scope import origin_of
from webcrawl.sitemaps.trust import prior_interval
from webcrawl.sitemaps.trustbook import TrustBook

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
        self.trust_params = trust_params(crawler.settings)
        self._book: TrustBook | None = None
        self._warned = False
        crawler.signals.connect(self._scraped, signal=signals.item_scraped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RevisitPipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, Page):
            return item
        said = item.sitemap or {}
        answered = 200 <= item.status < 300 or item.status == 304  # (an error tells nothing)
        if said.get("claim") and item.changed is not None and answered:
            self._tested(item.url, item.changed)  # the claimed URL's host, not a redirect's
        if not self.enabled:
            return item
        visits = visits_from_history(item.visits)
        params, method = self.params, None
        if len(visits) == 1 and said:  # a new page a sitemap named: its entry's prior
            prior = prior_interval(
                _number(said.get("lastmod")),
                said.get("changefreq") if isinstance(said.get("changefreq"), str) else None,
                item.fetched_at,
                (params.min_interval, params.max_interval),
            )
            if prior is not None and not said.get("trusted"):  # only a longer first wait
                prior = max(prior, params.initial_interval)
            if prior is not None and prior != params.initial_interval:
                params, method = replace(params, initial_interval=prior), "sitemap"
        revisit = plan(visits, time.time(), params)
        method = method if method and revisit.method == "prior" else revisit.method
        item.revisit_interval = round(revisit.interval, 3)
        item.next_visit = round(revisit.due, 3)
        item.revisit_method = method
        self.stats.inc_value("revisit/planned")
        self.stats.inc_value(f"revisit/method/{method}")
        return item

    def _tested(self, url: str, changed: bool) -> None:
        """A fetch that tested a sitemap's claim of a change: the host's trust learns
        whether it was true."""
        self.stats.inc_value(f"sitemap/claims_{'confirmed' if changed else 'refuted'}")
        frontier = frontier_of(self.crawler)
        if frontier is None:
            return
        book = self._book
        if book is None or book.server is not frontier.server:
            book = self._book = TrustBook(
                frontier.server, frontier.keys.sitemap_trust, self.trust_params
            )
        try:
            book.record(origin_of(url), changed)
        except RedisError as exc:
            logger.warning("Could not record the sitemap trust of %s in Redis: %s", url, exc)

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


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
