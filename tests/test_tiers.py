"""The frontier's two tiers: host queues in Redis, the rest in the store, against a real
Redis and a real SQLite store, with workers killed (SIGKILL) in the middle of a move."""

import json
import signal
import subprocess
import sys
import textwrap

import pytest
from scrapy import Request, Spider

from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.queue import HostQueue
from webcrawl.store.sqlite import SQLiteStore


class S(Spider):
    name = "s"


def make(redis_client, store, shards=4, per_host=3, budget=0):
    keys = CrawlKeys("t", shards)
    return HostQueue(
        redis_client, S(), keys, store=store, hot_per_host=per_host, hot_budget=budget
    ), keys


@pytest.fixture
def store(tmp_path):
    with SQLiteStore(tmp_path / "webtable.sqlite3") as store:
        yield store


def entry(queue, url, priority=0):
    return (
        url.encode(),
        url.split("/")[2],
        priority,
        0.0,
        queue.encode(Request(url, priority=priority)),
    )


def drain(queue, now=1000.0, check=None):
    """Pop and acknowledge until no shard has work; ``check()`` after every step."""
    urls, ack = [], []
    while True:
        result = queue.step(now=now, acks=ack)
        ack = [lease for _, lease in result.popped]
        urls += [request.url for request, _ in result.popped]
        if check:
            check()
        if not result.popped and not any(wait <= 0 for wait in queue.look(now=now)):
            queue.step(now=now, acks=ack, pop=False)
            return urls


def hot(redis_client, keys):
    """Requests in the host queues of each shard."""
    counts = []
    for k in keys.all_shards():
        names = redis_client.keys(k.host_queue_prefix + "*")
        counts.append(sum(redis_client.zcard(n) for n in names))
    return counts


