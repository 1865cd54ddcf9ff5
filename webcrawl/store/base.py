"""The store interface: the webtable (one row per URL, keyed by reversed URL).

Backends implement these few methods and pass ``tests/test_store_contract.py``.
Rows are JSON-compatible dicts with at least ``key`` and ``url``; a backend
may keep some fields in columns of their own, but returns the row as written.
Every failure of a backend (its driver's errors, a bad file, a lost server)
ends as :class:`StoreError`.  Methods block: callers on the reactor thread
run them in a thread.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import Any

Row = dict[str, Any]


class StoreError(RuntimeError):
    """A store operation failed (after the backend's own retries)."""


class Store(abc.ABC):
    url: str

    @abc.abstractmethod
    def put_pages(self, rows: Sequence[Row]) -> None:
        """Insert or replace ``rows`` (by ``row["key"]``), all or nothing."""

    @abc.abstractmethod
    def get_page(self, key: str) -> Row | None:
        """The row at ``key``, or None."""

    def get_pages(self, keys: Sequence[str]) -> dict[str, Row]:
        """The rows at ``keys`` that exist, by key (one round trip where the backend can)."""
        found = {}
        for key in keys:
            row = self.get_page(key)
            if row is not None:
                found[key] = row
        return found

    def get_fields(self, keys: Sequence[str], fields: Sequence[str]) -> dict[str, Row]:
        """Of the rows at ``keys`` that exist, by key, only those of ``fields`` they hold
        (None fields absent).  A backend reads no more of a row than it must, so a
        page's text and body stay on the server."""
        return {
            key: {f: row[f] for f in fields if row.get(f) is not None}
            for key, row in self.get_pages(keys).items()
        }

    @abc.abstractmethod
    def scan_pages(self, prefix: str = "", limit: int | None = None) -> Iterator[Row]:
        """Rows whose key starts with ``prefix``, in key order."""

    @abc.abstractmethod
    def count_pages(self) -> int:
        """Number of rows in the webtable."""

    # -- the failpaths table (the failed-path filter list): row = site, column = path level

    @abc.abstractmethod
    def failpath_row(self, site: str) -> dict[str, int]:
        """The counts of ``site`` by column ({} when it has none)."""

    @abc.abstractmethod
    def failpath_rows(self, prefix: str = "") -> Iterator[tuple[str, dict[str, int]]]:
        """Every (site, counts) whose site starts with ``prefix``, in site order."""

    @abc.abstractmethod
    def failpath_add(self, site: str, column: str, delta: int) -> int:
        """Add ``delta`` to a count (0 if absent) and return the new value, atomically
        across processes; a count that falls to 0 or below is removed in the same atomic
        step (0 is returned) and reads as absent, so a success (``-scale``) never deletes
        a failure another worker adds meanwhile, and the next failure counts 1."""

    @abc.abstractmethod
    def failpath_delete(self, site: str, columns: Sequence[str] | None = None) -> None:
        """Delete ``columns`` of ``site`` (None: the whole row)."""

    # -- the cold frontier: queue entries beyond what a host's queue in Redis holds,
    # under keys that sort as the host queue does (:mod:`webcrawl.frontier.cold`)

    @abc.abstractmethod
    def frontier_put(self, entries: Sequence[tuple[str, bytes]]) -> None:
        """Write ``(key, entry)`` pairs; a key written again gets the new entry (so a
        write retried after a lost reply is harmless)."""

    @abc.abstractmethod
    def frontier_scan(self, prefix: str, limit: int) -> list[tuple[str, bytes]]:
        """The first ``limit`` ``(key, entry)`` pairs whose key starts with ``prefix``,
        in key order."""

    @abc.abstractmethod
    def frontier_delete(self, keys: Sequence[str]) -> None:
        """Delete the entries at ``keys``; keys without one are ignored."""

    @abc.abstractmethod
    def identity(self) -> str:
        """The store's id: random, made by the first call on a new store and kept in the
        store itself, so every client of one store reads the same id (whatever URL it
        reaches it by) and two stores never share one.  A crawl records the id of the
        store its frontier and pages are in (:func:`webcrawl.frontier.layout.join_crawl`)."""

    def connect(self, wait: float = 0.0) -> None:  # noqa: B027 - SQLite opens on first use
        """Reach the store before the first page: a server that does not answer is
        waited for up to ``wait`` seconds; what waiting cannot fix (a wrong URL, a
        refused table) raises :class:`StoreError` at once, naming the setting."""

    @abc.abstractmethod
    def check_writable(self) -> None:
        """Raise :class:`StoreError` unless the store accepts a write right now."""

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release connections; the store may not be used afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
