"""The hard politeness check, as each request leaves the worker.

The frontier hands a host out at most once per delay when requests are popped;
but a popped request can wait in its worker before it is sent: for the host's
robots.txt, a busy reactor, or in Scrapy's own download slot (a project's
``DOWNLOAD_DELAY`` or ``CONCURRENT_REQUESTS_PER_DOMAIN``, which are per worker),
and another worker's next request to the host may then leave too soon.  So the
download handler takes the host's turn in Redis (one round trip) as the very last
step before it connects, and holds it until the answer is in (or the download
failed): then it releases it, and the host's next turn counts its delay from then,
as Nutch's and Heritrix's fetchers do.  No other request to the host leaves while
one is in flight, whichever worker sends it, so the server sees at least the delay
between two requests, however slow its answer or late a send (a busy worker can
send well after it took the turn).  A worker renews its holds with its leases; a
killed worker's hosts come back when they expire (FRONTIER_LEASE_TIMEOUT).  Two
round trips per request: politeness-limited crawls can afford them.

Paced: requests leased from the frontier, failed-path re-probes, the HEAD
pre-checks of revisits (so a revisit's HEAD and GET are two turns) and
robots.txt fetches (the request that needed the file takes the next turn).

With ``FRONTIER_HOST_DELAY = 0`` (politeness off, e.g. for benchmarks on your
own server) it does nothing and costs nothing.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from webcrawl.settings_check import non_negative_float
from webcrawl.urls.scope import scope_key

logger = logging.getLogger(__name__)

# holders of turn holds, <worker id>/<n>: unique in the process (http and https have a
# handler each, and their hosts' turns are the same)
_HOLDERS = itertools.count(1)


class HostTurns:
    """Each host's turn, taken in Redis by the download handler (see the module)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.delay = non_negative_float(settings, "FRONTIER_HOST_DELAY")
        self.slack = non_negative_float(settings, "FRONTIER_DELAY_SLACK")
        self.crawler = crawler
        self.stats = crawler.stats

    def release(self, frontier: Any, request: Request, holder: str) -> None:
        """The request's answer came in (or it failed): give the host's turn back, its
        delay counted from now."""
        host = scope_key(request.url, "host")
        logger.debug("Gave %s's turn back after %s (%s)", host, request, holder)
        if frontier.turn_holds.get(host) == holder:
            del frontier.turn_holds[host]
        try:
            frontier.queue.turns.release(
                host, default_delay=self.delay, slack=self.slack, holder=holder
            )
        except RedisError as exc:
            logger.warning(
                "Could not give %s's turn back in Redis (it comes back when its hold "
                "expires, in FRONTIER_LEASE_TIMEOUT at most): %s",
                host,
                exc,
            )

    def paced(self, request: Request) -> Any:
        """The frontier, if ``request`` is one it paces: a leased request, one the
        scheduler kept in this worker, a failed-path re-probe, a revisit's HEAD pre-check
        or a robots.txt fetch (other schedulers' requests are not, nor any with
        FRONTIER_HOST_DELAY = 0)."""
        from webcrawl.frontier.scheduler import (  # late: importing it installs a reactor
            LOCAL_META,
            frontier_of,
        )

        if self.delay == 0:
            return None
        frontier = frontier_of(self.crawler)
        if frontier is None:
            return None
        meta = request.meta
        if (
            frontier.is_leased(request)
            or meta.get(LOCAL_META)
            or meta.get("failpath_probe")
            or meta.get("revisit_head")
            or meta.get("robots_txt")
        ):
            return frontier
        return None

    async def take(self, frontier: Any, request: Request) -> str:
        """Wait until the host's turn comes, and take it: the holder to release it with
        (if Redis could not be asked, the request leaves anyway)."""
        from twisted.internet import reactor  # late: importing it installs a reactor

        host = scope_key(request.url, "host")
        holder = f"{frontier.worker_id}/{next(_HOLDERS)}"
        waited = 0.0
        while True:
            try:
                wait = frontier.queue.turns.acquire(
                    host,
                    default_delay=self.delay,
                    slack=self.slack,
                    holder=holder,
                    hold=frontier.lease_timeout,
                )
            except RedisError as exc:  # (it may have been taken: it is released after)
                logger.warning("Could not take %s's turn in Redis (sending anyway): %s", host, exc)
                break
            if wait <= 0:
                break
            waited += wait
            await maybe_deferred_to_future(deferLater(reactor, wait, lambda: None))
        frontier.turn_holds[host] = holder
        logger.debug("Took %s's turn for %s (%s)", host, request, holder)
        if waited:
            self.stats.inc_value("politeness/waited")
            self.stats.inc_value("politeness/waited_seconds", round(waited, 3))
        return holder
