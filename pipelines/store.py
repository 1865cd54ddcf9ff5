"""Write every page to the webtable, in batches, off the reactor thread.

Rows are buffered and written by one dedicated thread in batches of
``STORE_BATCH_SIZE`` (or every ``STORE_FLUSH_INTERVAL``
seconds).  An item is done when its batch is written: until then Scrapy keeps
its request in progress, so the frontier acknowledges a request only once its
page is in the store (a worker killed before that loses nothing: the lease
expires and another worker fetches the page again).  A failed batch is
retried ``STORE_RETRY_TIMES`` times with back-off; a batch that
still fails is not acknowledged: its items raise
:class:`~webcrawl.frontier.requeue.Requeue`, so their requests go back to the
frontier, and the worker pauses its fetches until the store accepts writes
again (:mod:`webcrawl.pipelines.outage`).  While it is paused, batches are tried once,
without the back-off.  Counted: ``store/requeued_rows``; logged once per
outage.  Closing the spider waits for every buffered row.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.utils.defer import maybe_deferred_to_future

from webcrawl.frontier.requeue import Requeue
from webcrawl.page import store_row
from webcrawl.pipelines.batches import ThreadedBatches
from webcrawl.pipelines.outage import StoreOutage
from webcrawl.settings_check import non_negative_float, positive_float, positive_int
from webcrawl.store import Store, StoreError, open_store, store_url_from_settings

logger = logging.getLogger(__name__)


class StorePipeline(ThreadedBatches):
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.stats = crawler.stats
        self.store_url = store_url_from_settings(settings)
        self.batch_size = positive_int(settings, "STORE_BATCH_SIZE")
        self.flush_interval = positive_float(settings, "STORE_FLUSH_INTERVAL")
        self.retry_times = int(non_negative_float(settings, "STORE_RETRY_TIMES"))
        self.connect_wait = non_negative_float(settings, "STORE_CONNECT_WAIT")
        self.store: Store = open_store(self.store_url)  # validates the URL; connects lazily
        self._start_batches("webcrawl-store")
        self.outage = StoreOutage.of(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StorePipeline:
        return cls(crawler)

    async def open_spider(self) -> None:
        """Reach the store before the first page (waiting for a server that does not
        answer yet, ``STORE_CONNECT_WAIT``); a wrong URL stops the crawl here."""
        self._pool.start()
        try:
            await maybe_deferred_to_future(self._in_thread(self.store.connect, self.connect_wait))
        except StoreError as exc:
            logger.error("Cannot start: %s", exc)
            self._pool.stop()  # (close_spider still runs: it finds the pool stopped)
            raise
        self._run_batches()
        logger.info("Storing pages in %s", self.store_url)

    async def process_item(self, item: Any) -> Any:
        # made into a row on the store thread, not the reactor's
        await self._written_with_batch(item)
        return item

    async def close_spider(self) -> None:
        await self._close_batches(self.store.close)
        self.outage.close()

    def _write_args(self) -> tuple[int]:
        return (0 if self.outage.down else self.retry_times,)

    def _write(self, batch: list[Any], retry_times: int) -> tuple[int, float]:
        """Runs in the store thread: write, retrying with back-off; return rows written and
        the seconds the write that succeeded took."""
        rows = []
        for item in batch:
            try:
                rows.append(store_row(item))
            except (KeyError, ValueError) as exc:  # no url, or not an http(s) URL
                logger.error("Cannot store item (%s): %r", exc, item)
        for attempt in range(retry_times + 1):
            try:
                started = time.perf_counter()
                self.store.put_pages(rows)
                return len(rows), time.perf_counter() - started
            except StoreError as exc:
                if attempt == retry_times:
                    raise
                delay = min(30.0, 0.5 * 2**attempt)
                logger.warning(
                    "Store write of %d rows failed (%s); retry %d/%d in %.1fs",
                    len(batch),
                    exc,
                    attempt + 1,
                    retry_times,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _written(self, result: tuple[int, float], batch: list[Any]) -> None:
        written, seconds = result
        self.stats.inc_value("store/rows", written)
        self.stats.inc_value("store/batches")
        self.stats.inc_value("store/write_seconds", seconds)
        if written < len(batch):
            self.stats.inc_value("store/bad_items", len(batch) - written)

    def _failed(self, failure: Any, batch: list[Any]) -> Requeue:
        """The batch could not be written: its pages are fetched again, later."""
        self.stats.inc_value("store/requeued_rows", len(batch))
        urls = [ItemAdapter(item).get("url", "?") for item in batch]
        return self._give_back(failure, urls, f"{len(batch)} rows", "store")
