"""The outbox's holding: a shard's links leave in batches, and a page's lease is
acknowledged only once the links held when it was done are stored (real Redis)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from scrapy import Request, Spider

from webcrawl.frontier.far_revisits import FarRevisits
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.outbox import Outbox
from webcrawl.frontier.queue import HostQueue

KEYS = CrawlKeys("ob", 2)


class S(Spider):
    name = "ob"


def host_in(shard: int, n: int = 0) -> str:
    """The ``n``-th host name of the form hN.example in ``shard``."""
    hosts = (f"h{i}.example" for i in range(1000))
    return [h for h in hosts if KEYS.shard_of(h) == shard][n]


A, B = host_in(0), host_in(1)  # one host in each shard


def push(queue: HostQueue, url: str) -> tuple:
    host = url.split("/")[2]
    return (url.encode(), host, 0, 0.0, queue.encode(Request(url)), None)


@pytest.fixture
def outbox(redis_client):
    queue = HostQueue(redis_client, S(), KEYS)
    return Outbox(queue, FarRevisits(lambda rows: None), shard_batch=3, shard_wait=5.0)


def queued(outbox: Outbox) -> int:
    return len(outbox.queue)


def leased(client, lease: str) -> bool:
    shard, _, ident = lease.partition(":")
    return client.zscore(KEYS.shard(int(shard)).leases, ident) is not None


def test_a_shards_links_wait_for_a_batch_then_leave_together(outbox):
    outbox.pushes += [push(outbox.queue, f"http://{B}/{i}") for i in range(2)]
    sent = outbox.step(pop=0, now=0)
    assert (sent.pushes, queued(outbox), outbox.held()) == ([], 0, 2)
    outbox.pushes.append(push(outbox.queue, f"http://{B}/2"))
    sent = outbox.step(pop=0, now=0)
    assert (len(sent.pushes), queued(outbox), outbox.held()) == (3, 3, 0)


def test_links_that_waited_long_enough_leave(outbox):
    outbox.pushes.append(push(outbox.queue, f"http://{B}/0"))
    assert not outbox.ripe(now=0)
    outbox.step(pop=0, now=4.9)
    assert outbox.held() == 1 and not outbox.ripe(now=4.9)
    assert outbox.ripe(now=5.0)
    outbox.step(pop=0, now=5.0)
    assert (outbox.held(), queued(outbox)) == (0, 1)


def test_a_lease_waits_for_the_links_held_when_its_page_was_done(outbox, redis_client):
    outbox.pushes.append(push(outbox.queue, f"http://{A}/seed"))
    outbox.step(pop=0, flush=True, now=0)
    ((_, lease),) = outbox.step(pop=1, now=0).result.popped
    outbox.pushes.append(push(outbox.queue, f"http://{B}/link"))  # a link of the page
    outbox.finished(lease, now=0)
    for _ in range(3):  # the link is held (one of a batch of 3): the lease stays
        outbox.step(pop=0, now=1)
    assert leased(redis_client, lease) and outbox.held() == 1
    assert outbox.in_progress() == [lease]  # renewed meanwhile
    # a link that came after the page was done does not hold its lease up
    outbox.step(pop=0, flush=True, now=2)
    outbox.pushes.append(push(outbox.queue, f"http://{B}/later"))
    outbox.step(pop=0, now=2)  # the ack leaves with the step after the one that stored
    assert not leased(redis_client, lease) and outbox.held() == 1
    assert outbox.pending()


def test_a_step_that_calls_a_shard_anyway_takes_its_links(outbox, redis_client):
    outbox.pushes.append(push(outbox.queue, f"http://{A}/seed"))
    outbox.step(pop=0, flush=True, now=0)
    ((_, lease),) = outbox.step(pop=1, now=0).result.popped
    outbox.nack(lease, 0.0)  # a hand-back to shard 0
    outbox.pushes += [push(outbox.queue, f"http://{A}/x"), push(outbox.queue, f"http://{B}/y")]
    sent = outbox.step(pop=0, now=0)
    assert [p[1] for p in sent.pushes] == [A] and outbox.held() == 1


def test_a_pop_that_finds_nothing_sends_every_link_next(outbox):
    outbox.pushes.append(push(outbox.queue, f"http://{B}/0"))
    assert not outbox.step(pop=1, now=0).result.popped  # nothing queued yet
    assert outbox.held() == 1
    assert len(outbox.step(pop=1, now=0).pushes) == 1  # the crawl may wait for it
    assert outbox.held() == 0


def test_no_holding_sends_every_link_at_every_step(redis_client):
    queue = HostQueue(redis_client, S(), KEYS)
    outbox = Outbox(queue, FarRevisits(lambda rows: None))
    outbox.pushes += [push(queue, f"http://{A}/0"), push(queue, f"http://{B}/0")]
    assert len(outbox.step(pop=0, now=0).pushes) == 2 and not outbox.held()


def test_a_link_held_already_is_not_sent_twice(outbox, redis_client):
    outbox.pushes.append(push(outbox.queue, f"http://{A}/seed"))
    outbox.step(pop=0, flush=True, now=0)
    ((_, lease),) = outbox.step(pop=1, now=0).result.popped
    outbox.pushes.append(push(outbox.queue, f"http://{B}/same"))
    outbox.step(pop=0, now=0)  # held
    outbox.pushes.append(push(outbox.queue, f"http://{B}/same"))  # found again by the page
    outbox.finished(lease, now=0)
    assert outbox.held() == 1 and outbox.holds(None) is False
    assert outbox.step(pop=0, now=0).merged == 1  # (dupefilter/filtered)
    assert leased(redis_client, lease)  # it waits for the one held
    sent = outbox.step(pop=0, flush=True, now=0)
    assert (len(sent.pushes), queued(outbox)) == (1, 1)
    outbox.step(pop=0, now=0)
    assert not leased(redis_client, lease)
    outbox.pushes.append(push(outbox.queue, f"http://{B}/same"))  # sent: no longer held
    assert outbox.held() == 1


def test_a_lease_waiting_for_its_far_revisits_is_not_acknowledged_after_an_unconfirmed_step(
    redis_pair,
):
    """Found by the review: a page with a revisit beyond the horizon waits in FarRevisits
    (neither done with nor in progress) while its link leaves in a step the replicas do
    not confirm; once its revisit is stored it was acknowledged, and a failover then
    lost the link.  It is left to expire now: the page is fetched again."""
    master = redis_pair.master.client()
    queue = HostQueue(master, S(), KEYS, wait_replicas=1, wait_timeout=0.2)
    writes: list = []

    def submit(func):
        future: Future[None] = Future()
        writes.append((future, func))
        return future

    far = FarRevisits(lambda rows: None, submit)
    outbox = Outbox(queue, far, shard_batch=32, shard_wait=1.0)
    outbox.pushes.append(push(queue, f"http://{A}/seed"))
    outbox.step(pop=0, flush=True, now=0)
    ((_, lease),) = outbox.step(pop=1, now=0).result.popped
    outbox.pushes.append(push(queue, f"http://{B}/link"))
    far.add(("k", A, 0, 10.0**9, b"x"))
    outbox.finished(lease, now=0)  # waits for its far revisit
    far.store()  # on the mover: not done yet
    redis_pair.link.hold()
    sent = outbox.step(pop=0, flush=True, now=0)
    assert sent.result.unconfirmed and sent.unreplicated == 1
    future, func = writes.pop()
    func()
    future.set_result(None)  # the revisit is stored
    for t in (1, 2, 3):
        outbox.step(pop=0, now=t)
    assert leased(master, lease) and not outbox.pending()


def test_the_seen_cache_key_of_a_held_link_is_known_until_it_is_sent(outbox):
    """Scheduler.knows_url asks: a link held is not in the seen cache yet, and the same
    link found again is dropped, not made a Request again."""
    outbox.pushes.append((*push(outbox.queue, f"http://{B}/x")[:5], 42))
    outbox.step(pop=0, now=0)
    assert outbox.holds(42) and not outbox.holds(43)
    outbox.step(pop=0, flush=True, now=0)
    assert not outbox.holds(42)
