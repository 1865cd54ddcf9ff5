"""Items written in batches by one thread of their own; an item is done when its batch is.

The store and WARC pipelines share this: items are buffered and written in batches of
``batch_size`` (or every ``flush_interval`` seconds; with 0, as soon as the writing
thread is free: group commit, so that a batch is whatever came while the last one was
written) by one dedicated thread.  An item's
``process_item`` awaits its batch, so Scrapy keeps its request in progress until the
batch is written and the frontier acknowledges it only then.  A batch that fails is not
acknowledged: the subclass's ``_failed`` makes a :class:`~webcrawl.frontier.requeue.Requeue`
that each of its items raises (their requests go back to the frontier).  Closing waits
for every buffered item.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task
from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure

from webcrawl.frontier.requeue import Requeue
from webcrawl.threadpools import one_thread_pool

logger = logging.getLogger(__name__)


class ThreadedBatches:
    """Subclasses set ``batch_size`` and ``flush_interval`` and define ``_write(batch,
    *args)`` (on the thread), ``_written(result, batch)`` and ``_failed(failure, batch)``
    (on the reactor, the latter returning the batch's Requeue); ``_write_args()`` gives
    extra arguments fixed when the batch leaves."""

    batch_size: int
    flush_interval: float  # seconds; 0: group commit
    outage: Any  # a StoreOutage (pipelines/outage.py)

    def _start_batches(self, name: str) -> None:
        self._buffer: list[Any] = []
        self._waiters: list[Deferred[None]] = []  # one per buffered item, fired when written
        self._pending: set[Deferred[Any]] = set()
        self._pool = one_thread_pool(name)
        self._loop = task.LoopingCall(self._flush)
        self._soon: Any = None  # group commit: the flush called for this reactor turn

    def _run_batches(self) -> None:
        """Start the thread (if not yet) and the periodic flush."""
        if not self._pool.started:
            self._pool.start()
        if self.flush_interval > 0:
            self._loop.start(self.flush_interval, now=False)

    async def _written_with_batch(self, entry: Any) -> None:
        """Buffer ``entry`` and wait until its batch is written (raises its Requeue)."""
        self._buffer.append(entry)
        # Each item waits on a Deferred of its own: awaiting one shared Deferred
        # from several coroutines hands its result to the first only.
        written: Deferred[None] = Deferred()
        self._waiters.append(written)
        if len(self._buffer) >= self.batch_size:
            self._flush()
        elif not self.flush_interval and not self._pending:
            self._flush_soon()
        await maybe_deferred_to_future(written)

    def _flush_soon(self) -> None:
        """Flush once the reactor has run what is ready now (the items of this turn join
        the batch)."""
        if self._soon is None or not self._soon.active():
            from twisted.internet import reactor  # late: importing it installs one

            self._soon = reactor.callLater(0, self._flush)

    async def _drain(self) -> None:
        """Stop the periodic flush and wait for every buffered item's batch."""
        if self._loop.running:
            self._loop.stop()
        self._flush()
        if self._pending:
            await maybe_deferred_to_future(DeferredList(list(self._pending)))

    async def _close_batches(self, close: Any) -> None:
        """Wait for every buffered item's batch, then run ``close`` on the writing thread
        and stop it (here, if the thread never started: nothing was written)."""
        await self._drain()
        if self._pool.started:
            await maybe_deferred_to_future(self._in_thread(close))
            self._pool.stop()
        else:
            close()

    def _in_thread(self, f: Any, *args: Any) -> Deferred[Any]:
        from twisted.internet import reactor  # late: importing it installs one

        return deferToThreadPool(reactor, self._pool, f, *args)

    def _write_args(self) -> tuple[Any, ...]:
        return ()

    def _flush(self) -> None:
        if not self._buffer:
            return
        batch, self._buffer = self._buffer, []
        waiters, self._waiters = self._waiters, []
        d = self._in_thread(self._write, batch, *self._write_args())
        d.addCallbacks(self._written, self._failed, callbackArgs=(batch,), errbackArgs=(batch,))
        self._pending.add(d)

        def done(outcome: Requeue | Failure | None) -> None:
            self._pending.discard(d)
            if isinstance(outcome, Failure):  # a fault of _written or _failed: not lost
                logger.error("Batch of %d items:\n%s", len(waiters), outcome.getTraceback())
                outcome = Requeue(f"batch failed: {outcome.getErrorMessage()}", self.outage.wait)
            try:
                for waiter in waiters:
                    if outcome is None:
                        waiter.callback(None)
                    else:  # each item raises its own exception
                        waiter.errback(Requeue(str(outcome), outcome.wait))
            finally:
                if not self.flush_interval and self._buffer and not self._pending:
                    self._flush()  # group commit: what came meanwhile is the next batch

        d.addBoth(done)

    def _give_back(self, failure: Any, urls: list[str], what: str, label: str) -> Requeue:
        """The Requeue of a batch that could not be written (``what``: "3 rows"): said
        once with its URLs, and the outage begun (``self.outage``: the worker pauses)."""
        logger.warning(
            "Could not write %s (%s); their requests go back to the frontier: %s",
            what,
            failure.getErrorMessage(),
            " ".join(urls[:20]),
        )
        self.outage.begin(f"writing {what}", failure.value)
        return Requeue(f"{label} write failed: {failure.getErrorMessage()}", self.outage.wait)

    def _write(self, batch: list[Any], *args: Any) -> Any:
        raise NotImplementedError

    def _written(self, result: Any, batch: list[Any]) -> None:
        raise NotImplementedError

    def _failed(self, failure: Any, batch: list[Any]) -> Requeue:
        raise NotImplementedError
