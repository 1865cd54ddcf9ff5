"""How much of its memory a worker gives to sitemap bodies, and to which hosts.

A sitemap's body may be ``SITEMAP_MAX_BYTES`` (50 MiB), so a worker keeps the bodies it
downloads, waits to read and reads within ``SITEMAP_MAX_MEMORY`` bytes together.  The
bytes a sitemap holds are what it received (or, from its ``Content-Length``, will
receive), then its decoded body until its entries are queued; a sitemap whose bytes do
not fit is stopped and goes back to the frontier for a while, to this worker or another.
A sitemap alone always fits, however large (the bound may be below one file).

A host has one sitemap in flight per worker at most, from the moment it leaves for the
downloader until it has been read: a host that offers thousands of files cannot crowd
out the others, nor, when they hang, fill the downloader (without it, 6 hosts with 5
hanging sitemaps each held Scrapy's CONCURRENT_REQUESTS, and an ordinary host got 19
pages in 150 s instead of 100).  Its other sitemaps wait in the frontier, each taking
one of the host's turns when it comes back.  A sitemap that has no answer yet holds no
bytes: hosts whose sitemaps hang until ``DOWNLOAD_TIMEOUT`` (or trickle in) keep
nobody else's waiting.

A sitemap holds its share by a token in its request's meta, released when the file has
been read or given up, and taken back as stale after ``stale_after`` seconds in case a
request vanished without either (nothing is lost for good).  Tokens are random, so a
token that reaches another worker with its request (through Redis) is none of that
worker's.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Share:
    owner: str  # the sitemap's host
    since: float
    size: int = 0  # bytes held


class SitemapMemory:
    """The sitemap memory of one worker (the reactor thread's: not thread-safe)."""

    def __init__(
        self, limit: int, stale_after: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1 byte, got {limit}")
        self.limit = limit
        self.stale_after = stale_after
        self.clock = clock
        self._shares: dict[str, _Share] = {}  # token -> its share

    def admit(self, token: str | None, owner: str) -> str | None:
        """The token under which a sitemap of ``owner`` (its host) that holds ``token``
        (None: none yet) may leave for the downloader: its own while it is held, a new
        one when ``owner`` has none in flight and the memory is not all taken, else None."""
        if token is not None and token in self._shares:
            return token
        self._reap(self.clock())
        if self.used >= self.limit and self._shares:
            return None
        if any(share.owner == owner for share in self._shares.values()):
            return None
        token = secrets.token_hex(8)
        self._shares[token] = _Share(owner, self.clock())
        return token

    def reserve(self, token: str | None, size: int, *, force: bool = False) -> bool:
        """Let ``token``'s sitemap hold ``size`` bytes (more than it holds: never less):
        whether they fit beside the others' (or it is alone, or ``force``: bytes that are
        in memory already).  False for a token not held (given up, or stale)."""
        share = self._shares.get(token) if token is not None else None
        if share is None:
            return False
        if size <= share.size:
            return True
        others = self.used - share.size
        if force or others == 0 or others + size <= self.limit:
            share.size = size
            return True
        return False

    def held_by(self, token: str | None) -> int:
        """The bytes ``token``'s sitemap holds (0: none, or a token not held)."""
        share = self._shares.get(token) if token is not None else None
        return share.size if share is not None else 0

    def release(self, token: str | None) -> None:
        """Free ``token``'s share (nothing if it holds none any more)."""
        if token is not None:
            self._shares.pop(token, None)

    @property
    def held(self) -> int:
        """Sitemaps in flight."""
        return len(self._shares)

    @property
    def used(self) -> int:
        """Bytes held by the sitemaps in flight."""
        return sum(share.size for share in self._shares.values())

    def _reap(self, now: float) -> None:
        for token, share in list(self._shares.items()):
            if now - share.since > self.stale_after:
                del self._shares[token]
