"""Regression tests for the frontier bugs the simulation (tests/test_frontier_sim.py) found.

Each test replays a shrunk counterexample as explicit calls, against a real Redis and
a real SQLite store, on an explicit clock (``now``). A worker's moves (the spill claims
and refill leases its steps hand it) are kept rather than run, so the test chooses when
each one runs: late, or never. This is how a test stops a worker between two of its
calls (docs/frontier.md, "The life of a URL").
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from scrapy import Request, Spider

from webcrawl.frontier import queue as queue_module
from webcrawl.frontier import scripts
from webcrawl.frontier.cold import crawl_prefix, parse_cold_key, revisit_prefix
from webcrawl.frontier.far_revisits import FarRevisits
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.lock import RedisLock
from webcrawl.frontier.outbox import Outbox
from webcrawl.frontier.queue import HostQueue
from webcrawl.store.base import StoreError
from webcrawl.store.sqlite import SQLiteStore

LEASE = 10.0  # lease timeout: leases, spill claims and refill leases
KEYS = CrawlKeys("t", 1)  # one shard holds every host
K = KEYS.shard(0)


class S(Spider):
    name = "s"


class FlakyStore:
    """The real store, except that ``frontier_put`` can fail ("before" writing, or
    "after": the rows are written but the answer is lost), and a hook can run before
    the next ``frontier_put`` or ``frontier_scan`` (a slow store call: others go on)."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self.put_fails: str | None = None
        self.before_put = None
        self.before_scan = None

    def __getattr__(self, name):
        return getattr(self._store, name)

    def frontier_put(self, rows):
        hook, self.before_put = self.before_put, None
        if hook is not None:
            hook()
        if self.put_fails == "before":
            raise StoreError("store down")
        self._store.frontier_put(rows)
        if self.put_fails == "after":
            raise StoreError("answer lost")

    def frontier_scan(self, prefix, limit):
        hook, self.before_scan = self.before_scan, None
        if hook is not None:
            hook()
        return self._store.frontier_scan(prefix, limit)


class Worker:
    """A worker's HostQueue. Its spill claims and refill grants are kept, not run."""

    def __init__(
        self, client, store, name: str, fetched: Counter, *, budget: int = 0, wait_replicas: int = 0
    ) -> None:
        self.queue = HostQueue(
            client,
            S(),
            KEYS,
            store=store,
            hot_per_host=2,
            hot_budget=budget,
            wait_replicas=wait_replicas,
            wait_timeout=0.2,
        )
        self.queue.id_prefix = f"{name}."  # the same in every run
        self.tiers = self.queue.tiers
        self.tiers.move = self._handed  # shadows Tiers.move: nothing runs until told to
        self.spills: list[tuple[str, list[bytes]]] = []  # (claim token, entries)
        self.grants: list[tuple[str, str, int, list[str]]] = []  # (host, token, room, stale)
        self.fetched = fetched  # URL -> times handed out, across workers

    def _handed(self, shard, spills, grants, *, now) -> None:
        if spills:
            self.spills.append((spills[0].decode(), spills[1]))
        for host, token, room, stale in grants or ():
            self.grants.append(
                (host.decode(), token.decode(), int(room), [k.decode() for k in stale])
            )

    def push(self, urls: list[str], now: float) -> None:
        pushes = [
            (u.encode(), u.split("/")[2], 0, 0.0, self.queue.encode(Request(u))) for u in urls
        ]
        self.queue.step(pushes=pushes, pop=False, now=now, lease_timeout=LEASE)

    def step(self, now: float, *, pop: int = 1, acks=(), lease_timeout: float = LEASE):
        """One step; returns the (url, lease) pairs popped."""
        result = self.queue.step(acks=list(acks), pop=pop, now=now, lease_timeout=lease_timeout)
        popped = [(request.url, lease) for request, lease in result.popped]
        self.fetched.update(url for url, _ in popped)
        return popped

    def run_moves(self, now: float) -> None:
        """Run the kept moves, spills first, as Tiers.move does."""
        while self.spills:
            claim, entries = self.spills.pop(0)
            self.tiers.spill(0, claim, entries, now=now)
        while self.grants:
            host, token, room, stale = self.grants.pop(0)
            self.tiers.refill(0, host, token, room, stale, now=now)


def push(url: str, queue: HostQueue) -> tuple:
    """A push for a step: (fingerprint, host, priority, wait, data, cache key)."""
    return (url.encode(), url.split("/")[2], 0, 0.0, queue.encode(Request(url)), None)


def url_of(data: bytes) -> str:
    return json.loads(data)["url"]


def hot_urls(client, host: str) -> list[str]:
    return [url_of(m.split(b"|", 1)[1]) for m in client.zrange(K.host_queue(host), 0, -1)]


