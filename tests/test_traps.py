"""Crawl-trap rules and session identifiers (plain logic, no network)."""

from __future__ import annotations

import pytest

from webcrawl.safety.traps import TrapRules, repeated_segment
from webcrawl.urls.urlkey import canonical_url, key_to_url, url_to_key


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://h/a/b/a/b/a/b/", "repeated_segments"),
        ("http://h/x/x/x", "repeated_segments"),
        ("http://h/cal/2024/cal/2025/cal/2026", "repeated_segments"),
        ("http://h/" + "p" * 2100, "url_too_long"),
        ("http://h/a/b/a/b", None),  # twice is allowed
        ("http://h/docs/v1/api/v1/", None),
        ("http://h//////", None),  # empty segments do not count
        ("http://h/?q=a/a/a/a", None),  # only the path
    ],
)
def test_trap_rules(url, why):
    assert TrapRules().why(url) == why


def test_trap_rules_can_be_turned_off():
    assert TrapRules(0, 0).why("http://h/a/a/a/a/" + "x" * 5000) is None
    assert repeated_segment("http://h/a/b/a/b/a", 2) == "a"
    assert repeated_segment("http://h/a/b/a/b/a", 3) is None


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://h/x;jsessionid=0A1B2C3D?b=1&a=2", "http://h/x?a=2&b=1"),
        ("http://h/x;JSESSIONID=0A1B;v=2", "http://h/x;v=2"),
        ("http://h/page.php?PHPSESSID=abc&id=7", "http://h/page.php?id=7"),
        ("http://h/?sid=1&sessionid=2&session_id=3&sessid=4", "http://h/"),
        ("http://h/a?CFID=1&CFTOKEN=2&zenid=3&osCsid=4&keep=1", "http://h/a?keep=1"),
        ("http://h/a?ASPSESSIONIDQQGGQGPA=KGMD", "http://h/a"),
        ("http://h/(S(kdh3ocbq5ydfa42mm5rm0zuy))/default.aspx", "http://h/default.aspx"),
        ("http://h/(X(1)S(abc))/a/b", "http://h/a/b"),
        ("http://h/a?side=1&sidebar=2", "http://h/a?side=1&sidebar=2"),  # not session names
        ("http://h/(notes)/a", "http://h/(notes)/a"),
    ],
)
def test_session_identifiers_are_removed(url, canonical):
    assert canonical_url(url) == canonical
    assert canonical_url(canonical) == canonical
    assert key_to_url(url_to_key(url)) == canonical


def test_a_hosts_new_urls_stop_at_its_page_budget(redis_client):
    """FRONTIER_MAX_PAGES_PER_HOST in the step script: a host takes that many new URLs
    in all (over any number of steps and workers); the rest are dropped, counted, and
    the host is listed; other hosts, duplicates and dont_filter requests are not
    affected."""
    from scrapy import Request, Spider

    from webcrawl.frontier.inspection import Inspector
    from webcrawl.frontier.keys import CrawlKeys
    from webcrawl.frontier.queue import HostQueue

    keys = CrawlKeys("budget", 4)
    workers = [HostQueue(redis_client, Spider("s"), keys, max_pages_per_host=5) for _ in range(2)]

    def push(queue, urls, fingerprint=True):
        entries = [
            (u.encode() if fingerprint else b"", u.split("/")[2], 0, 0.0, queue.encode(Request(u)))
            for u in urls
        ]
        return queue.step(now=0, pushes=entries, pop=False)

    first = push(workers[0], [f"http://trap/{i}" for i in range(3)] + ["http://ok/1"])
    assert (first.added, first.over_budget) == (4, 0)
    second = push(workers[1], [f"http://trap/{i}" for i in range(10)])  # 0..2 are known
    assert (second.added, second.over_budget) == (2, 5)
    assert push(workers[0], ["http://trap/99"]).over_budget == 1
    assert push(workers[0], ["http://trap/0"], fingerprint=False).added == 1  # a retry
    assert push(workers[1], [f"http://ok/{i}" for i in range(2, 6)]).over_budget == 0
    assert Inspector(redis_client, keys).hosts_over_budget() == [(5, "trap")]
    popped = set()
    while result := workers[0].step(now=0, pop=10):
        if not result.popped:
            break
        popped |= {r.url for r, _ in result.popped}
        workers[0].step(now=0, acks=[lease for _, lease in result.popped], pop=False)
    assert {u for u in popped if "trap" in u} == {f"http://trap/{i}" for i in range(5)}


@pytest.mark.parametrize("seen_mode", ["set", "bloom"])
def test_urls_over_a_hosts_budget_stay_out_of_the_dupefilter(redis_client, seen_mode):
    """A URL dropped over its host's budget is not recorded as seen: a host's links past
    its budget would otherwise fill its shard's Bloom filter without end, and other hosts'
    new URLs there would be taken for seen.  Dropped again, it is counted again; the
    host's URLs within its budget are in the dupefilter."""
    from scrapy import Request, Spider

    from webcrawl.frontier.bloom import BloomParams
    from webcrawl.frontier.keys import CrawlKeys
    from webcrawl.frontier.queue import HostQueue
    from webcrawl.frontier.scripts import seen_key

    keys = CrawlKeys("outside", 1)
    queue = HostQueue(redis_client, Spider("s"), keys, max_pages_per_host=3)
    params = BloomParams(1000, 0.001)
    key = seen_key(keys.shard(0), seen_mode)

    def fingerprint(url):
        digest = url.encode().ljust(20, b"#")
        if seen_mode == "set":
            return digest
        return ",".join(map(str, params.offsets(digest))).encode()

    def push(urls):
        entries = [(fingerprint(u), "big", 0, 0.0, queue.encode(Request(u))) for u in urls]
        return queue.step(now=0, pushes=entries, pop=False, seen_mode=seen_mode)

    def recorded():
        if seen_mode == "set":
            return redis_client.scard(key)
        return round(params.estimated_count(redis_client.bitcount(key)))

    first = push([f"http://big/{i}" for i in range(200)])
    assert (first.added, first.over_budget) == (3, 197)
    assert recorded() == 3
    again = push([f"http://big/{i}" for i in range(200)])
    assert (again.added, again.over_budget) == (0, 197)
    assert recorded() == 3