def test_a_host_keeps_its_limit_in_redis_and_the_rest_comes_back_from_the_store_in_order(
    redis_client, store
):
    queue, keys = make(redis_client, store)
    pushes = [entry(queue, f"http://a/{i}", priority=-(i // 4)) for i in range(10)]
    result = queue.step(now=0, pushes=pushes, pop=False)
    assert result.added == 10 and len(queue) == 10  # the cold tier counts as queued
    assert redis_client.zcard(keys.shard_for("a").host_queue("a")) == 3
    assert redis_client.hget(keys.shard_for("a").cold, "a") == b"7"
    assert drain(queue) == [f"http://a/{i}" for i in range(10)]  # none lost, in order
    assert len(queue) == 0 and store.frontier_scan("t/", 100) == []
    assert queue.tier_stats.spilled == queue.tier_stats.refilled == 7
    k = keys.shard_for("a")
    assert not redis_client.exists(
        k.cold, k.spill, k.spilling, k.refill, k.refilling, k.refill_wait, k.moved_prefix + "a"
    )
    assert int(redis_client.get(k.reserved)) == int(redis_client.get(k.cold_total)) == 0


def test_a_big_batch_keeps_its_order_across_the_tiers(redis_client, store):
    """1 203 requests of one host in one step (500 per ZADD: Lua's unpack limit), other
    hosts' between them; spilled in batches, refilled in order."""
    queue, _ = make(redis_client, store, shards=1, per_host=503)
    pushes = []
    for i in range(1203):
        pushes.append(entry(queue, f"http://a/{i}"))
        if i % 100 == 0:
            pushes.append(entry(queue, f"http://b/{i}"))
    assert queue.step(now=0, pushes=pushes, pop=False).added == len(pushes) == 1203 + 13
    assert len(queue) == len(pushes)
    urls = drain(queue)
    assert [u for u in urls if "//a/" in u] == [f"http://a/{i}" for i in range(1203)]
    assert [u for u in urls if "//b/" in u] == [f"http://b/{i}" for i in range(0, 1203, 100)]


def test_the_budget_bounds_redis_and_every_host_gets_its_turn(redis_client, store):
    """FRONTIER_HOT_BUDGET: over all hosts of a shard, never more in Redis than its share;
    hosts with all their requests in the store still take turns (refills wait for room)."""
    queue, keys = make(redis_client, store, shards=2, per_host=4, budget=10)  # 5 per shard
    pushes = [entry(queue, f"http://h{h}/{i}") for h in range(12) for i in range(6)]
    queue.step(now=0, pushes=pushes, pop=False)
    peaks = [0, 0]

    def check():
        peaks[:] = [max(p, n) for p, n in zip(peaks, hot(redis_client, keys), strict=True)]

    urls = drain(queue, check=check)
    assert sorted(urls) == sorted(f"http://h{h}/{i}" for h in range(12) for i in range(6))
    assert max(peaks) <= 5 and sum(peaks) > 0
    for h in range(12):  # each host in order
        assert [u for u in urls if f"//h{h}/" in u] == [f"http://h{h}/{i}" for i in range(6)]


def test_a_host_with_requests_only_in_the_store_is_work(redis_client, store):
    queue, keys = make(redis_client, store, per_host=1)
    queue.step(now=0, pushes=[entry(queue, f"http://a/{i}") for i in range(3)], pop=False)
    first = queue.step(now=1000)
    assert first.request.url == "http://a/0"
    assert redis_client.zcard(keys.shard_for("a").host_queue("a")) == 0
    assert redis_client.zcard(keys.shard_for("a").ready) == 0
    assert queue.idle_check("w", now=1000)[0] == 2  # queued counts the cold tier
    assert queue.has_work(now=1000)
    assert drain(queue) == ["http://a/1", "http://a/2"]


def test_a_requeued_lease_of_a_host_with_cold_requests_keeps_its_place(redis_client, store):
    """An expired lease goes back in the tier order: its request comes before the later
    ones of its host, none is lost."""
    queue, _ = make(redis_client, store, per_host=2)
    queue.step(now=0, pushes=[entry(queue, f"http://a/{i}") for i in range(6)], pop=False)
    assert queue.step(now=0, lease_timeout=10).request.url == "http://a/0"  # dies unacked
    assert drain(queue, now=100) == [f"http://a/{i}" for i in range(6)]


def test_a_refill_whose_lease_expired_does_nothing(redis_client, store):
    """A worker paused past its refill lease finds the host refilled by another: its late
    insert is refused, nothing is queued twice."""
    queue, _ = make(redis_client, store, per_host=2)
    queue.step(now=0, pushes=[entry(queue, f"http://a/{i}") for i in range(6)], pop=False)
    grants = []
    refill = queue.tiers.refill
    queue.tiers.refill = lambda *args, **kw: grants.append(args)  # the paused worker
    queue.step(now=0, lease_timeout=5)
    queue.step(now=0, lease_timeout=5)  # the queue is empty: a refill lease, not used
    assert len(grants) == 1
    queue.tiers.refill = refill
    urls = drain(queue, now=100)  # the lease expired: another refill
    refill(*grants[0], now=100)  # the paused worker wakes up
    assert sorted(urls) == [f"http://a/{i}" for i in range(6)]  # a/0, a/1: expired leases
    assert len(queue) == 0 and drain(queue, now=200) == []


VICTIM = textwrap.dedent("""
    import json, os, signal, sys
    import redis
    from scrapy import Request, Spider
    from webcrawl.frontier.keys import CrawlKeys
    from webcrawl.frontier.queue import HostQueue
    from webcrawl.store.sqlite import SQLiteStore

    url, path, point, log = sys.argv[1:5]

    class Dying(SQLiteStore):
        scanned = False
        def frontier_put(self, entries):
            super().frontier_put(entries)
            if point == "spilled":  # stored, not yet out of the spill set
                os.kill(os.getpid(), signal.SIGKILL)
        def frontier_scan(self, prefix, limit):
            if point == "granted":  # a refill lease, nothing read yet
                os.kill(os.getpid(), signal.SIGKILL)
            self.scanned = True
            return super().frontier_scan(prefix, limit)
        def frontier_delete(self, keys):
            if point == "moved" and self.scanned:  # in the queue, still in the store
                os.kill(os.getpid(), signal.SIGKILL)
            super().frontier_delete(keys)
            if point == "deleted" and self.scanned:  # deleted, the lease not yet ended
                os.kill(os.getpid(), signal.SIGKILL)

    class S(Spider):
        name = "s"

    queue = HostQueue(redis.Redis.from_url(url), S(), CrawlKeys("t", 4), store=Dying(path),
                      hot_per_host=3)
    ack = []
    with open(log, "a") as out:
        while True:
            result = queue.step(now=1000, acks=ack, lease_timeout=30)
            ack = [lease for _, lease in result.popped]
            for request, _ in result.popped:
                out.write(request.url + "\\n")
                out.flush()
""")


@pytest.mark.e2e
@pytest.mark.parametrize("point", ["spilled", "granted", "moved", "deleted"])
def test_kill_9_in_the_middle_of_a_move_loses_and_repeats_nothing(
    redis_server, redis_client, store, tmp_path, point
):
    """A worker dies (SIGKILL) at each point of a spill or a refill; another goes on
    after the dead worker's leases expire: every request is popped exactly once, each
    host's in order."""
    queue, _ = make(redis_client, store)
    urls = [f"http://h{h}.example/{i}" for i in range(700) for h in range(3)]
    queue.step(now=0, pushes=[entry(queue, u) for u in urls], pop=False)  # 1 391 to spill
    log = tmp_path / "victim.log"
    victim = subprocess.run(
        [sys.executable, "-c", VICTIM, redis_server.url, str(store.path), point, str(log)],
        timeout=120,
        capture_output=True,
    )
    assert victim.returncode == -signal.SIGKILL, victim.stderr.decode()[-2000:]
    before = log.read_text().split() if log.exists() else []
    after = drain(queue, now=2000)  # the victim's leases (30 s) have expired by then
    popped = before + after
    assert len(popped) == len(set(popped)) == len(urls)
    for h in range(3):
        assert [u for u in popped if f"//h{h}." in u] == [u for u in urls if f"//h{h}." in u]
    assert store.frontier_scan("t/", 10) == [] and len(queue) == 0


def test_reset_clears_the_crawls_cold_tier_only(redis_client, store):
    queue, _ = make(redis_client, store, shards=1, per_host=1)
    queue.step(now=0, pushes=[entry(queue, f"http://a/{i}") for i in range(600)], pop=False)
    assert len(store.frontier_scan("t/", 1000)) == 500  # 599 spilled: a batch stored at once
    store.frontier_put([("other/0000/a/x/y", b"{}")])
    queue.clear()
    assert store.frontier_scan("t/", 1000) == [] and len(queue) == 0
    assert store.frontier_scan("other/", 10) == [("other/0000/a/x/y", b"{}")]


def test_status_counts_the_requests_in_the_store(redis_server, redis_client, tmp_path):
    """`webcrawl status` counts a crawl's requests in both tiers, and its hosts whose
    requests are all in the store."""
    from test_cli import webcrawl

    from webcrawl.frontier.layout import join_crawl

    data = tmp_path / "data"
    keys = join_crawl(redis_client, "t", 4)
    with SQLiteStore(data / "webtable.sqlite3") as store:
        queue = HostQueue(redis_client, S(), keys, store=store, hot_per_host=2)
        pushes = [entry(queue, f"http://h{h}/{i}") for h in range(3) for i in range(300)]
        queue.step(now=0, pushes=pushes, pop=False)  # spilled, stored in a batch of 500
        queue.step(now=0, pushes=[entry(queue, "http://only/0")], pop=False)
    redis_url = f"REDIS_URL={redis_server.url}"
    # a store that cannot be read: reset deletes nothing (Redis forgetting the crawl would
    # leave its rows in the store for the next crawl of the name)
    broken = tmp_path / "broken"
    (broken / "webtable.sqlite3").mkdir(parents=True)
    failed = webcrawl(
        "reset", "--yes", "--crawl", "t", "-s", redis_url, data_dir=broken, check=False
    )
    assert failed.returncode == 1 and "nothing deleted in Redis" in failed.stderr
    assert redis_client.exists(keys.meta)
    status = json.loads(
        webcrawl("status", "--json", "--crawl", "t", "-s", redis_url, data_dir=data).stdout
    )
    assert status["queued"] == 901 and status["queued_in_store"] == 3 * 298
    assert status["queued_per_host"]["h0"] == 300 and status["hosts_queued"] == 4
    human = webcrawl("status", "--crawl", "t", "-s", redis_url, data_dir=data).stdout
    assert "queued     901 (7 in Redis, 894 in the store)" in human
    reset = webcrawl("reset", "--yes", "--crawl", "t", "-s", redis_url, data_dir=data).stdout
    assert "deleted 500 queued requests in sqlite:" in reset  # the rest: spilling, in Redis
    with SQLiteStore(data / "webtable.sqlite3") as store:
        assert store.frontier_scan("t/", 10) == []


def put_far_revisits(queue, now, day):
    """Revisits of a/0, a/1, a/2 due in 2, 3 and 4 days, into the store."""
    far = [
        (f"k{i}", "a", -1, now + day * (2 + i), queue.encode(Request(f"http://a/{i}")))
        for i in range(3)
    ]
    queue.put_far_revisits(far)
    return far


def test_revisits_beyond_the_horizon_wait_in_the_store(redis_client, store):
    """FRONTIER_REVISIT_HORIZON: a revisit due later waits in the store (sorted by due
    time) and reaches Redis's schedule when it comes within the horizon, once."""
    queue, keys = make(redis_client, store)
    day, now = 86400.0, 1.7e9
    far = put_far_revisits(queue, now, day)
    assert sum(redis_client.zcard(k.revisits) for k in keys.all_shards()) == 0
    assert queue.move_revisits_up(day, now=now) == 0  # none within a day yet
    assert queue.move_revisits_up(day, now=now + 1.5 * day) == 1  # k0: due in half a day
    k = keys.shard_for("a")
    assert redis_client.zrange(k.revisits, 0, -1) == [b"k0"]
    assert redis_client.hget(k.revisit_requests, "k0").startswith(b"a\n-1\n")
    assert queue.move_revisits_up(day, now=now + 1.5 * day) == 0  # moved once
    assert queue.move_revisits_up(day, now=now + 10 * day) == 2
    assert store.frontier_scan("t/", 10) == []
    due = queue.step(now=redis_client.time()[0] + 20 * day)  # Redis's clock, far ahead
    assert due.revisited == 3 and due.request.url.startswith("http://a/")
    redis_client.set(keys.revisit_mover, "1")  # another worker is moving them
    queue.put_far_revisits(far[:1])
    assert queue.move_revisits_up(day, now=now + 10 * day) == 0


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"FRONTIER_HOT_PER_HOST": 0, "FRONTIER_HOT_BUDGET": 5}, "FRONTIER_HOT_BUDGET needs"),
        ({"FRONTIER_HOT_PER_HOST": -1}, "FRONTIER_HOT_PER_HOST"),
        ({"FRONTIER_REVISIT_HORIZON": "soon"}, "FRONTIER_REVISIT_HORIZON"),
    ],
)
def test_bad_tier_settings_fail_at_start_with_their_name(given, message):
    from scrapy.settings import Settings

    from webcrawl.frontier.scheduler import tier_settings

    settings = Settings()
    settings.setmodule("webcrawl.settings.defaults")
    assert tier_settings(settings) == (100, 500_000, 86400.0)
    settings.setdict(given)
    with pytest.raises(ValueError, match=message):
        tier_settings(settings)


