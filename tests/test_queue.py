"""The shared queue's Lua scripts against a real Redis."""

import collections
import enum
import hashlib
import itertools
import math
import subprocess
import time

import pytest
import redis
from conftest import free_port
from scrapy import FormRequest, Request, Spider

from webcrawl.frontier import members, scripts
from webcrawl.frontier.bloom import BloomParams
from webcrawl.frontier.entry import DEFAULT_REQUEST_CLASSES, EntryRules
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.ownership import owned
from webcrawl.frontier.queue import HELP_AFTER, LOOKERS, MAX_PRIORITY, HostQueue
from webcrawl.frontier.workers import WorkerRegistry, popping, worker_info


class S(Spider):
    name = "s"


def make(redis_client, shards=16):
    keys = CrawlKeys("t", shards)
    return HostQueue(redis_client, S(), keys), keys


def total(redis_client, keys, command, name):
    """``command`` (SCARD, ZCARD...) of the key ``name`` summed over the shards."""
    return sum(redis_client.execute_command(command, getattr(k, name)) for k in keys.all_shards())


def entry(queue, url, priority=0, fp=None, wait=0.0):
    request = Request(url, priority=priority)
    host = url.split("/")[2]
    return (
        fp if fp is not None else url.encode(),
        host,
        priority,
        wait,
        queue.encode(request),
    )


def drain(queue, now=1000.0, **kw):
    urls = []
    while (r := queue.step(now=now, **kw).request) is not None:
        urls.append(r.url)
    return urls


def test_batch_push_dedups_in_one_round_trip(redis_client):
    queue, keys = make(redis_client)
    pushes = [entry(queue, "http://a/1"), entry(queue, "http://a/2"), entry(queue, "http://a/1")]
    assert queue.step(now=1, pushes=pushes, pop=False).added == 2
    pushes = [entry(queue, "http://a/2"), entry(queue, "http://b/3")]
    assert queue.step(now=1, pushes=pushes, pop=False).added == 1
    assert len(queue) == 3
    assert total(redis_client, keys, "SCARD", "seen") == 3
    # dont_filter (empty fingerprint) bypasses the set, and identical requests stay apart
    pushes = [entry(queue, "http://a/1", fp=b""), entry(queue, "http://a/1", fp=b"")]
    assert queue.step(now=1, pushes=pushes, pop=False).added == 2
    assert len(queue) == 5


def test_duplicates_are_found_before_the_step_sends_their_requests(redis_client):
    """With many fingerprints in a step, Redis is asked first which it has (one command per
    shard): only the new requests go to the step script; the outcome is the same."""
    queue, keys = make(redis_client)
    known = [entry(queue, f"http://h{i}/a") for i in range(30)]
    assert queue.step(now=1, pushes=known, pop=False).added == 30
    scripts = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    fresh = [entry(queue, f"http://h{i}/b") for i in range(10)]
    again = [entry(queue, "http://h1/c", fp=b""), *known, *fresh]  # dont_filter: always
    result = queue.step(now=1, pushes=again, pop=False)
    # one script call per shard that got a new request, none for shards of duplicates only
    shards = {keys.shard_of(e[1]) for e in [again[0], *fresh]}
    assert redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - scripts == len(shards)
    assert (result.known, result.added) == (30, 11)
    assert total(redis_client, keys, "SCARD", "seen") == 40 and len(queue) == 41
    # mostly new links: not worth the extra round trip, the script alone decides
    for step in range(10):
        new = [entry(queue, f"http://h{i}/{step}") for i in range(20)]
        assert queue.step(now=1, pushes=new, pop=False).added == 20
    stats = redis_client.info("commandstats")
    checks, scripts = stats["cmdstat_smismember"]["calls"], stats["cmdstat_evalsha"]["calls"]
    queue.step(now=1, pushes=[entry(queue, f"http://h{i}/x") for i in range(20)], pop=False)
    stats = redis_client.info("commandstats")
    # (each script call asks the seen set once itself: no lookup beyond those)
    calls = stats["cmdstat_evalsha"]["calls"] - scripts
    assert stats["cmdstat_smismember"]["calls"] - checks == calls > 0


def test_bloom_duplicates_are_found_before_the_step_too(redis_client):
    queue, _ = make(redis_client, shards=2)
    params = BloomParams(10_000, 0.001)

    def bloom_entry(url):
        fp = ",".join(map(str, params.offsets(hashlib.sha1(url.encode()).digest()))).encode()
        return (fp, url.split("/")[2], 0, 0.0, queue.encode(Request(url)))

    first = [bloom_entry(f"http://h{i}/a") for i in range(30)]
    assert queue.step(now=1, pushes=first, pop=False, seen_mode="bloom").added == 30
    again = [*first, *(bloom_entry(f"http://h{i}/b") for i in range(5))]
    result = queue.step(now=1, pushes=again, pop=False, seen_mode="bloom")
    assert (result.known, result.added) == (30, 5)
    assert len(queue) == 35


