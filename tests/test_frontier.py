"""The cluster frontier from the servers' side: politeness, fairness, no lost URLs."""

import re
import signal
import time
from collections import defaultdict
from itertools import pairwise

import pytest

from webcrawl.store import open_store

pytestmark = pytest.mark.e2e


def stored_urls(data_dir):
    with open_store(f"sqlite:///{data_dir}/webtable.sqlite3") as store:
        return [r["url"] for r in store.scan_pages()]


def page_times(demo):
    """host -> sorted request times, robots.txt excluded (it is fetched outside the queue)."""
    times = defaultdict(list)
    for r in demo.requests():
        if r["path"] != "/robots.txt":
            times[r["host"]].append(r["t"])
    return {h: sorted(t) for h, t in times.items()}


def test_politeness_holds_across_workers(demo, redis_server, redis_client, tmp_path, crawls):
    delay = 0.25
    settings = (
        f"REDIS_URL={redis_server.url}",
        f"FRONTIER_HOST_DELAY={delay}",
        "DEPTH_LIMIT=2",
        "CONCURRENT_REQUESTS_PER_DOMAIN=8",
    )
    workers = [crawls.start(demo.seeds, tmp_path / "data", *settings) for _ in range(2)]
    for worker in workers:
        crawls.finish(worker)
    gaps = {
        h: min(b - a for a, b in pairwise(t)) for h, t in page_times(demo).items() if len(t) > 1
    }
    assert len(gaps) == 4
    assert min(gaps.values()) >= delay, gaps
    # and the pace is the configured one, not slower: mean gap within 50 % of it
    for t in page_times(demo).values():
        assert (t[-1] - t[0]) / (len(t) - 1) < delay * 1.5


STOCK = (  # the control: stock scrapy-redis, one global queue, Scrapy's per-process delay
    "SCHEDULER=scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS=scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_QUEUE_CLASS=scrapy_redis.queue.FifoQueue",
    "SCHEDULER_SERIALIZER=webcrawl.frontier.serialize",
    "DOWNLOAD_DELAY=0.02",
    "RANDOMIZE_DOWNLOAD_DELAY=False",
    "CONCURRENT_REQUESTS_PER_DOMAIN=1",
)


