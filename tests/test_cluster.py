"""Several workers share one Redis: nothing fetched twice, nothing lost, nobody leaves early."""

import signal
import time
from collections import Counter

import pytest
from conftest import frontier_totals, read_items

from webcrawl.frontier.keys import CrawlKeys
from webcrawl.store import open_store

# About 40 pages/s over all workers on the 4 seed hosts: a crawl of the slow demo web
# lasts ~7 s, long enough for a second worker to start and take its share.
PACED = ("FRONTIER_HOST_DELAY=0.1",)


@pytest.mark.e2e
def test_two_workers_share_the_crawl(slow_demo, redis_server, redis_client, tmp_path, crawls):
    demo = slow_demo
    items = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    redis_url = f"REDIS_URL={redis_server.url}"
    workers = [  # paced so that the crawl lasts long enough for both to take a share
        crawls.start(demo.seeds, tmp_path / "data", redis_url, *PACED, items=path) for path in items
    ]
    logs = [crawls.finish(w) for w in workers]
    expected = set(demo.web.reachable())
    per_worker = [[i["url"] for i in read_items(p)] for p in items]
    union = Counter(per_worker[0] + per_worker[1])
    assert set(union) == expected
    assert max(union.values()) == 1  # no page stored by both
    fetches = demo.page_fetches()
    assert max(fetches.values()) == 1  # and none fetched twice (server side)
    assert all(len(p) > 20 for p in per_worker), [len(p) for p in per_worker]
    assert all("has no work left anywhere" in log for log in logs)
    totals = frontier_totals(redis_client)
    assert totals["seen"] > len(expected)  # dupefilter kept after close
    assert totals["queued"] == 0
    assert totals["leased"] == 0  # every lease acknowledged
    assert redis_client.scard(CrawlKeys("web").workers) == 0  # both deregistered


@pytest.mark.e2e
def test_late_worker_joins_a_running_crawl(slow_demo, redis_server, redis_client, tmp_path, crawls):
    demo = slow_demo
    redis_url = f"REDIS_URL={redis_server.url}"
    a = crawls.start(demo.seeds, tmp_path / "data", redis_url, *PACED, items=tmp_path / "a.jsonl")
    demo.wait_for_fetches(40)
    b = crawls.start(None, tmp_path / "data", redis_url, *PACED, items=tmp_path / "b.jsonl")
    crawls.finish(a)
    log_b = crawls.finish(b)
    got_b = read_items(tmp_path / "b.jsonl")
    assert len(got_b) > 10, log_b[-2000:]  # it took work, and did not close at once
    urls = [i["url"] for p in ("a", "b") for i in read_items(tmp_path / f"{p}.jsonl")]
    assert Counter(urls) == Counter(set(demo.web.reachable()))
    assert max(demo.page_fetches().values()) == 1


@pytest.mark.e2e
def test_stopping_a_worker_keeps_the_crawl(slow_demo, redis_server, redis_client, tmp_path, crawls):
    """Ctrl-C on the only worker: queue and dupefilter stay; a new worker finishes the crawl."""
    demo = slow_demo
    redis_url = f"REDIS_URL={redis_server.url}"
    a = crawls.start(demo.seeds, tmp_path / "data", redis_url, items=tmp_path / "a.jsonl")
    demo.wait_for_fetches(40)
    a.send_signal(signal.SIGINT)
    log_a = crawls.finish(a)
    assert "shutting down gracefully" in log_a
    totals = frontier_totals(redis_client)
    assert totals["queued"] > 0
    assert totals["seen"] > 0
    result = crawls.run(None, tmp_path / "data", redis_url, items=tmp_path / "b.jsonl")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "requests queued" in result.stderr
    urls = [i["url"] for p in ("a", "b") for i in read_items(tmp_path / f"{p}.jsonl")]
    assert Counter(urls) == Counter(set(demo.web.reachable()))
    assert max(demo.page_fetches().values()) == 1


