"""Revisits beyond the horizon on their way to the store, and the leases that wait for them.

A page's lease is acknowledged only once what the page produced is stored: its links
and near revisits in Redis (the scheduler's step), its revisits beyond
FRONTIER_REVISIT_HORIZON in the store (here).  Held only in a worker's memory past its
lease, a kill -9 would lose them.  The store write runs where ``submit`` puts it (the
scheduler's mover thread, off the reactor); a lease waits for every revisit scheduled
before it, so new revisits arriving all the time never hold back an older lease.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from webcrawl.store.base import StoreError

logger = logging.getLogger(__name__)

Revisit = tuple[str, str, int, float, bytes]  # (url key, host, priority, due, data)
FAR_REVISIT_LIMIT = 10**11  # a due time (Unix seconds) a store key can hold


def run_here(func: Callable[[], None]) -> Future[None]:
    """A ``submit`` that runs ``func`` now, in the caller's thread."""
    future: Future[None] = Future()
    try:
        func()
    except BaseException as exc:  # handed to whoever reads the future
        future.set_exception(exc)
    else:
        future.set_result(None)
    return future


class FarRevisits:
    """One worker's revisits beyond the horizon, and the leases waiting for them.

    Called from one thread (the reactor's); only ``put`` runs where ``submit`` says.
    """

    def __init__(
        self,
        put: Callable[[Sequence[Revisit]], None],
        submit: Callable[[Callable[[], None]], Future[None]] = run_here,
    ) -> None:
        self._put, self._submit = put, submit
        self.pending: list[Revisit] = []  # not handed to the store yet
        self._added = self._stored = 0  # revisits so far: scheduled, stored
        self._waiting: list[tuple[int, str]] = []  # (revisits before it, lease)
        self._writing: tuple[Future[None], list[Revisit]] | None = None
        self._failing = False

    @property
    def stored(self) -> int:
        """Revisits this worker has stored."""
        return self._stored

    def add(self, revisit: Revisit) -> None:
        self.pending.append(revisit)
        self._added += 1

    def hold(self, lease: str) -> bool:
        """Keep ``lease`` (of a page done with) until every revisit scheduled so far is
        stored; False if there is none to wait for."""
        if self._stored >= self._added:
            return False
        self._waiting.append((self._added, lease))
        return True

    def released(self) -> list[str]:
        """Leases whose revisits are all stored now (they leave the waiting list)."""
        self._collect()
        if not self._waiting:
            return []
        done = [lease for mark, lease in self._waiting if mark <= self._stored]
        if done:
            self._waiting = [(m, lease) for m, lease in self._waiting if m > self._stored]
        return done

    def waiting(self) -> list[str]:
        """Leases held for their revisits (they are renewed as in progress)."""
        return [lease for _, lease in self._waiting]

    def busy(self) -> bool:
        """Whether anything is not stored yet, or a lease waits."""
        return bool(self.pending or self._waiting or self._writing)

    def store(self) -> None:
        """Hand the pending revisits to the store, unless a write is still running (its
        outcome is collected first)."""
        self._collect()
        if self._writing is not None or not self.pending:
            return
        batch, self.pending = self.pending, []
        self._writing = (self._submit(lambda: self._put(batch)), batch)
        self._collect()  # written already, if ``submit`` ran it here

    def flush(self, timeout: float | None = None) -> None:
        """Wait for the running write, then store what is pending (a worker closing)."""
        if self._writing is not None:
            self._writing[0].exception(timeout)  # waits; the outcome is read below
        self.store()
        if self._writing is not None:
            self._writing[0].exception(timeout)
            self._collect()

    def _collect(self) -> None:
        if self._writing is None or not self._writing[0].done():
            return
        future, batch = self._writing
        self._writing = None
        exc = future.exception()
        if exc is None:
            self._stored += len(batch)
            if self._failing:
                self._failing = False
                logger.info("Revisits beyond the horizon are stored again")
            return
        self.pending[:0] = batch  # first again, in order
        if not isinstance(exc, StoreError):
            raise exc
        if not self._failing:
            self._failing = True
            logger.warning(
                "Could not store %d revisits beyond the horizon (kept; the leases "
                "of their pages wait, renewed, until they are stored): %s",
                len(batch),
                exc,
            )
