"""Crawls whose host queues hold 2 requests in Redis, so that nearly every URL goes
through the store (SQLite, and the real HBase), with a worker killed (SIGKILL) in the
middle of a refill."""

import json
import signal
from collections import Counter, defaultdict

import pytest
from conftest import read_items
from test_store_contract import drop_tables

from webcrawl.store import open_store

pytestmark = pytest.mark.e2e

TINY = ("FRONTIER_HOT_PER_HOST=2", "FRONTIER_HOST_DELAY=0.1", "FRONTIER_LEASE_TIMEOUT=2")

# A worker that kills itself in its 5th refill: the refilled requests are in Redis, not
# yet deleted from the store (the moment a crash could queue them twice).  Just before,
# it writes the URLs it holds leased (handed to its engine, or popped ahead) to HELD:
# they come back when their leases expire, after its other pages.
DIES_IN_A_REFILL = """import gc, json, os, signal
from webcrawl.frontier import scripts
_run, _refills, _scheduler = scripts.Script.run_confirmed, [], []
def _held():
    if not _scheduler:
        _scheduler.extend(o for o in gc.get_objects() if hasattr(type(o), "next_request")
                          and hasattr(o, "_prefetched"))
    if not _scheduler:
        raise RuntimeError("no webcrawl scheduler in this worker")
    for _ in range(100):  # (the reactor's thread may change them meanwhile)
        try:
            return [r.url for s in _scheduler for r in [*s._leases, *(r for r, _ in s._prefetched)]]
        except RuntimeError:
            continue
    raise RuntimeError("could not read the held requests")
def _dying(self, router, keys, args, **kwargs):
    result = _run(self, router, keys, args, **kwargs)
    if self is scripts.REFILL and int(result[0][0]) > 0:  # (moved, kept rows), confirmed
        _refills.append(result)
        if len(_refills) == 4:
            _held()  # found now: the scan takes a while
        if len(_refills) == 5:
            with open(HELD, "w") as out:
                json.dump(_held(), out)
            os.kill(os.getpid(), signal.SIGKILL)
    return result
scripts.Script.run_confirmed = _dying
from scrapy.cmdline import execute
execute()
"""


def depth_order_breaks(demo, fetched: list[str]) -> list[tuple[str, int, int]]:
    """Pages a host served after a page of its two or more levels deeper (breadth-first
    with several requests in flight can be one level off, never two)."""
    depth = demo.web.reachable()  # URL -> its shortest depth
    deepest: dict[str, int] = defaultdict(int)
    breaks = []
    for url in fetched:
        host = url.split("/")[2]
        if depth[url] <= deepest[host] - 2:
            breaks.append((url, depth[url], deepest[host]))
        deepest[host] = max(deepest[host], depth[url])
    return breaks


def server_order(demo) -> list[str]:
    return [
        f"http://{r['host']}{r['path']}"
        for r in sorted(demo.requests(), key=lambda r: r["t"])
        if r["path"] != "/robots.txt"
    ]


@pytest.fixture(params=["sqlite", "hbase"])
def store_url(request, tmp_path):
    """The crawl's store: SQLite, or tables of their own in the session's real HBase."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'webtable.sqlite3'}"
        return
    url = request.getfixturevalue("hbase").url("thrift")
    yield url
    drop_tables(url)


def test_a_worker_killed_in_a_refill_loses_and_repeats_nothing(
    slow_demo, redis_server, tmp_path, store_url, crawls
):
    demo, url = slow_demo, store_url
    settings = (f"REDIS_URL={redis_server.url}", *TINY, f"STORE_URL={url}")
    steady = crawls.start(
        demo.seeds,
        tmp_path / "data",
        *settings,
        "USER_AGENT=steady",
        items=tmp_path / "steady.jsonl",
    )
    demo.wait_for_fetches(10)
    victim = crawls.start(
        None,
        tmp_path / "data",
        *settings,
        "USER_AGENT=victim",
        items=tmp_path / "victim.jsonl",
        code=DIES_IN_A_REFILL.replace("HELD", repr(str(tmp_path / "held.json"))),
    )
    assert victim.wait(120) == -signal.SIGKILL, victim.log_text()[-3000:]
    held = set(json.loads((tmp_path / "held.json").read_text()))
    log = crawls.finish(steady)
    assert "rows that a refill whose worker died had moved up" in log  # and were deleted
    expected = set(demo.web.reachable())
    with open_store(url) as store:
        stored = [row["url"] for row in store.scan_pages()]
        assert store.frontier_scan("web/", 10) == []  # the store's tier is empty
    assert sorted(stored) == sorted(expected)  # nothing lost, one row each
    fetched = defaultdict(list)
    for r in demo.requests():
        if r["path"] != "/robots.txt":
            fetched[f"http://{r['host']}{r['path']}"].append(r["ua"])
    twice = {u: agents for u, agents in fetched.items() if len(agents) > 1}
    # fetched once each, but for what the killed worker had in flight (its leases expire)
    assert all(agents.count("steady") == 1 and "victim" in agents for agents in twice.values()), (
        twice
    )
    assert len(twice) <= 8, twice
    # breadth-first, but for the pages the killed worker held (fetched by it or not): they
    # come back when their leases expire, after the others of their level
    late = held | set(twice)
    order = [u for u in server_order(demo) if u in expected and u not in late]
    assert depth_order_breaks(demo, order) == []
    assert (
        Counter(i["url"] for i in read_items(tmp_path / "steady.jsonl")).most_common(1)[0][1] == 1
    )
    stats = log.split("Dumping Scrapy stats")[-1]
    assert "'frontier/spilled'" in stats and "'frontier/refilled'" in stats


def test_two_workers_crawl_breadth_first_per_host_through_the_store(
    slow_demo, redis_server, tmp_path, store_url, crawls
):
    demo, url = slow_demo, store_url
    settings = (f"REDIS_URL={redis_server.url}", *TINY, f"STORE_URL={url}")
    workers = [
        crawls.start(demo.seeds, tmp_path / "data", *settings, items=tmp_path / f"{name}.jsonl")
        for name in ("a", "b")
    ]
    logs = [crawls.finish(w) for w in workers]
    assert max(demo.page_fetches().values()) == 1  # each page fetched once
    with open_store(url) as store:
        assert sorted(row["url"] for row in store.scan_pages()) == sorted(demo.web.reachable())
    order = [u for u in server_order(demo) if u in demo.web.reachable()]
    assert depth_order_breaks(demo, order) == []
    refilled = sum(
        int(log.split("'frontier/refilled': ")[1].split(",")[0])
        for log in logs
        if "'frontier/refilled'" in log
    )
    assert refilled > len(order) * 0.8  # nearly every URL went through the store