@pytest.mark.e2e
def test_a_second_ctrl_c_stops_a_worker_at_once_and_loses_nothing(
    slow_demo, redis_server, tmp_path, crawls
):
    """The forced stop: no close_spider runs, so nobody stops the pipelines' thread pools;
    their threads must not hold the worker at exit (webcrawl/threadpools.py)."""
    demo = slow_demo
    # (leases of 3 s: those the forced stop leaves expire soon for the crawl that resumes)
    settings = (f"REDIS_URL={redis_server.url}", "WARC_ENABLED=True", "FRONTIER_LEASE_TIMEOUT=3")
    a = crawls.start(demo.seeds, tmp_path / "data", *settings)
    demo.wait_for_fetches(40)
    a.send_signal(signal.SIGINT)
    # the second once the first is handled, while the graceful stop runs (a fixed 0.3 s
    # wait let it finish first, now and then: the second then hit the interpreter's exit)
    deadline = time.monotonic() + 10
    while "shutting down gracefully" not in a.log_text() and time.monotonic() < deadline:
        time.sleep(0.005)
    a.send_signal(signal.SIGINT)
    a.wait(20)  # (hung for ever before)
    assert "forcing unclean shutdown" in a.log_text()
    result = crawls.run(None, tmp_path / "data", *settings)
    assert result.returncode == 0, result.stderr[-2000:]
    with open_store(f"sqlite:///{tmp_path / 'data' / 'webtable.sqlite3'}") as store:
        rows = list(store.scan_pages())
    assert sorted(r["url"] for r in rows) == sorted(demo.web.reachable())  # once each
    assert all(r["warc"] for r in rows)


@pytest.mark.e2e
def test_redis_restart_mid_crawl_loses_nothing(slow_demo, tmp_path, crawls):
    """Redis (with persistence) stops for a while and comes back: the crawl completes."""
    from conftest import RedisServer, free_port

    demo = slow_demo
    port = free_port()
    server = RedisServer(f"redis://127.0.0.1:{port}/0", port, tmp_path)
    server.start(appendonly=True)
    try:
        a = crawls.start(
            demo.seeds,
            tmp_path / "data",
            f"REDIS_URL={server.url}",
            "FRONTIER_LEASE_TIMEOUT=3",
            items=tmp_path / "a.jsonl",
        )
        demo.wait_for_fetches(40)
        server.stop()  # saves its append-only file on the way out
        time.sleep(2)
        server.start(appendonly=True)
        log = crawls.finish(a)
    finally:
        server.stop()
    assert "Could not" in log and "retrying until Redis at" in log
    urls = Counter(i["url"] for i in read_items(tmp_path / "a.jsonl"))
    assert max(urls.values()) == 1
    assert max(demo.page_fetches().values()) == 1
    # A pop that Redis executed just before it stopped, whose reply never
    # arrived, is leased to nobody alive: its lease expires and it is requeued.
    assert set(urls) == set(demo.web.reachable())


@pytest.mark.e2e
@pytest.mark.parametrize("grace", [15, 0])
@pytest.mark.usefixtures("redis_client")
def test_an_unseeded_worker_waits_for_the_seeds_of_a_worker_still_starting(
    grace, slow_demo, redis_server, tmp_path, crawls
):
    """Workers started together (scrapyd, webcrawl deploy): the one without seeds must
    not close before the one with the seeds has pushed them.  Grace 0 is the control.
    (``redis_client`` empties the shared Redis: the crawl must be new.)"""
    data, redis_url = tmp_path / "data", f"REDIS_URL={redis_server.url}"
    b = crawls.start(
        None, data, redis_url, *PACED, f"FRONTIER_START_GRACE={grace}", items=tmp_path / "b.jsonl"
    )
    time.sleep(4)  # B is up (or, without the grace, gone) before A starts
    a = crawls.start(slow_demo.seeds, data, redis_url, *PACED, items=tmp_path / "a.jsonl")
    crawls.finish(a)
    crawls.finish(b)
    fetched_by_b = len(read_items(tmp_path / "b.jsonl"))
    if grace:
        assert fetched_by_b > 20
        urls = [i["url"] for p in ("a", "b") for i in read_items(tmp_path / f"{p}.jsonl")]
        assert sorted(urls) == sorted(slow_demo.web.reachable())
    else:
        assert fetched_by_b == 0


