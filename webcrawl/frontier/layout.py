"""What a crawl was created with, checked when a worker or a command joins it.

A crawl's shard count is fixed when its first worker starts: a host's shard
is its hash modulo the count, so a worker with another count would queue a
host's URLs in another shard than the one holding its queue, leases and
fingerprints.  It is recorded in the crawl's ``meta`` hash and every worker
checks it, with the format of the crawl's keys (``LAYOUT``).  So is its
dupefilter (an exact set, or a Bloom filter of a given size): a worker with
another would not know the URLs the crawl has seen.  And so is its store (by
the store's own id, :meth:`Store.identity`): the frontier's cold tier and the
pages are there, so a worker with another store (two machines with their own
SQLite files) would spill requests where no other worker refills them from,
and refill from a store that does not have them.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING, Any

from webcrawl.frontier.keys import CrawlKeys

if TYPE_CHECKING:
    from webcrawl.store.base import Store

# The format of the crawl's keys in Redis (its queue members: members.py), recorded when
# the crawl is created: a worker refuses a crawl of another (it would misread its
# queues).  Changed with the format.
LAYOUT = "shards/2"


class CrawlLayoutError(ValueError):
    """The crawl in Redis cannot be joined with these settings."""


def join_crawl(
    client: Any,
    crawl: str,
    shards: int,
    dupefilter: dict[str, str] | None = None,
    store: dict[str, str] | None = None,
) -> CrawlKeys:
    """The keys of ``crawl`` with ``shards`` shards, recording the count (and
    ``dupefilter``, a :meth:`RedisDupeFilter.layout`, and ``store``, a
    :func:`store_record`) if the crawl has none yet; CrawlLayoutError if it was
    created with others."""
    keys = CrawlKeys(crawl, shards)
    recorded = client.hget(keys.meta, "shards")
    if recorded is None:
        # the layout first: a worker that finds the shard count finds the layout too
        client.hsetnx(keys.meta, "layout", LAYOUT)
        client.hsetnx(keys.meta, "shards", shards)
        recorded = client.hget(keys.meta, "shards")  # another worker may have been first
    layout = client.hget(keys.meta, "layout")
    if layout is None:  # (its creator died between the two writes: this one's, then)
        client.hsetnx(keys.meta, "layout", LAYOUT)
        layout = client.hget(keys.meta, "layout")
    if layout.decode() != LAYOUT:
        raise CrawlLayoutError(
            f"crawl {crawl!r} was created by another version of webcrawl (its keys' layout "
            f"is {layout.decode()!r}, this worker's {LAYOUT!r}): this worker would misread "
            f"its queues; finish it with the version that made it, or start over with "
            f"`webcrawl reset --crawl {crawl} --yes`"
        )
    if int(recorded) != shards:
        raise CrawlLayoutError(
            f"crawl {crawl!r} was created with FRONTIER_SHARDS = {int(recorded)}, this worker "
            f"has FRONTIER_SHARDS = {shards}: hosts would move to other shards and their queued "
            f"URLs would be lost; set FRONTIER_SHARDS = {int(recorded)} (or start over with "
            f"`webcrawl reset --crawl {crawl} --yes`)"
        )
    if dupefilter is not None:
        _join_dupefilter(client, keys, dupefilter)
    if store is not None:
        _join_store(client, keys, store)
    return keys


def recorded_dupefilter(client: Any, keys: CrawlKeys) -> dict[str, str]:
    """The crawl's dupefilter as recorded (``{}`` while no worker has joined it)."""
    recorded = client.hget(keys.meta, "dupefilter")
    return json.loads(recorded) if recorded else {}


def describe_dupefilter(layout: dict[str, str]) -> str:
    """In words, for messages: "an exact set", "a Bloom filter for N URLs at P false positives"."""
    kind = layout.get("dupefilter")
    if kind == "bloom" and "bloom_capacity" in layout:
        return (
            f"a Bloom filter for {layout['bloom_capacity']} URLs at "
            f"{layout.get('bloom_error_rate')} false positives "
            f"({layout.get('bloom_shard_capacity')} URLs a shard)"
        )
    return {"bloom": "a Bloom filter", "set": "an exact set"}.get(kind, f"dupefilter {kind!r}")


