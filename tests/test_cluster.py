"""Several workers share one Redis: nothing fetched twice, nothing lost, nobody leaves early."""

import signal
import subprocess
import time
from collections import Counter

import pytest
from conftest import ROOT, crawl_cmd, crawl_env, read_items, run_crawl

from webcrawl.keys import CrawlKeys

# About 40 pages/s over all workers on the 4 seed hosts: a crawl of the slow demo web
# lasts ~7 s, long enough for a second worker to start and take its share.
PACED = ("FRONTIER_HOST_DELAY=0.1",)


@pytest.fixture
def workers():
    """Started worker processes; any left running when a test fails is killed."""
    procs = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start_worker(procs, seeds, data_dir, redis_url, items, *settings):
    log = items.with_suffix(".log")
    with open(log, "w") as err:  # a file, not a pipe: a full pipe would stall the worker
        proc = subprocess.Popen(
            crawl_cmd(seeds, data_dir, f"REDIS_URL={redis_url}", *settings, items=items),
            cwd=ROOT, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    proc.log = log
    procs.append(proc)
    return proc


def finish(proc, timeout=120):
    proc.wait(timeout)
    log = proc.log.read_text()
    assert proc.returncode == 0, log[-3000:]
    return log


def wait_for_fetches(demo, n, timeout=30):
    deadline = time.monotonic() + timeout
    while sum(demo.page_fetches().values()) < n:
        assert time.monotonic() < deadline, "crawl did not get going"
        time.sleep(0.05)


def test_two_workers_share_the_crawl(slow_demo, redis_server, redis_client, tmp_path, workers):
    demo = slow_demo
    items = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for path in items:  # paced so that the crawl lasts long enough for both to take a share
        start_worker(workers, demo.seeds, tmp_path / "data", redis_server.url, path, *PACED)
    logs = [finish(w) for w in workers]
    expected = set(demo.web.reachable())
    per_worker = [[i["url"] for i in read_items(p)] for p in items]
    union = Counter(per_worker[0] + per_worker[1])
    assert set(union) == expected
    assert max(union.values()) == 1  # no page stored by both
    fetches = demo.page_fetches()
    assert max(fetches.values()) == 1  # and none fetched twice (server side)
    assert all(len(p) > 20 for p in per_worker), [len(p) for p in per_worker]
    assert all("has no work left anywhere" in log for log in logs)
    keys = CrawlKeys("web")
    assert redis_client.scard(keys.seen) > len(expected)  # dupefilter kept after close
    assert int(redis_client.get(keys.queued)) == 0
    assert redis_client.zcard(keys.leases) == 0  # every lease acknowledged
    assert redis_client.scard(keys.workers) == 0  # both deregistered


def test_late_worker_joins_a_running_crawl(
    slow_demo, redis_server, redis_client, tmp_path, workers
):
    demo = slow_demo
    a = start_worker(workers, demo.seeds, tmp_path / "data", redis_server.url, tmp_path / "a.jsonl",
                     *PACED)  # fmt: skip
    wait_for_fetches(demo, 40)
    b = start_worker(workers, None, tmp_path / "data", redis_server.url, tmp_path / "b.jsonl",
                     *PACED)  # fmt: skip
    finish(a)
    log_b = finish(b)
    got_b = read_items(tmp_path / "b.jsonl")
    assert len(got_b) > 10, log_b[-2000:]  # it took work, and did not close at once
    urls = [i["url"] for p in ("a", "b") for i in read_items(tmp_path / f"{p}.jsonl")]
    assert Counter(urls) == Counter(set(demo.web.reachable()))
    assert max(demo.page_fetches().values()) == 1


def test_stopping_a_worker_keeps_the_crawl(
    slow_demo, redis_server, redis_client, tmp_path, workers
):
    """Ctrl-C on the only worker: queue and dupefilter stay; a new worker finishes the crawl."""
    demo = slow_demo
    a = start_worker(workers, demo.seeds, tmp_path / "data", redis_server.url, tmp_path / "a.jsonl")
    wait_for_fetches(demo, 40)
    a.send_signal(signal.SIGINT)
    log_a = finish(a)
    assert "shutting down gracefully" in log_a
    keys = CrawlKeys("web")
    assert int(redis_client.get(keys.queued)) > 0
    assert redis_client.scard(keys.seen) > 0
    result = run_crawl(None, tmp_path / "data", f"REDIS_URL={redis_server.url}",
                       items=tmp_path / "b.jsonl")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "requests queued" in result.stderr
    urls = [i["url"] for p in ("a", "b") for i in read_items(tmp_path / f"{p}.jsonl")]
    assert Counter(urls) == Counter(set(demo.web.reachable()))
    assert max(demo.page_fetches().values()) == 1


def test_redis_restart_mid_crawl_loses_nothing(slow_demo, tmp_path, workers):
    """Redis (with persistence) stops for a while and comes back: the crawl completes."""
    from conftest import RedisServer, free_port

    demo = slow_demo
    port = free_port()
    server = RedisServer(f"redis://127.0.0.1:{port}/0", port, tmp_path)
    server.start(appendonly=True)
    try:
        a = start_worker(workers, demo.seeds, tmp_path / "data", server.url, tmp_path / "a.jsonl",
                         "FRONTIER_LEASE_TIMEOUT=3")  # fmt: skip
        wait_for_fetches(demo, 40)
        server.stop()  # saves its append-only file on the way out
        time.sleep(2)
        server.start(appendonly=True)
        log = finish(a)
    finally:
        server.stop()
    assert "Could not" in log and "retrying until Redis at" in log
    urls = Counter(i["url"] for i in read_items(tmp_path / "a.jsonl"))
    assert max(urls.values()) == 1
    assert max(demo.page_fetches().values()) == 1
    # A pop that Redis executed just before it stopped, whose reply never
    # arrived, is leased to nobody alive: its lease expires and it is requeued.
    assert set(urls) == set(demo.web.reachable())


@pytest.mark.parametrize("grace", [15, 0])
@pytest.mark.usefixtures("redis_client")
def test_an_unseeded_worker_waits_for_the_seeds_of_a_worker_still_starting(
    grace, slow_demo, redis_server, tmp_path, workers
):
    """Workers started together (scrapyd, webcrawl deploy): the one without seeds must
    not close before the one with the seeds has pushed them.  Grace 0 is the control.
    (``redis_client`` empties the shared Redis: the crawl must be new.)"""
    data = tmp_path / "data"
    b = start_worker(workers, None, data, redis_server.url, tmp_path / "b.jsonl", *PACED,
                     f"FRONTIER_START_GRACE={grace}")  # fmt: skip
    time.sleep(4)  # B is up (or, without the grace, gone) before A starts
    a = start_worker(workers, slow_demo.seeds, data, redis_server.url, tmp_path / "a.jsonl",
                     *PACED)  # fmt: skip
    finish(a)
    finish(b)
    fetched_by_b = len(read_items(tmp_path / "b.jsonl"))
    if grace:
        assert fetched_by_b > 20
        urls = [i["url"] for p in ("a", "b") for i in read_items(tmp_path / f"{p}.jsonl")]
        assert sorted(urls) == sorted(slow_demo.web.reachable())
    else:
        assert fetched_by_b == 0
