"""The adaptive per-host delay: the policy alone, then against the demo web."""

import email.utils
import itertools
from collections import defaultdict

import pytest
from conftest import Demo, demo_server

from webcrawl.demo.web import DemoWeb
from webcrawl.frontier.adaptive_delay import DelayPolicy, parse_retry_after

POLICY = DelayPolicy(base=0.5, max_delay=30.0, target_concurrency=1.0)


def test_backs_off_on_429_and_503_honouring_retry_after():
    assert POLICY.next_delay(0.5, status=429, latency=0.1, floor=0.5) == 1.0
    assert POLICY.next_delay(1.0, status=503, latency=0.1, floor=0.5) == 2.0
    assert POLICY.next_delay(0.5, status=429, latency=0.1, floor=0.5, retry_after=7) == 7.0
    assert POLICY.next_delay(20.0, status=503, latency=0.1, floor=0.5) == 30.0  # capped
    assert POLICY.next_delay(1.0, status=429, latency=0.1, floor=0.5, retry_after=3600) == 30.0
    # a zero base still backs off
    zero = DelayPolicy(base=0.0, max_delay=30.0, target_concurrency=1.0)
    assert zero.next_delay(0.0, status=429, latency=0.0, floor=0.0) == 0.1
    # ...and relaxes by halves, latency adding nothing, back to no delay
    assert zero.next_delay(0.4, status=200, latency=2.0, floor=0.0) == 0.2
    assert zero.next_delay(0.01, status=200, latency=2.0, floor=0.0) == 0.0


def test_a_retry_after_longer_than_the_max_delay_is_obeyed_for_its_window():
    """ADAPTIVE_DELAY_MAX bounds the delay between requests, not the wait a server asks
    for: Retry-After 3600 keeps the host waiting an hour (then 30 s between requests)."""
    delay = POLICY.next_delay(1.0, status=429, latency=0.1, floor=0.5, retry_after=3600)
    assert delay == 30.0
    assert POLICY.backoff_window(delay, 3600) == (3600, False)
    assert POLICY.backoff_window(2.0, None) == (2.0, False)  # a 503 alone: the new delay
    assert POLICY.backoff_window(30.0, 7 * 86400) == (3600.0, True)  # cut, and said so
    longer = DelayPolicy(base=0.5, max_delay=30.0, target_concurrency=1.0, retry_after_max=1e6)
    assert longer.backoff_window(30.0, 7 * 86400) == (7 * 86400, False)


def test_relaxes_back_to_the_floor_when_healthy():
    delay = 16.0
    steps = []
    while delay > 0.5:
        delay = POLICY.next_delay(delay, status=200, latency=0.05, floor=0.5)
        steps.append(delay)
    assert steps[:3] == pytest.approx([8.025, 4.0375, 2.04375])  # halfway to the target
    assert steps[-1] == 0.5 and len(steps) < 10  # never below the floor


def test_follows_latency_and_never_goes_below_crawl_delay():
    slow = POLICY.next_delay(0.5, status=200, latency=4.0, floor=0.5)
    assert slow == 2.25
    floor = POLICY.floor(crawl_delay=2.0)
    assert floor == 2.0 and POLICY.floor(None) == 0.5 and POLICY.floor(0.1) == 0.5
    assert POLICY.next_delay(2.0, status=200, latency=0.0, floor=floor) == 2.0
    half = DelayPolicy(base=0.5, max_delay=30.0, target_concurrency=2.0)
    assert half.next_delay(0.5, status=200, latency=4.0, floor=0.5) == 1.25


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        ("0", 0.0),
        ("", None),
        (None, None),
        ("soon", None),
        (email.utils.formatdate(1000.0 + 30, usegmt=True), 30.0),
        (email.utils.formatdate(1000.0 - 30, usegmt=True), 0.0),
    ],
)
def test_retry_after(value, seconds):
    assert parse_retry_after(value, now=1000.0) == seconds


def run_demo(crawls, tmp_path, *settings, faults=(), crawl_delays=()):
    log = tmp_path / "requests.jsonl"
    with demo_server(4, 24, log, faults=faults, crawl_delays=crawl_delays) as info:
        demo = Demo(info, DemoWeb(info["hosts"], info["pages_per_host"], info["seed"]), log)
        result = crawls.run(demo.seeds, tmp_path / "data", *settings, "DEPTH_LIMIT=2")
    assert result.returncode == 0, result.stderr[-2000:]
    times = defaultdict(list)
    for r in demo.requests():
        if r["path"] != "/robots.txt":
            times[r["host"]].append((r["t"], r["status"], r["path"]))
    return info, times, result.stderr


@pytest.mark.e2e
def test_429_with_retry_after_slows_the_host_for_every_request(tmp_path, crawls):
    info, times, log = run_demo(
        crawls, tmp_path, "FRONTIER_HOST_DELAY=0.02", faults=["1:/s0/:429:1:1"]
    )
    host = times[info["hosts"][1]]
    t429 = next(t for t, status, _ in host if status == 429)
    # nothing else was asked of that host for the second it asked for, once the crawler
    # had the answer: requests already on their way when the 429 was sent (the host
    # delay is 0.02 s, below the latency) may still arrive in the first moments
    in_flight = 0.2
    asked = [(t - t429, p) for t, _, p in host if t429 + in_flight < t < t429 + 1.0]
    assert not asked, asked
    assert sum(1 for t, _, _ in host if t429 < t <= t429 + in_flight) <= 2
    assert "answered 429" in log
    # the 429'd pages were fetched again later, and stored
    assert all(any(p == path and s == 200 for _, s, p in host) for _, st, path in host if st == 429)
    other = sorted(t for t, _, _ in times[info["hosts"][0]])
    assert min(b - a for a, b in itertools.pairwise(other)) < 0.5  # others unaffected


@pytest.mark.e2e
def test_a_retry_after_beyond_adaptive_delay_max_is_obeyed(tmp_path, crawls):
    info, times, log = run_demo(
        crawls,
        tmp_path,
        "FRONTIER_HOST_DELAY=0.02",
        "ADAPTIVE_DELAY_MAX=0.3",
        faults=["1:/s0/:429:1:2"],
    )
    host = times[info["hosts"][1]]
    t429 = min(t for t, status, _ in host if status == 429)
    in_flight = 0.2  # requests already on their way when the 429 was sent
    asked = [(round(t - t429, 2), p) for t, _, p in host if t429 + in_flight < t < t429 + 1.9]
    assert not asked, asked
    assert "no request to it for 2.0 s" in log


@pytest.mark.e2e
def test_robots_crawl_delay_is_a_floor(tmp_path, crawls):
    info, times, log = run_demo(
        crawls, tmp_path, "FRONTIER_HOST_DELAY=0.02", crawl_delays=["2:0.3"]
    )
    slow = sorted(t for t, _, _ in times[info["hosts"][2]])
    assert min(b - a for a, b in itertools.pairwise(slow)) >= 0.3
    assert "asks for Crawl-delay 0.3 s" in log
    fast = sorted(t for t, _, _ in times[info["hosts"][0]])
    assert min(b - a for a, b in itertools.pairwise(fast)) < 0.3
