"""The frontier on a real Redis Cluster (three masters, a replica each, on loopback):
crawls of the demo web with several workers, a worker and a master killed mid-crawl,
the command line, resharding, and the mistakes a user can make in REDIS_URL."""

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from itertools import pairwise

import pytest
import redis
from conftest import ROOT, CrawlResult, crawl_env, frontier_totals, read_items
from scrapy import Request, Spider
from test_cluster import PACED
from test_frontier import page_times, stored_urls

from tools.localcluster import LocalRedisCluster
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.queue import HostQueue
from webcrawl.frontier.redisconn import CrawlRedis
from webcrawl.settings import defaults
from webcrawl.urls.scope import scope_key

pytestmark = pytest.mark.e2e

WAIT = ("FRONTIER_REDIS_WAIT_REPLICAS=1",)


class S(Spider):
    name = "s"


@pytest.fixture
def cluster_client():
    """Opens clients of a cluster (as workers do: CrawlRedis), closed after the test."""
    opened = []

    def connect(cluster: LocalRedisCluster) -> redis.RedisCluster:
        conn = CrawlRedis(cluster.url, "unused")
        conn.open()
        opened.append(conn)
        return conn.client

    yield connect
    for conn in opened:
        conn.close()


def webcrawl(*args: str, redis_url: str, data_dir) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "webcrawl.cli",
        *args,
        "-s",
        f"WEBCRAWL_DATA_DIR={data_dir}",
        "-s",
        f"REDIS_URL={redis_url}",
    ]
    return subprocess.run(
        cmd, cwd=ROOT, env=crawl_env(), capture_output=True, text=True, timeout=120
    )


def keys_per_master(cluster: LocalRedisCluster) -> dict[int, int]:
    return {n.port: cluster.client(n.port).dbsize() for n in cluster.masters()}


# -- crawls ---------------------------------------------------------------------------


def test_two_workers_crawl_through_a_redis_cluster_once_each_and_politely(
    slow_demo, redis_cluster, tmp_path, cluster_client, crawls
):
    demo = slow_demo
    items = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    settings = (f"REDIS_URL={redis_cluster.url}", *PACED, *WAIT)
    workers = [crawls.start(demo.seeds, tmp_path / "data", *settings, items=p) for p in items]
    logs = [crawls.finish(w) for w in workers]
    expected = set(demo.web.reachable())
    per_worker = [[i["url"] for i in read_items(p)] for p in items]
    union = Counter(per_worker[0] + per_worker[1])
    assert set(union) == expected and max(union.values()) == 1
    assert max(demo.page_fetches().values()) == 1  # none fetched twice (server side)
    assert all(len(p) > 20 for p in per_worker), [len(p) for p in per_worker]
    assert all("Redis Cluster at redis+cluster://" in log for log in logs)
    assert all("has no work left anywhere" in log for log in logs)
    # politeness at the server: 0.1 s between two requests to a host, whichever worker
    gaps = {h: min(b - a for a, b in pairwise(t)) for h, t in page_times(demo).items()}
    assert min(gaps.values()) >= 0.1, gaps
    # the crawl's shards are spread evenly over the masters (its few hosts' keys are
    # where their shards fall), and the crawl's state is clean
    client = cluster_client(redis_cluster)
    keys = CrawlKeys("web", defaults.FRONTIER_SHARDS)
    per_master = Counter(
        client.get_node_from_key(keys.shard(s).ready).port for s in range(keys.shards)
    )
    assert set(per_master) == {n.port for n in redis_cluster.masters()}
    even = keys.shards / len(per_master)
    assert all(abs(n - even) <= 0.2 * even for n in per_master.values()), per_master
    totals = frontier_totals(client)
    assert totals["queued"] == 0 and totals["leased"] == 0 and totals["seen"] > len(expected)


