"""How many sitemaps a worker downloads and reads at once.

A sitemap's body may be ``SITEMAP_MAX_BYTES`` (50 MiB) and reading it takes a second of
CPU, so a worker holds at most ``SITEMAP_CONCURRENT_FILES`` of them, from the moment one
leaves for the downloader until its entries are queued (or it failed).  A sitemap that
finds every slot taken goes back to the frontier for a while, to this worker or another:
a host that offers thousands of big files cannot fill a worker's memory or its reading
thread, whatever its pages' concurrency.  One host holds at most one slot: a host whose
sitemaps hang until the download times out keeps the others' waiting for one slot at
most.

A slot is held by a token in the request's meta: it is released when the file has been
read or given up, and taken back as stale after ``stale_after`` seconds in case a request
vanished without either (a slot is never lost for good).  Tokens are random, so a token
that reaches another worker with its request (through Redis) is none of that worker's.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable


class SitemapSlots:
    """The slots of one worker (the reactor thread's: not thread-safe)."""

    def __init__(
        self, limit: int, stale_after: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self.stale_after = stale_after
        self.clock = clock
        self._held: dict[str, tuple[float, str]] = {}  # token -> (when taken, by whom)

    def acquire(self, token: str | None, owner: str = "") -> str | None:
        """The token of a slot for a request of ``owner`` (its host) that holds ``token``
        (None: none yet): the same token when it holds one still, a new one when a slot
        is free and ``owner`` holds none, else None."""
        now = self.clock()
        if token is not None and token in self._held:
            return token
        self._reap(now)
        if len(self._held) >= self.limit:
            return None
        if owner and any(by == owner for _, by in self._held.values()):
            return None
        token = secrets.token_hex(8)
        self._held[token] = (now, owner)
        return token

    def release(self, token: str | None) -> None:
        """Free the slot of ``token`` (nothing if it holds none any more)."""
        if token is not None:
            self._held.pop(token, None)

    @property
    def held(self) -> int:
        return len(self._held)

    def _reap(self, now: float) -> None:
        for token, (since, _) in list(self._held.items()):
            if now - since > self.stale_after:
                del self._held[token]