@pytest.mark.parametrize("mode", ["set", "bloom"])
def test_a_steps_own_duplicates_are_taken_once(redis_client, mode):
    """A fingerprint twice in one step, or (Bloom) one whose bits the step's earlier URLs
    set, is taken once: the step's own additions count as seen."""
    queue, keys = make(redis_client, shards=1)
    if mode == "bloom":
        fps = [b"1,2,3", b"3,2,1", b"1,2,4", b"5,5", b"1,2,3", b"4,5"]
    else:
        fps = [b"a", b"a", b"b", b"c", b"a", b"c"]
    pushes = [entry(queue, f"http://h/{i}", fp=fp) for i, fp in enumerate(fps)]
    assert queue.step(now=1, pushes=pushes, pop=False, seen_mode=mode).added == 3
    assert len(queue) == 3
    assert queue.step(now=1, pushes=pushes, pop=False, seen_mode=mode).added == 0
    (shard,) = keys.all_shards()
    if mode == "bloom":
        bits = redis_client.get(shard.bloom)
        assert [n for n in range(8 * len(bits)) if bits[n // 8] >> (7 - n % 8) & 1] == [
            1,
            2,
            3,
            4,
            5,
        ]
    else:
        assert redis_client.smembers(shard.seen) == {b"a", b"b", b"c"}


def test_a_call_of_thousands_of_pushes_looks_them_up_in_parts(redis_client):
    """The script asks the seen set for at most 1 000 fingerprints a command (Lua's unpack
    takes no more than ~8 000 values): what each part found is the right push's."""
    queue, keys = make(redis_client, shards=1)
    queue._precheck = False  # every push reaches the script
    urls = [f"http://h{i % 7}/{i}" for i in range(2500)]
    old = urls[5::3]  # known before, in every part
    assert queue.step(now=1, pushes=[entry(queue, u) for u in old], pop=False).added == len(old)
    result = queue.step(now=1, pushes=[entry(queue, u) for u in urls], pop=False)
    assert result.added == len(urls) - len(old)
    assert len(queue) == len(urls)
    (shard,) = keys.all_shards()
    assert redis_client.scard(shard.seen) == len(urls)
    assert sorted(drain(queue)) == sorted(urls)


def test_a_call_that_pops_and_acks_a_thousand_leases_does_it_in_rounds(redis_client):
    """A call pops ready hosts in rounds of at most 500 and acks in
    parts of 1 000: every host comes out once, its lease is kept, then acked."""
    queue, keys = make(redis_client, shards=1)
    urls = [f"http://h{i}/{page}" for page in "ab" for i in range(1300)]
    assert queue.step(now=1, pushes=[entry(queue, u) for u in urls], pop=False).added == 2600
    result = queue.step(now=2, pop=1300)
    assert result.calls == 1
    assert sorted(r.url for r, _ in result.popped) == sorted(urls[:1300])
    (shard,) = keys.all_shards()
    assert redis_client.zcard(shard.leases) == redis_client.hlen(shard.leased) == 1300
    assert redis_client.zcard(shard.ready) == 1300  # each still has its page b
    queue.step(now=3, acks=[lease for _, lease in result.popped], pop=False)
    assert redis_client.zcard(shard.leases) == redis_client.hlen(shard.leased) == 0
    assert sorted(drain(queue)) == sorted(urls[1300:])
    assert redis_client.zcard(shard.ready) == 0


def test_a_fingerprint_sent_as_text_and_as_bytes_is_taken_once(redis_client):
    """Redis sees one fingerprint whatever type the caller used: the step takes it once
    (the script trusts the client to send each fingerprint once a call)."""
    queue, _ = make(redis_client, shards=1)
    pushes = [entry(queue, "http://h/x", fp=b"x"), entry(queue, "http://h/x", fp="x")]
    assert queue.step(now=1, pushes=pushes, pop=False).added == 1
    assert len(queue) == 1


def test_an_over_budget_link_pushed_twice_in_a_step_counts_once(redis_client):
    keys = CrawlKeys("t", 1)
    queue = HostQueue(redis_client, S(), keys, max_pages_per_host=1)
    pushes = [entry(queue, "http://h/a"), entry(queue, "http://h/b"), entry(queue, "http://h/b")]
    result = queue.step(now=1, pushes=pushes, pop=False)
    assert (result.added, result.over_budget) == (1, 1)
    (shard,) = keys.all_shards()
    assert redis_client.smembers(shard.seen) == {b"http://h/a"}
    assert redis_client.smembers(shard.over_budget) == {b"h"}


def test_a_redis_without_smismember_still_filters_in_the_script(tmp_path):
    """Before Redis 6.2 there is no SMISMEMBER: the pre-check is given up (logged once), the
    step script finds the duplicates as before.  (A real server with the command renamed
    away, as ``rename-command`` does for an operator.)"""
    from webcrawl.frontier.embedded_redis import redis_server_binary

    port = free_port()
    server = subprocess.Popen(
        [
            redis_server_binary(),
            "--port",
            str(port),
            "--save",
            "",
            "--dir",
            str(tmp_path),
            "--rename-command",
            "SMISMEMBER",
            "",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        queue, _ = make(client)
        pushes = [entry(queue, f"http://h{i}/a") for i in range(30)]
        assert queue.step(now=1, pushes=pushes, pop=False).added == 30
        result = queue.step(now=1, pushes=pushes, pop=False)
        assert (result.known, result.added) == (0, 0) and not queue._precheck
        # a call of thousands, over several parts, with a page budget: the same outcome
        keys = CrawlKeys("u", 1)
        queue = HostQueue(client, S(), keys, max_pages_per_host=300)
        urls = [f"http://h{i % 7}/{i}" for i in range(2500)]
        old = urls[5::3]
        first = queue.step(now=1, pushes=[entry(queue, u) for u in old], pop=False)
        result = queue.step(now=1, pushes=[entry(queue, u) for u in urls + old], pop=False)
        assert first.added + result.added == len(queue) == 7 * 300
        assert result.over_budget == len(urls) - 7 * 300
        (shard,) = keys.all_shards()
        assert client.scard(shard.seen) == 7 * 300
        client.close()
    finally:
        server.terminate()
        server.wait()


def test_priority_then_fifo_within_a_host(redis_client):
    queue, _ = make(redis_client)
    urls = [
        ("http://a/low1", -1),
        ("http://a/high", 5),
        ("http://a/mid1", 0),
        ("http://a/low2", -1),
        ("http://a/mid2", 0),
        ("http://a/huge", 10**9),
    ]
    for url, prio in urls:  # one at a time: order across batches is kept too
        queue.step(now=1, pushes=[entry(queue, url, prio)], pop=False)
    assert drain(queue) == [
        "http://a/huge",
        "http://a/high",
        "http://a/mid1",
        "http://a/mid2",
        "http://a/low1",
        "http://a/low2",
    ]


def test_a_score_is_the_priority_and_the_sequence_number_orders_within_it(redis_client):
    """A host queue's score is -priority (clamped to MAX_PRIORITY), exactly; its requests
    of one priority pop in the order pushed, whatever the step call they came in, since
    a member starts with its 20-digit sequence number: the call's (the shard's counter)
    and its place in the call (members.py)."""
    queue, keys = make(redis_client, shards=1)
    (shard,) = keys.all_shards()
    prios = [MAX_PRIORITY + 5, -MAX_PRIORITY, 10**9, -(10**9), 1, 0]
    pushes = [entry(queue, f"http://a/{i}", p) for i, p in enumerate(prios)]
    pushes.append(entry(queue, "http://a/again", MAX_PRIORITY, fp=b""))  # dont_filter
    queue.step(now=1, pushes=pushes, pop=False)
    scored = redis_client.zrange(shard.host_queue("a"), 0, -1, withscores=True)
    clamp = [max(-MAX_PRIORITY, min(MAX_PRIORITY, p)) for p in prios] + [MAX_PRIORITY]
    by_url = {queue.decode(m).url: (m, score) for m, score in scored}
    urls = [f"http://a/{i}" for i in range(len(prios))] + ["http://a/again"]
    assert [by_url[u][1] for u in urls] == [-p for p in clamp]
    assert [by_url[u][0][:21] for u in urls] == [b"000000000000001%05d|" % i for i in range(1, 8)]
    # one priority, pushed over three calls (the shard's counter past 10**12): in order
    redis_client.set(shard.seq, 10**12 - 2)
    for n in range(3):
        batch = [entry(queue, f"http://b/{n}-{i}", -3) for i in range(12)]
        queue.step(now=1, pushes=batch, pop=False)
    queued = [queue.decode(m).url for m in redis_client.zrange(shard.host_queue("b"), 0, -1)]
    assert queued == [f"http://b/{n}-{i}" for n in range(3) for i in range(12)]


def test_a_shards_pushes_past_a_numbers_limit_take_more_numbers_in_one_call(
    redis_client, monkeypatch
):
    """More pushes for a shard than one call number holds (members.PUSHES_PER_CALL) take
    more numbers, in the same call (all or nothing): every one is queued, first pushed
    first popped."""
    monkeypatch.setattr(members, "PUSHES_PER_CALL", 4)
    queue, keys = make(redis_client, shards=1)
    (shard,) = keys.all_shards()
    pushes = [entry(queue, f"http://a/{i}") for i in range(10)]
    pushes += [entry(queue, "http://a/0", fp=b"")] * 3  # dont_filter: kept apart
    result = queue.step(now=1, pushes=pushes, pop=False)
    assert result.added == 13 and result.calls == 1
    assert int(redis_client.get(shard.seq)) == 4  # ceil(13 / 4) numbers
    assert drain(queue, now=1) == [f"http://a/{i}" for i in range(10)] + ["http://a/0"] * 3


def test_a_shard_out_of_call_numbers_refuses_pushes(redis_client):
    """Past 10**15 call numbers a shard's pushes and due revisits fail, said so, rather
    than sort before older requests (members.py)."""
    queue, keys = make(redis_client, shards=1)
    (shard,) = keys.all_shards()
    redis_client.set(shard.seq, 10**15 - 1)
    with pytest.raises(redis.ResponseError, match="used every call number"):
        queue.step(now=1, pushes=[entry(queue, "http://a/1")], pop=False)
    # nor does a revisit come due then: it stays in the schedule
    redis_client.set(shard.seq, 10**15 - 1)
    queue.step(now=1, revisits=[("k", "a", 0, 5.0, queue.encode(Request("http://a/r")))], pop=False)
    with pytest.raises(redis.ResponseError, match="used every call number"):
        queue.step(now=10)
    assert redis_client.zcard(shard.revisits) == 1


def test_priorities_of_int_subclasses_go_to_redis_as_ints(redis_client):
    """Scrapy takes any int as a priority; redis-py's C packer (hiredis) refuses int
    subclasses, which would fail every step of the worker holding such a push."""

    class Level(enum.IntEnum):
        HIGH = 3

    queue, _ = make(redis_client)
    pushes = [entry(queue, "http://a/low", 0), entry(queue, "http://a/high", Level.HIGH)]
    pushes[1] = (pushes[1][0], "a", Level.HIGH, 0.0, pushes[1][4])
    revisit = ("k", "a", Level.HIGH, 5.0, queue.encode(Request("http://a/again")))
    result = queue.step(now=1, pushes=pushes, revisits=[revisit], pop=False)
    assert not result.failed and result.added == 2
    assert drain(queue) == ["http://a/high", "http://a/again", "http://a/low"]


def test_a_host_is_handed_out_once_per_delay_across_workers(redis_client):
    queue, _ = make(redis_client)
    queue.step(now=100, pop=False, pushes=[entry(queue, f"http://a/{i}") for i in range(3)])
    first = queue.step(now=100, default_delay=2.0)
    assert first.request.url == "http://a/0"
    other = queue.step(now=101, default_delay=2.0)  # another worker, too early
    assert other.request is None and other.next_ready == 1.0  # seconds until a is ready
    assert queue.step(now=102, default_delay=2.0).request.url == "http://a/1"
    # a per-host delay overrides the default
    queue.set_delay("a", 10.0)
    assert queue.step(now=103, default_delay=2.0).request is None
    assert queue.step(now=104, default_delay=2.0).request.url == "http://a/2"
    # the hard check at send time: the host's last send is remembered, even while
    # its queue is empty, and a send too early is told how long to wait
    assert queue.turns.acquire("a", now=104.5, default_delay=2.0) == 0.0
    assert queue.turns.acquire("a", now=110.0, default_delay=2.0) == pytest.approx(4.5)
    queue.step(now=110, pushes=[entry(queue, "http://a/3")], pop=False)
    assert queue.step(now=110).next_ready == 4.5
    # an answer that came in later than the turn pushes the next turn back
    queue.turns.release("a", now=113.0, default_delay=2.0)  # host a's own delay is 10 s
    assert queue.turns.acquire("a", now=114.5, default_delay=2.0) == pytest.approx(8.5)
    queue.turns.release("a", now=100.0, default_delay=2.0)  # an earlier answer changes nothing
    assert queue.turns.acquire("a", now=123.0, default_delay=2.0) == 0.0
    assert queue.turns.acquire("b", now=110.0, default_delay=0.0) == 0.0  # no delay, no wait
    assert queue.turns.acquire("b", now=110.0, default_delay=0.0) == 0.0


def test_a_turn_is_held_until_its_answer_whatever_the_delay(redis_client):
    """A host sees no second request while one is in flight, whichever worker sends it:
    the next turn counts the delay from the answer (or from the hold's expiry).  The
    frontier still pops the host at its next turn (the request then waits for the hold)."""
    queue, keys = make(redis_client)
    queue.step(now=100, pop=False, pushes=[entry(queue, f"http://a/{i}") for i in range(4)])
    assert queue.step(now=100, default_delay=1.0).request.url == "http://a/0"
    assert queue.turns.acquire("a", now=100.2, default_delay=1.0, holder="w1/1", hold=30.0) == 0.0
    # a slow answer: past the delay, no other worker's request leaves
    wait = queue.turns.acquire("a", now=102.0, default_delay=1.0, holder="w2/1", hold=30.0)
    assert wait == pytest.approx(1.0)  # asks again in about a delay
    # a release by another holder (one whose hold expired) does not end this one
    queue.turns.release("a", now=103.0, default_delay=1.0, holder="w2/0")
    assert queue.turns.acquire("a", now=104.5, default_delay=1.0, holder="w2/1", hold=30.0) > 0
    # the holder renews the hold while its request is in flight
    queue.renew([], 30.0, holds=[("a", "w1/1")], now=125.0)
    assert queue.turns.acquire("a", now=140.0, default_delay=1.0, holder="w2/1", hold=30.0) > 0
    # the answer: the delay counts from it
    queue.turns.release("a", now=141.0, default_delay=1.0, holder="w1/1")
    assert queue.turns.acquire("a", now=141.5, default_delay=1.0, holder="w2/1", hold=30.0) > 0
    assert queue.turns.acquire("a", now=142.0, default_delay=1.0, holder="w2/1", hold=30.0) == 0.0
    # a holder killed in flight: the host comes back when its hold expires
    assert queue.turns.acquire("a", now=171.9, default_delay=1.0, holder="w3/1", hold=30.0) > 0
    assert queue.turns.acquire("a", now=172.0, default_delay=1.0, holder="w3/1", hold=30.0) == 0.0
    # a late release of the expired holder leaves the new hold alone
    queue.turns.release("a", now=173.0, default_delay=1.0, holder="w2/1")
    assert queue.turns.acquire("a", now=180.0, default_delay=1.0, holder="w4/1", hold=30.0) > 0
    holds = redis_client.hgetall(keys.shard_for("a").turn_holds)
    assert holds == {b"a": b"202 w3/1"}
    queue.clear()  # SCHEDULER_FLUSH_ON_START: no hold of the last crawl is left
    assert not redis_client.exists(keys.shard_for("a").turn_holds)


def test_hosts_take_turns(redis_client):
    """A host with many queued URLs does not hold up hosts with few."""
    queue, _ = make(redis_client, shards=1)
    pushes = [entry(queue, f"http://big/{i}") for i in range(100)]
    pushes += [entry(queue, f"http://small{h}/{i}") for h in range(3) for i in range(2)]
    queue.step(now=0, pushes=pushes, pop=False)
    hosts = []
    now = 0.0
    while len(hosts) < 12:
        result = queue.step(now=now, default_delay=1.0)
        if result.request is None:
            now += result.next_ready
            continue
        hosts.append(result.request.url.split("/")[2])
    assert hosts[:4] == ["big", "small0", "small1", "small2"]
    assert hosts[4:8] == ["big", "small0", "small1", "small2"]
    assert hosts[8:] == ["big"] * 4  # small hosts are done after two rounds


def test_a_worker_pops_its_own_shards_first_and_the_others_when_they_have_nothing(
    redis_client,
):
    queue, keys = make(redis_client, shards=4)
    hosts = {keys.shard_of(f"h{i}"): f"h{i}" for i in range(40)}  # a host in each shard
    assert sorted(hosts) == [0, 1, 2, 3]
    queue.step(
        now=0,
        pushes=[entry(queue, f"http://{h}/{i}") for h in hosts.values() for i in range(3)],
        pop=False,
    )
    queue.prefer(frozenset({1, 2}))
    popped = [queue.step(now=0, default_delay=10.0).request for _ in range(4)]
    shards = [keys.shard_of(r.url.split("/")[2]) for r in popped]
    assert sorted(shards[:2]) == [1, 2]  # its own, while they have a host ready
    assert sorted(shards[2:]) == [0, 3]  # then the others' (none starves)
    queue.prefer(frozenset())  # owning nothing: every shard in turn
    assert queue.step(now=20.0, default_delay=10.0, pop=4).popped


def test_a_worker_helps_with_a_shard_only_once_nobody_pops_it(redis_client):
    """Every shard always has work.  Another worker's shards get none of this one's pops
    while their owner keeps popping them (a helper's pages are pages whose links its seen
    cache does not know); once nobody has popped one for HELP_AFTER seconds (its owner
    dead, or draining to stop), this worker pops it too, and again only after another
    HELP_AFTER seconds without pops."""
    queue, keys = make(redis_client, shards=4)
    owner = HostQueue(redis_client, S(), keys)
    hosts = {}
    for i in range(400):  # ten hosts a shard
        hosts.setdefault(keys.shard_of(f"h{i}"), set()).add(f"h{i}")
        if min(map(len, hosts.values())) >= 10 and len(hosts) == 4:
            break
    pushes = [
        entry(queue, f"http://{h}/{i}") for hs in hosts.values() for h in hs for i in range(25)
    ]
    queue.step(now=0, pushes=pushes, pop=False)
    queue.prefer(frozenset({1, 2}))
    owner.prefer(frozenset({0, 3}))

    def shard_at(q, t):
        return keys.shard_of(q.step(now=t, default_delay=1.0).request.url.split("/")[2])

    mine = []
    for tenth in range(0, 200):  # 20 s: the owner pops its shards every half second
        t = tenth / 10
        mine.append(shard_at(queue, t))
        if tenth % 5 == 0:
            assert shard_at(owner, t) in (0, 3)
    assert set(mine) == {1, 2}
    mine = [shard_at(queue, 20 + tenth / 10) for tenth in range(0, 200)]  # the owner is gone
    helped = [i / 10 for i, s in enumerate(mine) if s in (0, 3)]
    assert mine.count(0) in (2, 3, 4) and mine.count(3) in (2, 3, 4)
    # first within HELP_AFTER of the owner's last pop and of the look after it; then each
    # no sooner than HELP_AFTER after the last
    assert helped[0] <= 2 * HELP_AFTER
    for shard in (0, 3):
        times = [i / 10 for i, s in enumerate(mine) if s == shard]
        assert all(b - a >= HELP_AFTER for a, b in itertools.pairwise(times))


def test_an_owner_that_pops_its_shard_when_due_gets_no_help_however_long_its_gaps(
    redis_client,
):
    """The owner's shard has one host, with a 10 s delay: it is due every 10 s, and the
    owner pops it then.  Its last pop is 10 s old when the host comes due again, but its
    work has not waited: a busy worker looking at it then does not take the host's
    turns (neglect counts from when work came due)."""
    queue, keys = make(redis_client, shards=4)
    owner = HostQueue(redis_client, S(), keys)
    queue._cursor = owner._cursor = 0
    hosts = {}
    for i in range(400):
        hosts.setdefault(keys.shard_of(f"h{i}"), []).append(f"h{i}")
    slow = hosts[0][0]  # the only host of shard 0
    pushes = [entry(queue, f"http://{slow}/{i}") for i in range(20)]
    for s in (1, 2, 3):
        pushes += [entry(queue, f"http://{h}/{i}") for h in hosts[s][:10] for i in range(60)]
    queue.step(now=0, pushes=pushes, pop=False)
    queue.set_delay(slow, 10.0, now=0)
    queue.prefer(frozenset({1, 2}))
    owner.prefer(frozenset({0, 3}))
    who = []
    for tenth in range(600):  # both step every 0.1 s, the helper first
        for name, q in (("helper", queue), ("owner", owner)):
            for request, _ in q.step(now=tenth / 10, default_delay=1.0).popped:
                if request.url.split("/")[2] == slow:
                    who.append(name)
    assert len(who) >= 5 and set(who) == {"owner"}, who


def _counting_calls(queue, script=scripts.PEEK):
    """The shards each look of ``queue`` asks (a PEEK each; or calls ``script``),
    appended to a list."""
    asked = []
    run = queue.router.run

    def counting(calls):
        asked.extend(c.shard for c in calls if c.script is script)
        return run(calls)

    queue.router.run = counting
    return asked


@pytest.mark.parametrize("workers", [1, 8, 40])
def test_a_busy_worker_asks_its_own_shards_each_second_and_the_others_in_a_round(
    redis_client, workers
):
    """A look asks each shard when it has work (a PEEK each).  While its own shards have
    work, a worker asks the others' in slices, a round over them each HELP_AFTER seconds,
    stretched by workers / LOOKERS past LOOKERS workers (the fleet's looks at a shard stay
    about LOOKERS a round), and its own only when it does not know them to have work now
    (its steps pop them and learn from the answers), each every HELP_AFTER / 2 seconds;
    once its own have nothing, it asks them at every look (each second) and the others'
    in a round of ``refresh``, stretched the same."""
    queue, keys = make(redis_client, shards=16)
    asked = _counting_calls(queue)
    own = keys.shard_of("a")
    empty = (own + 3) % 16  # its own too, with nothing
    queue.step(now=0, pushes=[entry(queue, f"http://a/{i}") for i in range(200)], pop=False)
    queue.prefer(frozenset({own, empty}), workers=workers)
    span = HELP_AFTER * max(1, workers / LOOKERS)
    looks = []
    for t in range(int(3 * span)):
        asked.clear()
        assert queue.step(now=t, default_delay=0.5).request is not None
        looks.append(list(asked))
    assert looks[0] == list(range(16))  # its first look asks every shard
    assert not any(own in look for look in looks[1:])  # it pops it each second
    times = [t for t, look in enumerate(looks) if empty in look]
    assert {b - a for a, b in itertools.pairwise(times)} == {math.ceil(HELP_AFTER / 2)}
    others = [[s for s in look if s not in (own, empty)] for look in looks[1:]]
    for shard in set(range(16)) - {own, empty}:  # each other shard once a round
        times = [t for t, look in enumerate(others, 1) if shard in look]
        assert times[0] <= span + 1
        assert all(span - 1 <= b - a <= span + 1 for a, b in itertools.pairwise(times)), times
    # ... and no more: 14 others a round, a slice each second
    assert max(map(len, others)) <= -(-14 // span) + 1
    asked.clear()  # after a round's time without a look, it asks every shard
    assert queue.step(now=int(3 * span) + span, default_delay=0.5).request is not None
    assert sorted(asked) == list(range(16))
    idle, _ = make(redis_client, shards=16)  # its own shards have nothing
    asked = _counting_calls(idle)
    idle.prefer(frozenset({(own + 1) % 16}), workers=workers)
    idle.step(now=0, pop=False)
    rounds = []
    for t in range(1, 1 + 2 * int(span)):
        asked.clear()
        idle.step(now=100 + t)
        rounds.append(len(asked))
    per_second = 1 + 15 / max(1, workers / LOOKERS)  # its own, a slice of the others
    assert sum(rounds) / len(rounds) == pytest.approx(per_second, rel=0.25)


def test_a_lone_worker_asks_its_empty_shards_every_few_seconds_while_busy(redis_client):
    """A worker that owns every shard (alone in the crawl) asks those it knows no work in
    each HELP_AFTER / 2 seconds while one keeps it busy, not every shard each second (128
    PEEKs a second, about one a page for a lone worker crawling a few hosts)."""
    queue, keys = make(redis_client, shards=16)
    asked = _counting_calls(queue)
    own = keys.shard_of("a")
    queue.step(now=0, pushes=[entry(queue, f"http://a/{i}") for i in range(100)], pop=False)
    queue.prefer(frozenset(range(16)), workers=1)
    looks = []
    for t in range(20):
        asked.clear()
        assert queue.step(now=t, default_delay=0.5).request is not None
        looks.append(sorted(asked))
    assert looks[0] == list(range(16))  # its first look asks every shard
    empty = sorted(set(range(16)) - {own})
    assert all(look in ([], empty) for look in looks[1:]), looks
    times = [t for t, look in enumerate(looks) if look]
    assert {b - a for a, b in itertools.pairwise(times)} == {math.ceil(HELP_AFTER / 2)}


def test_a_dead_owners_shard_gets_help_from_several_of_many_busy_workers(redis_client):
    """Forty workers over 80 shards, each busy with its own (every shard always has a host
    ready).  One owner stops popping (killed, or draining); until the registry would move
    its shards, the others help: several of them, soon after its work has waited
    HELP_AFTER seconds, each a step per HELP_AFTER once it found the neglect; while the
    owners of the other shards, which keep popping, get no help at all.  And a worker that
    is busy but underloaded (its own host comes due once a second) finds work in
    another's shard within a round of its looks (the next test)."""
    shards, n = 80, 40
    keys = CrawlKeys("t", shards)
    ids = [f"w{i:02}" for i in range(n)]
    queues = {}
    for i in ids:
        queues[i] = HostQueue(redis_client, S(), keys)
        queues[i].prefer(owned(i, ids, shards), workers=n)
    dead = ids[0]
    dead_shards = owned(dead, ids, shards)
    hosts = {}
    for i in range(50_000):  # three hosts a shard, a hundred in the dead owner's (so that
        # its due work keeps waiting, however many help)
        shard = keys.shard_of(f"h{i}")
        if len(hosts.setdefault(shard, [])) < (100 if shard in dead_shards else 3):
            hosts[shard].append(f"h{i}")
    assert len(hosts) == shards
    q = queues[ids[1]]
    pushes = [
        entry(q, f"http://{h}/{j}")
        for shard, hs in hosts.items()
        for h in hs
        for j in range(5 if shard in dead_shards else 40)
    ]
    q.step(now=0, pushes=pushes, pop=False)
    helps = []  # (time, worker, shard)
    tick, acks = 0.5, {i: [] for i in ids}
    for k in range(int(60 / tick)):  # 60 s; the owner dies at 5 s
        t = k * tick
        for i in ids:
            if i == dead and t >= 5:
                continue
            q = queues[i]
            result = q.step(now=t, default_delay=tick, acks=acks[i])
            acks[i] = [lease for _, lease in result.popped]
            for request, _ in result.popped:
                shard = keys.shard_of(request.url.split("/")[2])
                if shard not in q._owned:
                    helps.append((t, i, shard))
    assert all(s in dead_shards for _, _, s in helps), "a live owner's shard got help"
    assert {s for _, _, s in helps} == set(dead_shards)
    first = min(t for t, _, _ in helps)
    # its work waits HELP_AFTER from 5 s; then LOOKERS workers a round (of 25 s) ask it
    assert first <= 5 + HELP_AFTER + 10, first
    helpers = {i for t, i, _ in helps if t < 5 + 30}  # before the registry moves it (30 s)
    assert len(helpers) >= 4, helpers
    for i in helpers:  # from when it found it, a step per HELP_AFTER each
        for shard in dead_shards:
            times = [t for t, j, s in helps if j == i and s == shard]
            gaps = [b - a for a, b in itertools.pairwise(times)]
            assert all(HELP_AFTER <= gap <= HELP_AFTER + 1 for gap in gaps), times


def test_a_stalled_worker_does_not_set_the_fleet_helping_each_other_for_good(redis_client):
    """Found by a review: sixteen workers over 128 shards, each shard always with a host
    ready, each worker popping its eight in turn (one every 4 s).  One stalls for 6 s:
    its shards look neglected, the others help them first, so their own go unpopped
    long enough to look neglected too, and so on: the whole fleet went on popping only
    each other's shards (and fetching pages whose links its seen cache does not know).
    Its own shards that it has known due and not tried for HELP_AFTER / 2 go before the
    help (here, where every worker has more than it can pop, they always do: no worker
    helps, and the stalled one's shards wait for it, or for the registry to move them):
    once the stalled worker is back, the fleet pops its own again."""
    shards, n = 128, 16
    keys = CrawlKeys("t", shards)
    ids = [f"w{i:02}" for i in range(n)]
    queues = {i: HostQueue(redis_client, S(), keys) for i in ids}
    for i in ids:
        queues[i].prefer(owned(i, ids, shards), workers=n)
    hosts = {}
    for k in range(20_000):  # three hosts a shard
        shard = keys.shard_of(f"h{k}")
        if len(hosts.setdefault(shard, [])) < 3:
            hosts[shard].append(f"h{k}")
    q = queues[ids[1]]
    q.step(
        now=0,
        pushes=[entry(q, f"http://{h}/{j}") for hs in hosts.values() for h in hs for j in range(8)],
        pop=False,
    )
    helped, pops = collections.Counter(), collections.Counter()  # per 10 s
    tick, acks = 0.5, {i: [] for i in ids}
    for k in range(int(60 / tick)):
        t = k * tick
        for i in ids:
            if i == ids[0] and 5 <= t < 11:
                continue  # stalled
            result = queues[i].step(now=t, default_delay=tick, acks=acks[i])
            acks[i] = [lease for _, lease in result.popped]
            for request, _ in result.popped:
                pops[t // 10] += 1
                helped[t // 10] += keys.shard_of(request.url.split("/")[2]) not in queues[i]._owned
    for window in (3, 4, 5):
        assert helped[window] <= 0.05 * pops[window], (dict(helped), dict(pops))


def test_underloaded_workers_learn_of_work_in_anothers_shard_within_a_round(redis_client):
    """Forty workers, each busy with its own shards but underloaded: each has one host,
    due once a second.  New hosts arrive in one shard, more than its owner, which keeps
    popping it, can fetch (200, for their 40 pages a second of spare): every other worker
    learns of them within a round of its looks (25 s: HELP_AFTER times 40 / LOOKERS), and
    some of them take them at once (LOOKERS workers ask the shard each round)."""
    shards, n = 80, 40
    keys = CrawlKeys("t", shards)
    ids = [f"w{i:02}" for i in range(n)]
    queues = {i: HostQueue(redis_client, S(), keys) for i in ids}
    mine = {i: owned(i, ids, shards) for i in ids}
    for i in ids:
        queues[i].prefer(mine[i], workers=n)
    own_host = {}
    for k in range(100_000):
        h = f"own{k}"
        for i in ids:
            if i not in own_host and keys.shard_of(h) == min(mine[i]):
                own_host[i] = h
        if len(own_host) == n:
            break
    q0 = queues[ids[0]]
    q0.step(
        now=0,
        pushes=[entry(q0, f"http://{h}/{j}") for h in own_host.values() for j in range(100)],
        pop=False,
    )
    target = min(mine[ids[1]])
    new_hosts = [h for h in (f"new{k}" for k in range(100_000)) if keys.shard_of(h) == target]
    learnt, took = {}, {}  # worker -> when it first knew of the new hosts, took one
    tick, acks = 0.5, {i: [] for i in ids}
    for k in range(int(35 / tick)):
        t = k * tick
        if k == int(5 / tick):
            pushes = [entry(q0, f"http://{h}/{j}") for h in new_hosts[:200] for j in range(10)]
            q0.step(now=t, pushes=pushes, pop=False)
        for i in ids:
            q = queues[i]
            result = q.step(now=t, default_delay=1.0, acks=acks[i])
            acks[i] = [lease for _, lease in result.popped]
            if q._asked[target] >= 5 and q._due[target] <= q._asked[target]:
                learnt.setdefault(i, q._asked[target])  # a look found work there
            for request, _ in result.popped:
                if request.url.split("/")[2].startswith("new"):
                    took.setdefault(i, t)
    others = set(ids) - {ids[1]}
    assert set(learnt) | set(took) >= others, sorted(others - set(learnt) - set(took))
    assert max(learnt.values()) <= 5 + HELP_AFTER * n / LOOKERS + 1
    assert len({i for i, t in took.items() if i != ids[1] and t <= 5 + HELP_AFTER}) >= 3


def test_a_worker_whose_own_shards_do_not_answer_pops_the_others(redis_client):
    """Found by a review: a look at its own shards alone raised when they all failed (their
    node down), and so did every step, though the other shards had work."""
    queue, keys = make(redis_client, shards=8)
    own, other = keys.shard_of("a"), keys.shard_of("b")
    assert own != other
    queue.step(now=0, pushes=[entry(queue, f"http://b/{i}") for i in range(3)], pop=False)
    redis_client.set(keys.shard(own).ready, "not a sorted set")  # every call of it fails
    queue.prefer(frozenset({own}))
    popped = [queue.step(now=t).request for t in (0.0, 1.0, 2.0)]
    assert [r.url for r in popped] == ["http://b/0", "http://b/1", "http://b/2"]


def test_a_worker_with_nothing_ready_of_its_own_wakes_for_the_next_look(redis_client):
    """Found by a review: with its own shard's work far off, a worker slept until then,
    though it looks at the others' shards less often and another worker had pushed there
    since its last look."""
    queue, keys = make(redis_client, shards=8)
    other = make(redis_client, shards=8)[0]  # another worker
    own = keys.shard_of("a")
    queue.prefer(frozenset({own}))
    queue.step(now=0, pushes=[entry(queue, "http://a/later", wait=30.0)], pop=False)
    assert queue.step(now=0).request is None  # it looks at every shard
    other.step(now=0.5, pushes=[entry(queue, "http://b/x")], pop=False)
    result = queue.step(now=0.6)
    assert result.request is None and result.next_ready == pytest.approx(0.4)
    assert queue.step(now=1.0).request.url == "http://b/x"  # its next look finds it


def test_a_worker_that_asks_some_shards_a_look_wakes_for_its_next_look(redis_client):
    """Found by a review: a worker that owns nothing in a fleet of 20 (its looks ask the
    shards in slices) knew only of far work, and slept until then (600 s), though work
    came meanwhile in a shard its next looks would ask."""
    queue, _ = make(redis_client, shards=8)
    other = make(redis_client, shards=8)[0]
    queue.prefer(frozenset(), workers=20)
    queue.step(now=0, pushes=[entry(queue, "http://late/1", wait=600.0)], pop=False)
    result = queue.step(now=0)
    assert result.request is None and result.next_ready == pytest.approx(1.0)
    other.step(now=0.5, pushes=[entry(other, f"http://new{i}/x") for i in range(50)], pop=False)
    t = result.next_ready
    while (result := queue.step(now=t)).request is None:
        assert 0 < result.next_ready <= 1.0
        t += result.next_ready
    assert t <= 1 + 20 / LOOKERS  # within a round of its looks (2.5 s)


def test_an_idle_worker_that_polls_asks_no_more_than_its_looks(redis_client):
    """Found by a review: the scheduler's idle poll (every 0.5 s) asked every shard, so
    each of a hundred idle workers over 128 shards sent 256 PEEKs a second; it follows
    the looks' round now (its own shards each second, a slice of the others')."""
    queue, keys = make(redis_client, shards=128)
    other = make(redis_client, shards=128)[0]
    asked = _counting_calls(queue)
    own = keys.shard_of("a")
    queue.prefer(frozenset({own}), workers=100)
    assert not queue.has_work(now=0) and len(asked) == 128  # its first look: every shard
    asked.clear()
    polls = [queue.has_work(now=t / 2) for t in range(1, 51)]  # 25 s of polls
    assert not any(polls)
    per_second = 1 + 127 / (100 / LOOKERS)  # its own, a slice of the others'
    assert len(asked) <= 25 * per_second * 1.1, len(asked)
    other.step(now=25, pushes=[entry(other, "http://a/1")], pop=False)
    assert queue.has_work(now=26)  # its own shard: its next look


def test_leases_ack_and_expire(redis_client):
    queue, keys = make(redis_client)
    queue.step(now=0, pop=False, pushes=[entry(queue, "http://a/1"), entry(queue, "http://b/2")])
    one = queue.step(now=0, lease_timeout=10)
    two = queue.step(now=0, lease_timeout=10)
    assert {one.request.url, two.request.url} == {"http://a/1", "http://b/2"}
    assert total(redis_client, keys, "ZCARD", "leases") == 2 and len(queue) == 0
    queue.step(now=1, acks=[one.lease], pop=False)  # w1 finished
    queue.renew([one.lease], 49, now=1)  # renewing an acked lease does not revive it
    assert total(redis_client, keys, "ZCARD", "leases") == 1
    assert queue.step(now=5).request is None  # w2's lease still valid
    again = queue.step(now=11, lease_timeout=10)  # w2 died: lease expired
    assert again.requeued == 1 and again.request.url == two.request.url
    queue.renew([again.lease], 89, now=11)
    assert queue.step(now=30).requeued == 0  # renewed


def test_delayed_requests_wait_for_their_time(redis_client):
    queue, _ = make(redis_client)
    pushes = [entry(queue, "http://a/retry", wait=50.0), entry(queue, "http://a/now")]
    queue.step(now=0, pushes=pushes, pop=False)
    assert len(queue) == 2
    assert drain(queue, now=10) == ["http://a/now"]
    assert drain(queue, now=50) == ["http://a/retry"]


def test_idle_check_sees_busy_live_workers_and_leases(redis_client):
    """Queued and leases are counted over the shards (a call each) only when no other
    live worker is busy: Scrapy has an idle worker check each time it finds nothing to
    do, and a busy worker keeps the crawl open anyway."""
    queue, keys = make(redis_client)
    registry = WorkerRegistry(redis_client, keys)
    counted = _counting_calls(queue, scripts.COUNT)
    queue.step(now=0, pop=False, pushes=[entry(queue, "http://a/1"), entry(queue, "http://b/2")])
    registry.beat("w1", {}, ttl=10)
    registry.beat("w2", {}, ttl=10)
    l1 = queue.step(now=0).lease
    l2 = queue.step(now=0).lease
    registry.mark_busy("w1", 0.0)  # what a worker's scheduler does when it first pops
    registry.mark_busy("w2", 0.0)
    assert queue.idle_check("w1") == (None, 0, 1, None) and counted == []  # w2 busy
    assert queue.idle_check("w2") == (0, 0, 0, 2)  # both leases open
    queue.step(now=0, acks=[l1, l2], pop=False)
    assert queue.idle_check("w2") == (0, 0, 0, 0)
    redis_client.rpush(keys.start, "http://submitted/")
    assert queue.idle_check("w1") == (0, 1, 0, 0)
    # a busy worker whose heartbeat expired (killed) does not count as busy
    queue.step(now=0, pushes=[entry(queue, "http://a/3")], pop=False)
    registry.beat("w4", {}, ttl=0.05)
    queue.step(now=0)
    registry.mark_busy("w4", 0.0)
    time.sleep(0.1)
    assert queue.idle_check("w1") == (0, 1, 0, 1)  # ...but its lease does, until it expires


def test_crawl_done_reads_the_shards_only_when_no_other_worker_is_busy(redis_client):
    """An idle worker polls whether the crawl is done (twice a second): while another
    worker is busy or a seed waits, it reads the crawl-wide keys alone (a hundred idle
    workers counting 128 shards each would be 25 600 calls a second)."""
    queue, keys = make(redis_client, shards=16)
    registry = WorkerRegistry(redis_client, keys)
    counted = _counting_calls(queue, scripts.COUNT)
    registry.beat("w2", {}, ttl=10)
    registry.mark_busy("w2", 0.0)
    assert not queue.crawl_done("w1") and counted == []
    registry.remove("w2")
    assert queue.crawl_done("w1") and sorted(counted) == list(range(16))
    queue.step(now=0, pop=False, pushes=[entry(queue, "http://a/1")])
    assert not queue.crawl_done("w1", now=0)  # queued
    lease = queue.step(now=0).lease
    assert not queue.crawl_done("w1", now=10)  # leased
    # (a dead worker's lease, waiting to expire: counted again HELP_AFTER later)
    counted.clear()
    assert not queue.crawl_done("w1", now=10 + HELP_AFTER - 0.1) and counted == []
    queue.step(now=0, acks=[lease], pop=False)
    assert queue.crawl_done("w1", now=10 + HELP_AFTER) and len(counted) == 16
    redis_client.rpush(keys.start, "http://submitted/")
    counted.clear()
    assert not queue.crawl_done("w1", now=30) and counted == []
    redis_client.delete(keys.start)
    queue.step(now=0, pop=False, pushes=[entry(queue, "http://a/2")])
    assert not queue.crawl_done("w1", now=30) and len(counted) == 16
    registry.beat("w2", {}, ttl=10)
    registry.mark_busy("w2", 0.0)
    assert not queue.crawl_done("w1", now=31)
    registry.remove("w2")  # the last busy worker finishes: counted at once
    assert not queue.crawl_done("w1", now=31.5) and len(counted) == 32


def test_registry_prunes_dead_workers(redis_client):
    _, keys = make(redis_client)
    registry = WorkerRegistry(redis_client, keys)
    registry.beat("alive", {"pages": 3}, ttl=10)
    registry.beat("dead", {"pages": 1}, ttl=0.05)
    time.sleep(0.1)
    assert [w["id"] for w in registry.live()] == ["alive"]
    assert redis_client.smembers(keys.workers) == {b"alive"}
    registry.remove("alive")
    assert registry.live() == []


def test_a_scrapy_commands_own_worker_shares_no_shard(redis_client):
    """A ``scrapy shell`` left open beats like a worker but pops nothing of the shared
    crawl: the others share the shards without it (a shard it owned would get only the
    help a neglected shard gets)."""
    _, keys = make(redis_client)
    registry = WorkerRegistry(redis_client, keys)
    registry.beat("crawler", worker_info(0.0, {}, 1.0, 0.0, idle=False, pops=True), ttl=10)
    registry.beat("shell", worker_info(0.0, {}, 1.0, 0.0, idle=True, pops=False), ttl=10)
    live = registry.live()
    assert [w["id"] for w in live] == ["crawler", "shell"]  # both shown by webcrawl status
    assert popping(live) == ["crawler"]
    assert owned("crawler", popping(live), 16) == set(range(16))


class WithCallbacks(Spider):
    name = "cb"

    def parse(self, response):
        pass

    def page(self, response):
        pass

    def failed(self, failure):
        pass


def test_entries_are_small_and_decode_to_the_request_scrapy_would_rebuild(redis_client):
    from scrapy import FormRequest

    from webcrawl.frontier import serialize

    spider = WithCallbacks()
    queue = HostQueue(redis_client, spider, CrawlKeys("t"))
    ref = {"Referer": "http://a/list/"}
    requests = [
        Request("http://a/1"),
        Request("http://a/2", callback=spider.page, errback=spider.failed, meta={"d": 1}),
        Request("http://a/3", callback=spider.parse, priority=4, dont_filter=True),
        FormRequest("http://a/4", formdata={"q": "x"}, callback=spider.page),
        Request("http://a/5", headers=ref, meta={"depth": 2}),  # kept as its path
        Request("http://b/6", headers=ref),  # another origin: kept as a header
        Request(
            "http://a/7",
            headers={**ref, "Accept": "text/html"},
            method="HEAD",
            body=b"x",
            cookies={"c": "1"},
            encoding="latin-1",
            flags=["f"],
            cb_kwargs={"k": [1]},
        ),
        Request("http://a:8080", headers={"Referer": "http://a:8080"}),
    ]
    for request in requests:
        entry = queue.encode(request)
        back = queue.decode(b"7|" + entry)
        assert back.to_dict(spider=spider) == request.to_dict(spider=spider), entry
    typical = Request(
        "https://docs.example.org/en/3.2/topics/http/urls/",
        meta={"depth": 3},
        headers={"Referer": "https://docs.example.org/en/3.2/topics/"},
    )
    assert queue.encode(typical) == (
        b'{"url":"https://docs.example.org/en/3.2/topics/http/urls/",'
        b'"meta":{"depth":3},"_ref":"/en/3.2/topics/"}'
    )
    # an entry with every field (as another request class's entry is written) reads
    full = serialize.dumps(typical.to_dict(spider=spider))
    assert queue.decode(b"1|" + full).to_dict() == typical.to_dict()


def test_one_step_pops_several_hosts_but_each_once_per_delay(redis_client):
    queue, keys = make(redis_client, shards=1)
    pushes = [entry(queue, u) for u in ("http://a/1", "http://a/2", "http://b/1", "http://c/1")]
    queue.step(now=0, pushes=pushes, pop=False)
    result = queue.step(now=10, pop=8, default_delay=1.0, lease_timeout=30)
    assert sorted(r.url for r, _ in result.popped) == ["http://a/1", "http://b/1", "http://c/1"]
    assert len({lease for _, lease in result.popped}) == 3
    assert total(redis_client, keys, "ZCARD", "leases") == 3
    later = queue.step(now=10.5, pop=8, default_delay=1.0)
    assert later.popped == [] and later.next_ready == 0.5  # a waits for its delay
    # without a delay one call takes a host's requests in turn
    queue.step(now=0, pop=False, pushes=[entry(queue, "http://d/1"), entry(queue, "http://d/2")])
    urls = [r.url for r, _ in queue.step(now=20, pop=8).popped]
    assert urls == ["http://d/1", "http://a/2", "http://d/2"]  # by ready time, in turn


def test_released_leases_go_back_at_the_next_step(redis_client):
    """What a closing worker popped but never started is requeued at once (renew to 0)."""
    queue, _ = make(redis_client, shards=1)
    queue.step(now=0, pop=False, pushes=[entry(queue, "http://a/1"), entry(queue, "http://b/1")])
    popped = queue.step(now=1, pop=2, lease_timeout=60).popped
    queue.renew([lease for _, lease in popped], 0.0, now=1)
    again = queue.step(now=2, pop=2, lease_timeout=60)
    assert again.requeued == 2
    assert sorted(r.url for r, _ in again.popped) == ["http://a/1", "http://b/1"]


def revisit(queue, url, due, priority=0):
    import hashlib

    key = hashlib.sha1(url.encode()).hexdigest()[:20]
    return (key, url.split("/")[2], priority, due, queue.encode(Request(url)))


def test_revisits_are_one_per_url_and_bypass_the_dupefilter(redis_client):
    queue, keys = make(redis_client)
    queue.step(now=0, pushes=[entry(queue, "http://a/1")], pop=False)
    long = {"lease_timeout": 1e6}  # no lease expiry in this test
    assert drain(queue, now=0, **long) == ["http://a/1"]  # fetched, and in the seen set
    # scheduled twice: the second schedule replaces the first
    queue.step(now=0, revisits=[revisit(queue, "http://a/1", 50.0)], pop=False)
    queue.step(now=0, revisits=[revisit(queue, "http://a/1", 80.0)], pop=False)
    assert total(redis_client, keys, "ZCARD", "revisits") == 1
    assert drain(queue, now=60, **long) == []
    result = queue.step(now=80, **long)
    assert result.revisited == 1 and result.request.url == "http://a/1"
    assert (
        total(redis_client, keys, "ZCARD", "revisits") == 0
        and total(redis_client, keys, "HLEN", "revisit_requests") == 0
    )
    # the seen set still has it: a link to it is filtered as before
    assert queue.step(now=90, pushes=[entry(queue, "http://a/1")]).added == 0


def _take_revisits(url, worker, out, barrier):
    import redis

    queue = HostQueue(redis.Redis.from_url(url), S(), CrawlKeys("t"))
    got = []
    barrier.wait(30)  # both start together
    for _ in range(400):
        result = queue.step(pop=5)  # Redis's clock
        got += [request.url for request, _ in result.popped]
    out.put(got)


def test_due_revisits_move_atomically_with_two_workers(redis_client, redis_server):
    import multiprocessing

    queue, keys = make(redis_client)
    urls = [f"http://h{i % 7}/p{i}" for i in range(300)]
    queue.step(pop=False, revisits=[revisit(queue, u, -1.0) for u in urls])
    ctx = multiprocessing.get_context("spawn")
    out, barrier = ctx.Queue(), ctx.Barrier(2)
    workers = [
        ctx.Process(target=_take_revisits, args=(redis_server.url, f"w{i}", out, barrier))
        for i in range(2)
    ]
    for w in workers:
        w.start()
    taken = [out.get(timeout=60) for _ in workers]
    for w in workers:
        w.join(30)
    assert all(taken), "both workers took some"
    assert sorted(taken[0] + taken[1]) == sorted(urls)  # each exactly once
    assert total(redis_client, keys, "ZCARD", "revisits") == 0


def test_a_lease_handed_back_returns_after_its_wait(redis_client):
    """A request whose page could not be stored is not acknowledged: it comes back."""
    queue, keys = make(redis_client)
    queue.step(now=0, pushes=[entry(queue, "http://a/1")], pop=False)
    lease = queue.step(now=0, lease_timeout=60).lease
    queue.step(now=1, nacks=[(lease, 5.0)], pop=False)
    assert queue.step(now=5).request is None  # not yet
    again = queue.step(now=6)
    assert again.requeued == 1 and again.request.url == "http://a/1"
    assert total(redis_client, keys, "SCARD", "seen") == 1  # past the dupefilter, which has it


def test_shared_times_are_redis_time_not_the_workers(redis_client):
    """Leases, delays and due revisits are set by Redis's clock: a step sends only
    durations, so a worker whose clock is off cannot move them."""
    queue, keys = make(redis_client)
    queue.step(pushes=[entry(queue, "http://a/1")], pop=False)
    queue.step(revisits=[revisit(queue, "http://a/2", 3600.0)], pop=False)
    lease = queue.step(lease_timeout=60).lease
    seconds, micros = redis_client.time()
    now = seconds + micros / 1e6
    assert redis_client.zscore(
        keys.shard_for("a").leases, lease.partition(":")[2]
    ) == pytest.approx(now + 60, abs=1)
    due = redis_client.zscore(keys.shard_for("a").revisits, revisit(queue, "http://a/2", 0)[0])
    assert due == pytest.approx(now + 3600, abs=1)
    queue.renew([lease], 30)
    assert redis_client.zscore(
        keys.shard_for("a").leases, lease.partition(":")[2]
    ) == pytest.approx(now + 30, abs=1)


def test_a_backoff_holds_whoever_writes_next(redis_client):
    queue, keys = make(redis_client)
    # worker A: 503 + Retry-After 50 -> delay 50, held and waited for 50 s
    assert queue.set_delay("a", 50.0, hold=50.0, not_before=50.0, now=100) == 50.0
    assert float(redis_client.hget(keys.shard_for("a").next, "a")) == 150.0
    # worker B saw a slow 200 a moment later: it cannot lower the delay in force...
    assert queue.set_delay("a", 3.0, now=101) == 50.0
    assert float(redis_client.hget(keys.shard_for("a").delay, "a")) == 50.0
    assert queue.turns.acquire("a", default_delay=1.0, now=101) == pytest.approx(49.0)
    # ...nor can a shorter back-off; a longer one extends the hold
    assert queue.set_delay("a", 8.0, hold=8.0, not_before=8.0, now=102) == 50.0
    # once the back-off has expired, the delay follows the answers again
    assert queue.set_delay("a", 3.0, now=151) == 3.0
    assert redis_client.hget(keys.shard_for("a").delay_hold, "a") is None


def test_entries_naming_a_class_outside_the_allow_list_are_refused_unimported(
    redis_client, tmp_path, monkeypatch
):
    """Whoever can write the shared queue must not choose what workers import."""
    import sys

    (tmp_path / "planted.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('imported').touch()\n"
        "from scrapy import Request\nclass Evil(Request):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    queue, keys = make(redis_client)
    good = entry(queue, "http://a/ok")
    planted = b'{"url": "http://a/evil", "_class": "planted.Evil", "headers": {}}'
    pushes = [good, (b"e", "a", 0, 0.0, planted), (b"g", "a", 0, 0.0, b"not json")]
    queue.step(now=0, pushes=pushes, pop=False)
    result = queue.step(now=0, pop=3)
    assert [r.url for r, _ in result.popped] == ["http://a/ok"]
    assert [(str(why), why.kind, why.url) for _, why in result.refused] == [
        (
            "request class 'planted.Evil' is not in FRONTIER_REQUEST_CLASSES",
            "class",
            "http://a/evil",
        ),
        ("not a serialised request: Expecting value: line 1 column 1 (char 0)", "unreadable", None),
    ]
    assert "planted" not in sys.modules and not (tmp_path / "imported").exists()
    # scrapy's own subclasses, and those a project allows, are read
    rules = EntryRules(frozenset([*DEFAULT_REQUEST_CLASSES, "planted.Evil"]))
    form = HostQueue(redis_client, S(), keys, rules)
    assert type(form.decode(b"1|" + planted)).__name__ == "Evil"
    assert type(queue.decode(b"1|" + queue.encode(FormRequest("http://a/f")))) is FormRequest


def test_sequence_numbers_past_10_to_the_14_keep_identical_requests_apart(redis_client):
    """A member carries its sequence number in full, 20 digits (members.py). Lua's own
    printing of a number ('%.14g') once made 10^14 '1e+14': identical requests
    (dont_filter) past it became one member while the queue counted them all, and the
    cold tier could not read it."""
    queue, keys = make(redis_client, shards=1)
    (shard,) = keys.all_shards()
    redis_client.set(shard.seq, 99_999_999_999_999)
    same = entry(queue, "http://h.example/a", fp=b"")
    assert queue.step(now=1, pushes=[same, same, same], pop=False).added == 3
    queued = redis_client.zrange(shard.host_queue("h.example"), 0, -1)
    assert len(queue) == 3 and [m.split(b"|")[0] for m in queued] == [
        b"10000000000000000001",
        b"10000000000000000002",
        b"10000000000000000003",
    ]