def check(client, store) -> None:
    """The simulation's invariants on counters and places (one shard):
    - ``queued`` is the number of entries in the host queues;
    - ``cold_total`` is the sum of ``cold``;
    - a host's ``cold`` is its entries in the spill set plus its live store rows (rows
      of claims neither in progress nor completed left out: dead, or lost), minus its
      moved set;
    - ``reserved`` is the sum of the rooms held by refill leases;
    - no URL is both in a host queue and in a live store row outside the moved set."""
    hot = {}
    for name in client.scan_iter(match=K.host_queue_prefix + "*"):
        host = name.decode()[len(K.host_queue_prefix) :]
        hot[host] = set(hot_urls(client, host))
    queued = int(client.get(K.queued) or 0)
    assert queued == sum(len(u) for u in hot.values()), f"queued {queued}, but {hot}"
    cold = {h.decode(): int(n) for h, n in client.hgetall(K.cold).items()}
    total = int(client.get(K.cold_total) or 0)
    assert total == sum(cold.values()), f"cold_total {total}, but cold {cold}"
    claims = {c.decode() for c in client.smembers(K.spill_live) | set(client.hkeys(K.spill_done))}
    spill = defaultdict(set)  # host -> seqs
    for entry in client.zrange(K.spill, 0, -1):
        host, _, member = entry.split(b"\n", 2)
        spill[host.decode()].add(int(member.split(b"|", 1)[0]))
    stored = defaultdict(dict)  # host -> seq -> url, live rows only
    for key, data in store.frontier_scan(crawl_prefix("t"), 1000):
        if "/~r/" not in key:
            _, _, host, _, seq, claim = parse_cold_key(key)
            if claim in claims or client.sismember(K.moved_prefix + host, key):
                stored[host][seq] = url_of(data)
    for host in set(cold) | set(spill) | set(stored):
        moved = {parse_cold_key(m.decode())[4] for m in client.smembers(K.moved_prefix + host)}
        rows = (spill[host] | set(stored[host])) - moved
        assert cold.get(host, 0) == len(rows), (
            f"host {host}: cold count {cold.get(host, 0)}, but {len(rows)} in the spill set "
            f"and store"
        )
        twice = {u for s, u in stored[host].items() if s not in moved} & hot.get(host, set())
        assert not twice, f"in the store and in a host queue: {sorted(twice)}"
    leases = client.hvals(K.refill)
    rooms = sum(int(v.split(b"|")[1]) for v in leases)
    reserved = int(client.get(K.reserved) or 0)
    assert reserved == rooms, (
        f"reserved {reserved} but {len(leases)} refill leases hold {rooms} places"
    )


def drain(worker: Worker, now: float, acks=()) -> None:
    """Pop and acknowledge, running every move at once, until no work is left. The
    invariants are checked after every step."""
    acks = list(acks)
    for _ in range(50):
        popped = worker.step(now, pop=3, acks=acks)
        acks = [lease for _, lease in popped]
        worker.run_moves(now)
        check(worker.queue.server, worker.tiers.store)
        if not popped and not any(wait <= 0 for wait in worker.queue.look(now=now)):
            worker.step(now, pop=0, acks=acks)
            return
    raise AssertionError("the frontier does not drain")


def assert_drained(client, store, *, dead_rows_left: bool = False) -> None:
    """Nothing is left queued, counted, reserved or leased. Unless ``dead_rows_left``,
    the store is empty too: no refill scans a dead claim's row that sorts after the
    host's last live row, so such a row may stay (docs/frontier.md)."""
    assert int(client.get(K.queued) or 0) == int(client.get(K.cold_total) or 0) == 0
    assert int(client.get(K.reserved) or 0) == 0
    assert not client.exists(K.cold, K.spill, K.spilling, K.refill, K.refilling, K.leases)
    rows = store.frontier_scan(crawl_prefix("t"), 1000)
    if dead_rows_left:  # garbage: rows of claims neither in progress nor completed
        claims = {c.decode() for c in client.smembers(K.spill_live)}
        claims |= {c.decode() for c in client.hkeys(K.spill_done)}
        rows = [key for key, _ in rows if parse_cold_key(key)[5] in claims]
    assert rows == []


@pytest.fixture
def store(tmp_path):
    with SQLiteStore(tmp_path / "webtable.sqlite3") as real:
        yield FlakyStore(real)


@pytest.fixture
def fetched():
    return Counter()


def urls(prefix: str, n: int, start: int = 0) -> list[str]:
    return [f"http://{prefix}/{i}" for i in range(start, start + n)]


