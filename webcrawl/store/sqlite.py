"""SQLite webtable: the embedded default (stdlib, WAL mode, one file).

Several processes may write one file: WAL lets readers run beside the
writer, and writers wait for each other up to ``busy_timeout``.  Each thread
gets its own connection (sqlite3 connections are not shared across threads).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from webcrawl.store.base import Row, Store, StoreError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS webtable (
    key        TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    status     INTEGER,
    fetched_at REAL,
    row        TEXT NOT NULL
) WITHOUT ROWID
"""


class SQLiteStore(Store):
    def __init__(self, path: str | Path, busy_timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, check_same_thread=False)
            self._retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
            conn.execute("PRAGMA synchronous=NORMAL")
            self._retry_locked(lambda: conn.execute(_SCHEMA))
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _retry_locked(self, operation: Callable[[], object]) -> None:
        """Run ``operation``, waiting out "database is locked" up to ``busy_timeout``.

        Switching a new file to WAL (and creating the table) while another
        process does the same fails at once with SQLITE_BUSY: SQLite's busy
        handler does not cover that lock change.  Workers starting together on
        a fresh data directory hit it.
        """
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                operation()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def put_pages(self, rows: Sequence[Row]) -> None:
        values = [
            (r["key"], r["url"], r.get("status"), r.get("fetched_at"), json.dumps(r)) for r in rows
        ]
        try:
            with self._conn() as conn:
                conn.executemany(
                    "INSERT INTO webtable (key, url, status, fetched_at, row) VALUES (?,?,?,?,?)"
                    " ON CONFLICT(key) DO UPDATE SET url=excluded.url, status=excluded.status,"
                    " fetched_at=excluded.fetched_at, row=excluded.row",
                    values,
                )
        except sqlite3.Error as exc:
            raise StoreError(f"{self.url}: writing {len(rows)} rows failed: {exc}") from exc

    def get_page(self, key: str) -> Row | None:
        found = self._conn().execute("SELECT row FROM webtable WHERE key = ?", (key,)).fetchone()
        return json.loads(found[0]) if found else None

    def scan_pages(self, prefix: str = "", limit: int | None = None) -> Iterator[Row]:
        sql = "SELECT row FROM webtable WHERE key >= ? AND key < ? ORDER BY key"
        params: list[object] = [prefix, prefix + "\U0010ffff"]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        for (row,) in self._conn().execute(sql, params):
            yield json.loads(row)

    def count_pages(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM webtable").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
