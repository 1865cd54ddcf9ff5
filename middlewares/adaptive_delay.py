"""Adapt each host's politeness delay, for all workers, from the answers it gives.

Reads robots.txt's Crawl-delay (as the floor), 429/503 with Retry-After
(back off) and latency (slow hosts get fewer requests); the policy is
:class:`webcrawl.frontier.adaptive_delay.DelayPolicy`.  The delay is written to the
frontier in Redis, which paces the host for every worker; writes happen only
when the delay moves by more than 10 %.  A back-off holds for its window
whoever writes next (the frontier takes the maximum until it ends), and each
worker adopts the delay in force, so it adapts from the shared value and not
only from what it saw itself.  ``meta["dont_adapt_delay"]`` opts a
request out.  Needs webcrawl's scheduler (the frontier); without it, it does
nothing.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

from webcrawl.frontier.adaptive_delay import BACKOFF_STATUSES, DelayPolicy, parse_retry_after
from webcrawl.settings_check import non_negative_float, positive_float
from webcrawl.urls.scope import scope_key

logger = logging.getLogger(__name__)


class AdaptiveDelayMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ADAPTIVE_DELAY_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        self.policy = DelayPolicy(
            base=non_negative_float(settings, "FRONTIER_HOST_DELAY"),
            max_delay=positive_float(settings, "ADAPTIVE_DELAY_MAX"),
            target_concurrency=positive_float(settings, "ADAPTIVE_DELAY_TARGET_CONCURRENCY"),
            retry_after_max=positive_float(settings, "ADAPTIVE_DELAY_RETRY_AFTER_MAX"),
        )
        self.user_agent = settings.get("USER_AGENT")
        self.delays: dict[str, float] = {}  # host -> delay we last set
        self.floors: dict[str, float] = {}  # host -> floor (robots.txt Crawl-delay)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AdaptiveDelayMiddleware:
        middleware = cls(crawler)
        crawler.signals.connect(middleware._robots_parsed, signal=signals.robots_parsed)
        return middleware

    def _frontier(self) -> Any:
        from webcrawl.frontier.scheduler import (
            frontier_of,  # late: importing it early installs a reactor
        )

        return frontier_of(self.crawler)

    def _robots_parsed(self, robotparser: Any, request: Request) -> None:
        parser = getattr(robotparser, "rp", robotparser)  # Protego, or Scrapy's wrapper of it
        crawl_delay = None
        if parser is not None and hasattr(parser, "crawl_delay"):
            crawl_delay = parser.crawl_delay(self.user_agent or "*")
        if not crawl_delay:
            return
        host = scope_key(request.url, "host")
        floor = self.policy.floor(float(crawl_delay))
        self.floors[host] = floor
        logger.info("robots.txt of %s asks for Crawl-delay %s s", host, crawl_delay)
        # a robots.txt fetched just now was a request to the host: the delay counts from it
        not_before = floor if request.meta.get("robots_txt_fetched") else 0.0
        self._set(host, max(floor, self.delays.get(host, 0.0)), force=True, not_before=not_before)

    def process_response(self, request: Request, response: Response) -> Response:
        if request.meta.get("dont_adapt_delay"):
            return response
        host = scope_key(request.url, "host")
        floor = self.floors.get(host, self.policy.base)
        current = self.delays.get(host, floor)
        latency = float(request.meta.get("download_latency", 0.0))
        retry_after = parse_retry_after(
            (response.headers.get("Retry-After") or b"").decode("latin-1"), time.time()
        )
        delay = self.policy.next_delay(
            current, status=response.status, latency=latency, floor=floor, retry_after=retry_after
        )
        if response.status not in BACKOFF_STATUSES:
            self._set(host, delay)
            return response
        window, cut = self.policy.backoff_window(delay, retry_after)
        self.stats.inc_value("adaptive_delay/backoff")
        if cut:
            logger.warning(
                "%s asked for Retry-After %.0f s: waiting ADAPTIVE_DELAY_RETRY_AFTER_MAX"
                " (%.0f s) instead",
                host,
                retry_after,
                window,
            )
        if window > delay:
            logger.info(
                "%s answered %d: no request to it for %.1f s, then a delay of %.2f s",
                host,
                response.status,
                window,
                delay,
            )
        else:
            logger.info("%s answered %d: its delay is now %.2f s", host, response.status, delay)
        self._set(host, delay, hold=window, not_before=window)
        return response

    def _set(
        self,
        host: str,
        delay: float,
        *,
        force: bool = False,
        hold: float = 0.0,
        not_before: float = 0.0,
    ) -> None:
        shared = self.delays.get(host, self.policy.base)  # what the frontier applied last we knew
        self.delays[host] = delay
        if not (force or hold) and abs(delay - shared) <= max(0.1 * shared, 0.05):
            self.delays[host] = shared  # too small a change to be worth a write
            return
        frontier = self._frontier()
        if frontier is None:
            return
        try:
            # the delay in force may be another worker's back-off: adapt from it next time
            self.delays[host] = frontier.queue.set_delay(
                host, delay, hold=hold, not_before=not_before
            )
            self.stats.inc_value("adaptive_delay/updates")
        except RedisError as exc:
            logger.warning("Could not share the delay of %s: %s", host, exc)