def test_no_second_refill_lease_while_one_is_live(redis_client, store, fetched):
    """Finding 1: A holds h's refill lease and is at its store scan. B pops h's last
    request, which puts h back in the refill wait list. B's step grants no second lease
    (before the fix: "reserved 3 but 1 refill leases hold 2 places", and ``reserved``
    leaked 1)."""
    a = Worker(redis_client, store, "a", fetched, budget=3)
    b = Worker(redis_client, store, "b", fetched, budget=3)
    a.push(urls("h", 5), now=0)  # h/0, h/1 hot; h/2..h/4 spilled
    assert a.step(0, lease_timeout=5)[0][0] == "http://h/0"  # its lease ends at 5
    a.run_moves(0)  # the spill: h/2..h/4 in the store
    a.push(urls("x", 2), now=0)
    (h1,) = a.step(0)
    assert h1[0] == "http://h/1"  # h's queue is empty: A gets its refill lease
    assert [(h, room) for h, _, room, _ in a.grants] == [("h", 1)]  # the budget's last place
    # t=6: h/0's lease expired, so h/0 is back in h's queue. B pops it and x's two, and h
    # waits for a refill again.
    popped = b.step(6, pop=3)
    assert sorted(u for u, _ in popped) == ["http://h/0", "http://x/0", "http://x/1"]
    check(redis_client, store)  # reserved: A's lease's room alone
    assert b.grants == []  # A's lease (until 10) is live
    a.run_moves(6)  # A's scan returns; its refill moves h/2 up and ends its lease
    assert redis_client.zcard(K.host_queue("h")) == 1
    check(redis_client, store)
    drain(a, 100, acks=[h1[1], *(lease for _, lease in popped)])
    assert fetched == Counter(urls("h", 5) + urls("x", 2) + ["http://h/0"])  # h/0: expired
    assert_drained(redis_client, store)


def test_a_late_spill_write_after_a_refill_is_never_refilled(redis_client, store, fetched):
    """Finding 2: W2 checked its claim of h's spilled requests, but its store write is
    slow and the claim expires. W1 claims them again, stores them, and refills two into
    h's queue. Then W2's write lands. Its claim is dead: its SPILLED takes nothing out,
    and its rows are neither counted nor refilled (before the fix: h/2 and h/3 were
    fetched twice)."""
    w1 = Worker(redis_client, store, "w1", fetched)
    w2 = Worker(redis_client, store, "w2", fetched)
    w1.push(urls("h", 5), now=0)  # h/0, h/1 hot; h/2..h/4 spilled
    ((_, lease0),) = w2.step(0)  # h/0, and a claim of the spill set until 10
    ((w2_claim, _),) = w2.spills
    w2.step(1, pop=0, acks=[lease0])
    leases = []

    def meanwhile() -> None:  # W2's claim was live when it checked it, at 1
        ((_, lease1),) = w1.step(11)  # h/1; the expired claim is taken again
        assert not redis_client.sismember(K.spill_live, w2_claim)  # dead
        w1.run_moves(11)  # stored, out of the spill set
        assert w1.step(12, acks=[lease1]) == [] and len(w1.grants) == 1
        w1.run_moves(12)  # refilled: h/2, h/3 into h's queue
        assert redis_client.zcard(K.host_queue("h")) == 2
        leases.append(lease1)

    store.before_put = meanwhile
    w2.run_moves(1)  # the late write: h/2..h/4 in the store again, under w2's claim
    assert leases and len(store.frontier_scan(crawl_prefix("t"), 10)) == 4
    check(redis_client, store)
    popped = w1.step(14, pop=2)
    assert [u for u, _ in popped] == ["http://h/2", "http://h/3"]
    w1.run_moves(14)  # the refill scans w2's rows of h/2 and h/3 first: garbage
    assert hot_urls(redis_client, "h") == []  # before the fix: h/2, h/3 queued again
    check(redis_client, store)
    drain(w1, 100, acks=[lease for _, lease in popped])
    assert fetched == Counter(urls("h", 5))
    assert_drained(redis_client, store)


def test_a_partly_reclaimed_claim_is_dead_and_its_spilled_takes_nothing(
    redis_client, store, fetched, monkeypatch
):
    """Finding 3: only part of W2's expired claim is claimed again (a batch of 3: one
    new entry comes first). W2's claim is dead all the same, and its late SPILLED must
    not take out the entry still claimed under it. The first fix did, and here that
    gives "host c: cold count 4, but 3 in the spill set and store", and c/3 is never
    fetched."""
    monkeypatch.setattr(queue_module, "SPILL_BATCH", 3)  # the simulation's batch
    w1 = Worker(redis_client, store, "w1", fetched)
    w2 = Worker(redis_client, store, "w2", fetched)
    w1.push(urls("c", 4), now=0)  # c/0, c/1 hot; c/2, c/3 spilled
    ((_, lease0),) = w2.step(0)  # c/0, and a claim of c/2, c/3 until 10
    ((w2_claim, w2_entries),) = w2.spills
    assert len(w2_entries) == 2
    w2.step(1, pop=0, acks=[lease0])
    w1.push(urls("c", 2, start=4), now=11)  # a spill set of 3 or more: a push claims it
    ((_, w1_entries),) = w1.spills
    assert len(w1_entries) == 3  # c/4, c/5 (unclaimed), and c/2 of w2's two
    assert not redis_client.sismember(K.spill_live, w2_claim)  # dead
    w1.run_moves(11)
    w2.run_moves(12)  # the late write, under the dead claim
    check(redis_client, store)
    assert redis_client.hvals(K.spill_claim) == [w2_claim.encode()]  # c/3 waits for a claim
    assert redis_client.hget(K.spilling, "c") == b"1"
    drain(w1, 100)
    assert fetched == Counter(urls("c", 6))
    assert_drained(redis_client, store)