def test_a_worker_killed_with_kill_9_loses_nothing_on_a_cluster(
    slow_demo, redis_cluster, tmp_path, crawls
):
    demo = slow_demo
    settings = (f"REDIS_URL={redis_cluster.url}", *PACED, *WAIT, "FRONTIER_LEASE_TIMEOUT=3")
    a = crawls.start(demo.seeds, tmp_path / "data", *settings, items=tmp_path / "a.jsonl")
    b = crawls.start(demo.seeds, tmp_path / "data", *settings, items=tmp_path / "b.jsonl")
    demo.wait_for_fetches(60)
    b.send_signal(signal.SIGKILL)
    b.wait(10)
    log = crawls.finish(a)
    # the store, not b's feed file: kill -9 loses what the feed exporter had buffered
    assert set(stored_urls(tmp_path / "data")) == set(demo.web.reachable()), log[-2000:]
    twice = [u for u, n in demo.page_fetches().items() if n > 1]
    assert len(twice) <= 2 * 4 * 4, twice  # at most what b held (prefetch and in flight)


def test_a_master_killed_mid_crawl_fails_over_and_no_url_is_lost(
    slow_demo, tmp_path, cluster_client, crawls
):
    """kill -9 a master with a crawl running: its replica takes over, the workers retry
    until it has (nothing they hold is dropped), and every reachable page is stored.

    Redis replicates asynchronously; with FRONTIER_REDIS_WAIT_REPLICAS=1 a page's lease
    is acknowledged only after its links reached a replica, so what the dead master
    had not passed on is fetched again rather than lost."""
    demo = slow_demo
    with LocalRedisCluster(tmp_path / "cluster") as cluster:
        workers = [
            crawls.start(
                demo.seeds,
                tmp_path / "data",
                f"REDIS_URL={cluster.url}",
                *PACED,
                *WAIT,
                items=tmp_path / f"{path}.jsonl",
            )
            for path in ("a", "b")
        ]
        # the master that serves the shards of most of the demo's hosts
        client = cluster_client(cluster)
        keys = CrawlKeys("web")
        ports = Counter(
            client.get_node_from_key(keys.shard_for(scope_key(u, "host")).prefix).port
            for u in demo.seeds
        )
        victim = ports.most_common(1)[0][0]
        demo.wait_for_fetches(60)
        cluster.kill(victim)
        started = time.monotonic()
        promoted = cluster.wait_failover(victim)
        failover = time.monotonic() - started
        logs = [crawls.finish(w, timeout=180) for w in workers]
        assert promoted != victim
    stored = Counter(stored_urls(tmp_path / "data"))
    reachable = set(demo.web.reachable())
    lost = reachable - set(stored)
    twice = sorted(u for u, n in demo.page_fetches().items() if n > 1)
    report = {
        "failover_s": round(failover, 2),
        "lost": len(lost),
        "fetched_twice": len(twice),
        "pages": len(reachable),
        "hosts_on_the_dead_master": ports[victim],
    }
    print("FAILOVER", json.dumps(report))
    (tmp_path / "failover.json").write_text(json.dumps(report))
    assert not lost, (report, sorted(lost)[:20], logs[0][-3000:])
    assert any("retry" in log for log in logs)  # the outage was seen, and waited out


# -- the command line -----------------------------------------------------------------


def test_status_submit_reset_and_failpaths_work_on_a_cluster(demo, redis_cluster, tmp_path, crawls):
    data = tmp_path / "data"
    result = crawls.run(demo.seeds, data, f"REDIS_URL={redis_cluster.url}")
    assert result.returncode == 0, result.stderr[-2000:]
    status = webcrawl("status", "--json", redis_url=redis_cluster.url, data_dir=data)
    assert status.returncode == 0, status.stderr
    state = json.loads(status.stdout)
    reachable = len(demo.web.reachable())
    shards = defaults.FRONTIER_SHARDS
    assert state["shards"] == shards and len(state["queued_per_shard"]) == shards
    assert state["queued"] == 0 and state["leased"] == 0 and state["stored"] == reachable
    assert state["seen"] >= reachable and state["redis"].startswith("Redis Cluster at")
    submit = webcrawl(
        "submit", "http://example.invalid/a", redis_url=redis_cluster.url, data_dir=data
    )
    assert submit.returncode == 0, submit.stderr
    state = json.loads(
        webcrawl("status", "--json", redis_url=redis_cluster.url, data_dir=data).stdout
    )
    assert state["submitted"] == 1
    failpaths = webcrawl("failpaths", redis_url=redis_cluster.url, data_dir=data)
    assert failpaths.returncode == 0 and "dead paths" in failpaths.stdout
    reset = webcrawl("reset", "--yes", redis_url=redis_cluster.url, data_dir=data)
    assert reset.returncode == 0, reset.stderr
    assert keys_per_master(redis_cluster) == dict.fromkeys(keys_per_master(redis_cluster), 0)


