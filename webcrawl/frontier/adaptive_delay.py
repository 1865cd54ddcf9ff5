"""Per-host politeness delay that adapts to how the host answers.

A pure policy, in the shape of Scrapy's AutoThrottle: plain numbers in,
the next delay out.  The frontier applies the delay to every worker.

- The floor is ``FRONTIER_HOST_DELAY``, raised to the host's robots.txt
  ``Crawl-delay`` when it asks for more: the delay never goes below it.
- 429 or 503: the delay doubles, and is at least the ``Retry-After`` the
  server asked for.  The back-off *holds* for its window (:meth:`DelayPolicy.
  backoff_window`: the Retry-After, or the new delay): no request goes to the
  host before the window ends, and no worker's healthy answers lower the delay
  within it (the frontier keeps the window and takes the maximum).
- A Retry-After longer than ``ADAPTIVE_DELAY_MAX`` is obeyed for that host
  (its window), while the delay itself stays within ``ADAPTIVE_DELAY_MAX``;
  only an ask beyond ``ADAPTIVE_DELAY_RETRY_AFTER_MAX`` is cut to it.
- Any other answer: the delay moves halfway towards
  ``latency / target_concurrency`` (a slow host gets fewer requests), never
  below the floor; so after a burst of 503s it relaxes back step by step.
- Never above ``ADAPTIVE_DELAY_MAX``.
- With no floor at all (``FRONTIER_HOST_DELAY = 0``, no Crawl-delay) the
  user asked for no politeness delay: only 429/503 add one, and it halves
  back to 0 on healthy answers.
"""

from __future__ import annotations

import email.utils
from dataclasses import dataclass

BACKOFF_STATUSES = frozenset({429, 503})


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


@dataclass(frozen=True)
class DelayPolicy:
    base: float  # FRONTIER_HOST_DELAY (s)
    max_delay: float  # ADAPTIVE_DELAY_MAX (s)
    target_concurrency: float  # ADAPTIVE_DELAY_TARGET_CONCURRENCY
    retry_after_max: float = 3600.0  # ADAPTIVE_DELAY_RETRY_AFTER_MAX (s)

    def floor(self, crawl_delay: float | None) -> float:
        """The least delay for a host whose robots.txt asks for ``crawl_delay``."""
        return max(self.base, crawl_delay or 0.0)

    def next_delay(
        self,
        current: float,
        *,
        status: int,
        latency: float,
        floor: float,
        retry_after: float | None = None,
    ) -> float:
        """The host's delay after an answer with ``status`` that took ``latency`` seconds."""
        if status in BACKOFF_STATUSES:
            # back off: double, and wait at least as long as the server asked
            delay = max(current * 2, floor, retry_after or 0.0, 0.1)
        elif floor == 0:
            # no politeness asked for (FRONTIER_HOST_DELAY 0, no Crawl-delay): latency
            # adds nothing; relax a back-off by halves
            delay = current / 2 if current >= 0.02 else 0.0
        else:
            # AutoThrottle's rule: head halfway towards latency / target concurrency
            target = latency / self.target_concurrency
            delay = max((current + target) / 2, floor)
        return min(delay, max(self.max_delay, floor))

    def backoff_window(self, delay: float, retry_after: float | None) -> tuple[float, bool]:
        """(seconds the host waits and its back-off ``delay`` holds, whether the server's
        ``retry_after`` was cut to ``retry_after_max``) after a 429 or 503."""
        asked = retry_after or 0.0
        window = max(delay, min(asked, self.retry_after_max))
        return window, asked > self.retry_after_max