def test_a_refill_during_a_spill_of_its_host_leaves_that_spills_rows(redis_client, store, fetched):
    """Finding 4 (review R1): A's refill of h runs while one of h's requests is on its
    way to the store: B wrote its row, but its SPILLED is lost. REFILL moves h/2 (its
    claim is complete) and leaves B's row of h/3 in the store (its claim is in
    progress: if it expires, h/3 is stored again under another). Each URL is fetched
    once. (The first fix moved nothing while any request of h was on its way: a host
    whose pages keep finding links starved.)"""
    a = Worker(redis_client, store, "a", fetched)
    b = Worker(redis_client, store, "b", fetched)
    a.push(urls("h", 3), now=0)  # h/0, h/1 hot; h/2 spilled
    ((_, lease0),) = a.step(0)
    a.run_moves(0)  # h/2 in the store
    ((_, lease1),) = a.step(0, acks=[lease0])  # h's queue empties: A's refill lease
    assert [(h, room) for h, _, room, _ in a.grants] == [("h", 2)]
    b.push(["http://h/3"], now=0)  # h has cold requests: h/3 follows them
    assert b.step(0, acks=[lease1]) == [] and len(b.spills) == 1
    store.put_fails = "after"
    b.run_moves(0)  # h/3's row is written, but B never runs SPILLED
    store.put_fails = None
    assert redis_client.hget(K.spilling, "h") == b"1"
    a.run_moves(1)  # the scan reads h/2 and B's h/3: h/2 moves up
    assert hot_urls(redis_client, "h") == ["http://h/2"]
    assert a.tiers.stats.refilled == 1 and a.tiers.stats.refills == 1
    assert int(redis_client.get(K.reserved)) == 0 and not redis_client.exists(K.refill)
    assert [url_of(v) for _, v in store.frontier_scan(crawl_prefix("t"), 10)] == ["http://h/3"]
    check(redis_client, store)
    ((_, lease2),) = a.step(11)  # h/2; B's claim expired: A claims h/3
    a.run_moves(11)  # and stores it again
    check(redis_client, store)
    drain(a, 100, acks=[lease2])
    assert fetched == Counter(urls("h", 4))
    assert_drained(redis_client, store, dead_rows_left=True)  # B's row sorts after A's


def test_claim_tokens_of_two_workers_differ_even_if_the_counter_is_lost(
    redis_client, store, fetched
):
    """Finding 5: a claim's token is the worker's prefix and a counter. After a failover
    loses the counter, a second worker's claim gets the same counter value but not the
    same token. The first claim's death does not kill the second: its SPILLED takes its
    entries out."""
    a = Worker(redis_client, store, "a", fetched)
    b = Worker(redis_client, store, "b", fetched)
    a.push(urls("h", 4), now=0)  # h/0, h/1 hot; h/2, h/3 spilled
    popped = b.step(0, pop=2)  # h/0, h/1; b claims h/2, h/3 until 10
    ((b_claim, _),) = b.spills
    b.step(1, pop=0, acks=[lease for _, lease in popped])
    counter = int(b_claim.split(".")[-2])
    redis_client.set(K.lease_seq, counter - 1)  # a failover lost the claim's increment
    assert a.step(11) == []  # b's claim expired: a claims h/2, h/3 again
    ((a_claim, _),) = a.spills
    assert a_claim.split(".")[-2] == str(counter)  # the same counter value...
    assert a_claim != b_claim  # ...but another token
    live = {c.decode() for c in redis_client.smembers(K.spill_live)}
    assert live == {a_claim}  # b's is dead
    a.run_moves(11)
    assert not redis_client.exists(K.spill, K.spilling, K.spill_claim)  # a's claim was live
    b.run_moves(12)  # b's late write: dead
    check(redis_client, store)
    drain(a, 100)
    assert fetched == Counter(urls("h", 4))
    assert_drained(redis_client, store, dead_rows_left=True)


def far_revisit(worker: Worker, url: str, due: float) -> tuple:
    return ("k-" + url.rsplit("/", 1)[1], "h", 0, due, worker.queue.encode(Request(url)))


