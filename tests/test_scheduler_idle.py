"""The scheduler's answers to Scrapy when a worker has nothing to do, on a real Redis:
in-process workers opened as ``Scheduler.open`` opens them, their periodic tasks called
by hand (no reactor runs)."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.core.engine import ExecutionEngine
from scrapy.exceptions import DontCloseSpider
from test_scheduler_input import _crawler

from webcrawl.frontier.layout import join_crawl, store_record
from webcrawl.frontier.scheduler import Scheduler
from webcrawl.frontier.signals import crawl_may_end, crawl_out_of_work


@pytest.fixture
def worker(redis_server, tmp_path):
    """Opens in-process workers of one crawl (four shards, no politeness delay)."""
    opened = []

    def open_worker(**settings: object) -> Scheduler:
        crawler = _crawler(
            REDIS_URL=redis_server.url,
            WEBCRAWL_CRAWL="idle",
            WEBCRAWL_DATA_DIR=str(tmp_path),
            FRONTIER_SHARDS=4,
            FRONTIER_HOST_DELAY=0,
            **settings,
        )
        scheduler = Scheduler.from_crawler(crawler)
        crawler.engine = ExecutionEngine(crawler, spider_closed_callback=lambda _: None)
        scheduler.spider, scheduler.one_off = Spider("web"), False
        scheduler.store.connect(1)
        scheduler.redis.open()
        keys = join_crawl(
            scheduler.redis.client,
            "idle",
            scheduler.shards,
            scheduler.df.layout(),
            store_record(scheduler.store),
        )
        scheduler._opened(keys)
        for loop in scheduler._loops:  # no reactor: _beat and _poll are called by hand
            loop.stop()
        opened.append(scheduler)
        return scheduler

    yield open_worker
    for scheduler in opened:
        scheduler.queue.close()
        scheduler._close_connections()


def idle(scheduler: Scheduler) -> bool:
    """What Scrapy's spider_idle gets from the scheduler: whether it may close."""
    try:
        scheduler._on_idle(scheduler.spider)
    except DontCloseSpider:
        return False
    return True


def test_a_worker_with_nothing_to_do_now_says_the_crawl_is_out_of_work_only_at_its_end(
    worker,
):
    """Scrapy sends spider_idle to a worker with nothing to do now, while others crawl:
    the scheduler keeps it open, and sends crawl_out_of_work (for what must run before
    the end, the failed-path middleware's final re-probe) only when the crawl has no
    work anywhere; a handler that raises DontCloseSpider keeps the worker open then."""
    a, b = worker(), worker()
    ends = []

    def end(spider: Spider) -> None:
        ends.append(spider)

    b.crawler.signals.connect(end, signal=crawl_out_of_work)
    a.enqueue_request(Request("http://h.example/1"))
    a._flush()
    assert a.next_request().url == "http://h.example/1"  # a's: leased, a busy
    b.queue.look()
    assert not b.has_pending_requests()  # nothing for b to do now...
    assert not idle(b) and ends == []  # ...but the crawl is not out of work
    a._flush()  # a is done with it (no engine slot: nothing is in progress)
    assert idle(a)  # (a's own handlers: none)
    assert idle(b) and ends == [b.spider]

    def not_yet(spider: Spider) -> None:
        raise DontCloseSpider("a last thing to do")

    b.crawler.signals.connect(not_yet, signal=crawl_out_of_work)
    assert not idle(b) and ends == [b.spider] * 2
    b.crawler.signals.disconnect(not_yet, signal=crawl_out_of_work)

    def may_add_work(spider: Spider) -> None:
        raise DontCloseSpider("a sitemap waits for memory")

    # a component that may still add work holds the end: crawl_out_of_work is not sent
    b.crawler.signals.connect(may_add_work, signal=crawl_may_end)
    assert not idle(b) and ends == [b.spider] * 2
    b.crawler.signals.disconnect(may_add_work, signal=crawl_may_end)
    assert idle(b) and ends == [b.spider] * 3


def test_a_paused_worker_hands_back_what_it_popped_and_owns_no_shard(worker):
    """A worker whose engine is paused (a store outage) says so in its heartbeat: the
    others own its shards, and the requests it popped for later go back to the crawl."""
    a, b = worker(FRONTIER_PREFETCH=5), worker()
    for i in range(5):
        a.enqueue_request(Request(f"http://h.example/{i}"))
    a._flush()
    first = a.next_request()  # (pops five, hands out one)
    assert first is not None and len(a._prefetched) == 4
    a.crawler.engine.pause()
    a._beat()
    b._beat()
    assert not a._prefetched and a.stats.get_value("frontier/owned_shards") == 0
    assert b.queue._owned == frozenset(range(4))
    popped = b.queue.step(pop=10, lease_timeout=60, now=None)
    assert len(popped.popped) == 4  # the four a had popped for later, handed back
    a.crawler.engine.unpause()
    a._beat()
    assert a.stats.get_value("frontier/owned_shards") > 0


def test_a_scrapy_shell_never_marks_itself_busy(worker):
    """A Scrapy command's own crawl (scrapy shell) never goes idle: marked busy, it would
    keep a finite crawl open for as long as it is left open."""
    shell = worker()
    shell.one_off = True
    shell._mark_busy()
    assert shell.server.hlen(shell.keys.busy) == 0


def test_the_failed_path_final_re_probe_waits_for_the_crawl_to_be_out_of_work(worker):
    """spider_idle while others crawl keeps a worker with links of recovered paths to
    send back open, without sending them before their time (other workers' copies of
    the site's counts must be read again first); crawl_out_of_work sends them now, and
    takes the final re-probe turn only when nothing of the middleware's own runs; while
    another worker's re-probe runs it waits, with one wake-up of the engine pending."""
    from twisted.internet import reactor

    from webcrawl.middlewares.failpath import FailPathMiddleware

    scheduler = worker()
    middleware = FailPathMiddleware(scheduler.crawler)
    middleware._frontier = lambda: scheduler
    sent = []

    async def send_back() -> None:
        sent.append(True)

    middleware._later(60, send_back)
    with pytest.raises(DontCloseSpider):
        middleware._idle(scheduler.spider)
    assert sent == []  # at its time, not now
    with pytest.raises(DontCloseSpider):
        middleware._out_of_work(scheduler.spider)
    assert sent == [True]
    final = scheduler.keys.failpath_probe + ":final"
    middleware._probing = True  # its own periodic re-probe runs: not the final one yet
    with pytest.raises(DontCloseSpider):
        middleware._out_of_work(scheduler.spider)
    assert not scheduler.server.exists(final)
    middleware._probing = False
    other = middleware._probe_turns(scheduler).lock.__class__(
        scheduler.server, scheduler.keys.failpath_probe + ":running", 60, owner="other"
    )
    assert other.acquire()  # another worker's re-probe runs
    wakes = lambda: [c for c in reactor.getDelayedCalls() if c is middleware._wake]  # noqa: E731
    try:
        for _ in range(3):
            with pytest.raises(DontCloseSpider):
                middleware._out_of_work(scheduler.spider)
        assert len(wakes()) == 1
    finally:
        middleware._wake.cancel()
    other.release()
    scheduler.server.set(final, "another worker")  # the final turn was taken: nothing to do
    middleware._out_of_work(scheduler.spider)
