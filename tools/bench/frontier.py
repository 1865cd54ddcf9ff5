"""``python -m tools.bench frontier``: ``webcrawl bench frontier`` on one Redis and on the
local Redis Cluster of three masters with a replica each (:mod:`tools.localcluster`):
pages/s, Redis work per page and per-master balance (:mod:`webcrawl.bench.frontier`)."""

from __future__ import annotations

import argparse
import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

from webcrawl.bench import frontier
from webcrawl.bench.frontier import Servers


@contextlib.contextmanager
def cluster(workdir: Path, shards: int, crawl: str) -> Iterator[Servers]:
    """A fresh local Redis Cluster for one setup; stopped on the way out."""
    import redis

    from tools.localcluster import LocalRedisCluster
    from webcrawl.frontier.keys import CrawlKeys

    keys = CrawlKeys(crawl, shards)
    with LocalRedisCluster(workdir / "cluster", masters=3, replicas=1) as local:
        masters = {f":{n.port}": local.client(n.port) for n in local.masters()}
        replicas = {f":{n.port}": local.client(n.port) for n in local.replicas()}
        port = int(local.url.rsplit(":", 1)[1])
        with redis.RedisCluster(host="127.0.0.1", port=port) as rc:
            owner = {
                s: f":{rc.get_node_from_key(keys.shard(s).prefix).port}" for s in range(shards)
            }
        yield Servers("cluster, 3 masters", local.url, masters, replicas, owner)


TARGETS = {"single": frontier.one_redis, "cluster": cluster}


def run(args: argparse.Namespace) -> int:
    targets = {
        **TARGETS,
        "single": functools.partial(frontier.one_redis, binary=args.redis_server),
    }
    chosen = targets if args.target == "both" else {args.target: targets[args.target]}
    return frontier.run(args, chosen)