# -- the frontier on a cluster, directly ------------------------------------------------


def entry(queue, url):
    host = url.split("/")[2]
    return url.encode(), host, 0, 0.0, queue.encode(Request(url))


def test_every_url_is_popped_once_from_shards_on_every_master(redis_cluster, cluster_client):
    client = cluster_client(redis_cluster)
    queue = HostQueue(client, S(), CrawlKeys("t"))
    urls = [f"http://h{h}.example/{p}" for h in range(64) for p in range(5)]
    added = queue.step(pushes=[entry(queue, u) for u in urls], pop=False).added
    assert added == len(urls)
    got = []
    for _ in range(500):
        got += [r.url for r, _ in queue.step(pop=8, acks=[]).popped]
        if len(got) == len(urls):
            break
    assert sorted(got) == sorted(urls)
    nodes = {queue.router.node_of(s).connection_pool.connection_kwargs["port"] for s in range(16)}
    assert nodes == {n.port for n in redis_cluster.masters()}


def _move_slot(cluster: LocalRedisCluster, slot: int, src_port: int, dst_port: int) -> None:
    """Move ``slot`` and its keys from one master to another, as a resharding does."""
    ids = {n.port: n.node_id for n in cluster.masters()}
    src, dst = cluster.client(src_port), cluster.client(dst_port)
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src_port])
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst_port])
    while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
        src.execute_command("MIGRATE", "127.0.0.1", dst_port, "", 0, 5000, "KEYS", *keys)
    for port in ids:
        cluster.client(port).execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[dst_port])


def test_a_shard_moved_by_resharding_is_followed_not_lost(redis_cluster, cluster_client):
    """MOVED: the slot map is read again and the step is sent to the shard's new master."""
    client = cluster_client(redis_cluster)
    queue = HostQueue(client, S(), CrawlKeys("t"))
    host = "moved.example"
    shard = queue.keys.shard_of(host)
    queue.step(pushes=[entry(queue, f"http://{host}/{i}") for i in range(5)], pop=False)
    slot = client.keyslot(queue.keys.shard(shard).prefix)
    before = queue.router.node_of(shard).connection_pool.connection_kwargs["port"]
    other = next(n.port for n in redis_cluster.masters() if n.port != before)
    _move_slot(redis_cluster, slot, before, other)
    result = queue.step(pushes=[entry(queue, f"http://{host}/{i}") for i in range(5, 8)], pop=False)
    assert result.added == 3 and not result.failed
    assert queue.router.node_of(shard).connection_pool.connection_kwargs["port"] == other
    got = []
    for _ in range(50):
        got += [r.url for r, _ in queue.step(pop=4).popped]
    assert sorted(got) == sorted(f"http://{host}/{i}" for i in range(8))


# -- bad input -----------------------------------------------------------------------


