"""Row keys of the cold frontier: a host's queued requests kept in the store
(:meth:`webcrawl.store.base.Store.frontier_put`) beyond what its queue in Redis
holds, and revisits due beyond the horizon (:func:`revisit_key`).

A key sorts as the host queue does: by crawl, shard, host, then priority
(highest first), then arrival (the request's sequence number: members.py), so a scan of a
host's prefix yields its next requests in the order Redis would have popped
them::

    <crawl>/<shard, 4 hex digits>/<host>/<11 digits: OFFSET - priority>/<20 digits: seq>/<claim>

``claim`` is the token of the spill claim under which a worker wrote the row: a claim
that expired and was taken again is dead, and its rows are never refilled.

Crawl names and hosts (``scope_key(url, "host")``: a host and maybe a port)
hold no ``/``, so one host's prefix never covers another's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from webcrawl.store.base import Store

PRIORITY_LIMIT = 10**10  # |priority| below this (Scrapy's are small integers)
_OFFSET = 5 * 10**10  # OFFSET - priority: 11 digits, higher priorities first
_SEQ_LIMIT = 10**20


def crawl_prefix(crawl: str) -> str:
    """The prefix of every cold key of ``crawl``."""
    if not crawl or "/" in crawl:
        raise ValueError(f"not a crawl name: {crawl!r}")
    return crawl + "/"


def check_host(host: str) -> str:
    """``host`` if it can be a host key (``scope_key(url, "host")``), else ValueError."""
    if not host or "/" in host or "\n" in host:
        raise ValueError(f"not a host key: {host!r}")
    host.encode()  # (UnicodeEncodeError, a ValueError: bytes that were no UTF-8)
    return host


def _digits(text: str, n: int) -> bool:
    return len(text) == n and text.isascii() and text.isdigit()


def host_prefix(crawl: str, shard: int, host: str) -> str:
    """The prefix of every cold key of ``host`` (in ``shard`` of ``crawl``)."""
    if not 0 <= shard < 0x10000:
        raise ValueError(f"shard {shard} out of range")
    return f"{crawl_prefix(crawl)}{shard:04x}/{check_host(host)}/"


def cold_key(crawl: str, shard: int, host: str, priority: int, seq: int, *, claim: str) -> str:
    """The key of a queued request of ``host`` with ``priority`` and sequence number
    ``seq``, written under the spill claim ``claim``."""
    if not -PRIORITY_LIMIT < priority < PRIORITY_LIMIT:
        raise ValueError(f"priority {priority} out of range (|priority| < {PRIORITY_LIMIT})")
    if not 0 <= seq < _SEQ_LIMIT:
        raise ValueError(f"sequence number {seq} out of range")
    if not claim or "/" in claim:
        raise ValueError(f"not a claim token: {claim!r}")
    return f"{host_prefix(crawl, shard, host)}{_OFFSET - priority:011d}/{seq:020d}/{claim}"


def parse_cold_key(key: str) -> tuple[str, int, str, int, int, str]:
    """``(crawl, shard, host, priority, seq, claim)`` of a cold key (ValueError for a key
    that is not one, or holds the surrogates of bytes that were no UTF-8)."""
    key.encode()  # (UnicodeEncodeError is a ValueError)
    crawl, shard, host, priority, seq, claim = key.split("/")
    hex_shard = len(shard) == 4 and all(c in "0123456789abcdef" for c in shard)
    if not (hex_shard and _digits(priority, 11) and _digits(seq, 20) and claim):
        raise ValueError(f"not a cold key: {key!r}")
    return crawl, int(shard, 16), check_host(host), _OFFSET - int(priority), int(seq), claim


def revisit_prefix(crawl: str) -> str:
    """The prefix of ``crawl``'s revisits beyond the horizon (no shard is ``~r``)."""
    return crawl_prefix(crawl) + "~r/"


def revisit_key(crawl: str, due: float, url_key: str) -> str:
    """The key of a revisit due at ``due`` (Unix time): they sort by due time."""
    if not 0 <= round(due * 1000) < 10**14 or not url_key or "/" in url_key:
        raise ValueError(f"bad revisit: due {due!r}, URL key {url_key!r}")
    return f"{revisit_prefix(crawl)}{round(due * 1000):014d}/{url_key}"


def parse_revisit_key(key: str) -> tuple[float, str]:
    """``(due, url key)`` of a revisit key (ValueError for a key that is not one, or holds
    the surrogates of bytes that were no UTF-8)."""
    key.encode()  # (UnicodeEncodeError is a ValueError)
    due, url_key = key.rsplit("/", 2)[1:]
    if not _digits(due, 14) or not url_key:
        raise ValueError(f"not a revisit key: {key!r}")
    return int(due) / 1000, url_key


def clear_cold(store: Store, crawl: str) -> int:
    """Delete ``crawl``'s cold tier from ``store``; returns how many rows."""
    deleted = 0
    while rows := store.frontier_scan(crawl_prefix(crawl), 1000):
        store.frontier_delete([key for key, _ in rows])
        deleted += len(rows)
    return deleted