def _join_dupefilter(client: Any, keys: CrawlKeys, ours: dict[str, str]) -> None:
    recorded = recorded_dupefilter(client, keys)
    if not recorded:  # a new crawl
        client.hsetnx(keys.meta, "dupefilter", json.dumps(ours, sort_keys=True))
        recorded = recorded_dupefilter(client, keys)  # another worker may have been first
    if recorded != ours:
        raise CrawlLayoutError(
            f"crawl {keys.crawl!r} was created with {describe_dupefilter(recorded)} as its "
            f"dupefilter, this worker has {describe_dupefilter(ours)}: neither knows the URLs "
            "the other has seen; set DUPEFILTER_CLASS, FRONTIER_EXPECTED_URLS, BLOOM_CAPACITY, "
            "BLOOM_ERROR_RATE and FRONTIER_MAX_PAGES_PER_HOST (which sizes each shard's "
            "filter) as the crawl's first worker had them (or start over with "
            f"`webcrawl reset --crawl {keys.crawl} --yes`)"
        )


def existing_crawl(client: Any, crawl: str, default_shards: int) -> tuple[CrawlKeys, bool]:
    """The keys of ``crawl`` as it was created (``default_shards`` if it does not exist
    yet), and whether it exists."""
    recorded = client.hget(CrawlKeys(crawl, default_shards).meta, "shards")
    if recorded is None:
        return CrawlKeys(crawl, default_shards), False
    return CrawlKeys(crawl, int(recorded)), True


def store_record(store: Store) -> dict[str, str]:
    """What the crawl's meta hash records of ``store``: its id (read, or made, in the
    store: blocks), its URL and the machine it is recorded from (for messages)."""
    return {"id": store.identity(), "url": store.url, "host": socket.gethostname()}


def recorded_store(client: Any, keys: CrawlKeys) -> dict[str, str] | None:
    """The crawl's store as recorded (a :func:`store_record`; None while no worker has
    joined it)."""
    recorded = client.hget(keys.meta, "store")
    return json.loads(recorded) if recorded else None


def describe_store(record: dict[str, str]) -> str:
    """In words, for messages: "sqlite:///... on host A (store id ...)"."""
    return f"{record['url']} on host {record['host']} (store id {record['id']})"


def _join_store(client: Any, keys: CrawlKeys, ours: dict[str, str]) -> None:
    recorded = recorded_store(client, keys)
    if recorded is None:  # a new crawl
        client.hsetnx(keys.meta, "store", json.dumps(ours, sort_keys=True))
        recorded = recorded_store(client, keys)  # another worker may have been first
    if recorded is not None and recorded["id"] != ours["id"]:  # (None: reset meanwhile)
        anew = (
            " (the same URL on the same host: that store was made anew since the crawl began)"
            if (recorded["url"], recorded["host"]) == (ours["url"], ours["host"])
            else ""
        )
        raise CrawlLayoutError(
            f"crawl {keys.crawl!r} keeps its frontier and pages in {describe_store(recorded)}; "
            f"this worker's store is {describe_store(ours)}{anew}: set STORE_URL to "
            "the crawl's store (every worker of a crawl must share one store: on several "
            "machines, HBase) or start over with "
            f"`webcrawl reset --crawl {keys.crawl} --yes`"
        )


def submit_seeds(client: Any, keys: CrawlKeys, urls: list[str]) -> None:
    """Queue seeds for the crawl: its workers poll this list (WEBCRAWL_SUBMIT_POLL_INTERVAL)."""
    client.rpush(keys.start, *urls)


def delete_crawl(client: Any, keys: CrawlKeys) -> int:
    """Delete every key of the crawl in Redis (on each node of a cluster); how many."""
    names = sorted(
        {
            name
            for pattern in keys.all_patterns()
            for name in client.scan_iter(match=pattern, count=1000)
            if keys.owns(name)
        }
    )
    for i in range(0, len(names), 1000):
        client.delete(*names[i : i + 1000])
    return len(names)
