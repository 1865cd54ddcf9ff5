"""Change detection: SimHash the page's visible text, compare with its stored version.

For each page the previous row is read from the store (on a small thread
pool, off the reactor) and :func:`webcrawl.change.compare` fills in
``simhash``, ``previous_simhash``, ``distance``, ``changed`` and the visit
history.  A 304 takes the stored content.  Stats: ``change/new``,
``change/changed``, ``change/unchanged``, ``change/not_modified``,
``change/read_errors`` (the store could not be read: the page is treated as
new and the error logged; the page itself is never lost).
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy.crawler import Crawler
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from webcrawl.change import compare
from webcrawl.page import Page
from webcrawl.settings_check import non_negative_int, positive_int
from webcrawl.store import Store, StoreError, open_store, store_url_from_settings
from webcrawl.urlkey import url_to_key

logger = logging.getLogger(__name__)


class ChangePipeline:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.stats = crawler.stats
        self.threshold = non_negative_int(settings, "SIMHASH_CHANGE_DISTANCE")
        self.keep = positive_int(settings, "REVISIT_HISTORY")
        self.store: Store = open_store(store_url_from_settings(settings))
        self._pool = ThreadPool(minthreads=1, maxthreads=2, name="webcrawl-change")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ChangePipeline:
        return cls(crawler)

    def open_spider(self) -> None:
        self._pool.start()

    async def close_spider(self) -> None:
        await maybe_deferred_to_future(deferToThreadPool(reactor, self._pool, self.store.close))
        self._pool.stop()

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, Page):
            return item
        was_304 = item.kind == "not_modified"
        previous = await maybe_deferred_to_future(
            deferToThreadPool(reactor, self._pool, self._previous, item.url)
        )
        # the fingerprint is CPU work (about 1 ms a page): here, not on the pool, where
        # it would only contend with the reactor for the GIL
        compare(item, previous, self.threshold, self.keep)
        if was_304:
            self.stats.inc_value("change/not_modified")
        if item.kind != "failed":
            outcome = {None: "new", True: "changed", False: "unchanged"}[item.changed]
            self.stats.inc_value(f"change/{outcome}")
        return item

    def _previous(self, url: str) -> dict[str, Any] | None:
        """Runs on the pool: the stored row of ``url``, or None."""
        try:
            return self.store.get_page(url_to_key(url))
        except (StoreError, ValueError) as exc:
            self.stats.inc_value("change/read_errors")
            logger.error("Could not read the stored version of %s (%s): treated as new",
                         url, exc)  # fmt: skip
            return None
