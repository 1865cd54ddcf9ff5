"""Change detection: SimHash the page's visible text, compare with its stored version.

Pages are gathered for ``SIMHASH_READ_INTERVAL`` seconds (or 64 of them)
and their previous rows read from the store in one call on a thread of its
own, off the reactor: one thread hop and one query (one Thrift round trip
with HBase) per batch, not per page.  Then, on the reactor thread,
:func:`webcrawl.incremental.change.compare` fills in ``simhash``, ``previous_simhash``,
``distance``, ``changed`` and the visit history.  A 304 takes the stored
content.

A row that could not be read is not a missing row: the pages of a failed
read raise :class:`~webcrawl.frontier.requeue.Requeue` (nothing is written for them,
their requests go back to the frontier) and the worker pauses until the
store answers (:mod:`webcrawl.pipelines.outage`).  A 304 for a page whose content is
not stored (:func:`webcrawl.incremental.change.holds_content`) writes nothing either:
the page is fetched again at once, without conditional headers.

Stats: ``change/new``, ``change/changed``, ``change/unchanged``,
``change/not_modified``, ``change/read_errors``, ``change/refetched``
(304s without stored content).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThreadPool

from webcrawl.frontier.requeue import Requeue
from webcrawl.incremental.change import NoStoredContent, compare
from webcrawl.page import Page
from webcrawl.pipelines.outage import StoreOutage
from webcrawl.settings_check import non_negative_float, non_negative_int, positive_int
from webcrawl.store import Row, Store, open_store, store_url_from_settings
from webcrawl.threadpools import one_thread_pool
from webcrawl.urls.urlkey import url_to_key

logger = logging.getLogger(__name__)

_BATCH = 64  # pages read in one store call at most


class ChangePipeline:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.stats = crawler.stats
        self.threshold = non_negative_int(settings, "SIMHASH_CHANGE_DISTANCE")
        self.keep = positive_int(settings, "REVISIT_HISTORY")
        self.interval = non_negative_float(settings, "SIMHASH_READ_INTERVAL")
        self.store: Store = open_store(store_url_from_settings(settings))
        self._pool = one_thread_pool("webcrawl-change")
        # pages waiting for their stored versions: (key, Deferred fired with the row)
        self._waiting: list[tuple[str, Deferred[Row | None]]] = []
        self._timer: Any = None
        self.crawler = crawler
        self.outage = StoreOutage.of(crawler)
        self.warc = settings.getbool("WARC_ENABLED") and settings.getbool("WARC_DEDUP")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ChangePipeline:
        return cls(crawler)

    def open_spider(self) -> None:
        self._pool.start()

    async def close_spider(self) -> None:
        from twisted.internet import reactor  # late: importing it installs one

        self._read()
        await maybe_deferred_to_future(deferToThreadPool(reactor, self._pool, self.store.close))
        self._pool.stop()
        self.outage.close()

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, Page):
            return item
        was_304 = item.kind == "not_modified"
        previous = await maybe_deferred_to_future(self._previous(item.url))
        # the fingerprint is CPU work (about 1 ms a page): here, not on the pool, where
        # it would only contend with the reactor for the GIL
        started = time.perf_counter()
        try:
            if was_304 and self.warc and not (previous or {}).get("warc_original"):
                # an archive holds no full capture of it yet: one is needed for the 304's
                # revisit record to refer to (WARC turned on for an existing webtable)
                raise NoStoredContent(f"{item.url} answered 304 but no WARC holds it in full")
            compare(item, previous, self.threshold, self.keep)
        except NoStoredContent as exc:
            self._refetch(item)
            raise DropItem(
                f"{exc}: fetching it again without conditions", log_level="INFO"
            ) from None
        if item.simhash is not None and not was_304:  # a fingerprint was computed
            self.stats.inc_value("change/simhashes")
            self.stats.inc_value("change/simhash_seconds", time.perf_counter() - started)
        if was_304:
            self.stats.inc_value("change/not_modified")
        if item.kind != "failed":
            outcome = {None: "new", True: "changed", False: "unchanged"}[item.changed]
            self.stats.inc_value(f"change/{outcome}")
        return item

    def _previous(self, url: str) -> Deferred[Row | None]:
        """A Deferred of the stored row of ``url`` (None if none), read with the batch."""
        from twisted.internet import reactor  # late: importing it installs one

        # each page waits on a Deferred of its own: awaiting one shared Deferred from
        # several coroutines hands its result to the first only
        found: Deferred[Row | None] = Deferred()
        try:
            key = url_to_key(url)
        except ValueError as exc:  # no row can exist (the store pipeline reports it)
            logger.debug("No stored version of %s: %s", url, exc)
            found.callback(None)
            return found
        self._waiting.append((key, found))
        if len(self._waiting) >= _BATCH:
            self._read()
        elif self._timer is None:
            self._timer = reactor.callLater(self.interval, self._read)
        return found

    def _read(self) -> None:
        """Read the stored rows of every waiting page, in one call on the pool."""
        from twisted.internet import reactor  # late: importing it installs one

        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if not self._waiting:
            return
        waiting, self._waiting = self._waiting, []
        keys = [key for key, _ in waiting]
        d = deferToThreadPool(reactor, self._pool, self.store.get_pages, keys)

        def deliver(rows: dict[str, Row]) -> None:
            for key, found in waiting:
                found.callback(rows.get(key))

        def failed(failure: Any) -> None:
            self._read_failed(failure.value, keys)
            for _, found in waiting:  # each page raises its own exception
                found.errback(Requeue(f"store read failed: {failure.value}", self.outage.wait))

        d.addCallbacks(deliver, failed)

    def _read_failed(self, exc: BaseException, keys: list[str]) -> None:
        self.stats.inc_value("change/read_errors", len(keys))
        logger.warning(
            "Could not read the stored versions of %d pages (%s); their requests go "
            "back to the frontier: %s",
            len(keys),
            exc,
            " ".join(keys[:20]),
        )
        self.outage.begin(f"reading {len(keys)} rows", exc)

    def _refetch(self, page: Page) -> None:
        """Fetch ``page`` again at once, without conditional headers (whichever worker)."""
        self.stats.inc_value("change/refetched")
        spider = self.crawler.spider
        make = getattr(spider, "request_for", None)
        request = make(page.url) if make else Request(page.url)
        request.meta["depth"] = page.depth
        request = request.replace(priority=-page.depth)
        from webcrawl.frontier.scheduler import (
            frontier_of,  # late: importing it early installs a reactor
        )

        frontier = frontier_of(self.crawler)
        if frontier is not None:
            # the revisit schedule bypasses the dupefilter; replaces a conditional revisit
            frontier.schedule_revisit(request, time.time())
        else:
            self.crawler.engine.crawl(request.replace(dont_filter=True))
