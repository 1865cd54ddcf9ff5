"""What a crawl was created with, checked when a worker or a command joins it.

A crawl's shard count is fixed when its first worker starts: a host's shard
is its hash modulo the count, so a worker with another count would queue a
host's URLs in another shard than the one holding its queue, leases and
fingerprints.  It is recorded in the crawl's ``meta`` hash and every worker
checks it.
"""

from __future__ import annotations

from typing import Any

from webcrawl.frontier.keys import CrawlKeys

LAYOUT = "shards/1"

# keys that only the one-keyspace layout of webcrawl before shards had
_LEGACY = ("seen", "bloom", "queued", "ready", "leases", "revisits", "start", "workers")


class CrawlLayoutError(ValueError):
    """The crawl in Redis cannot be joined with these settings."""


def join_crawl(client: Any, crawl: str, shards: int) -> CrawlKeys:
    """The keys of ``crawl`` with ``shards`` shards, recording the count if the crawl is
    new; CrawlLayoutError if it was created with another count or by an older webcrawl."""
    keys = CrawlKeys(crawl, shards)
    recorded = client.hget(keys.meta, "shards")
    if recorded is None:
        _refuse_legacy(client, keys)
        client.hsetnx(keys.meta, "shards", shards)
        client.hsetnx(keys.meta, "layout", LAYOUT)
        recorded = client.hget(keys.meta, "shards")  # another worker may have been first
    if int(recorded) != shards:
        raise CrawlLayoutError(
            f"crawl {crawl!r} was created with FRONTIER_SHARDS = {int(recorded)}, this worker "
            f"has FRONTIER_SHARDS = {shards}: hosts would move to other shards and their queued "
            f"URLs would be lost; set FRONTIER_SHARDS = {int(recorded)} (or start over with "
            f"`webcrawl reset --crawl {crawl} --yes`)"
        )
    return keys


def existing_crawl(client: Any, crawl: str, default_shards: int) -> tuple[CrawlKeys, bool]:
    """The keys of ``crawl`` as it was created (``default_shards`` if it does not exist
    yet), and whether it exists."""
    recorded = client.hget(CrawlKeys(crawl, default_shards).meta, "shards")
    if recorded is None:
        return CrawlKeys(crawl, default_shards), False
    return CrawlKeys(crawl, int(recorded)), True


def _refuse_legacy(client: Any, keys: CrawlKeys) -> None:
    old = [keys.legacy_prefix + name for name in _LEGACY]
    if any(client.exists(name) for name in old):  # one by one: other slots on a cluster
        raise CrawlLayoutError(
            f"crawl {keys.crawl!r} holds state of an older webcrawl (one keyspace, "
            f"{keys.legacy_prefix}*), before the frontier had shards: start over with "
            f"`webcrawl reset --crawl {keys.crawl} --yes` (the store keeps its pages)"
        )
