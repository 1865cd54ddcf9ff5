"""Shards of the frontier: which shard a host is in, key names, and how a worker's
pops go round the shards (against a real Redis)."""

from collections import Counter

import pytest
from scrapy import Request, Spider

from webcrawl.frontier.keys import CrawlKeys, check_crawl_name, hash_slot, shard_of
from webcrawl.frontier.layout import (
    LAYOUT,
    CrawlLayoutError,
    existing_crawl,
    join_crawl,
    recorded_store,
    store_record,
)
from webcrawl.frontier.queue import HostQueue
from webcrawl.frontier.redisconn import cluster_nodes
from webcrawl.store.sqlite import SQLiteStore


class S(Spider):
    name = "s"


def test_a_host_has_one_shard_the_same_in_every_process():
    # CRC-32, not Python's salted hash(): these values are the same everywhere
    hosts = ("example.com", "127.0.0.1:8080", "b\u00fccher.de")
    assert [shard_of(h, 16) for h in hosts] == [9, 8, 5]
    assert shard_of("example.com", 1) == 0
    counts = Counter(shard_of(f"host{i}.example.org", 16) for i in range(16_000))
    assert len(counts) == 16 and max(counts.values()) < 1.1 * 1000  # even within 10 %


def test_every_key_of_a_shard_shares_its_hash_tag_and_the_crawl_owns_them():
    keys = CrawlKeys("web", 16)
    k = keys.shard_for("example.com")
    names = [k.ready, k.seen, k.bloom, k.leases, k.host_queue("example.com"), k.revisits]
    assert all(n.startswith(k.prefix) for n in names)
    assert k.prefix.startswith(f"webcrawl:{{web:{k.shard}")
    assert keys.start.startswith("webcrawl:{web}:")
    assert all(keys.owns(n) for n in [*names, keys.start])
    other = CrawlKeys("web:x", 16)  # a crawl whose name extends ours
    assert not keys.owns(other.shard(3).ready) and not keys.owns(other.start)
    assert not keys.owns("webcrawl:{webx}:start")


@pytest.mark.parametrize("shards", [16, 64, 256, 1024])
def test_shards_spread_evenly_over_the_slots_so_over_a_clusters_masters(shards):
    """redis-cli gives 3 masters slots 0-5460, 5461-10922 and 10923-16383."""
    slots = [
        hash_slot(k.prefix.split("{")[1].split("}")[0])
        for k in CrawlKeys("web", shards).all_shards()
    ]
    per_master = [
        sum(a <= s < b for s in slots) for a, b in ((0, 5461), (5461, 10923), (10923, 16384))
    ]
    even = shards / 3
    assert max(abs(n - even) / even for n in per_master) < (0.15 if shards <= 256 else 0.1)
    assert len({shard_of(f"h{i}", shards) for i in range(50 * shards)}) == shards


@pytest.mark.parametrize(
    "name", ["", "a{b}", "a b", "a*", "x?", "[x]", "web:1", "web:1.5", "web/2024"]
)
def test_names_that_cannot_name_keys_are_refused(name):
    with pytest.raises(ValueError, match="cannot name Redis keys"):
        check_crawl_name(name)


def test_cluster_urls():
    assert cluster_nodes("redis+cluster://h1:7000") == ("redis://h1:7000", [("h1", 7000)])
    assert cluster_nodes("rediss+cluster://u:p@h1:7000,h2:7001/0?ssl_cert_reqs=none") == (
        "rediss://u:p@h1:7000/0?ssl_cert_reqs=none",
        [("h1", 7000), ("h2", 7001)],
    )
    with pytest.raises(ValueError, match="expected host:port"):
        cluster_nodes("redis+cluster://h1")


def test_the_shard_count_is_recorded_and_another_refused(redis_client):
    assert existing_crawl(redis_client, "c", 16) == (CrawlKeys("c", 16), False)
    join_crawl(redis_client, "c", 8)
    assert existing_crawl(redis_client, "c", 16) == (CrawlKeys("c", 8), True)
    assert join_crawl(redis_client, "c", 8).shards == 8
    with pytest.raises(
        CrawlLayoutError, match="FRONTIER_SHARDS = 8, this worker has FRONTIER_SHARDS = 16"
    ):
        join_crawl(redis_client, "c", 16)


