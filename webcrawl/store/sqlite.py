"""SQLite webtable: the embedded default (stdlib, WAL mode, one file).

``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``, with an
optional ``?timeout=SECONDS``: how long a writer waits for another one (the
busy timeout, 60 s).  Several processes may write one file: WAL lets readers
run beside the writer, and writers wait for each other up to that timeout.
Each thread gets its own connection (sqlite3 connections are not shared
across threads).  Every sqlite3 error (a locked database, a file that is not
a database, a table that is not ours) ends as :class:`StoreError`.  The
store's id (:meth:`SQLiteStore.identity`) is in the file's ``meta`` table.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs

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
CREATE TABLE IF NOT EXISTS frontier (
    key    TEXT PRIMARY KEY,
    entry  BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    name   TEXT PRIMARY KEY,
    value  TEXT NOT NULL
) WITHOUT ROWID;
"""

# Host parameters per statement: SQLite's limit is 999 before 3.32, 32766 after.
_MAX_PARAMS = 500
_FIELD_NAME = re.compile(r"[A-Za-z0-9_]+")  # (a JSON path label as is)


class SQLiteStore(Store):
    DEFAULT_TIMEOUT = 60.0

    def __init__(self, path: str | Path, busy_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = Path(path).absolute()  # the file, whatever the directory is later
        self.busy_timeout = busy_timeout
        self.url = f"sqlite:///{self.path}"
        if busy_timeout != self.DEFAULT_TIMEOUT:
            self.url += f"?timeout={busy_timeout:g}"
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._identity: str | None = None

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        """The store of ``sqlite:///PATH[?timeout=SECONDS]`` (ValueError names what is wrong)."""
        prefix = "sqlite:///"
        rest = url[len(prefix) :] if url.startswith(prefix) else ""
        path, _, query = rest.partition("?")
        if not path:
            raise ValueError(f"STORE_URL: expected sqlite:///PATH[?timeout=SECONDS], got {url!r}")
        options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        unknown = sorted(set(options) - {"timeout"})
        if unknown:
            raise ValueError(
                f"STORE_URL: unknown sqlite option(s) {', '.join(unknown)} (known: timeout)"
            )
        timeout = cls.DEFAULT_TIMEOUT
        if "timeout" in options:
            try:
                timeout = float(options["timeout"])
            except ValueError:
                timeout = math.nan
            if not (math.isfinite(timeout) and timeout >= 0):
                raise ValueError(
                    f"STORE_URL: timeout must be a number of seconds "
                    f">= 0, got {options['timeout']!r}"
                )
        return cls(path, busy_timeout=timeout)

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Any sqlite3 (or file) error inside ends as a StoreError naming the store."""
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"{self.url}: {what} failed: {exc}") from exc

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, check_same_thread=False)
            try:
                self._retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
                conn.execute("PRAGMA synchronous=NORMAL")
                self._retry_locked(lambda: conn.executescript(_SCHEMA))
            except sqlite3.Error:
                conn.close()
                raise
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def connect(self, wait: float = 0.0) -> None:
        """Open the file and make the table (a bad path fails here, not at the first page)."""
        with self._errors("opening"):
            self._conn()

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
        with self._errors(f"writing {len(rows)} rows"), self._conn() as conn:
            conn.executemany(
                "INSERT INTO webtable (key, url, status, fetched_at, row) VALUES (?,?,?,?,?)"
                " ON CONFLICT(key) DO UPDATE SET url=excluded.url, status=excluded.status,"
                " fetched_at=excluded.fetched_at, row=excluded.row",
                values,
            )

    def get_page(self, key: str) -> Row | None:
        with self._errors(f"reading {key}"):
            found = self._conn().execute("SELECT row FROM webtable WHERE key = ?", (key,))
            row = found.fetchone()
        return json.loads(row[0]) if row else None

    def get_pages(self, keys: Sequence[str]) -> dict[str, Row]:
        return {key: json.loads(row) for key, row in self._select(keys, "row", [])}

    def get_fields(self, keys: Sequence[str], fields: Sequence[str]) -> dict[str, Row]:
        # SQLite extracts the fields from the JSON row (``->``: JSON text, so that types
        # survive); the row itself never reaches Python
        names = list(dict.fromkeys(fields))
        bad = [name for name in names if not _FIELD_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"field names are letters, digits and _: {bad!r}")
        picks = ", ".join("row -> ?" for _ in names) or "NULL"
        try:
            selected = self._select(keys, picks, [f"$.{name}" for name in names])
        except StoreError as exc:
            if "malformed JSON" not in str(exc.__cause__):
                raise
            # a row holding NaN or Infinity: Python's json writes them, SQLite's JSON
            # refuses them; read in Python (rare: no field the crawl stores is one)
            return {
                key: {n: row[n] for n in names if row.get(n) is not None}
                for key, row in self.get_pages(keys).items()
            }
        found: dict[str, Row] = {}
        for key, *values in selected:
            pairs = zip(names, values, strict=False)
            row = {n: json.loads(v) for n, v in pairs if v is not None}
            found[key] = {n: v for n, v in row.items() if v is not None}
        return found

    def _select(self, keys: Sequence[str], picks: str, params: list[str]) -> list[tuple]:
        """``SELECT key, <picks>`` of the rows at ``keys`` (``params``: the picks')."""
        unique = list(dict.fromkeys(keys))
        step = max(1, _MAX_PARAMS - len(params))
        out: list[tuple] = []
        with self._errors(f"reading {len(unique)} rows"):
            conn = self._conn()
            for start in range(0, len(unique), step):
                chunk = unique[start : start + step]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT key, {picks} FROM webtable WHERE key IN ({marks})"
                out.extend(conn.execute(sql, [*params, *chunk]))
        return out

    def scan_pages(self, prefix: str = "", limit: int | None = None) -> Iterator[Row]:
        sql = "SELECT row FROM webtable WHERE key >= ? AND key < ? ORDER BY key"
        params: list[object] = [prefix, prefix + "\U0010ffff"]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._errors("scanning rows"):
            cursor = self._conn().execute(sql, params)
        while True:
            with self._errors("scanning rows"):
                batch = cursor.fetchmany(500)
            if not batch:
                return
            for (row,) in batch:
                yield json.loads(row)

    def count_pages(self) -> int:
        with self._errors("counting rows"):
            return int(self._conn().execute("SELECT COUNT(*) FROM webtable").fetchone()[0])

    def failpath_row(self, site: str) -> dict[str, int]:
        with self._errors(f"reading the failpaths of {site}"):
            found = self._conn().execute(
                "SELECT level, count FROM failpaths WHERE site = ? AND count > 0", (site,)
            )
            return dict(found.fetchall())

    def failpath_rows(self, prefix: str = "") -> Iterator[tuple[str, dict[str, int]]]:
        with self._errors("scanning the failpaths"):
            found = (
                self._conn()
                .execute(
                    "SELECT site, level, count FROM failpaths WHERE site >= ? AND site < ?"
                    " AND count > 0 ORDER BY site, level",
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
        """One transaction: the add, and the delete of a count at or below 0 (no other
        writer can come between them)."""
        what = f"counting {int(delta):+d} on the failpath {site} {column}"
        # the connection's context commits (or rolls back) both statements at once
        with self._errors(what), self._conn() as conn:
            ((value,),) = conn.execute(
                "INSERT INTO failpaths (site, level, count) VALUES (?, ?, ?)"
                " ON CONFLICT(site, level) DO UPDATE SET count = count + excluded.count"
                " RETURNING count",
                (site, column, int(delta)),
            ).fetchall()
            if value <= 0:
                conn.execute("DELETE FROM failpaths WHERE site = ? AND level = ?", (site, column))
        return max(int(value), 0)

    def failpath_delete(self, site: str, columns: Sequence[str] | None = None) -> None:
        with self._errors(f"deleting the failpaths of {site}"), self._conn() as conn:
            if columns is None:
                conn.execute("DELETE FROM failpaths WHERE site = ?", (site,))
            else:
                conn.executemany(
                    "DELETE FROM failpaths WHERE site = ? AND level = ?",
                    [(site, c) for c in columns],
                )

    def frontier_put(self, entries: Sequence[tuple[str, bytes]]) -> None:
        with self._errors(f"writing {len(entries)} frontier entries"), self._conn() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO frontier (key, entry) VALUES (?, ?)",
                [(k, bytes(e)) for k, e in entries],
            )

    def frontier_scan(self, prefix: str, limit: int) -> list[tuple[str, bytes]]:
        if limit <= 0:
            return []
        with self._errors(f"scanning the frontier at {prefix!r}"):
            return [
                (k, bytes(e))
                for k, e in self._conn().execute(
                    "SELECT key, entry FROM frontier WHERE key >= ? AND key < ? ORDER BY key "
                    "LIMIT ?",
                    (prefix, prefix + "\U0010ffff", int(limit)),
                )
            ]

    def frontier_delete(self, keys: Sequence[str]) -> None:
        with self._errors(f"deleting {len(keys)} frontier entries"), self._conn() as conn:
            conn.executemany("DELETE FROM frontier WHERE key = ?", [(k,) for k in keys])

    def identity(self) -> str:
        """Kept in the file's ``meta`` table (row ``store_id``): the first writer's id wins."""
        if self._identity is None:
            with self._errors("reading the store's id"), self._conn() as conn:
                conn.execute(
                    "INSERT OR IGNORE INTO meta (name, value) VALUES ('store_id', ?)",
                    (uuid.uuid4().hex,),
                )
                ((self._identity,),) = conn.execute(
                    "SELECT value FROM meta WHERE name = 'store_id'"
                ).fetchall()
        return self._identity

    def check_writable(self) -> None:
        """Takes the write lock and lets it go (``BEGIN IMMEDIATE``; ``ROLLBACK``): waits up
        to the busy timeout for another writer, as a write would."""
        with self._errors("taking the write lock"):
            conn = self._conn()
            if conn.in_transaction:  # (never left open by this store)
                conn.rollback()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
