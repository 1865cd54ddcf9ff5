"""Every host's sitemap trust, kept in the crawl's Redis for all workers.

One hash per crawl (``CrawlKeys.sitemap_trust``): field ``scheme://host[:port]``,
value ``"confirmed refuted claims"`` (the tested claims as :class:`~webcrawl.sitemaps.
trust.HostTrust` counts them, halved past the window, and every claim seen, for
``webcrawl status``).  A tested claim is recorded by one Lua script, so that workers
recording at once neither lose a count nor halve twice; ``tests/test_sitemaps_trust.py``
checks it against :meth:`HostTrust.record`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from webcrawl.sitemaps.trust import HostTrust, TrustParams

_RECORD = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
local c, r, n = 0, 0, 0
if v then
  local a, b, d = string.match(v, '^(%S+) (%S+) (%S+)$')
  c, r, n = tonumber(a) or 0, tonumber(b) or 0, tonumber(d) or 0
end
c = c + tonumber(ARGV[2])
r = r + tonumber(ARGV[3])
n = n + tonumber(ARGV[4])
if c + r > tonumber(ARGV[5]) then
  c = c / 2
  r = r / 2
end
local out = string.format('%.17g %.17g %d', c, r, n)
redis.call('HSET', KEYS[1], ARGV[1], out)
return out
"""


def parse_value(raw: bytes | str | None) -> tuple[HostTrust, int]:
    """(trust, claims seen) of a stored value (nothing known for a bad one)."""
    if raw is None:
        return HostTrust(), 0
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
    try:
        confirmed, refuted, claims = text.split()
        return HostTrust(max(0.0, float(confirmed)), max(0.0, float(refuted))), int(claims)
    except ValueError:
        return HostTrust(), 0


class TrustBook:
    """Reads and records hosts' trust in ``server`` (a redis-py client) under ``key``."""

    def __init__(self, server: Any, key: str, params: TrustParams) -> None:
        self.server = server
        self.key = key
        self.params = params
        self._record = server.register_script(_RECORD)

    def read(self, origin: str) -> HostTrust:
        return parse_value(self.server.hget(self.key, origin))[0]

    def record(self, origin: str, changed: bool) -> HostTrust:
        """One tested claim of ``origin`` (``changed``: what the refetch found)."""
        return self._update(origin, 1 if changed else 0, 0 if changed else 1, 0)

    def add_claims(self, origin: str, claims: int) -> None:
        """``claims`` more claimed changes seen in ``origin``'s sitemaps."""
        if claims:
            self._update(origin, 0, 0, claims)

    def _update(self, origin: str, confirmed: int, refuted: int, claims: int) -> HostTrust:
        args = [origin, confirmed, refuted, claims, self.params.window]
        return parse_value(self._record(keys=[self.key], args=args))[0]

    def hosts(self, count: int = 1000) -> Iterator[tuple[str, HostTrust, int]]:
        """(origin, trust, claims seen) of every host with a record."""
        for field, value in self.server.hscan_iter(self.key, count=count):
            origin = field.decode("utf-8", "replace") if isinstance(field, bytes) else field
            trust, claims = parse_value(value)
            yield origin, trust, claims
