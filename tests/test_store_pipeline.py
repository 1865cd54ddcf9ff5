"""The store pipeline's write path: retries, bad items, nothing dropped silently."""

import logging

import pytest
from scrapy.utils.test import get_crawler

from pipelines.store import StorePipeline
from webcrawl.page import Page
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
    import settings.base as defaults

    base = {k: v for k, v in vars(defaults).items() if k.isupper()}
    base |= {"WEBCRAWL_STORE_URL": f"sqlite:///{tmp_path}/w.db", "WEBCRAWL_STORE_RETRY_TIMES": 2}
    return StorePipeline(get_crawler(settings_dict={**base, **overrides}))


def page(url):
    return Page(url=url, final_url=url, status=200, fetched_at=1.0)


def test_retries_then_writes(tmp_path, caplog):
    p = pipeline(tmp_path)
    p.store = FlakyStore(open_store(f"sqlite:///{tmp_path}/w.db"), failures=2)
    with caplog.at_level(logging.WARNING):
        assert p._write([page("http://a.example/"), page("http://b.example/")]) == 2
    assert "retry 2/2" in caplog.text
    assert p.store.store.count_pages() == 2


def test_gives_up_loudly_with_the_urls(tmp_path, caplog):
    p = pipeline(tmp_path, WEBCRAWL_STORE_RETRY_TIMES=0)
    p.store = FlakyStore(open_store(f"sqlite:///{tmp_path}/w.db"), failures=1)
    batch = [page("http://a.example/x")]
    with pytest.raises(StoreError):
        p._write(batch)
    from twisted.python.failure import Failure

    with caplog.at_level(logging.ERROR):
        p._failed(Failure(StoreError("disk on fire")), batch)
    assert "Lost 1 rows" in caplog.text and "http://a.example/x" in caplog.text
    assert p.stats.get_value("store/failed_rows") == 1


def test_a_bad_item_does_not_sink_its_batch(tmp_path, caplog):
    p = pipeline(tmp_path)
    batch = [page("http://a.example/"), {"title": "no url"}, page("ftp://nope/")]
    with caplog.at_level(logging.ERROR):
        assert p._write(batch) == 1
    p._written(1, batch)
    assert p.stats.get_value("store/bad_items") == 2
    assert caplog.text.count("Cannot store item") == 2


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("WEBCRAWL_STORE_BATCH_SIZE", "0", "WEBCRAWL_STORE_BATCH_SIZE must be a positive integer"),
        ("WEBCRAWL_STORE_FLUSH_INTERVAL", "soon", "WEBCRAWL_STORE_FLUSH_INTERVAL must be a number"),
        ("WEBCRAWL_STORE_URL", "mongodb://x/", "WEBCRAWL_STORE_URL: unsupported store"),
    ],
)
def test_bad_settings(tmp_path, name, value, message):
    with pytest.raises(ValueError, match=message):
        pipeline(tmp_path, **{name: value})
