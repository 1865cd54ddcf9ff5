"""The shared queue's Lua scripts against a real Redis."""

import time

from scrapy import Request, Spider

from webcrawl.keys import CrawlKeys
from webcrawl.queue import PriorityQueue
from webcrawl.workers import WorkerRegistry


class S(Spider):
    name = "s"


def make(redis_client):
    keys = CrawlKeys("t")
    return PriorityQueue(redis_client, S(), keys), keys


def entry(queue, url, priority=0, fp=None):
    request = Request(url, priority=priority)
    return (fp if fp is not None else url.encode(), priority, queue.encode(request))


def test_batch_push_dedups_in_one_round_trip(redis_client):
    queue, keys = make(redis_client)
    added = queue.push_many([entry(queue, "http://a/1"), entry(queue, "http://a/2"),
                             entry(queue, "http://a/1")])  # fmt: skip
    assert added == 2
    assert queue.push_many([entry(queue, "http://a/2"), entry(queue, "http://a/3")]) == 1
    assert len(queue) == 3
    assert redis_client.scard(keys.seen) == 3
    # dont_filter (empty fingerprint) bypasses the set
    assert queue.push_many([entry(queue, "http://a/1", fp=b"")]) == 1
    assert len(queue) == 4


def test_pop_by_priority_then_fifo(redis_client):
    queue, _ = make(redis_client)
    urls = [("http://a/low1", -1), ("http://a/high", 5), ("http://a/mid1", 0),
            ("http://a/low2", -1), ("http://a/mid2", 0), ("http://a/huge", 10**9)]  # fmt: skip
    for url, prio in urls:  # one at a time: order across batches is kept too
        queue.push_many([entry(queue, url, prio)])
    popped = []
    while (request := queue.pop("w1", time.time())) is not None:
        popped.append(request.url)
    assert popped == ["http://a/huge", "http://a/high", "http://a/mid1", "http://a/mid2",
                      "http://a/low1", "http://a/low2"]  # fmt: skip
    assert queue.pop("w1", time.time()) is None


def test_idle_check_sees_busy_live_workers_only(redis_client):
    queue, keys = make(redis_client)
    registry = WorkerRegistry(redis_client, keys)
    queue.push_many([entry(queue, "http://a/1"), entry(queue, "http://a/2")])
    registry.beat("w1", {}, ttl=10)
    registry.beat("w2", {}, ttl=10)
    queue.pop("w1", 1.0)
    queue.pop("w2", 1.0)
    assert queue.idle_check("w1") == (0, 0, 1)  # w2 still busy
    assert queue.idle_check("w2") == (0, 0, 0)
    queue.pop("w3", 1.0)  # w3 popped nothing: not busy
    redis_client.rpush(keys.start, "http://submitted/")
    assert queue.idle_check("w1") == (0, 1, 0)
    # a busy worker whose heartbeat expired (killed) does not hold the crawl open
    queue.push_many([entry(queue, "http://a/3")])
    registry.beat("w4", {}, ttl=0.05)
    queue.pop("w4", 1.0)
    time.sleep(0.1)
    assert queue.idle_check("w1") == (0, 1, 0)


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


class WithCallbacks(Spider):
    name = "cb"

    def parse(self, response):
        pass

    def page(self, response):
        pass

    def failed(self, failure):
        pass


def test_fast_encode_matches_scrapy_to_dict(redis_client):
    from scrapy import FormRequest
    from scrapy.utils.request import request_from_dict

    from webcrawl import serialize

    spider = WithCallbacks()
    queue = PriorityQueue(redis_client, spider, CrawlKeys("t"))
    requests = [
        Request("http://a/1"),
        Request("http://a/2", callback=spider.page, errback=spider.failed, meta={"d": 1}),
        Request("http://a/3", callback=spider.parse, priority=4, dont_filter=True),
        FormRequest("http://a/4", formdata={"q": "x"}, callback=spider.page),
    ]
    for request in requests:
        ours = serialize.loads(queue.encode(request))
        assert ours == serialize.loads(serialize.dumps(request.to_dict(spider=spider)))
        back = request_from_dict(ours, spider=spider)
        assert (type(back), back.url, back.callback, back.errback, back.body) == (
            type(request), request.url, request.callback, request.errback, request.body,
        )  # fmt: skip
