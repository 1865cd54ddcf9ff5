"""Worker heartbeats in Redis: who is crawling, and are they alive."""

from __future__ import annotations

import json
import os
import socket
import uuid
from typing import Any

import redis

from webcrawl.frontier.keys import CrawlKeys


def new_worker_id() -> str:
    """``host:pid:random``, unique across machines and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class WorkerRegistry:
    def __init__(self, server: redis.Redis, keys: CrawlKeys) -> None:
        self.server = server
        self.keys = keys

    def beat(self, worker_id: str, info: dict[str, Any], ttl: float) -> None:
        """Record ``info`` for ``worker_id``; it expires after ``ttl`` seconds."""
        payload = json.dumps({"id": worker_id, **info}, sort_keys=True)
        pipe = self.server.pipeline(transaction=False)
        pipe.set(self.keys.worker(worker_id), payload, px=max(1, int(ttl * 1000)))
        pipe.sadd(self.keys.workers, worker_id)
        pipe.execute()

    def mark_busy(self, worker_id: str, now: float) -> None:
        """``worker_id`` has work (it popped some after being idle): until its next idle
        check, no other worker takes the crawl for finished."""
        self.server.hset(self.keys.busy, worker_id, repr(now))

    def remove(self, worker_id: str) -> None:
        pipe = self.server.pipeline(transaction=False)
        pipe.delete(self.keys.worker(worker_id))
        pipe.srem(self.keys.workers, worker_id)
        pipe.hdel(self.keys.busy, worker_id)
        pipe.execute()

    def live(self) -> list[dict[str, Any]]:
        """Heartbeats of the live workers; ids whose heartbeat expired are pruned."""
        ids = sorted(m.decode() for m in self.server.smembers(self.keys.workers))
        if not ids:
            return []
        values = self.server.mget([self.keys.worker(i) for i in ids])
        dead = [i for i, v in zip(ids, values, strict=True) if v is None]
        if dead:
            self.server.srem(self.keys.workers, *dead)
        return [json.loads(v) for v in values if v is not None]


def worker_info(
    started: float, stats: dict[str, Any], now: float, rate: float, *, idle: bool, pops: bool
) -> dict[str, Any]:
    """The heartbeat fields, from a Scrapy stats dict and the current page rate (pages/s);
    ``pops``: whether the worker pops the shared crawl (a Scrapy command's own crawl, as
    ``scrapy shell``, does not)."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": started,
        "last_seen": now,
        "pages": int(stats.get("response_received_count", 0)),
        "items": int(stats.get("item_scraped_count", 0)),
        "errors": int(stats.get("log_count/ERROR", 0)),
        "rate": round(rate, 2),
        "state": "idle" if idle else "busy",
        "pops": pops,
    }


def popping(live: list[dict[str, Any]]) -> list[str]:
    """The ids of the ``live`` workers (:meth:`WorkerRegistry.live`) that pop the shared
    crawl: the shards are shared among them (a ``scrapy shell`` left open must not own
    shards it never pops, whose work would wait for other workers' help)."""
    return [str(worker["id"]) for worker in live if worker["pops"]]