def test_a_cluster_url_for_a_single_redis_and_the_reverse_fail_clearly(
    redis_server, redis_cluster, tmp_path, crawls
):
    single = redis_server.url.replace("redis://", "redis+cluster://").rsplit("/", 1)[0]
    result = webcrawl("status", redis_url=single, data_dir=tmp_path)
    assert result.returncode == 2
    assert "names a Redis Cluster, but the server there is a single Redis" in result.stderr
    node = redis_cluster.masters()[0].port
    result = webcrawl("status", redis_url=f"redis://127.0.0.1:{node}/0", data_dir=tmp_path)
    assert result.returncode == 2
    assert "is a node of a Redis Cluster" in result.stderr
    assert f"redis+cluster://127.0.0.1:{node}" in result.stderr
    # a worker says the same, and stops at once
    crawl = crawls.run(["http://127.0.0.1:9/"], tmp_path / "data", f"REDIS_URL={single}")
    assert crawl.returncode != 0 or "single Redis" in crawl.stderr
    assert "names a Redis Cluster, but the server there is a single Redis" in crawl.stderr


def test_a_shard_count_other_than_the_crawls_is_refused_naming_both(
    demo, redis_server, redis_client, tmp_path, crawls
):
    data = tmp_path / "data"
    first = crawls.run(demo.seeds, data, f"REDIS_URL={redis_server.url}", "DEPTH_LIMIT=0")
    assert first.returncode == 0, first.stderr[-2000:]
    other = crawls.run(demo.seeds, data, f"REDIS_URL={redis_server.url}", "FRONTIER_SHARDS=8")
    assert "created with FRONTIER_SHARDS = 128, this worker has FRONTIER_SHARDS = 8" in other.stderr
    assert not read_items_of(other)
    assert sum(frontier_totals(redis_client).values()) > 0  # nothing of the crawl touched


def test_a_worker_whose_store_is_not_the_crawls_is_refused_naming_both(
    demo, redis_server, redis_client, tmp_path, crawls
):
    """Two machines with the defaults: one Redis, a SQLite file each.  The second would
    spill requests to its own file and refill from an empty one: refused at start."""
    redis_url, depth = f"REDIS_URL={redis_server.url}", "DEPTH_LIMIT=1"
    first = crawls.run(demo.seeds[:1], tmp_path / "m1", redis_url, depth)
    assert first.returncode == 0, first.stderr[-2000:]
    other = crawls.run(demo.seeds[1:], tmp_path / "m2", redis_url, depth)
    said = (
        f"crawl 'web' keeps its frontier and pages in sqlite:///{tmp_path}/m1/"
        "webtable.sqlite3 on host "
    )
    assert said in other.stderr, other.stderr[-2000:]
    assert f"this worker's store is sqlite:///{tmp_path}/m2/webtable.sqlite3 on " in other.stderr
    assert "`webcrawl reset --crawl web --yes`" in other.stderr
    assert not read_items_of(other) and other.returncode != 0
    # the control: a worker with the crawl's store joins, and crawls
    again = crawls.run(demo.seeds[1:], tmp_path / "m1", redis_url, depth)
    assert again.returncode == 0 and "keeps its frontier" not in again.stderr
    assert read_items_of(again), again.stderr[-2000:]


def read_items_of(result: CrawlResult) -> list[str]:
    return [line for line in result.stderr.splitlines() if "Scraped from" in line]


def test_a_crawl_name_that_cannot_name_keys_is_refused(tmp_path, crawls):
    with pytest.raises(ValueError, match="cannot name Redis keys"):
        CrawlKeys("we{b}")
    result = crawls.run(["http://127.0.0.1:9/"], tmp_path / "data", "WEBCRAWL_CRAWL=a b")
    assert "cannot name Redis keys" in result.stderr


def test_the_bloom_filters_are_allocated_on_every_master(redis_cluster, cluster_client):
    """RedisBloomDupeFilter.prepare's pipeline of scripts, each routed to its shard's
    master."""
    from test_bloom import _prepared_filter

    client = cluster_client(redis_cluster)
    filt = _prepared_filter(client, shards=16)
    filt.prepare()
    length = -(-filt.params.bits // 8)
    assert {client.strlen(filt.key_for(s)) for s in range(16)} == {length}
    assert all(n > 0 for n in keys_per_master(redis_cluster).values())
