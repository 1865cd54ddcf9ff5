"""Retries go back to the shared frontier, behind the host's other URLs, with back-off.

Scrapy's RetryMiddleware decides what to retry (connection failures, DNS
errors, timeouts, ``RETRY_HTTP_CODES``) and builds the retry request with a
lower priority, at most ``RETRY_TIMES`` times; this subclass marks it
not to be fetched before ``FRONTIER_RETRY_BACKOFF * 2**(n - 1)`` seconds, so
the frontier parks it (Larbin's rule) instead of the worker hammering a
failing host.  A request that fails for good reaches the spider's errback,
which records it in the store with the reason.  IgnoreRequest (robots.txt,
offsite) is never retried.
"""

from __future__ import annotations

import time

from scrapy import Request
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.settings import BaseSettings

from webcrawl.settings_check import non_negative_float


class FrontierRetryMiddleware(RetryMiddleware):
    def __init__(self, settings: BaseSettings) -> None:
        super().__init__(settings)  # RETRY_TIMES, RETRY_HTTP_CODES, RETRY_PRIORITY_ADJUST
        if self.max_retry_times < 0:
            raise ValueError(f"RETRY_TIMES must be >= 0, got {self.max_retry_times}")
        self.backoff = non_negative_float(settings, "FRONTIER_RETRY_BACKOFF")

    def _retry(self, request: Request, reason: str | Exception | type[Exception]) -> Request | None:
        retry = super()._retry(request, reason)
        if retry is not None:
            attempt = int(retry.meta.get("retry_times", 1))
            retry.meta["frontier_not_before"] = time.time() + self.backoff * 2 ** (attempt - 1)
        return retry