def test_a_lease_waits_for_its_far_revisit_and_is_fetched_again_if_it_is_lost(
    redis_client, store, fetched
):
    """Finding 6 (kill -9 lost revisits beyond the horizon): the lease of a page whose
    revisit is due beyond the horizon is not acknowledged until that revisit is stored.
    Here the store write fails and then the worker dies: its lease expires and the page
    is fetched again. The next fetch stores the revisit, and only then is its lease
    acknowledged."""
    a = Worker(redis_client, store, "a", fetched)
    a.push(["http://h/0"], now=0)
    ((url, lease),) = a.step(0)
    far = FarRevisits(a.queue.put_far_revisits)
    far.add(far_revisit(a, url, due=2e9))
    acks = [] if far.hold(lease) else [lease]  # Scheduler._step's rule: the page is done
    store.put_fails = "before"
    far.store()  # the store is down: the revisit is kept
    acks += far.released()
    a.step(1, pop=0, acks=acks)
    assert redis_client.zscore(K.leases, lease.split(":")[1]) == LEASE  # not acknowledged
    assert far.waiting() == [lease] and far.busy()  # renewed at each heartbeat
    assert store.frontier_scan(revisit_prefix("t"), 10) == []
    del a, far  # kill -9
    store.put_fails = None
    b = Worker(redis_client, store, "b", fetched)
    ((again, lease2),) = b.step(11)  # the lease expired: the page is fetched again
    assert again == url and fetched[url] == 2
    far2 = FarRevisits(b.queue.put_far_revisits)
    far2.add(far_revisit(b, url, due=2e9))
    assert far2.hold(lease2)
    assert far2.released() == []  # not before the revisit is stored
    far2.store()
    assert far2.released() == [lease2] and not far2.busy()
    assert len(store.frontier_scan(revisit_prefix("t"), 10)) == 1
    b.step(12, pop=0, acks=[lease2])
    assert not redis_client.exists(K.leases, K.leased)


@pytest.mark.parametrize("lost_at", [1, 2])  # A's next call: extend, or release
def test_a_revisit_mover_whose_lock_expired_leaves_the_next_movers_lock(
    redis_client, store, fetched, lost_at
):
    """Finding 8, in the revisit mover: A's lock expires while A is at its store scan
    (its first, or its second and last), and B takes the lock. A's extend and release
    leave B's lock alone. (RedisLock on its own is tested in tests/test_lock.py.)"""
    a = Worker(redis_client, store, "a", fetched)
    a.queue.put_far_revisits(
        [
            far_revisit(a, "http://h/0", due=1010.0),  # within the horizon
            far_revisit(a, "http://h/1", due=5000.0),
        ]
    )
    b_lock = RedisLock(redis_client, KEYS.revisit_mover, ttl=30, owner="b")

    def expire_and_take() -> None:
        redis_client.delete(KEYS.revisit_mover)  # A's key expires
        assert b_lock.acquire(now=1031.0)

    def later() -> None:
        store.before_scan = expire_and_take

    store.before_scan = expire_and_take if lost_at == 1 else later
    assert a.queue.move_revisits_up(50.0, now=1000.0, batch=1) == 1
    assert store.before_scan is None  # B took the lock
    assert b_lock.owned(now=1031.0)
    assert redis_client.get(KEYS.revisit_mover).decode().startswith(b_lock.token + "|")
    assert b_lock.release(now=1032.0)


def test_a_refill_the_replicas_did_not_confirm_deletes_nothing(redis_pair, store, fetched):
    """Finding 5, found by the simulation's failovers: a refill moves h's rows up, but
    the replica has not got that move (its link is held up) when the master dies.  The
    rows stay in the store until a refill is confirmed, so the promoted replica's crawl
    still fetches them (before the fix they were deleted: h/2..h/4 never fetched)."""
    master = redis_pair.master.client()
    w = Worker(master, store, "w", fetched, wait_replicas=1)
    w.push(urls("h", 5), now=0)  # h/0, h/1 hot; h/2..h/4 spilled
    w.step(0)  # h/0, and a claim of the spill set
    w.run_moves(0)  # stored, confirmed by the replica
    w.step(0)  # h/1: h's queue is empty, w gets its refill lease
    assert len(w.grants) == 1
    assert master.execute_command("WAIT", 1, 5000) == 1  # the replica has all of it
    redis_pair.link.hold()
    w.run_moves(1)  # REFILL moves h/2, h/3 up; its WAIT finds the replica behind
    assert len(store.frontier_scan(crawl_prefix("t"), 10)) == 3
    promoted = redis_pair.fail_over()  # the move is lost
    v = Worker(promoted, store, "v", fetched)
    check(promoted, store)
    drain(v, 30)  # leases and the refill lease expired
    assert {url: n for url, n in fetched.items() if n != 1} == {"http://h/0": 2, "http://h/1": 2}
    assert set(fetched) == set(urls("h", 5))
    assert_drained(promoted, store)


