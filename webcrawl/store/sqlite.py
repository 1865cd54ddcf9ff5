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
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS failpaths (
    site   TEXT NOT NULL,
    level  TEXT NOT NULL,
    count  INTEGER NOT NULL,
    PRIMARY KEY (site, level)
) WITHOUT ROWID;
"""

# Host parameters per statement: SQLite's limit is 999 before 3.32, 32766 after.
_MAX_PARAMS = 500


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
            self._retry_locked(lambda: conn.executescript(_SCHEMA))
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

    def get_pages(self, keys: Sequence[str]) -> dict[str, Row]:
        found: dict[str, Row] = {}
        unique = list(dict.fromkeys(keys))
        try:
            conn = self._conn()
            for start in range(0, len(unique), _MAX_PARAMS):
                chunk = unique[start : start + _MAX_PARAMS]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT key, row FROM webtable WHERE key IN ({marks})"
                for key, row in conn.execute(sql, chunk):
                    found[key] = json.loads(row)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.url}: reading {len(unique)} rows failed: {exc}") from exc
        return found

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

    def failpath_row(self, site: str) -> dict[str, int]:
        found = self._conn().execute("SELECT level, count FROM failpaths WHERE site = ?", (site,))
        return dict(found.fetchall())

    def failpath_rows(self, prefix: str = "") -> Iterator[tuple[str, dict[str, int]]]:
        found = (
            self._conn()
            .execute(
                "SELECT site, level, count FROM failpaths WHERE site >= ? AND site < ?"
                " ORDER BY site, level",
                (prefix, prefix + "\U0010ffff"),
            )
            .fetchall()
        )
        row: dict[str, int] = {}
        current = None
        for site, level, count in found:
            if site != current and current is not None:
                yield current, row
                row = {}
            current = site
            row[level] = count
        if current is not None:
            yield current, row

    def failpath_add(self, site: str, column: str, delta: int) -> int:
        try:
            with self._conn() as conn:  # one statement: atomic across processes
                found = conn.execute(
                    "INSERT INTO failpaths (site, level, count) VALUES (?, ?, ?)"
                    " ON CONFLICT(site, level) DO UPDATE SET count = count + excluded.count"
                    " RETURNING count",
                    (site, column, int(delta)),
                ).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.url}: counting a failure of {site} {column}: {exc}") from exc
        return int(found[0])

    def failpath_delete(self, site: str, columns: Sequence[str] | None = None) -> None:
        try:
            with self._conn() as conn:
                if columns is None:
                    conn.execute("DELETE FROM failpaths WHERE site = ?", (site,))
                else:
                    conn.executemany("DELETE FROM failpaths WHERE site = ? AND level = ?",
                                     [(site, c) for c in columns])  # fmt: skip
        except sqlite3.Error as exc:
            raise StoreError(f"{self.url}: deleting failpaths of {site}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