# A worker whose clock is two minutes ahead of the others' (and of Redis's).
SKEWED = """import sys, time
_real = time.time
time.time = lambda: _real() + 120.0
from scrapy.cmdline import execute
execute()
"""


@pytest.mark.e2e
def test_a_worker_with_a_clock_ahead_requeues_nothing_and_keeps_politeness(
    slow_demo, redis_server, redis_client, tmp_path, crawls
):
    """Lease deadlines, host turns and back-offs are Redis's time: the skewed worker
    does not take the others' live leases for expired (pages fetched twice)."""
    demo = slow_demo
    redis_url = f"REDIS_URL={redis_server.url}"
    a = crawls.start(demo.seeds, tmp_path / "data", redis_url, *PACED, items=tmp_path / "a.jsonl")
    demo.wait_for_fetches(10)
    b = crawls.start(
        None, tmp_path / "data", redis_url, *PACED, items=tmp_path / "b.jsonl", code=SKEWED
    )
    logs = [crawls.finish(a), crawls.finish(b)]
    assert all("lease_expired" not in log for log in logs), "live leases were requeued"
    fetches = demo.page_fetches()
    assert max(fetches.values()) == 1, [u for u, n in fetches.items() if n > 1]
    union = Counter(i["url"] for p in ("a", "b") for i in read_items(tmp_path / f"{p}.jsonl"))
    assert set(union) == set(demo.web.reachable()) and max(union.values()) == 1
    assert len(read_items(tmp_path / "b.jsonl")) > 10  # the skewed worker took part


def test_a_call_to_a_hung_redis_fails_well_within_a_second(tmp_path):
    """Workers call Redis on the reactor thread: a Redis that stopped answering (here
    SIGSTOP) must not freeze every download for redis-py's 3 x 10 s."""
    import os

    import redis
    from conftest import RedisServer, free_port
    from scrapy.settings import Settings

    from webcrawl.frontier.redisconn import CrawlRedis

    port = free_port()
    server = RedisServer(f"redis://127.0.0.1:{port}/0", port, tmp_path)
    server.start()
    settings = Settings()
    settings.setmodule("webcrawl.settings.defaults")
    settings.set("REDIS_URL", server.url)
    conn = CrawlRedis.from_settings(settings)
    try:
        conn.open()
        os.kill(server.proc.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            conn.client.get("x")
        took = time.monotonic() - started
        os.kill(server.proc.pid, signal.SIGCONT)
        assert took < 1.0, took
        assert conn.client.get("x") is None  # and it works again once Redis answers
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        conn.close()
        server.stop()


@pytest.mark.e2e
def test_a_redis_that_hangs_mid_crawl_loses_nothing_and_charges_no_site(
    slow_demo, tmp_path, crawls
):
    import os

    from conftest import RedisServer, free_port

    demo = slow_demo
    port = free_port()
    server = RedisServer(f"redis://127.0.0.1:{port}/0", port, tmp_path)
    server.start()
    try:
        a = crawls.start(
            demo.seeds,
            tmp_path / "data",
            f"REDIS_URL={server.url}",
            "FRONTIER_LEASE_TIMEOUT=6",
            "FAILPATH_MIN_DELAY=2",
            "FAILPATH_MAX_DELAY=4",
            items=tmp_path / "a.jsonl",
        )
        demo.wait_for_fetches(40)
        # shorter than the lease timeout (leases cannot be renewed meanwhile); pops that
        # Redis runs when it wakes up, for a worker that gave up on them, expire after it
        os.kill(server.proc.pid, signal.SIGSTOP)
        time.sleep(3)
        os.kill(server.proc.pid, signal.SIGCONT)
        log = crawls.finish(a)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()
    assert "retrying until Redis at" in log
    items = read_items(tmp_path / "a.jsonl")
    urls = Counter(i["url"] for i in items)
    assert set(urls) == set(demo.web.reachable()) and max(urls.values()) == 1
    assert [i["url"] for i in items if i["kind"] == "failed"] == []
    assert "'failpath/failures'" not in log  # the outage was not the sites' fault