@pytest.mark.parametrize("frontier", ["webcrawl", "stock"])
def test_a_big_host_does_not_hold_up_small_ones(
    lopsided_demo, redis_server, tmp_path, frontier, crawls
):
    demo = lopsided_demo
    settings = ["FRONTIER_HOST_DELAY=0.02"]
    if frontier == "stock":
        settings = [*STOCK, f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=False"]
    result = crawls.run(demo.seeds, tmp_path / "data", *settings)
    assert result.returncode == 0, result.stderr[-2000:]
    times = page_times(demo)
    big = demo.info["hosts"][0]
    start = min(t[0] for t in times.values())
    big_done = times[big][-1] - start
    small_done = max(t[-1] - start for host, t in times.items() if host != big)
    if frontier == "webcrawl":
        assert small_done < big_done * 0.4, (small_done, big_done)
        assert sorted(stored_urls(tmp_path / "data")) == sorted(demo.web.reachable())
    else:  # the big host's backlog holds the small hosts back
        assert small_done > big_done * 0.4, (small_done, big_done)


def test_killed_workers_lose_nothing(slow_demo, redis_server, redis_client, tmp_path, crawls):
    """Workers join and are killed (kill -9) again and again mid-crawl: every page is still
    stored, and the server still sees the delay between two requests to a host."""
    demo = slow_demo
    data = tmp_path / "data"
    # ~30 pages/s over the 4 hosts: the crawl lasts ~10 s, long enough for three victims
    paced = (
        f"REDIS_URL={redis_server.url}",
        "FRONTIER_HOST_DELAY=0.12",
        "FRONTIER_LEASE_TIMEOUT=2",
    )
    steady = crawls.start(demo.seeds, data, *paced, "USER_AGENT=steady", name="steady")
    killed_agents = []
    for i in range(3):
        agent = f"victim-{i}"
        victim = crawls.start(demo.seeds, data, *paced, f"USER_AGENT={agent}", name=agent)
        deadline = time.monotonic() + 30
        while not any(r["ua"] == agent for r in demo.requests()):
            assert steady.poll() is None, f"the crawl ended before {agent} took part"
            assert time.monotonic() < deadline, f"{agent} never fetched"
            time.sleep(0.05)
        time.sleep(0.5)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed_agents.append(agent)
    log = crawls.finish(steady)
    assert "whose lease ran out" in log
    expected = set(demo.web.reachable())
    urls = stored_urls(data)
    assert sorted(urls) == sorted(expected)  # nothing lost, one row each
    fetched = defaultdict(list)
    for r in demo.requests():
        if r["path"] != "/robots.txt":
            fetched[f"http://{r['host']}{r['path']}"].append(r["ua"])
    twice = {u: agents for u, agents in fetched.items() if len(agents) > 1}
    # only what a killed worker held was fetched again
    assert all(any(a in killed_agents for a in agents) for agents in twice.values()), twice
    # politeness at the server, whoever sent (a killed worker's turns held until they expire)
    gaps = {h: min(b - a for a, b in pairwise(t)) for h, t in page_times(demo).items()}
    assert min(gaps.values()) >= 0.12, gaps


def test_failures_are_requeued_with_backoff_then_recorded(tmp_path, crawls):
    """Host 1 resets each URL twice (transient); host 2's /s1/ always (dead)."""
    from conftest import Demo, demo_server

    from webcrawl.demo.web import DemoWeb

    log = tmp_path / "requests.jsonl"
    faults = ["1:/:reset:2", "2:/s1/:reset"]
    with demo_server(4, 24, log, faults=faults) as info:
        demo = Demo(info, DemoWeb(info["hosts"], info["pages_per_host"], info["seed"]), log)
        # the frontier's retries alone: failed-path filtering (tests/test_failpath_crawl.py)
        # would drop the dead subtree's later URLs instead of trying each 1 + 3 times
        settings = (
            "FRONTIER_RETRY_BACKOFF=0.2",
            "STATUS_HEARTBEAT_INTERVAL=0.5",
            "FAILPATH_ENABLED=False",
        )
        result = crawls.run(demo.seeds, tmp_path / "data", *settings, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    flaky, dead = info["hosts"][1], info["hosts"][2]
    retried = set(re.findall(r"Retrying <GET (\S+)> \(failed 1 times\)", result.stderr))
    assert any(flaky in u for u in retried)
    rows = {}
    with open_store(f"sqlite:///{tmp_path}/data/webtable.sqlite3") as store:
        rows = {r["url"]: r for r in store.scan_pages()}
    assert set(rows) == set(demo.web.reachable(dead=(f"http://{dead}/s1/",)))
    fetches = defaultdict(list)
    for r in demo.requests():
        if r["path"] != "/robots.txt":
            fetches[f"http://{r['host']}{r['path']}"].append((r["t"], r["status"]))
    for url, row in rows.items():
        host = url.split("/")[2]
        attempts = fetches[url]
        # Twisted's connection pool retries a GET once, at once, when a reused
        # keep-alive connection drops; the others are ours, after the back-off.
        if host == flaky:  # reset twice, then fetched (a redirect source answers 301)
            assert [s for _, s in attempts] == [0, 0, 301 if "/old/" in url else row["status"]]
            if url in retried:
                assert attempts[2][0] - attempts[0][0] >= 0.2, (url, attempts)
        elif host == dead and url.split("/", 3)[3].startswith("s1/"):
            assert row["kind"] == "failed" and row["status"] == 0, row
            assert "Connection" in row["error"], row["error"]
            assert {s for _, s in attempts} == {0}
            assert 4 <= len(attempts) <= 8  # 1 + RETRY_TIMES (+ Twisted's at once)
            # back-off 0.2 + 0.4 + 0.8 s between the first attempt and the last
            assert attempts[-1][0] - attempts[0][0] >= 1.4, attempts
        else:
            assert len(attempts) == 1, (url, attempts)
    assert f"'pages/failed': {sum(r['kind'] == 'failed' for r in rows.values())}" in result.stderr
