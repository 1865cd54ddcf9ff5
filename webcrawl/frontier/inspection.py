"""Reading a crawl's frontier from outside: counts, largest hosts, hosts over budget,
the dupefilter's estimate.  ``webcrawl status``, the monitor, its metrics and the tests
read the frontier through this module alone; what "queued" means is said once, by the
shard's ``count`` script (which the workers' idle check runs too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webcrawl.frontier import scripts
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.shards import ShardRouter


@dataclass
class ShardState:
    """One shard, as read at one moment (``hot``: queued in Redis; ``cold``: in the
    store's frontier table; ``seen``: members of its exact set; ``bloom_bits``: bits set
    in its Bloom filter)."""

    shard: int
    hot: int
    cold: int
    revisit_due: int
    leased: int
    seen: int = 0
    bloom_bits: int = 0
    revisits: int = 0
    next_revisit: float | None = None
    hosts: list[str] = field(default_factory=list)

    @property
    def queued(self) -> int:
        return self.hot + self.cold


def shard_counts(
    router: ShardRouter, keys: CrawlKeys, now: float | None = None
) -> list[tuple[int, int, int, int]]:
    """Per shard, atomically: (queued in Redis, queued in the store, revisits due now,
    leases)."""
    calls = [scripts.COUNT.call(k, [scripts.now_arg(now)]) for k in keys.all_shards()]
    counts = []
    for call in router.run(calls):
        if call.error is not None:
            raise call.error
        hot, cold, due, leases = (int(v) for v in call.result)
        counts.append((hot, cold, due, leases))
    return counts


class Inspector:
    """What a crawl's frontier holds, read from its Redis (one Redis or a cluster)."""

    def __init__(self, client: Any, keys: CrawlKeys) -> None:
        self.client = client
        self.keys = keys

    def now(self) -> float:
        """The frontier's clock (Redis's), not this machine's."""
        seconds, micros = self.client.time()
        return seconds + micros / 1e6

    def shards(self, now: float | None = None) -> list[ShardState]:
        router = ShardRouter(self.client, self.keys)
        try:
            counts = shard_counts(router, self.keys, now)
        finally:
            router.close()
        pipe = self.client.pipeline(transaction=False)  # on a cluster: to each key's node
        for k in self.keys.all_shards():
            pipe.scard(k.seen).bitcount(k.bloom).zcard(k.revisits)
            pipe.zrange(k.revisits, 0, 0, withscores=True).zrange(k.ready, 0, -1).hkeys(k.cold)
        replies, width = pipe.execute(), 6
        states = []
        for shard, (hot, cold, due, leased) in enumerate(counts):
            seen, bits, revisits, first, ready, cold_hosts = replies[
                shard * width : (shard + 1) * width
            ]
            states.append(
                ShardState(
                    shard,
                    hot,
                    cold,
                    due,
                    leased,
                    seen=seen,
                    bloom_bits=bits,
                    revisits=revisits,
                    next_revisit=first[0][1] if first else None,
                    hosts=list(dict.fromkeys(h.decode() for h in [*ready, *cold_hosts])),
                )
            )
        return states

    def totals(self, now: float | None = None) -> dict[str, int]:
        """Over all shards: queued (Redis and store), revisits due, leased, seen (exact
        set members, or a Bloom filter's estimate)."""
        shards = self.shards(now)
        return {
            "queued": sum(s.queued for s in shards),
            "revisit_due": sum(s.revisit_due for s in shards),
            "leased": sum(s.leased for s in shards),
            "seen": self.seen(shards)[0],
        }

    def largest_hosts(self, shards: list[ShardState]) -> list[tuple[int, str]]:
        """(queued, host) of every host with queued requests (in Redis or the store),
        largest first."""
        pipe, hosts = self.client.pipeline(transaction=False), []
        for s in shards:
            k = self.keys.shard(s.shard)
            for host in s.hosts:
                hosts.append(host)
                pipe.zcard(k.host_queue(host)).hget(k.cold, host)
        counts = pipe.execute() if hosts else []
        sizes = [hot + int(cold or 0) for hot, cold in zip(counts[::2], counts[1::2], strict=True)]
        return sorted(zip(sizes, hosts, strict=True), reverse=True)

    def hosts_over_budget(self) -> list[tuple[int, str]]:
        """(new URLs taken, host) of the hosts whose new URLs went over the per-host budget
        (FRONTIER_MAX_PAGES_PER_HOST)."""
        pipe = self.client.pipeline(transaction=False)
        for k in self.keys.all_shards():
            pipe.smembers(k.over_budget)
        per_shard = pipe.execute()
        pipe, hosts = self.client.pipeline(transaction=False), []
        for k, members in zip(self.keys.all_shards(), per_shard, strict=True):
            for host in sorted(members):
                hosts.append(host.decode())
                pipe.hget(k.host_pages, host)
        counts = pipe.execute() if hosts else []
        return sorted(((int(n or 0), h) for n, h in zip(counts, hosts, strict=True)), reverse=True)

    def seen(self, shards: list[ShardState]) -> tuple[int, dict[str, Any]]:
        """URLs the crawl has seen (a Bloom filter's: estimated from its bits), and its
        dupefilter as recorded when the crawl was created; a Bloom filter's with the new
        URLs expected to have been taken for seen (never crawled)."""
        from webcrawl.frontier.bloom import BloomParams
        from webcrawl.frontier.layout import recorded_dupefilter

        seen = sum(s.seen for s in shards)
        layout = recorded_dupefilter(self.client, self.keys)
        if layout.get("dupefilter") != "bloom":
            return seen, {"kind": "set"}
        capacity, error_rate = int(layout["bloom_capacity"]), float(layout["bloom_error_rate"])
        params = BloomParams(int(layout["bloom_shard_capacity"]), error_rate)
        counts = [params.estimated_count(s.bloom_bits) for s in shards]
        return seen + sum(counts), {
            "kind": "bloom",
            "capacity": capacity,
            "shard_capacity": params.capacity,
            "error_rate": error_rate,
            "false_positives": round(sum(params.expected_false_positives(n) for n in counts)),
            "false_positive_rate_now": max(params.false_positive_rate(n) for n in counts),
        }

    def crawl_wide(self) -> dict[str, int]:
        """Seeds submitted and not taken yet, scope keys, pages recorded failed."""
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(self.keys.start).scard(self.keys.scope).get(self.keys.failed)
        submitted, scope, failed = pipe.execute()
        return {"submitted": submitted, "scope_keys": scope, "failed": int(failed or 0)}