def test_a_crawl_of_another_key_layout_is_refused(redis_client):
    """A crawl whose keys another version of webcrawl laid out (its queue members in
    another format) is refused, with the way out, not misread."""
    join_crawl(redis_client, "c", 8)
    assert redis_client.hget(CrawlKeys("c", 8).meta, "layout") == LAYOUT.encode()
    redis_client.hset(CrawlKeys("c", 8).meta, "layout", "shards/1")
    with pytest.raises(CrawlLayoutError, match=r"another version.*'shards/1'.*webcrawl reset"):
        join_crawl(redis_client, "c", 8)
    # a creator that died between its two writes: the next worker records the layout
    redis_client.hdel(CrawlKeys("c", 8).meta, "layout")
    assert join_crawl(redis_client, "c", 8).shards == 8
    assert redis_client.hget(CrawlKeys("c", 8).meta, "layout") == LAYOUT.encode()


SET = {"dupefilter": "set"}
BLOOM = {
    "dupefilter": "bloom",
    "bloom_capacity": "1000000",
    "bloom_error_rate": "0.001",
    "bloom_shard_capacity": "325000",
}


def test_the_dupefilter_is_recorded_and_another_refused(redis_client):
    """A set and a Bloom filter, or Bloom filters of two sizes, do not know each other's
    URLs: the crawl keeps the one it was created with and refuses a worker with another."""
    join_crawl(redis_client, "c", 16, BLOOM)
    assert join_crawl(redis_client, "c", 16, BLOOM).shards == 16
    assert join_crawl(redis_client, "c", 16).shards == 16  # commands do not ask
    with pytest.raises(
        CrawlLayoutError,
        match=r"created with a Bloom filter for 1000000 URLs "
        r"at 0\.001 false positives \(325000 URLs a shard\) as its dupefilter, this "
        "worker has an exact set",
    ):
        join_crawl(redis_client, "c", 16, SET)
    with pytest.raises(CrawlLayoutError, match="this worker has a Bloom filter for 2000000"):
        join_crawl(redis_client, "c", 16, {**BLOOM, "bloom_capacity": "2000000"})
    with pytest.raises(CrawlLayoutError, match=r"\(200000 URLs a shard\)"):  # another budget
        join_crawl(redis_client, "c", 16, {**BLOOM, "bloom_shard_capacity": "200000"})
    join_crawl(redis_client, "d", 16, SET)
    with pytest.raises(CrawlLayoutError, match="created with an exact set as its dupefilter"):
        join_crawl(redis_client, "d", 16, BLOOM)


def test_the_store_is_recorded_and_a_worker_with_another_refused(redis_client):
    """The crawl's cold tier and pages are in its store: a worker with another (two
    machines with their own SQLite files) is refused, both stores named."""
    a = {"id": "1a", "url": "sqlite:////srv/data/webtable.sqlite3", "host": "m1"}
    b = {"id": "2b", "url": "sqlite:////home/w/.webcrawl/webtable.sqlite3", "host": "m2"}
    join_crawl(redis_client, "web", 16, SET, a)
    assert recorded_store(redis_client, CrawlKeys("web", 16)) == a
    assert join_crawl(redis_client, "web", 16, SET, {**a, "host": "m3"}).shards == 16  # HBase
    assert join_crawl(redis_client, "web", 16).shards == 16  # commands do not ask
    with pytest.raises(CrawlLayoutError) as refused:
        join_crawl(redis_client, "web", 16, SET, b)
    assert str(refused.value) == (
        "crawl 'web' keeps its frontier and pages in sqlite:////srv/data/webtable.sqlite3 on "
        "host m1 (store id 1a); this worker's store is sqlite:////home/w/.webcrawl/webtable."
        "sqlite3 on host m2 (store id 2b): set STORE_URL to the crawl's store (every "
        "worker of a crawl must share one store: on several machines, HBase) or start over "
        "with `webcrawl reset --crawl web --yes`"
    )
    with pytest.raises(
        CrawlLayoutError,
        match="the same URL on the same host: that store was made anew since the crawl began",
    ):
        join_crawl(redis_client, "web", 16, SET, {**a, "id": "3c"})
    assert recorded_store(redis_client, CrawlKeys("web", 16)) == a
    join_crawl(redis_client, "other", 16, SET, b)  # another crawl, another store
    assert recorded_store(redis_client, CrawlKeys("new", 16)) is None