def test_a_spill_claim_a_failover_lost_writes_no_row(redis_pair, store, fetched, caplog):
    """Found by the simulation's failovers: a step claims h's spilled requests, and the
    master dies before its replica has the claim.  The worker, now on the promoted
    replica, checks its claim (CLAIMED) before it writes: lost, so nothing is written
    (before the fix its rows were written under a claim nobody knew: refilled besides
    the next claim's, and h/2..h/4 fetched twice)."""
    master = redis_pair.master.client()
    w = Worker(master, store, "w", fetched, wait_replicas=1)
    w.push(urls("h", 5), now=0)  # h/0, h/1 hot; h/2..h/4 in the spill set
    assert master.execute_command("WAIT", 1, 5000) == 1
    redis_pair.link.hold()
    w.step(0)  # h/0, and a claim of the spill set: on the master only
    assert len(w.spills) == 1
    promoted = redis_pair.fail_over()
    again = Worker(promoted, store, "w", fetched, wait_replicas=1)  # w, reconnected
    again.spills = w.spills
    with caplog.at_level("INFO", logger="webcrawl.frontier.tiers"):
        again.run_moves(1)
    assert store.frontier_scan(crawl_prefix("t"), 10) == []
    assert "is not live any more" in caplog.text
    check(promoted, store)
    # the promoted replica has no replica of its own: its moves to the store wait for one
    # (the next test); without WAIT, they go on
    drain(Worker(promoted, store, "v", fetched), 30)
    assert {url: n for url, n in fetched.items() if n != 1} == {"http://h/0": 2}
    assert set(fetched) == set(urls("h", 5))
    assert_drained(promoted, store)


