"""The store pipeline's write path: retries, bad items, nothing dropped silently."""

import logging

import pytest
from scrapy.utils.test import get_crawler

from webcrawl.frontier.requeue import Requeue
from webcrawl.page import Page
from webcrawl.pipelines.store import StorePipeline
from webcrawl.store import StoreError, open_store


class FlakyStore:
    """A real SQLite store that fails its first ``failures`` writes."""

    def __init__(self, store, failures):
        self.store, self.failures = store, failures

    def put_pages(self, rows):
        if self.failures:
            self.failures -= 1
            raise StoreError("disk on fire")
        self.store.put_pages(rows)


def pipeline(tmp_path, **overrides):
    import webcrawl.settings.base as defaults

    base = {k: v for k, v in vars(defaults).items() if k.isupper()}
    base |= {"STORE_URL": f"sqlite:///{tmp_path}/w.db", "STORE_RETRY_TIMES": 2}
    return StorePipeline(get_crawler(settings_dict={**base, **overrides}))


def page(url):
    return Page(url=url, final_url=url, status=200, fetched_at=1.0)


def test_retries_then_writes(tmp_path, caplog):
    p = pipeline(tmp_path)
    p.store = FlakyStore(open_store(f"sqlite:///{tmp_path}/w.db"), failures=2)
    with caplog.at_level(logging.WARNING):
        written, seconds = p._write([page("http://a.example/"), page("http://b.example/")], 2)
    assert written == 2 and 0 < seconds < 10
    assert "retry 2/2" in caplog.text
    assert p.store.store.count_pages() == 2


def test_a_batch_that_cannot_be_written_is_requeued_not_acknowledged(tmp_path, caplog):
    p = pipeline(tmp_path, STORE_RETRY_TIMES=0)
    p.store = FlakyStore(open_store(f"sqlite:///{tmp_path}/w.db"), failures=1)
    batch = [page("http://a.example/x")]
    with pytest.raises(StoreError):
        p._write(batch, 0)
    from twisted.python.failure import Failure

    with caplog.at_level(logging.WARNING):
        requeue = p._failed(Failure(StoreError("disk on fire")), batch)
    p.outage.close()
    # the item fails with Requeue (a DropItem: nothing stored, its lease handed back)
    assert isinstance(requeue, Requeue) and requeue.wait == p.outage.wait
    assert "Could not write 1 rows" in caplog.text and "http://a.example/x" in caplog.text
    assert "Pausing this worker's fetches" in caplog.text
    assert p.stats.get_value("store/requeued_rows") == 1
    assert p.stats.get_value("store/outages") == 1


def test_a_bad_item_does_not_sink_its_batch(tmp_path, caplog):
    p = pipeline(tmp_path)
    batch = [page("http://a.example/"), {"title": "no url"}, page("ftp://nope/")]
    with caplog.at_level(logging.ERROR):
        assert p._write(batch, 0)[0] == 1
    p._written((1, 0.25), batch)
    assert p.stats.get_value("store/bad_items") == 2
    assert p.stats.get_value("store/write_seconds") == 0.25
    assert caplog.text.count("Cannot store item") == 2


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("STORE_BATCH_SIZE", "0", "STORE_BATCH_SIZE must be a positive integer"),
        ("STORE_FLUSH_INTERVAL", "soon", "STORE_FLUSH_INTERVAL must be a number"),
        ("STORE_URL", "mongodb://x/", "STORE_URL: unsupported store"),
    ],
)
def test_bad_settings(tmp_path, name, value, message):
    with pytest.raises(ValueError, match=message):
        pipeline(tmp_path, **{name: value})


LOCKER = """import sqlite3, sys, time
db, rows, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
while True:
    try:
        conn = sqlite3.connect(db, timeout=30, isolation_level=None)
        if conn.execute("SELECT COUNT(*) FROM webtable").fetchone()[0] >= rows:
            break
        conn.close()
    except sqlite3.Error:
        pass
    time.sleep(0.05)
conn.execute("BEGIN EXCLUSIVE")
print("locked", time.time(), flush=True)
time.sleep(hold)
conn.execute("COMMIT")
print("released", time.time(), flush=True)
"""


@pytest.mark.e2e
def test_a_store_locked_past_every_retry_mid_crawl_loses_no_page(slow_demo, tmp_path, crawls):
    """Another process holds the SQLite webtable in BEGIN EXCLUSIVE for longer than all
    the store pipeline's retries: the rows it could not write are not acknowledged, the
    worker pauses, and every reachable page still ends up stored."""
    import subprocess
    import sys

    demo = slow_demo
    db = tmp_path / "data" / "webtable.sqlite3"
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db), "30", "6"], stdout=subprocess.PIPE, text=True
    )
    try:
        result = crawls.run(
            demo.seeds,
            tmp_path / "data",
            f"STORE_URL=sqlite:///{db}?timeout=0.5",
            "STORE_RETRY_TIMES=1",
            "STORE_OUTAGE_WAIT=1",
            "FRONTIER_HOST_DELAY=0.05",
            timeout=180,
        )
        lines = locker.communicate(timeout=30)[0].split()
    finally:
        locker.kill()
    log = result.stderr
    assert result.returncode == 0, log[-3000:]
    assert lines[0] == "locked" and lines[2] == "released", lines
    assert "Pausing this worker's fetches" in log and "answers again after" in log
    assert "'store/requeued_rows'" in log and "Lost" not in log
    with open_store(f"sqlite:///{db}") as store:
        stored = {row["url"] for row in store.scan_pages()}
    reachable = set(demo.web.reachable())
    assert sorted(reachable - stored) == []
    fetches = demo.page_fetches()
    refetched = sum(n - 1 for n in fetches.values())
    print(
        f"rows expected {len(reachable)}, stored {len(stored & reachable)}, "
        f"requests fetched again {refetched}"
    )
    assert refetched > 0  # the control: some rows really could not be written


def test_a_worker_paused_by_two_outages_resumes_when_both_are_over(tmp_path):
    from webcrawl.pipelines.outage import StoreOutage
    from webcrawl.pipelines.warc import WarcOutage

    p = pipeline(tmp_path)
    crawler = p.outage.crawler

    class Engine:
        paused = False

        def pause(self):
            self.paused = True

        def unpause(self):
            self.paused = False

    engine = crawler.engine = Engine()
    store, warc = StoreOutage.of(crawler), WarcOutage.of(crawler)
    assert store is p.outage and warc is not store and WarcOutage.of(crawler) is warc
    store.begin("writing", StoreError("down"))
    warc.begin("writing", OSError(28, "No space left on device"))
    try:
        assert engine.paused
        store._end()  # the store is back, the disk is still full
        assert engine.paused and warc.down
        warc._end()
        assert not engine.paused
        assert crawler.stats.get_value("warc/outages") == 1
        assert crawler.stats.get_value("store/outages") == 1
    finally:
        store.close()
        warc.close()
