"""A worker whose store fails pauses its fetches until the store answers again.

Pages fetched while the store cannot be read or written could only be
dropped or re-fetched; so on the first failure (after the backend's and the
pipeline's own retries) the store pipelines raise
:class:`~webcrawl.frontier.requeue.Requeue` for the pages concerned (their requests go
back to the frontier, ``STORE_OUTAGE_WAIT`` seconds later) and
begin an outage: the engine stops taking new requests, requests already
downloading finish, and every ``STORE_OUTAGE_WAIT`` seconds the
store is asked whether it accepts a write (:meth:`Store.check_writable`).
When it does, the engine resumes.  One outage per crawler, shared by the
pipelines; logged once when it begins and once when it ends.

Stats: ``store/outages``, ``store/outage_seconds``.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any

from scrapy.crawler import Crawler
from twisted.internet import task
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from webcrawl.settings_check import positive_float
from webcrawl.store import Store, open_store, store_url_from_settings
from webcrawl.threadpools import one_thread_pool

logger = logging.getLogger(__name__)

_OUTAGES: weakref.WeakKeyDictionary[Crawler, dict[type, StoreOutage]] = weakref.WeakKeyDictionary()


class StoreOutage:
    """The store's outage: checked with :meth:`Store.check_writable`."""

    what = "Store"
    stat = "store"

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.wait = positive_float(crawler.settings, "STORE_OUTAGE_WAIT")
        self.store_url = store_url_from_settings(crawler.settings)
        self._store: Store | None = None  # opened on the first outage only
        self._pool: ThreadPool | None = None
        self._loop: task.LoopingCall | None = None
        self._since: float | None = None
        self._checking = False

    @classmethod
    def of(cls, crawler: Crawler) -> StoreOutage:
        """The crawler's outage tracker of this kind (one for all its pipelines)."""
        outages = _OUTAGES.setdefault(crawler, {})
        outage = outages.get(cls)
        if outage is None:
            outage = outages[cls] = cls(crawler)
        return outage

    @property
    def target(self) -> str:
        return str(self.store_url)

    def probe(self) -> None:
        """Raise unless the resource accepts a write again (runs on the check's thread)."""
        if self._store is None:
            self._store = open_store(self.store_url)
        self._store.check_writable()

    @property
    def down(self) -> bool:
        return self._since is not None

    def begin(self, what: str, exc: BaseException) -> None:
        """The store failed (``what`` could not be done): pause fetching, start checking."""
        if self._since is not None:
            return
        self._since = time.monotonic()
        self.stats.inc_value(f"{self.stat}/outages")
        logger.error(
            "%s %s failed: %s could not be done (%s). Pausing this worker's fetches "
            "until it answers (checked every %.1f s); the pages concerned go back to "
            "the frontier",
            self.what,
            self.target,
            what,
            exc,
            self.wait,
        )
        engine = self._engine()
        if engine is not None:
            engine.pause()
        if self._pool is None:
            self._pool = one_thread_pool(f"webcrawl-{self.stat}-check")
            self._pool.start()
        self._loop = task.LoopingCall(self._check)
        self._loop.start(self.wait, now=False)

    def _check(self) -> None:
        from twisted.internet import reactor  # late: importing it installs one

        if self._checking or self._pool is None:
            return
        self._checking = True
        d = deferToThreadPool(reactor, self._pool, self.probe)
        d.addCallbacks(
            lambda _: self._end(),
            lambda f: logger.info(
                "%s %s still failing: %s", self.what, self.target, f.getErrorMessage()
            ),
        )
        d.addBoth(self._checked)

    def _checked(self, _: Any) -> None:
        self._checking = False

    def _end(self) -> None:
        if self._since is None:
            return
        took = time.monotonic() - self._since
        self._since = None
        self.stats.inc_value(f"{self.stat}/outage_seconds", round(took, 3))
        logger.warning(
            "%s %s answers again after %.1f s: resuming fetches", self.what, self.target, took
        )
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        others = _OUTAGES.get(self.crawler, {}).values()
        if any(other.down for other in others if other is not self):
            return  # another outage keeps the worker paused
        engine = self._engine()
        if engine is not None:
            engine.unpause()
            slot = getattr(engine, "_slot", None)
            if slot is not None:
                slot.nextcall.schedule()  # ask the scheduler now, not on the 5 s heartbeat

    def _engine(self) -> Any:
        try:
            return self.crawler.engine
        except (AttributeError, RuntimeError):  # Scrapy 2.19: no engine before the crawl
            return None

    def close(self) -> None:
        """Stop checking (the spider is closing); release the check's store and thread."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._pool is not None:
            self._pool.stop()
            self._pool = None
        if self._store is not None:
            self._store.close()
            self._store = None