def test_a_master_whose_replica_is_cut_off_deletes_no_store_copy(redis_pair, store, fetched):
    """FRONTIER_REDIS_WAIT_REPLICAS=1 and the master's one replica is cut off (it may come
    back behind, and be promoted): steps go on, confirmed by the replicas the master
    has, but a refill deletes no row and a spill writes none, as neither is confirmed
    by the replica asked for (before: WAIT asked for the replicas connected, none)."""
    master = redis_pair.master.client()
    w = Worker(master, store, "w", fetched, wait_replicas=1)
    w.push(urls("h", 5), now=0)  # h/0, h/1 hot; h/2..h/4 spilled
    w.step(0)  # h/0, and a claim of the spill set
    w.run_moves(0)  # stored: the replica confirmed the claim
    w.step(0)  # h/1, and h's refill lease
    redis_pair.link.cut()
    deadline = time.monotonic() + 10
    while master.info("replication")["connected_slaves"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    w.run_moves(1)  # REFILL moves h/2 and h/3 up, unconfirmed: the rows stay
    assert len(store.frontier_scan(crawl_prefix("t"), 10)) == 3
    w.push(urls("h", 3, start=5), now=2)  # confirmed by the replicas the master has
    assert w.step(2, pop=2)  # h/2, h/3; and a claim of h/5..h/7
    w.run_moves(2)  # the claim is not confirmed: nothing written
    assert len(store.frontier_scan(crawl_prefix("t"), 10)) == 3
    check(master, store)


def test_a_dead_claims_rows_are_never_refilled_even_a_day_later(redis_client, store, fetched):
    """Found by the review: W2's claim expires while its store write is slow, and the
    host drains meanwhile; then the write lands, in rows no refill scans.  A day later
    the host gets new links: a refill reads the old rows.  Only rows of completed claims
    move (spill_done): those are garbage, deleted (before: moved, fetched twice, and
    ``cold`` taken down for rows it never counted, stranding the new rows while the idle
    check said done)."""
    w1 = Worker(redis_client, store, "w1", fetched)
    w2 = Worker(redis_client, store, "w2", fetched)
    w1.push(urls("h", 5), now=0)  # h/0, h/1 hot; h/2..h/4 spilled
    ((_, lease0),) = w2.step(0)  # w2 claims h/2..h/4 until 10
    w2.step(1, pop=0, acks=[lease0])

    def meanwhile() -> None:  # w2's write is slow: the whole host drains meanwhile
        drain(w1, 11)

    store.before_put = meanwhile
    w2.run_moves(1)  # CLAIMED said live at 1; the rows land after the drain
    assert_drained(redis_client, store, dead_rows_left=True)
    day = 11 + 86401
    w1.push(urls("h", 6, start=10), now=day)  # h/10, h/11 hot; h/12..h/15 spilled
    drain(w1, day)
    assert fetched == Counter(urls("h", 5) + urls("h", 6, start=10))
    assert_drained(redis_client, store, dead_rows_left=True)
    assert w1.queue.counts(now=day) == (0, 0, 0)


def test_a_dead_claim_that_completes_a_day_later_takes_nothing(
    redis_client, store, fetched, monkeypatch
):
    """Found by the third review: claim A is partly claimed again (dead), and its worker
    stalls for over a day (a laptop asleep).  Dead marks were kept a day: A's SPILLED
    then completed it, for the entry still claimed under it, and a refill moved A's rows
    by count: the row of h/2, which claim B had stored, went up twice (``queued`` one
    too high for good) and h/3's row was deleted as garbage (never fetched).  A claim
    completes only while it is in ``spill_live``, which it leaves for good."""
    monkeypatch.setattr(queue_module, "SPILL_BATCH", 3)  # the simulation's batch
    w1 = Worker(redis_client, store, "w1", fetched)
    w2 = Worker(redis_client, store, "w2", fetched)
    w1.push(urls("h", 4), now=0)  # h/0, h/1 hot; h/2, h/3 spilled
    ((_, lease0),) = w2.step(0)  # h/0; w2 claims h/2, h/3 until 10 (claim A)
    ((a_claim, a_entries),) = w2.spills
    w2.spills.clear()  # w2 stalls before it stores them
    w2.step(1, pop=0, acks=[lease0])
    w1.push(urls("c", 4), now=11)  # c/2, c/3 spilled: a claim of 3, with one of A's
    ((_, b_entries),) = w1.spills
    assert len(set(b_entries) & set(a_entries)) == 1
    assert not redis_client.sismember(K.spill_live, a_claim)  # dead
    w1.run_moves(11)
    day = 11 + 86401
    w1.push(urls("d", 5), now=day)  # a fresh claim of three: A's other entry waits
    w1.run_moves(day)
    w2.tiers.spill(0, a_claim, a_entries, now=day)  # A's worker wakes up
    assert not redis_client.hexists(K.spill_done, a_claim)  # before the fix: 1
    check(redis_client, store)
    drain(w1, day + 1)
    assert fetched == Counter(urls("h", 4) + urls("c", 4) + urls("d", 5))
    assert_drained(redis_client, store, dead_rows_left=True)
    assert w1.queue.counts(now=day + 1000) == (0, 0, 0)


def test_a_page_in_progress_when_a_step_was_not_confirmed_is_fetched_again(redis_pair):
    """Found by the review: a page's link leaves in a step the replicas do not confirm
    while the page is still in progress; the page finishes later.  Its lease is left
    to expire (before: acknowledged two steps later, on a cluster possibly on another
    node, whose failover does not take the ack back with the link)."""
    master = redis_pair.master.client()
    queue = HostQueue(master, S(), KEYS, wait_replicas=1, wait_timeout=0.2)
    outbox = Outbox(queue, FarRevisits(lambda rows: None))
    outbox.pushes.append(push("http://h/0", queue))
    outbox.step(pop=0, now=0)
    ((_, lease),) = outbox.step(pop=1, now=0).result.popped  # h/0 in progress
    redis_pair.link.hold()
    outbox.pushes.append(push("http://h/1", queue))  # a link of h/0
    sent = outbox.step(pop=0, in_progress=[lease], now=1)
    assert sent.result.unconfirmed and sent.unreplicated == 1
    outbox.finished(lease)
    for _ in range(3):
        outbox.step(pop=0, now=2)
    assert master.zscore(K.leases, lease.partition(":")[2]) is not None  # not acked
    assert not outbox.pending()


def test_a_stale_lease_after_a_failover_names_no_other_workers_lease(redis_pair, store, fetched):
    """Found by the simulation's failovers: a pop the replica had not got is lost with
    the lease counter's increment; the next pop on the promoted replica counts the same
    number.  Lease ids carry their worker's prefix: the first worker's ack of its stale
    lease leaves the second's lease alone (before: it acknowledged it, and the request
    was lost if that worker died)."""
    master = redis_pair.master.client()
    a = Worker(master, store, "a", fetched)
    a.push(urls("h", 2), now=0)
    assert master.execute_command("WAIT", 1, 5000) == 1
    redis_pair.link.hold()
    ((_, stale),) = a.step(0)  # on the master only
    promoted = redis_pair.fail_over()
    b = Worker(promoted, store, "b", fetched)
    ((_, lease),) = b.step(1)
    assert stale != lease and stale.split(".")[-2] == lease.split(".")[-2]
    Worker(promoted, store, "a", fetched).step(2, pop=0, acks=[stale])  # a, reconnected
    assert promoted.zscore(K.leases, lease.partition(":")[2]) is not None


def test_a_workers_own_stale_lease_after_a_failover_names_none_of_its_new_leases(
    redis_pair, store, fetched
):
    """Found by the second review: a failover loses a worker's pop, and with it the lease
    counter's increment; the same worker's next pop counts the same number.  Each step
    adds its own part to the ids it makes, so the worker's ack of its stale lease leaves
    its new one alone (before: its prefix alone kept ids apart between workers only)."""
    master = redis_pair.master.client()
    w = Worker(master, store, "w", fetched)
    w.push(["http://h/0"], now=0)
    assert master.execute_command("WAIT", 1, 5000) == 1
    redis_pair.link.hold()
    ((_, stale),) = w.step(0)  # on the master only
    promoted = redis_pair.fail_over()
    again = Worker(promoted, store, "w", fetched)  # w, reconnected, with its memory
    again.queue._steps = w.queue._steps
    ((_, lease),) = again.step(1)  # h/0 again: its pop was lost
    assert stale != lease
    again.step(2, pop=0, acks=[stale])
    assert promoted.zscore(K.leases, lease.partition(":")[2]) is not None


def test_a_refill_that_kept_rows_of_a_claim_completed_meanwhile_asks_again(
    redis_client, store, fetched, monkeypatch
):
    """Found by the second review: W1's refill of h scans only rows of W2's claim, in
    progress, and moves nothing.  Before its REFILLED, W2's SPILLED completes the claim
    and asks for h, and W3's step takes h off the wait list (its refill lease is still
    live) without granting it.  REFILLED asks again, as the claim is done (before: it
    did not, and h's rows stayed in the store for good)."""
    monkeypatch.setattr(queue_module, "SPILL_BATCH", 3)
    w1, w2, w3 = (Worker(redis_client, store, n, fetched) for n in ("w1", "w2", "w3"))
    w1.push(urls("h", 4), now=0)  # h/0, h/1 hot; h/2, h/3 spilled
    ((_, lease0),) = w2.step(0)  # h/0; w2 claims h/2, h/3
    w1.push(urls("h", 1, start=4), now=0)  # h/4 spilled
    ((_, lease1),) = w1.step(0)  # h/1; w1 claims h/4
    claim, entries = w2.spills.pop(0)
    w1.run_moves(0)  # h/4 stored: h wants a refill
    store.put_fails = "after"  # w2 wrote its rows; its SPILLED comes later
    w2.tiers.spill(0, claim, entries, now=0)
    store.put_fails = None
    w1.step(1, pop=1, acks=[lease1])  # w1's refill lease for h
    refilled = scripts.REFILLED.run

    def meanwhile(router, keys, args):
        monkeypatch.setattr(scripts.REFILLED, "run", refilled)
        scripts.SPILLED.run(w2.queue.router, keys, ["1.0", 2, claim, *entries])
        w3.step(1, pop=1)  # takes h off the wait list: its lease is live
        return refilled(router, keys, args)

    monkeypatch.setattr(scripts.REFILLED, "run", meanwhile)
    w1.run_moves(1)  # scans h/2, h/3 (w2's claim, in progress): moves nothing
    drain(w1, 50, acks=[lease0])
    assert set(fetched) == set(urls("h", 5))
    assert w1.queue.counts(now=50) == (0, 0, 0)


class _ReplyLostOnce(redis.Connection):
    """A connection whose next reply, once armed, is read and then lost: redis-py's
    retry (CrawlRedis gives clients one) sends the call again, and it runs twice."""

    lose = False

    def read_response(self, *args, **kwargs):
        reply = super().read_response(*args, **kwargs)
        if _ReplyLostOnce.lose:
            _ReplyLostOnce.lose = False
            raise redis.TimeoutError("reply lost")
        return reply


def test_a_step_sent_again_after_a_lost_reply_makes_new_lease_ids(redis_server, store, fetched):
    """Found by the review of ids counted in the call: a STEP run twice (its reply lost,
    redis-py sent it again with the same arguments) must not make the lease ids of its
    first run again: its HSET would overwrite the first run's lease, whose request was
    already out of its host queue, and that request would be lost.  One lease_seq
    increment per call keeps them apart; the first run's lease expires and is fetched."""
    client = redis.Redis.from_url(redis_server.url, retry=Retry(NoBackoff(), 1))
    client.connection_pool.connection_class = _ReplyLostOnce
    client.flushall()
    w = Worker(client, store, "w", fetched)
    w.push(urls("h", 2), now=0)
    w.queue.look(now=1)  # (so that the step's pipeline is its STEP call alone)
    _ReplyLostOnce.lose = True
    ((_, lease),) = w.step(1)  # runs twice: h/0 leased, then h/1
    assert client.hlen(K.leased) == 2  # both leases, neither overwritten
    w.step(2, pop=0, acks=[lease])
    drain(w, 100)  # the first run's lease expires: its request comes back
    assert set(fetched) == set(urls("h", 2))
    assert_drained(client, store)
    client.close()


def test_a_refill_that_keeps_more_rows_than_lua_can_unpack_completes(redis_client):
    """Found by the review of 22a145c: REFILL returned ``{n, unpack(keep)}``, and Lua's
    unpack fails past ~8 000 values, so a refill that kept more rows of claims still in
    progress (FRONTIER_HOT_PER_HOST of 8 000 or more) failed after it had moved its rows
    up; its lease then held the room and the store rows were asked for again."""
    keys = CrawlKeys("t", 1)
    k = keys.shard(0)
    room = 9000
    redis_client.set(k.reserved, room)  # as the grant left it
    redis_client.hset(k.refill, "h", f"tok|{room}|1")  # one row stored of h
    redis_client.hset(k.cold, "h", 8001)
    redis_client.set(k.cold_total, 8001)
    redis_client.hset(k.spill_done, "D", 1)  # a completed claim of one row
    redis_client.sadd(k.spill_live, "L")  # a claim in progress: its rows are kept
    args = ["0", "h", "tok", room, "0", "t/0000/h/x/1/D", "0", "00000000000000100001|d"]
    for i in range(8000):
        args += [f"t/0000/h/x/{i + 2}/L", "0", f"{i:020d}|l"]
    reply = scripts.REFILL.run(scripts.ShardRouter(redis_client, keys), k, args)
    assert reply[0] == 1 and len(reply) == 8001
    assert redis_client.zcard(k.host_queue_prefix + "h") == 1
    assert redis_client.get(k.queued) == b"1" and redis_client.get(k.reserved) == b"0"
