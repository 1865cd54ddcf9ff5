"""Crawls that keep their pages in a real HBase (conftest's standalone HBase 2.6), and
crawls through its faults: a Thrift gateway killed, the whole HBase killed and
restarted on its write-ahead log, pooled connections dropped by the server."""

import struct
import time
import urllib.request

import happybase
import pytest
from conftest import read_items
from test_store_contract import drop_tables

from webcrawl.localhbase import LocalHBase
from webcrawl.store import open_store
from webcrawl.store.hbase import parse_hbase_url
from webcrawl.urls.urlkey import url_to_key

pytestmark = pytest.mark.e2e

PACED = ("FRONTIER_HOST_DELAY=0.1",)


def stored_urls(store_url: str) -> list[str]:
    with open_store(store_url) as store:
        return [row["url"] for row in store.scan_pages()]


def page_count(store_url: str) -> int:
    with open_store(store_url) as store:
        return store.count_pages()


def raw_connection(store_url: str) -> happybase.Connection:
    o = parse_hbase_url(store_url)
    return happybase.Connection(
        o["host"],
        o["port"],
        table_prefix=o["table_prefix"],
        transport=o["transport"],
        protocol=o["protocol"],
    )


def assert_every_page_stored_once(demo, url: str) -> None:
    """Every reachable page has its row, and the page count (a counter) agrees."""
    expected = set(demo.web.reachable())
    urls = stored_urls(url)
    assert len(urls) == len(set(urls))
    assert set(urls) == expected, sorted(expected - set(urls))[:10]
    assert page_count(url) == len(expected)  # counted once each, never twice


def test_two_workers_store_every_page_once_in_hbase(
    slow_demo,
    redis_server,
    tmp_path,
    hbase,
    crawls,
):
    url = hbase.url("thrift")
    items = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    workers = [
        crawls.start(
            slow_demo.seeds,
            tmp_path / "data",
            f"REDIS_URL={redis_server.url}",
            f"STORE_URL={url}",
            "STORE_CONTENT=True",
            *PACED,
            items=path,
        )
        for path in items
    ]
    logs = [crawls.finish(w) for w in workers]
    expected = set(slow_demo.web.reachable())
    assert_every_page_stored_once(slow_demo, url)
    crawled = [i["url"] for p in items for i in read_items(p)]
    assert sorted(crawled) == sorted(expected)  # each page crawled (and so stored) once
    assert all(len(read_items(p)) > 20 for p in items)
    assert not any("Could not write" in log for log in logs)
    seed = slow_demo.seeds[0]
    with open_store(url) as store:  # the row is the page, change fields included
        row = store.get_page(url_to_key(seed))
        assert row["status"] == 200 and len(row["simhash"]) == 16 and row["visits"]
    conn = raw_connection(url)
    try:  # Nutch's webtable, read with plain happybase: reversed URL, typed cells, raw body
        key = url_to_key(seed).encode()
        host, port = seed.split("/")[2].split(":")
        assert key == ".".join(reversed(host.split("."))).encode() + f":http:{port}/".encode()
        cells = conn.table("webpage").row(key)
        assert cells[b"f:st"] == struct.pack(">i", 200)
        assert struct.unpack(">d", cells[b"f:ts"])[0] == row["fetched_at"]
        assert cells[b"p:sig"] == bytes.fromhex(row["simhash"])
        assert cells[b"f:typ"].startswith(b"text/html")
        body = cells[b"f:cnt"]
    finally:
        conn.close()
    with urllib.request.urlopen(seed) as answer:
        assert body == answer.read()
    drop_tables(url)


def test_a_thrift_gateway_killed_mid_crawl_loses_no_row(
    slow_demo,
    redis_server,
    tmp_path,
    hbase,
    crawls,
):
    url = hbase.url("crashing")  # a gateway of this test's own
    worker = crawls.start(
        slow_demo.seeds,
        tmp_path / "data",
        f"REDIS_URL={redis_server.url}",
        f"STORE_URL={url}",
        *PACED,
        items=tmp_path / "a.jsonl",
    )
    slow_demo.wait_for_fetches(60)
    hbase.local.stop_gateway("crashing", kill=True)  # kill -9 of the Thrift JVM
    time.sleep(1.0)
    hbase.gateway("crashing")  # the same port again, waited for
    log = crawls.finish(worker)
    assert_every_page_stored_once(slow_demo, url)
    assert "retry" in log  # it did notice the outage
    hbase.local.stop_gateway("crashing")
    drop_tables(hbase.gateway("thrift").store_url(parse_hbase_url(url)["table_prefix"]))


def test_hbase_killed_mid_crawl_replays_its_log_and_the_crawl_goes_on(
    slow_demo,
    redis_server,
    tmp_path,
    crawls,
):
    """kill -9 of the master (with its RegionServer and ZooKeeper): what the
    RegionServer had acknowledged is only in its write-ahead log, replayed when the
    master starts again on the same data; meanwhile the worker pauses and retries."""
    local = LocalHBase(tmp_path / "hbase")  # its own HBase: this one dies
    try:
        url = local.start(port=None, timeout=300).store_url("crawl")
        worker = crawls.start(
            slow_demo.seeds,
            tmp_path / "data",
            f"REDIS_URL={redis_server.url}",
            f"STORE_URL={url}",
            "STORE_OUTAGE_WAIT=2",
            *PACED,
            items=tmp_path / "a.jsonl",
        )
        slow_demo.wait_for_fetches(80)
        stored_before = page_count(url)
        assert stored_before > 0
        local.stop_master(kill=True)
        time.sleep(2.0)
        local.start_master()  # on the same rootdir: splits and replays the dead server's WAL
        local.wait_ready("thrift", timeout=300)
        log = crawls.finish(worker, timeout=400)
        assert_every_page_stored_once(slow_demo, url)
        assert "store outage" in log.lower() or "retry" in log
        master_log = (local.logs / "master.log").read_text()
        assert "split" in master_log.lower()  # the dead RegionServer's WAL was split
    finally:
        local.stop()


def test_connections_the_server_drops_when_idle_lose_nothing(
    slow_demo,
    redis_server,
    tmp_path,
    hbase,
    crawls,
):
    """The gateway closes client sockets idle for 0.3 s, so pooled connections die
    between batches (``TSocket read 0 bytes``); idempotent calls are retried on a fresh
    one, increments are sent on a live socket only: no row lost, none counted twice."""
    gateway = hbase.gateway("impatient", read_timeout=0.3)  # batches: one a second
    url = gateway.store_url(f"idle{time.monotonic_ns()}")
    worker = crawls.start(
        slow_demo.seeds,
        tmp_path / "data",
        f"REDIS_URL={redis_server.url}",
        f"STORE_URL={url}",
        "STORE_FLUSH_INTERVAL=1.0",
        *PACED,
        items=tmp_path / "a.jsonl",
    )
    log = crawls.finish(worker, timeout=300)
    assert_every_page_stored_once(slow_demo, url)
    assert "TSocket read 0 bytes" in log or "Broken pipe" in log  # the server did drop them
    assert "Could not write" not in log
    hbase.local.stop_gateway("impatient")
    drop_tables(hbase.gateway("thrift").store_url(parse_hbase_url(url)["table_prefix"]))
