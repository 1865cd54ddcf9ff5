"""Crawls that keep their pages in HBase (the Thrift1 emulator in a subprocess)."""

import time
import urllib.request

import happybase
import pytest
from conftest import read_items
from support.hbase_emulator import hbase_emulator
from test_cluster import finish, start_worker, wait_for_fetches, workers  # noqa: F401

from webcrawl.store import open_store
from webcrawl.urls.urlkey import url_to_key

PACED = ("FRONTIER_HOST_DELAY=0.1",)


def stored_urls(store_url: str) -> list[str]:
    with open_store(store_url) as store:
        return [row["url"] for row in store.scan_pages()]


@pytest.mark.slow
def test_two_workers_store_every_page_once_in_hbase(
    slow_demo,
    redis_server,
    tmp_path,
    workers,  # noqa: F811
):
    with hbase_emulator(idle_timeout=None, data=tmp_path / "hbase.data") as hbase:
        url = f"hbase://{hbase.host}:{hbase.port}?table_prefix=crawl"
        items = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
        for path in items:
            start_worker(workers, slow_demo.seeds, tmp_path / "data", redis_server.url, path,
                         f"WEBCRAWL_STORE_URL={url}", "WEBCRAWL_STORE_CONTENT=True",
                         *PACED)  # fmt: skip
        logs = [finish(w) for w in workers]
        expected = set(slow_demo.web.reachable())
        urls = stored_urls(url)
        assert len(urls) == len(set(urls))  # one row per URL
        assert set(urls) == expected
        crawled = [i["url"] for p in items for i in read_items(p)]
        assert sorted(crawled) == sorted(expected)  # each page crawled (and so stored) once
        assert all(len(read_items(p)) > 20 for p in items)
        assert not any("Lost" in log for log in logs)
        seed = slow_demo.seeds[0]
        with open_store(url) as store:  # the row is the page, change fields included
            row = store.get_page(url_to_key(seed))
            assert row["status"] == 200 and len(row["simhash"]) == 16 and row["visits"]
        conn = happybase.Connection(hbase.host, hbase.port, table_prefix="crawl")
        try:  # the raw body, in Nutch's column
            body = conn.table("webpage").row(url_to_key(seed).encode(), [b"f:cnt"])[b"f:cnt"]
        finally:
            conn.close()
        with urllib.request.urlopen(seed) as answer:
            assert body == answer.read()


@pytest.mark.slow
def test_a_thrift_server_restart_mid_crawl_loses_no_row(
    slow_demo,
    redis_server,
    tmp_path,
    workers,  # noqa: F811
):
    with hbase_emulator(idle_timeout=None, data=tmp_path / "hbase.data") as hbase:
        url = f"hbase://{hbase.host}:{hbase.port}?table_prefix=crawl"
        items = tmp_path / "a.jsonl"
        worker = start_worker(workers, slow_demo.seeds, tmp_path / "data", redis_server.url,
                              items, f"WEBCRAWL_STORE_URL={url}", *PACED)  # fmt: skip
        wait_for_fetches(slow_demo, 60)
        hbase.stop(kill=True)  # a crash: down for a second, then back with its data
        time.sleep(1.0)
        hbase.start()
        log = finish(worker)
        expected = set(slow_demo.web.reachable())
        assert set(stored_urls(url)) == expected
        assert "Lost" not in log
        assert "retry" in log  # it did notice the outage
