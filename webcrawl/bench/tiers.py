"""``webcrawl bench tiers``: a frontier of millions of URLs through its two tiers.

Pushes ``--urls`` synthetic links over ``--hosts`` hosts into the real frontier (one
Redis, FRONTIER_SHARDS, FRONTIER_HOT_PER_HOST and FRONTIER_HOT_BUDGET at their defaults
or as given, the Bloom dupefilter sized for them) with the cold tier in SQLite, as
one process: the Redis memory per URL the crawl knows, the store's rows and bytes.
Then pops and acknowledges for ``--duration`` seconds as a worker does, and compares
the refills' throughput with the pop rate: refills must not be what bounds pages/s.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from webcrawl.bench.common import tcp_redis
from webcrawl.settings import defaults


def _entries(hosts: int, params: Any, start: int, stop: int) -> list[tuple]:
    """Pushes ``start..stop`` of the synthetic crawl: (Bloom offsets, host, priority, wait,
    entry), the entry as the queue encodes a spider's link (checked in :func:`run`)."""
    from webcrawl.frontier import serialize

    pushes = []
    for i in range(start, stop):
        host = f"www.site{i % hosts}.example"
        path = f"/section-{(i // hosts) % 97}/"
        url = f"https://{host}{path}article-{i}.html"
        offsets = params.offsets(hashlib.sha1(url.encode()).digest())
        data = serialize.dumps({"url": url, "meta": {"depth": 3}, "priority": -3, "_ref": path})
        pushes.append((",".join(map(str, offsets)).encode(), host, -3, 0.0, data))
    return pushes


def _store_size(path: Path) -> tuple[int, int]:
    """(rows of the frontier table, bytes of the database and its WAL)."""
    with sqlite3.connect(path) as conn:
        try:
            rows = conn.execute("SELECT COUNT(*) FROM frontier").fetchone()[0]
        except sqlite3.OperationalError:  # nothing was spilled: no table yet
            rows = 0
    return rows, sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _fill(queue: Any, n: int, hosts: int, params: Any) -> float:
    """Push the synthetic crawl in batches as workers do; returns the seconds taken."""
    from scrapy import Request

    from webcrawl.frontier import serialize

    sample = _entries(hosts, params, 0, 1)[0]
    url = serialize.loads(sample[4])["url"]
    request = Request(
        url, meta={"depth": 3}, priority=-3, headers={"Referer": url.rsplit("/", 1)[0] + "/"}
    )
    assert queue.encode(request) == sample[4], "the synthetic entry is not a real one"
    started, batch = time.perf_counter(), 5000
    for s in range(0, n, batch):
        queue.step(
            pushes=_entries(hosts, params, s, min(n, s + batch)), pop=False, seen_mode="bloom"
        )
    return time.perf_counter() - started


def _drain(queue: Any, duration: float) -> dict[str, float]:
    """Pop 20 per step and acknowledge, for ``duration`` seconds: pops, refills, spills."""
    tiers = queue.tier_stats
    before = (tiers.refilled, tiers.refill_seconds, tiers.spill_seconds)
    pops, acks, started = 0, [], time.perf_counter()
    while time.perf_counter() - started < duration:
        result = queue.step(acks=acks, pop=20, seen_mode="bloom")
        acks = [lease for _, lease in result.popped]
        pops += len(result.popped)
    elapsed = time.perf_counter() - started
    queue.step(acks=acks, pop=False)
    return {
        "elapsed": elapsed,
        "pops": pops,
        "refilled": tiers.refilled - before[0],
        "refill_s": tiers.refill_seconds - before[1],
        "spill_s": tiers.spill_seconds - before[2],
    }


def run(args: argparse.Namespace) -> int:
    import redis
    from scrapy import Spider

    from webcrawl.frontier.dupefilter import shard_bloom_params
    from webcrawl.frontier.keys import CrawlKeys
    from webcrawl.frontier.queue import HostQueue
    from webcrawl.store.sqlite import SQLiteStore

    n, hosts, shards = args.urls, args.hosts, defaults.FRONTIER_SHARDS
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-"))
    db = workdir / "webtable.sqlite3"
    try:
        with tcp_redis(workdir) as url, SQLiteStore(db) as store:
            client = redis.Redis.from_url(url)
            base = client.info("memory")["used_memory"]
            keys = CrawlKeys("tiers", shards)
            params = shard_bloom_params(n, 0.01, shards, host_budget=0)  # no host past its share
            for k in keys.all_shards():  # allocated at once, as the Bloom dupefilter does
                client.set(k.bloom, bytes(-(-params.bits // 8)))
            queue = HostQueue(
                client,
                Spider(name="web"),
                keys,
                store=store,
                hot_per_host=args.hot_per_host,
                hot_budget=args.hot_budget,
            )
            fill = _fill(queue, n, hosts, params)
            spilled, spill_s = queue.tier_stats.spilled, queue.tier_stats.spill_seconds
            used = client.info("memory")["used_memory"] - base
            bloom = sum(client.memory_usage(k.bloom) or 0 for k in keys.all_shards())
            hot = sum(int(client.get(k.queued) or 0) for k in keys.all_shards())
            cold = sum(int(client.get(k.cold_total) or 0) for k in keys.all_shards())
            rows, size = _store_size(db)
            d = _drain(queue, args.duration)
            queue.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\n{n:,} URLs over {hosts:,} hosts, {shards} shards; FRONTIER_HOT_PER_HOST="
        f"{args.hot_per_host}, FRONTIER_HOT_BUDGET={args.hot_budget:,}; Bloom dupefilter "
        f"sized for them at 1 %"
    )
    print(
        f"fill: {n / fill:,.0f} URLs/s pushed ({fill:.0f} s, {spill_s:.0f} s of it storing "
        f"{spilled:,} in the store)"
    )
    print(f"\n{'Redis':<42} {'bytes':>14} {'bytes/URL':>10}")
    for name, value in (
        ("all (used_memory)", used),
        ("Bloom filters", bloom),
        ("the rest (hot queues, hosts, tiers)", used - bloom),
    ):
        print(f"{name:<42} {value:>14,} {value / n:>10.1f}")
    print(f"{'requests in Redis, in the cold tier':<42} {hot:>14,} {cold:>10,}")
    print(f"{'store: rows, bytes (SQLite file + WAL)':<42} {rows:>14,} {size:>10,}")
    print(f"{'store: bytes per row':<42} {size / max(rows, 1):>14.1f}")
    elapsed = d["elapsed"]
    print(f"\ndrain for {elapsed:.0f} s, one process popping 20 per step and acknowledging:")
    print(f"{'pops/s':<42} {d['pops'] / elapsed:>14,.0f}")
    print(f"{'refilled rows/s (of the wall time)':<42} {d['refilled'] / elapsed:>14,.0f}")
    print(
        f"{'refill throughput (rows/s of refill time)':<42} "
        f"{d['refilled'] / max(d['refill_s'], 1e-9):>14,.0f}"
    )
    print(
        f"{'share of the time in refills, in spills':<42} {d['refill_s'] / elapsed:>13.1%} "
        f"{d['spill_s'] / elapsed:>9.1%}"
    )
    return 0
