"""How much of its memory a worker gives to sitemap bodies, and to which hosts.

A sitemap's body may be ``SITEMAP_MAX_BYTES`` (50 MiB), so a worker keeps the bodies it
downloads, waits to read and reads within ``SITEMAP_MAX_MEMORY`` bytes together.  A
sitemap holds the bytes it has received (a little ahead, as they come), then its body
until read, then what its entries take until they are queued: bytes that are in memory,
never a promise (a ``Content-Length`` is not one: a host that announces 50 MiB and
stalls holds nothing).  A download whose next bytes do not fit is stopped and goes back
to the frontier for a while; a sitemap alone always fits, however large (the bound may
be below one file).

A stopped sitemap claims the memory it needs (twice what it had received; all it may
take, ``SITEMAP_MAX_BYTES``, once it was stopped before): the claim is held for it as a
share of its own, so that others are admitted and grow only beside it and the memory
drains until it fits; it then takes that share.  One claim stands at a time, for
``claim_ttl`` seconds from the claimant's last try (a claimant that went to another
worker, or was dropped, frees it soon).  Without the claim, a big file stopped whenever
smaller ones filled the memory first could wait for ever.

A host has one sitemap in flight per worker at most, from the moment it leaves for the
downloader until it has been read: a host that offers thousands of files cannot crowd
out the others, nor, when they hang, fill the downloader (without it, 6 hosts with 5
hanging sitemaps each held Scrapy's CONCURRENT_REQUESTS, and an ordinary host got 19
pages in 150 s instead of 100).  Its other sitemaps wait in the frontier, each taking
one of the host's turns when it comes back.

A sitemap holds its share by a token in its request's meta, released when the file has
been read or given up, and taken back as stale after ``stale_after`` seconds without a
sign of life (admitted, bytes, read) in case a request vanished without either (nothing
is lost for good).  Tokens are random, so a token that reaches another worker with its
request (through Redis) is none of that worker's.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

STOPPED_KEPT = 10_000  # URLs whose download was stopped that are remembered


@dataclass
class _Share:
    owner: str  # the sitemap's host
    seen: float  # its last sign of life (a claim: its sitemap's last try)
    size: int = 0  # bytes held
    claim: str = ""  # a claim's: the URL of the sitemap it is held for


class SitemapMemory:
    """The sitemap memory of one worker (the reactor thread's: not thread-safe)."""

    def __init__(
        self,
        limit: int,
        stale_after: float,
        clock: Callable[[], float] = time.monotonic,
        claim_ttl: float = 15.0,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1 byte, got {limit}")
        self.limit = limit
        self.stale_after = stale_after
        self.clock = clock
        self.claim_ttl = claim_ttl
        self._shares: dict[str, _Share] = {}  # token -> its share (claims too)
        self._stopped: OrderedDict[str, None] = OrderedDict()  # URLs stopped before

    def admit(self, token: str | None, owner: str, url: str = "") -> str | None:
        """The token under which the sitemap at ``url`` of ``owner`` (its host) that holds
        ``token`` (None: none yet) may leave for the downloader: its own while it is
        held; its claim's once the others leave room for it; a new one when ``owner``
        has none in flight and the memory (claims included) is not all taken; else
        None."""
        now = self.clock()
        if token is not None and token in self._shares:
            self._shares[token].seen = now
            return token
        self._reap(now)
        used = self.used
        busy = any(share.owner == owner and not share.claim for share in self._shares.values())
        for held, share in self._shares.items():
            if url and share.claim == url:
                if busy or (used > self.limit and used > share.size):
                    share.seen = now  # (alive: it waits for the memory to drain)
                    return None
                share.claim, share.seen = "", now
                return held
        if busy or any(share.owner == owner for share in self._shares.values()):
            return None
        if self._shares and used >= self.limit:
            return None
        token = secrets.token_hex(8)
        self._shares[token] = _Share(owner, now)
        return token

    def host_busy(self, owner: str) -> bool:
        """Whether ``owner`` (a host) has a sitemap in flight (a claim waiting for its
        memory does not count)."""
        return any(share.owner == owner and not share.claim for share in self._shares.values())

    def hold(self, token: str | None, size: int, *, force: bool = False) -> bool:
        """Let ``token``'s sitemap hold ``size`` bytes: whether they fit beside the
        others' (claims included; or it holds fewer than before, or it is alone, or
        ``force``: bytes that are in memory already).  False for a token not held
        (given up, or stale)."""
        share = self._shares.get(token) if token is not None else None
        if share is None or share.claim:
            return False
        share.seen = self.clock()
        others = self.used - share.size
        if force or size <= share.size or others == 0 or others + size <= self.limit:
            share.size = size
            return True
        return False

    def touch(self, tokens: list[str | None]) -> None:
        """A sign of life of the sitemaps of ``tokens`` (waiting to be read)."""
        now = self.clock()
        for token in tokens:
            share = self._shares.get(token) if token is not None else None
            if share is not None and not share.claim:
                share.seen = now

    def stopped(self, token: str | None, url: str, need: int, most: int) -> None:
        """``token``'s download was stopped, its bytes not fitting: its share is freed,
        and ``need`` bytes (``most`` if ``url`` was stopped before) are claimed for
        ``url``'s return, unless another's claim stands."""
        share = self._shares.pop(token, None) if token is not None else None
        if url in self._stopped:
            need = max(need, most)
        self._stopped[url] = None
        self._stopped.move_to_end(url)
        while len(self._stopped) > STOPPED_KEPT:
            self._stopped.popitem(last=False)
        now = self.clock()
        self._reap(now)
        if any(other.claim for other in self._shares.values()):
            return  # one claim at a time
        owner = share.owner if share is not None else ""
        self._shares[secrets.token_hex(8)] = _Share(owner, now, need, claim=url)

    def holds(self, token: str | None) -> bool:
        """Whether ``token`` holds a share (not released, nor taken back as stale)."""
        share = self._shares.get(token) if token is not None else None
        return share is not None and not share.claim

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
        """Sitemaps in flight (and a claim waiting for its sitemap)."""
        return len(self._shares)

    @property
    def used(self) -> int:
        """Bytes held by the sitemaps in flight, and claimed."""
        return sum(share.size for share in self._shares.values())

    def _reap(self, now: float) -> None:
        for token, share in list(self._shares.items()):
            if now - share.seen > (self.claim_ttl if share.claim else self.stale_after):
                del self._shares[token]
