"""Politeness turns: a host's turn is taken as its request leaves a worker, whichever
worker it is, held until its answer is in, and its delay is shared by every worker."""

from __future__ import annotations

from webcrawl.frontier import scripts
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.scripts import now_arg
from webcrawl.frontier.shards import ShardRouter


class Turns:
    """Hosts' turns and delays, in the shard of each host."""

    def __init__(self, router: ShardRouter, keys: CrawlKeys) -> None:
        self.router = router
        self.keys = keys

    def acquire(
        self,
        host: str,
        *,
        default_delay: float,
        slack: float = 0.0,
        holder: str = "",
        hold: float = 0.0,
        now: float | None = None,
    ) -> float:
        """Take ``host``'s turn to send a request now: 0.0, or the seconds to wait before
        asking again.

        The hard politeness check, made as the request leaves the worker: a request
        can wait after its pop (for robots.txt, for a busy reactor), and the delay
        counts between sends, whichever workers send them.  With ``hold`` > 0 the turn
        stays ``holder``'s until :meth:`release` (or ``hold`` seconds, which
        :meth:`HostQueue.renew` pushes back): no other request to the host leaves while
        this one is in flight.
        """
        wait = scripts.ACQUIRE.run(
            self.router,
            self.keys.shard_for(host),
            [host, now_arg(now), default_delay, slack, "take", holder, hold],
        )
        return float(wait)

    def release(
        self,
        host: str,
        *,
        default_delay: float,
        slack: float = 0.0,
        holder: str = "",
        now: float | None = None,
    ) -> None:
        """The answer of ``holder``'s request to ``host`` came in (or it failed) now: its
        hold ends, and the host's next turn is no sooner than now + delay."""
        scripts.ACQUIRE.run(
            self.router,
            self.keys.shard_for(host),
            [host, now_arg(now), default_delay, slack, "release", holder, 0],
        )

    def set_delay(
        self,
        host: str,
        delay: float,
        *,
        hold: float = 0.0,
        not_before: float = 0.0,
        now: float | None = None,
    ) -> float:
        """Set ``host``'s delay for every worker; return the delay in force.

        ``hold`` > 0 makes it a back-off: for that many seconds no write lowers the
        delay below it (another worker's healthy answers included).  ``not_before``
        > 0: the host's next turn is at least that many seconds from now.
        """
        value = scripts.SET_DELAY.run(
            self.router, self.keys.shard_for(host), [host, delay, hold, not_before, now_arg(now)]
        )
        return float(value)