def test_workers_with_their_own_data_dirs_are_two_stores_and_one_data_dir_is_one(
    redis_client, tmp_path
):
    """As a worker joins (Scheduler.open): the default store, SQLite in the data dir."""
    stores = [SQLiteStore(tmp_path / d / "webtable.sqlite3") for d in ("m1", "m1", "m2")]
    first, same, other = (store_record(s) for s in stores)
    join_crawl(redis_client, "web", 16, SET, first)
    join_crawl(redis_client, "web", 16, SET, same)
    with pytest.raises(CrawlLayoutError) as refused:
        join_crawl(redis_client, "web", 16, SET, other)
    for store in stores:
        store.close()
    assert f"pages in sqlite:///{tmp_path}/m1/webtable.sqlite3 on host " in str(refused.value)
    assert f"this worker's store is sqlite:///{tmp_path}/m2/webtable.sqlite3 on " in str(
        refused.value
    )


def entry(queue, url):
    return url.encode(), url.split("/")[2], 0, 0.0, queue.encode(Request(url))


def hosts_in_every_shard(keys, per_shard=2):
    hosts, i = {}, 0
    while min((len(v) for v in hosts.values()), default=0) < per_shard or len(hosts) < 16:
        host = f"h{i}.example"
        hosts.setdefault(keys.shard_of(host), []).append(host)
        i += 1
    return [h for shard in sorted(hosts) for h in hosts[shard][:per_shard]]


def test_pops_go_round_every_shard_in_turn(redis_client):
    """No shard starves another: with work in every shard, 16 pops of one request
    each take one from every shard."""
    queue = HostQueue(redis_client, S(), CrawlKeys("t"))
    hosts = hosts_in_every_shard(queue.keys)
    urls = [f"http://{h}/{p}" for h in hosts for p in range(3)]
    queue.step(pushes=[entry(queue, u) for u in urls], pop=False, now=0)
    shards = []
    for _ in range(16):
        ((_, lease),) = queue.step(pop=1, now=1).popped
        shards.append(int(lease.split(":")[0]))
    assert sorted(shards) == list(range(16))


def test_work_another_worker_puts_in_an_empty_shard_is_found_within_a_second(redis_client):
    mine = HostQueue(redis_client, S(), CrawlKeys("t"), refresh=1.0)
    theirs = HostQueue(redis_client, S(), CrawlKeys("t"))
    mine.step(pushes=[entry(mine, "http://a.example/1")], pop=False, now=0)
    assert mine.step(pop=1, now=0).request.url == "http://a.example/1"
    empty = mine.step(pop=1, now=0.1)
    assert empty.request is None
    other = next(
        h
        for h in (f"x{i}.example" for i in range(100))
        if mine.keys.shard_of(h) != mine.keys.shard_of("a.example")
    )
    theirs.step(pushes=[entry(theirs, f"http://{other}/1")], pop=False, now=0.2)
    assert mine.step(pop=1, now=0.5).request is None  # still believes every shard idle...
    assert mine.step(pop=1, now=1.2).request.url == f"http://{other}/1"  # ...not for long


def test_a_step_with_one_shard_down_applies_the_others_and_says_which_failed(redis_client):
    """One call per shard: the failure of one (here a script error injected by a key
    of the wrong type) does not undo the others, and it is reported by shard."""
    queue = HostQueue(redis_client, S(), CrawlKeys("t"))
    a = "a.example"
    b = next(
        h
        for h in (f"b{i}.example" for i in range(100))
        if queue.keys.shard_of(h) != queue.keys.shard_of(a)
    )
    redis_client.set(queue.keys.shard_for(b).seen, "not a set")  # SADD fails there
    result = queue.step(
        pushes=[entry(queue, f"http://{a}/1"), entry(queue, f"http://{b}/1")], pop=False
    )
    assert result.added == 1 and list(result.failed) == [queue.keys.shard_of(b)]
    assert "WRONGTYPE" in str(result.failed[queue.keys.shard_of(b)])