def test_a_crawl_with_requests_in_the_store_refuses_workers_without_the_tier(redis_client, store):
    from webcrawl.frontier.scheduler import check_no_cold_tier

    queue, keys = make(redis_client, store, per_host=1)
    check_no_cold_tier(redis_client, keys)
    queue.step(now=0, pushes=[entry(queue, f"http://a/{i}") for i in range(3)], pop=False)
    with pytest.raises(ValueError, match="has 2 queued requests in the store: FRONTIER_HOT_PER"):
        check_no_cold_tier(redis_client, keys)


def test_a_store_outage_is_logged_once_counted_and_loses_nothing(redis_client, tmp_path, caplog):
    """Spills that fail (the store is down) are counted each time, logged once per outage,
    and retried when their claims expire; nothing is lost."""
    from webcrawl.store.base import StoreError

    class Down(SQLiteStore):
        down = True

        def frontier_put(self, entries):
            if self.down:
                raise StoreError("the store is down")
            super().frontier_put(entries)

    with Down(tmp_path / "down.sqlite3") as store:
        queue, _ = make(redis_client, store, shards=1, per_host=1)
        urls = [f"http://a/{i}" for i in range(600)]
        caplog.set_level("DEBUG", logger="webcrawl.frontier.tiers")
        queue.step(now=0, pushes=[entry(queue, u) for u in urls], pop=False)
        for t in (100, 200):  # the claims expire and are tried again, still down
            queue.step(now=t, pop=False, pushes=[entry(queue, f"http://b/{t}")])
        warnings = [r for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1 and "further failures are not logged" in warnings[0].message
        stats = queue.tier_stats
        assert stats.errors >= 2 and stats.outages == 1 and stats.spilled == 0
        store.down = False
        popped = drain(queue, now=1000)
        assert sorted(popped) == sorted([*urls, "http://b/100", "http://b/200"])
        assert any("work again" in r.message for r in caplog.records)
        assert queue.tier_stats.outages == 1


def test_moves_run_where_the_mover_says(redis_client, store):
    """With a mover (the scheduler's thread), a step hands its spills and refills over
    instead of doing the store I/O itself; run later, they lose and repeat nothing."""
    moves = []
    keys = CrawlKeys("t", 2)
    queue = HostQueue(redis_client, S(), keys, store=store, hot_per_host=2, mover=moves.append)
    queue.step(now=0, pushes=[entry(queue, f"http://a/{i}") for i in range(8)], pop=False)
    first = queue.step(now=0)  # claims the spill set: a move handed over, not run
    assert first.request.url == "http://a/0" and len(moves) == 1
    assert store.frontier_scan("t/", 10) == []
    moves.pop()()
    assert len(store.frontier_scan("t/", 10)) == 6
    urls, ack = [first.request.url], [first.lease]
    for i in range(50):  # time runs on: the queue looks at every shard again now and then
        result = queue.step(now=1000 + 2 * i, acks=ack)
        ack = [lease for _, lease in result.popped]
        urls += [request.url for request, _ in result.popped]
        while moves:
            moves.pop(0)()
    assert urls == [f"http://a/{i}" for i in range(8)]
    assert len(queue) == 0 and store.frontier_scan("t/", 10) == []


def _spill_entries(redis_client, k):
    return redis_client.zrange(k.spill, 0, -1)


def test_unreadable_spill_entries_are_dropped_and_stall_nothing(redis_client, store, caplog):
    """A spill entry no worker can read (a corrupted or foreign record in Redis) would fail
    its claim's whole move at every try, and the requests claimed with it would never
    reach the store: it is dropped (logged, counted), the rest move and come back."""
    queue, keys = make(redis_client, store, shards=1, per_host=3)
    k = keys.shard_for("a")
    urls = [f"http://a/{i}" for i in range(10)]
    queue.step(now=0, pushes=[entry(queue, u) for u in urls], pop=False)
    spilled = _spill_entries(redis_client, k)
    assert len(spilled) == 7  # on their way to the store, none claimed yet
    # one of them corrupted (its score is no number: it was counted, and its URL is
    # lost), and a record no step wrote (no host: counted nowhere)
    host, _, member = spilled[3].split(b"\n", 2)
    redis_client.zrem(k.spill, spilled[3])
    redis_client.zadd(k.spill, {b"%s\nNaN\n%s" % (host, member): 0, b"junk": 0})
    caplog.set_level("ERROR", logger="webcrawl.frontier.tiers")
    popped = drain(queue)
    assert popped == urls[:6] + urls[7:]  # in order, the corrupted one's URL gone
    assert queue.tier_stats.unreadable == 2 and queue.tier_stats.spilled == 6
    assert "Dropped 2 unreadable spill entries" in caplog.text
    assert _spill_entries(redis_client, k) == [] and store.frontier_scan("t/", 10) == []
    # counts: the corrupted entry's place in cold was taken off by a refill
    assert len(queue) == 0 and redis_client.hgetall(k.cold) == {}
    assert redis_client.hgetall(k.spill_done) == {} and not queue.has_work(now=1000)


def test_unreadable_cold_rows_are_dropped_and_the_hosts_refills_go_on(redis_client, store, caplog):
    """A row under a host's prefix in the store whose key no worker can read would fail
    every refill of the host (its requests in the store would never come back): it is
    deleted (logged, counted), and the host's other rows are refilled in order."""
    from webcrawl.frontier.cold import host_prefix

    queue, keys = make(redis_client, store, shards=1, per_host=2)
    urls = [f"http://a/{i}" for i in range(8)]
    queue.step(now=0, pushes=[entry(queue, u) for u in urls], pop=False)
    first = queue.step(now=1000)  # pops a/0; claims the spill set, which is stored
    assert first.request.url == urls[0]
    rows = store.frontier_scan("t/", 100)
    assert len(rows) == 6 and rows[2][1] == queue.encode(Request(urls[4]))
    prefix = host_prefix("t", 0, "a")
    # a row of the store's corrupted (counted in cold: its URL is lost), and two no
    # worker wrote, one sorting before the host's rows and one after
    key, data = rows[2]
    store.frontier_delete([key])
    parts = key.split("/")
    parts[3] = "5000000000x"  # the priority
    huge = f"{prefix}4{'9' * 400}/{'0' * 20}/{parts[5]}"  # a priority no float holds
    store.frontier_put(
        [("/".join(parts), data), (prefix + "0bad", b"x"), (huge, b"z"), (prefix + "~", b"y")]
    )
    caplog.set_level("ERROR", logger="webcrawl.frontier.tiers")
    popped = drain(queue, now=1000, check=None)
    queue.step(now=1000, acks=[first.lease], pop=False)
    lost = urls[4]  # the rows are a/2 to a/7
    assert popped == [u for u in urls[1:] if u != lost]
    assert queue.tier_stats.unreadable == 4
    assert "unreadable rows of a in the store" in caplog.text
    assert store.frontier_scan("t/", 10) == []
    k = keys.shard_for("a")
    assert len(queue) == 0 and redis_client.hgetall(k.cold) == {}
    assert not queue.has_work(now=1000)


def test_unreadable_revisit_rows_are_dropped_and_the_others_move_up(redis_client, store, caplog):
    """A revisit row in the store that no worker can read would fail every move of the
    revisits beyond the horizon (none would reach Redis again): it is deleted (logged,
    counted), and the others move up, across batches."""
    queue, keys = make(redis_client, store)
    day, now = 86400.0, 1.7e9
    put_far_revisits(queue, now, day)
    store.frontier_put(
        [
            ("t/~r/0000000000000x/bad-due", b"a\n-1\nx"),  # sorts first
            ("t/~r/" + "0" * 20 + "9" * 400 + "/huge-due", b"a\n-1\nx"),
            ("t/~r/00000000000001/no-host", b"\n-1\nx"),
            ("t/~r/00000000000001/host-with-a-slash", b"a/b\n-1\nx"),
            ("t/~r/00000000000001/bad-value", b"no lines"),
            ("t/~r/00000000000002/bad-priority", b"a\nhigh\nx"),
            ("t/~r/no-due", b"a\n-1\nx"),  # sorts last
        ]
    )
    caplog.set_level("ERROR", logger="webcrawl.frontier.tiers")
    assert queue.move_revisits_up(10 * day, now=now, batch=2) == 3
    assert queue.tier_stats.unreadable == 7
    assert store.frontier_scan("t/", 10) == []
    k = keys.shard_for("a")
    assert sorted(redis_client.zrange(k.revisits, 0, -1)) == [b"k0", b"k1", b"k2"]


def test_a_refill_lease_for_a_host_no_request_has_is_given_back_and_its_count_cleared(
    redis_client, store, caplog
):
    """A host name no request has, counted in the cold tier (a corrupted count in Redis:
    empty, with a slash, bytes that are no UTF-8), is granted a refill lease: the refill
    reads nothing, raises nothing, and tells Redis the store has none of its rows, so
    its count goes and it is not granted again at every lease expiry."""
    queue, keys = make(redis_client, store, shards=1)
    k = keys.shard(0)
    bad = [b"", b"a/b", b"\xff"]
    for host in bad:
        redis_client.hset(k.cold, host, 1)
        redis_client.zadd(k.refill_wait, {host: 0})
    redis_client.incrby(k.cold_total, len(bad))
    caplog.set_level("ERROR", logger="webcrawl.frontier.tiers")
    for t in (1000, 1100, 1200):  # past the refill leases' expiry
        queue.step(now=t)
    assert queue.tier_stats.unreadable == 3 and "unreadable refill lease" in caplog.text
    assert redis_client.hgetall(k.cold) == {} and int(redis_client.get(k.cold_total)) == 0
    assert redis_client.hgetall(k.refill) == {} and int(redis_client.get(k.reserved) or 0) == 0
    assert len(queue) == 0 and not queue.has_work(now=1300)


def test_unreadable_keys_in_a_hosts_moved_set_are_dropped_and_its_refills_go_on(
    redis_client, store, caplog
):
    """A host's moved set names the store rows a refill moved up, deleted by the next
    refill; a member that is no cold key (text that is not one, or bytes that are no
    UTF-8: corrupted in Redis) is dropped (logged, counted), not deleted from the store,
    and the host's rows are refilled in order."""
    queue, keys = make(redis_client, store, shards=1, per_host=2)
    urls = [f"http://a/{i}" for i in range(8)]
    queue.step(now=0, pushes=[entry(queue, u) for u in urls], pop=False)
    first = queue.step(now=1000)  # pops a/0; claims the spill set, which is stored
    assert first.request.url == urls[0] and len(store.frontier_scan("t/", 100)) == 6
    k = keys.shard_for("a")
    redis_client.sadd(k.moved_prefix + "a", b"not a cold key", b"t/0000/a/\xff/1/x")
    caplog.set_level("ERROR", logger="webcrawl.frontier.tiers")
    popped = drain(queue, now=1000, check=None)
    queue.step(now=1000, acks=[first.lease], pop=False)
    assert popped == urls[1:]
    assert queue.tier_stats.unreadable == 2 and "unreadable" in caplog.text
    assert store.frontier_scan("t/", 10) == []
    assert len(queue) == 0 and not queue.has_work(now=1000)
