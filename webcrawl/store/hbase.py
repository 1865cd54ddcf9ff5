"""HBase webtable through happybase (Thrift1): the store of a cluster.

``hbase://HOST:PORT?table_prefix=crawl&transport=buffered&protocol=binary``
(the defaults are HBase's own: port 9090, buffered transport, binary
protocol; HBase 2 installs often run ``transport=framed&protocol=compact``).
More query parameters: ``pool_size`` (connections, 4), ``timeout`` (socket
timeout in seconds, 30), ``batch_size`` (cells per ``mutateRows`` call,
1000), ``batch_bytes`` (bytes per call, 1 MiB: HBase's framed transport
refuses frames over 2 MB; a single larger row still goes alone), ``retries``
(attempts after the first for idempotent calls, 4).

Four tables, created idempotently on first use (every family keeps one
version, as Nutch's mapping does):

- ``webpage``, one row per URL, row key the reversed URL (Nutch 2).  Known
  fields go to typed columns in Nutch 2's spirit, values big-endian as
  HBase's ``Bytes`` (and Gora) encode them: family ``f`` (fetch: ``bas``
  final URL, ``st`` status as int, ``ts`` fetch time as a double of Unix
  seconds, ``fi`` revisit interval, ``nft`` next fetch time, ``typ`` content
  type, ``cnt`` the raw body with ``STORE_CONTENT``, ...), ``p``
  (parse: ``t`` title, ``c`` text, ``sig`` and ``psig`` the SimHash and the
  previous one as 8 raw bytes, ...), ``h`` (headers:
  ``ETag``, ``Last-Modified``, ``Content-Length``).  Lists and fields of
  other types are JSON in ``f:x``.  A field that is None is deleted, so it
  reads back absent.
- ``counters``, family ``c``: row ``webpage`` holds the number of rows in the
  webtable (``count_pages``), so that ``webcrawl status`` never scans the
  webtable.  A row is counted the first time it is written: after a batch is
  written, every row without the 8-byte marker ``f:n`` gets it by an
  ``atomicIncrement``, and the writer whose increment returned 1 (the first, of
  every writer) counts it.  Each store keeps its total in a column of its own,
  ``c:rows:<host>:<pid>:<id>``, rewritten with each batch (a put, safe to retry,
  where an increment whose reply is lost could not be); the count is their sum.
  An increment whose reply is lost is settled with a later batch by reading
  the marker back.
- ``frontier``, family ``e``: the cold frontier (``e:q``, the queue entry, under
  keys of :mod:`webcrawl.frontier.cold`), and the store's id (``identity``) in
  row ``/store-id``, column ``e:id``.
- ``failpaths``, one row per site, one 8-byte counter per path level in
  family ``c`` (HBase's atomic ``atomicIncrement``).  A count at 0 or below
  reads as absent; a level is cleared by taking its counter back to 0 with
  an increment, never by a delete (see ``failpath_add`` and
  ``failpath_delete``).

happybase's pool refreshes a connection that failed but re-raises
(``TSocket read 0 bytes`` after the server closed an idle socket, a
restarted server): idempotent calls (reads, puts, column deletes) are retried
here with back-off on a fresh connection; counter increments only when they
were never sent (a lost reply may hide a done increment): before one, a
socket the server has closed is replaced.  Errors end as :class:`StoreError`.
All methods block: callers on the reactor thread run them in a thread.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import select
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from webcrawl.store.base import Row, Store, StoreError

logger = logging.getLogger(__name__)

T = TypeVar("T")

WEBTABLE = "webpage"
FAILPATHS = "failpaths"
# family -> options; one version each, as Nutch's gora-hbase-mapping.xml
WEBTABLE_FAMILIES = {"f": {"max_versions": 1}, "p": {"max_versions": 1}, "h": {"max_versions": 1}}
FAILPATH_FAMILIES = {"c": {"max_versions": 1}}
COUNTERS = "counters"
COUNTER_FAMILIES = {"c": {"max_versions": 1}}
ROWS_COUNTER = (b"webpage", b"c:rows")  # row, column prefix in COUNTERS
MARKER = b"f:n"  # 8-byte counter in every webtable row: 1 once the row is counted
FRONTIER = "frontier"
FRONTIER_FAMILIES = {"e": {"max_versions": 1}}
ENTRY = b"e:q"  # a cold frontier row's queue entry
# The cell time of every frontier row.  A frontier row is deleted once moved up and its
# key never written again; a write of it that lands after the delete (a put retried on
# a fresh connection whose first attempt the gateway applied late) must stay hidden
# under the delete marker, whose time is the server's: at the server's time it would be
# newer, come back, and be queued a second time (a completed spill claim's rows are
# refilled by count: a copy of one moved twice would leave another of its rows behind).
# A major compaction drops marker and hidden cells together; a copy late by that long
# would show again.
FRONTIER_TIME = 1
# the store's id, in a row of the frontier table no cold key can have (they start with
# "<crawl>/") and a column no frontier scan reads
STORE_ID = (b"/store-id", b"e:id")
TABLES = (
    (WEBTABLE, WEBTABLE_FAMILIES),
    (FAILPATHS, FAILPATH_FAMILIES),
    (COUNTERS, COUNTER_FAMILIES),
    (FRONTIER, FRONTIER_FAMILIES),
)
# HBase's table names: [namespace:]qualifier, qualifier of letters, digits, _ - .
# (TableName.isLegalTableQualifierName); happybase adds "<prefix>_" before ours
_PREFIX = re.compile(r"(?:[A-Za-z0-9_]+:)?[A-Za-z0-9_][A-Za-z0-9_.-]*")
EXTRA = b"f:x"  # JSON object of the fields without a typed column
FIELDS = b"f:fields"  # the typed fields of the current version, comma-separated
EXTRA_FIELDS = b"f:xf"  # the names of the fields in f:x, a JSON list (for get_fields)

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_DOUBLE = struct.Struct(">d")


def _enc_str(v: Any) -> bytes | None:
    # surrogatepass: a lone surrogate in a page's text is stored, as SQLite's JSON would
    return v.encode("utf-8", "surrogatepass") if type(v) is str else None


def _enc_int(v: Any) -> bytes | None:
    return _INT.pack(v) if type(v) is int and -(2**31) <= v < 2**31 else None


def _enc_long(v: Any) -> bytes | None:
    return _LONG.pack(v) if type(v) is int and -(2**63) <= v < 2**63 else None


def _enc_double(v: Any) -> bytes | None:
    return _DOUBLE.pack(v) if type(v) is float else None


def _enc_bool(v: Any) -> bytes | None:
    return (b"\x01" if v else b"\x00") if type(v) is bool else None


def _enc_hash(v: Any) -> bytes | None:
    """A 64-bit fingerprint in 16 hex digits, as 8 raw bytes (Nutch's signature is bytes)."""
    if type(v) is not str or len(v) != 16 or v != v.lower():
        return None
    try:
        return bytes.fromhex(v)
    except ValueError:
        return None


def _enc_base64(v: Any) -> bytes | None:
    """A body in (canonical) base64, as its raw bytes (Nutch's ``f:cnt``)."""
    if type(v) is not str:
        return None
    try:
        raw = base64.b64decode(v, validate=True)
    except ValueError:
        return None
    return raw if base64.b64encode(raw).decode("ascii") == v else None


_DECODE: dict[Callable[[Any], bytes | None], Callable[[bytes], Any]] = {
    _enc_str: lambda b: b.decode("utf-8", "surrogatepass"),
    _enc_int: lambda b: _INT.unpack(b)[0],
    _enc_long: lambda b: _LONG.unpack(b)[0],
    _enc_double: lambda b: _DOUBLE.unpack(b)[0],
    _enc_bool: lambda b: b != b"\x00",
    _enc_hash: lambda b: b.hex(),
    _enc_base64: lambda b: base64.b64encode(b).decode("ascii"),
}

# row field -> (column, encoder); anything else (or of another type) goes to f:x as JSON
COLUMNS: dict[str, tuple[bytes, Callable[[Any], bytes | None]]] = {
    "url": (b"f:url", _enc_str),
    "final_url": (b"f:bas", _enc_str),
    "status": (b"f:st", _enc_int),
    "fetched_at": (b"f:ts", _enc_double),
    "depth": (b"f:dep", _enc_int),
    "kind": (b"f:kind", _enc_str),
    "content_type": (b"f:typ", _enc_str),
    "error": (b"f:err", _enc_str),
    "revisit_interval": (b"f:fi", _enc_double),
    "next_visit": (b"f:nft", _enc_double),
    "revisit_method": (b"f:rvm", _enc_str),
    "title": (b"p:t", _enc_str),
    "text": (b"p:c", _enc_str),
    "simhash": (b"p:sig", _enc_hash),
    "previous_simhash": (b"p:psig", _enc_hash),
    "distance": (b"p:dist", _enc_int),
    "changed": (b"p:chg", _enc_bool),
    "etag": (b"h:ETag", _enc_str),
    "last_modified": (b"h:Last-Modified", _enc_str),
    "content_length": (b"h:Content-Length", _enc_long),
    "content": (b"f:cnt", _enc_base64),
}
_FIELD_OF = {column: (name, _DECODE[enc]) for name, (column, enc) in COLUMNS.items()}


def encode_row(row: Row) -> dict[bytes, bytes]:
    """The cells to put for ``row`` (its ``key`` is the row key).

    Nothing is deleted: a delete marker gets the server's time and hides any put
    of the same millisecond (HBase's HBASE-2256), so a page written twice in a
    row could lose fields.  Instead ``f:fields`` lists the typed fields of this
    version and ``f:x`` is always rewritten; a typed cell of an older version
    that this one lacks stays in HBase, unread.
    """
    cells: dict[bytes, bytes] = {}
    extra: dict[str, Any] = {}
    names = []
    for name, value in row.items():
        if name == "key" or value is None:
            continue
        typed = COLUMNS.get(name)
        data = typed[1](value) if typed else None
        if data is None:
            extra[name] = value
        else:
            cells[typed[0]] = data  # type: ignore[index]
            names.append(name)
    cells[EXTRA] = json.dumps(extra, separators=(",", ":")).encode()
    cells[FIELDS] = ",".join(names).encode()
    cells[EXTRA_FIELDS] = json.dumps(list(extra), separators=(",", ":")).encode()
    return cells


def _listed(value: bytes | None) -> set[str]:
    """The field names of an ``f:xf`` cell."""
    names = json.loads(value) if value else []
    return {str(n) for n in names} if isinstance(names, list) else set()


def decode_row(key: bytes, cells: dict[bytes, bytes]) -> Row:
    """The row as written (None fields absent) from its cells."""
    row: Row = {"key": key.decode("utf-8", "surrogatepass")}
    listed = cells.get(FIELDS)
    current = set(listed.decode().split(",")) if listed is not None else None
    for column, data in cells.items():
        if column == EXTRA:
            row.update(json.loads(data))
            continue
        if column == EXTRA_FIELDS:
            continue
        known = _FIELD_OF.get(column)
        if known and (current is None or known[0] in current):
            row[known[0]] = known[1](data)
    return row


def parse_hbase_url(url: str) -> dict[str, Any]:
    """Connection options from ``hbase://host:port?...``; ValueError names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "hbase" or not parts.hostname:
        raise ValueError(f"STORE_URL: expected hbase://HOST[:PORT][?...], got {url!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    known = {
        "table_prefix",
        "transport",
        "protocol",
        "pool_size",
        "timeout",
        "batch_size",
        "batch_bytes",
        "retries",
    }
    unknown = sorted(set(query) - known)
    if unknown:
        raise ValueError(
            f"STORE_URL: unknown hbase option(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    try:
        port = parts.port or 9090
    except ValueError:
        raise ValueError(f"STORE_URL: the port of {url!r} is not a port number (1-65535)") from None
    prefix = query.get("table_prefix") or None
    if prefix is not None and (not _PREFIX.fullmatch(prefix) or len(prefix) > 200):
        raise ValueError(
            f"STORE_URL: table_prefix {prefix!r} is not a legal HBase "
            "table name ([namespace:]name of letters, digits, '_', '-', '.', "
            "not starting with '-' or '.', at most 200 characters)"
        )
    opts: dict[str, Any] = {
        "host": parts.hostname,
        "port": port,
        "table_prefix": prefix,
        "transport": query.get("transport", "buffered"),
        "protocol": query.get("protocol", "binary"),
    }
    if opts["transport"] not in ("buffered", "framed"):
        raise ValueError(
            f"STORE_URL: transport must be buffered or framed, got {opts['transport']!r}"
        )
    if opts["protocol"] not in ("binary", "compact"):
        raise ValueError(f"STORE_URL: protocol must be binary or compact, got {opts['protocol']!r}")
    for name, kind, default in (
        ("pool_size", int, 4),
        ("timeout", float, 30.0),
        ("batch_size", int, 1000),
        ("batch_bytes", int, 1 << 20),
        ("retries", int, 4),
    ):
        raw = query.get(name)
        try:
            value = kind(raw) if raw is not None else default
        except ValueError:
            raise ValueError(f"STORE_URL: {name} must be a number, got {raw!r}") from None
        if value < (0 if name == "retries" else 1):
            raise ValueError(f"STORE_URL: {name} is out of range: {raw!r}")
        opts[name] = value
    return opts


def _retryable() -> tuple[type[BaseException], ...]:
    """Errors worth another try: the wire, and the server's IOError replies (a region
    moving, a server starting).  IllegalArgument, AlreadyExists and
    TApplicationException (a bad filter, a bad row) would fail again."""
    from happybase.pool import NoConnectionsAvailable
    from Hbase_thrift import IOError as HBaseIOError
    from thriftpy2.protocol.exc import TProtocolException
    from thriftpy2.transport import TTransportException

    return (
        TTransportException,
        HBaseIOError,
        OSError,
        NoConnectionsAvailable,
        TProtocolException,
        _cybin_error(),
    )


def _cybin_error() -> type[BaseException]:
    """thriftpy2's Cython binary protocol raises its own ProtocolError (not a TException)
    on bytes that are not a Thrift reply: a connection out of step, or not Thrift."""
    try:
        from thriftpy2.protocol.cybin import ProtocolError
    except ImportError:  # thriftpy2 without its compiled protocol
        from thriftpy2.protocol.exc import TProtocolException as ProtocolError
    return ProtocolError


def _failures() -> tuple[type[BaseException], ...]:
    """Every error a call can end with (reported as :class:`StoreError`)."""
    from thriftpy2.thrift import TException

    return (*_retryable(), TException)


def _peer_closed(conn: Any) -> bool:
    """Whether the server has closed ``conn``'s socket (an idle disconnect), without
    sending anything.  Only for calls that cannot be retried blindly."""
    sock = getattr(conn.transport, "sock", None)
    sock = getattr(sock, "sock", sock)  # a transport around a TSocket, or the socket
    if not isinstance(sock, socket.socket):
        return False
    try:
        # (Python waits up to the socket's timeout before a recv, whatever its flags:
        # ask first whether there is anything to read at all)
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False  # open, nothing to read: alive
        return sock.recv(1, socket.MSG_PEEK) == b""  # readable and empty: closed
    except (OSError, ValueError):
        return True


class HBaseStore(Store):
    def __init__(self, url: str) -> None:
        self.url = url
        self.options = parse_hbase_url(url)  # checks the URL; no I/O here
        self._pool: Any = None
        self._ready = False
        self._closed = False
        self._lock = threading.Lock()
        # rows not known to be counted -> whether their marker increment was sent (and
        # got no reply) or not (the markers could not be read)
        self._unsettled: dict[bytes, bool] = {}
        # rows this store counted first, kept in a column of its own (see _save_count)
        self._ledger = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}".encode()
        self._counted = 0
        self._counted_unsaved = False
        self._identity: str | None = None

    # -- connections ----------------------------------------------------------------

    def _call(self, what: str, operation: Callable[[Any], T], idempotent: bool = True) -> T:
        """Run ``operation(connection)``, retried on a fresh connection after an error
        of the wire or an IOError reply.  A non-idempotent operation is retried only
        when it was never sent (no connection could be had)."""
        retryable, failures = _retryable(), _failures()
        attempts = self.options["retries"] + 1
        for attempt in range(attempts):
            sent = False
            try:
                pool = self._connect()
                with pool.connection(timeout=self.options["timeout"]) as conn:
                    try:
                        conn.open()
                        if not idempotent and _peer_closed(conn):
                            conn.transport.close()  # reopened below: the call is not lost
                            conn.open()
                        sent = True
                        return operation(conn)
                    except failures:
                        # the pool gives the connection a new socket without closing
                        # the old one (a ResourceWarning, a leaked descriptor)
                        conn.transport.close()
                        raise
            except failures as exc:
                final = not isinstance(exc, retryable) or (sent and not idempotent)
                if final or attempt + 1 >= attempts:
                    raise StoreError(f"{self.url}: {what} failed: {_describe(exc)}") from exc
                delay = min(5.0, 0.2 * 2**attempt)
                logger.warning(
                    "%s: %s failed (%s); retry %d/%d in %.1fs",
                    self.url,
                    what,
                    _describe(exc),
                    attempt + 1,
                    attempts - 1,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _connect(self) -> Any:
        """The connection pool, made on first use, with the tables in place."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.url}: the store is closed")
            if self._pool is None:
                import happybase

                o = self.options
                self._pool = happybase.ConnectionPool(
                    size=o["pool_size"],
                    host=o["host"],
                    port=o["port"],
                    timeout=int(o["timeout"] * 1000),
                    table_prefix=o["table_prefix"],
                    transport=o["transport"],
                    protocol=o["protocol"],
                )
            if not self._ready:
                with self._pool.connection(timeout=self.options["timeout"]) as conn:
                    try:
                        self._create_tables(conn)
                    except _failures():
                        conn.transport.close()  # the pool replaces it without closing it
                        raise
                self._ready = True
            return self._pool

    @staticmethod
    def _create_tables(conn: Any) -> None:
        from Hbase_thrift import AlreadyExists  # loaded by happybase from its Hbase.thrift

        existing = set(conn.tables())
        for name, families in TABLES:
            if name.encode() in existing:
                continue
            try:
                conn.create_table(name, families)
                logger.info("Created HBase table %s", name)
            except AlreadyExists:  # another worker made it first
                pass

    def connect(self, wait: float = 0.0) -> None:
        """Reach the server and make the tables, before the first page.

        A server that does not answer (refused, starting, a master not yet up) is
        waited for up to ``wait`` seconds, with a log line when the wait begins and
        every 30 s.  What waiting cannot fix fails at once, naming the setting and
        what the server said: a transport or protocol the server does not speak
        (the others are tried, to say which it does), a table the server refuses."""
        began = time.monotonic()
        logged = 0.0
        while True:
            try:
                self._probe()  # a short timeout: a transport mismatch can hang a call
                self._connect()
                if logged:
                    logger.info("%s answers, after %.0f s", self._where(), time.monotonic() - began)
                return
            except _failures() as exc:
                self._reset_pool()
                fatal = self._diagnose(exc)
                if fatal:
                    raise StoreError(f"STORE_URL={self.url}: {fatal}") from exc
                waited = time.monotonic() - began
                if waited >= wait:
                    raise StoreError(
                        f"STORE_URL={self.url}: {self._where()} did not answer "
                        f"within {wait:.0f} s (STORE_CONNECT_WAIT): {_describe(exc)}"
                    ) from exc
                if not logged or waited - logged >= 30:
                    logger.warning(
                        "%s does not answer (%s); waiting for it, at most %.0f s more",
                        self._where(),
                        _describe(exc),
                        wait - waited,
                    )
                    logged = max(waited, 1e-9)
                time.sleep(min(2.0, max(0.0, wait - waited)))

    def _probe(self, transport: str | None = None, protocol: str | None = None) -> None:
        """One call on a connection of its own, of at most 5 s."""
        import happybase

        o = self.options
        conn = happybase.Connection(
            o["host"],
            o["port"],
            timeout=int(min(o["timeout"], 5) * 1000),
            transport=transport or o["transport"],
            protocol=protocol or o["protocol"],
            autoconnect=False,
        )
        try:
            conn.open()
            conn.client.getTableNames()
        finally:
            conn.close()

    def _where(self) -> str:
        return f"HBase's Thrift server at {self.options['host']}:{self.options['port']}"

    def _reset_pool(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            _close_pool(pool)

    def _diagnose(self, exc: BaseException) -> str | None:
        """Why waiting would not help (None: it may, the server may be starting)."""
        from Hbase_thrift import IllegalArgument
        from Hbase_thrift import IOError as HBaseIOError
        from thriftpy2.thrift import TApplicationException
        from thriftpy2.transport import TTransportException

        if isinstance(exc, HBaseIOError | IllegalArgument | TApplicationException):
            # an IOError may pass (a master initializing, a region in transition),
            # unless it is one of these; the others are the server's final word
            message = _describe(exc)
            final = not isinstance(exc, HBaseIOError) or any(
                refused in message
                for refused in (
                    "NamespaceNotFoundException",
                    "IllegalArgumentException",
                    "Illegal character",
                    "AccessDeniedException",
                )
            )
            return f"{self._where()} refused: {message}" if final else None
        refused = isinstance(exc, TTransportException) and exc.type == TTransportException.NOT_OPEN
        if refused or isinstance(exc, ConnectionRefusedError):
            return None  # nothing listens (yet)
        spoken = self._spoken()
        mine = (self.options["transport"], self.options["protocol"])
        if spoken and spoken != mine:
            return (
                f"{self._where()} speaks {spoken[0]}+{spoken[1]}, not "
                f"{mine[0]}+{mine[1]} ({_describe(exc)}): add "
                f"transport={spoken[0]}&protocol={spoken[1]} to the URL"
            )
        if spoken is None and not isinstance(exc, TTransportException | OSError):
            return (
                f"what listens at {self.options['host']}:{self.options['port']} does not "
                f"answer as a Thrift1 server ({_describe(exc)}): is it HBase's Thrift "
                "server (hbase thrift start), not its Thrift2 or REST server?"
            )
        return None

    def _spoken(self) -> tuple[str, str] | None:
        """The transport and protocol the server answers in, if one of the four."""
        for transport in ("buffered", "framed"):
            for protocol in ("binary", "compact"):
                try:
                    self._probe(transport, protocol)
                    return transport, protocol
                except Exception:  # not this one
                    continue
        return None

    # -- the webtable -----------------------------------------------------------------

    def put_pages(self, rows: Sequence[Row]) -> None:
        latest = {row["key"]: row for row in rows}  # a key written twice: the last one
        mutations = [
            (key.encode("utf-8", "surrogatepass"), encode_row(row)) for key, row in latest.items()
        ]

        limit = self.options["batch_bytes"]

        def write(conn: Any) -> None:
            with conn.table(WEBTABLE).batch(batch_size=self.options["batch_size"]) as batch:
                size = 0
                for key, cells in mutations:
                    row_bytes = len(key) + sum(len(c) + len(v) for c, v in cells.items())
                    if size and size + row_bytes > limit:
                        batch.send()  # keeps a call under the framed transport's frame limit
                        size = 0
                    batch.put(key, cells)
                    size += row_bytes

        self._call(f"writing {len(rows)} rows", write)
        self._count_new([key for key, _ in mutations])

    def _count_new(self, keys: list[bytes]) -> None:
        """Add the rows written for the first time to the page count (see the module's
        docstring); a failure here costs the count, never the batch (it is written)."""
        new = 0
        try:
            if self._unsettled:
                new += self._settle()
            marked = self._call(
                "reading row markers",
                lambda conn: {key for key, _ in conn.table(WEBTABLE).rows(keys, columns=[MARKER])},
            )
        except StoreError as exc:
            logger.info("Page count of %d rows settled later: %s", len(keys), exc)
            for key in keys:
                self._unsettled.setdefault(key, False)
            keys = []
        for key in keys:
            if key not in marked:
                new += self._mark(key)
        if new or self._counted_unsaved:
            self._counted += new
            self._save_count()

    def _save_count(self) -> None:
        """Put this store's own total in its own column of the count row: a put of an
        absolute value, so retried safely (an increment whose reply is lost could not
        be); one that fails is put again with the next batch."""
        column = ROWS_COUNTER[1] + b":" + self._ledger
        value = _LONG.pack(self._counted)
        try:
            self._call(
                "saving the page count",
                lambda conn: conn.table(COUNTERS).put(ROWS_COUNTER[0], {column: value}),
            )
            self._counted_unsaved = False
        except StoreError as exc:
            self._counted_unsaved = True
            logger.warning("Page count not saved (again with the next batch): %s", exc)

    def _mark(self, key: bytes) -> int:
        """1 if this call marked ``key`` first, else 0; a marker whose increment got
        no reply is settled later (``_settle``)."""
        try:
            return int(self._increment(f"marking row {key!r}", WEBTABLE, key, MARKER, 1) == 1)
        except StoreError as exc:
            logger.info("No reply to marking row %r (%s): read back later", key, exc)
            self._unsettled[key] = True
            return 0

    def _settle(self) -> int:
        """The rows not known to be counted, their markers read back: absent, the row
        is marked now; present after an increment that got no reply, it counts if the
        marker is 1 (it was ours: workers lease distinct URLs, so another first writer
        of that row at that very moment is unlikely); present otherwise, it was
        counted before.  Returns the rows this worker counts."""
        pending, self._unsettled = self._unsettled, {}
        keys = list(pending)
        try:
            found = self._call(
                "reading row markers",
                lambda conn: dict(conn.table(WEBTABLE).rows(keys, columns=[MARKER])),
            )
        except StoreError:
            self._unsettled = pending | self._unsettled
            raise
        new = 0
        for key, sent in pending.items():
            value = found.get(key, {}).get(MARKER)
            if value is None:
                new += self._mark(key)
            elif sent:
                new += int(_LONG.unpack(value)[0] == 1)
        return new

    def get_page(self, key: str) -> Row | None:
        k = key.encode("utf-8")
        cells = self._call(f"reading {key}", lambda conn: conn.table(WEBTABLE).row(k))
        return decode_row(k, cells) if cells else None

    def get_pages(self, keys: Sequence[str]) -> dict[str, Row]:
        wanted = [k.encode("utf-8") for k in dict.fromkeys(keys)]
        if not wanted:
            return {}
        found = self._call(
            f"reading {len(wanted)} rows", lambda conn: conn.table(WEBTABLE).rows(wanted)
        )
        return {k.decode("utf-8"): decode_row(k, cells) for k, cells in found}

    def get_fields(self, keys: Sequence[str], fields: Sequence[str]) -> dict[str, Row]:
        # the fields' typed columns, f:fields and f:xf; f:x (outlinks, visits...) only of
        # the rows that keep a wanted field there (one of another type than its column's)
        wanted = [k.encode("utf-8") for k in dict.fromkeys(keys)]
        if not wanted:
            return {}
        names = list(dict.fromkeys(fields))
        columns = [COLUMNS[n][0] for n in names if n in COLUMNS] + [FIELDS, EXTRA_FIELDS]
        found = dict(
            self._call(
                f"reading {len(wanted)} rows",
                lambda conn: conn.table(WEBTABLE).rows(wanted, columns=columns),
            )
        )
        extra = [k for k, cells in found.items() if set(names) & _listed(cells.get(EXTRA_FIELDS))]
        if extra:
            more = self._call(
                f"reading {len(extra)} rows",
                lambda conn: conn.table(WEBTABLE).rows(extra, columns=[EXTRA]),
            )
            for k, cells in more:
                found[k] = {**found[k], **cells}
        out: dict[str, Row] = {}
        for k, cells in found.items():
            row = decode_row(k, cells)
            out[k.decode("utf-8")] = {n: row[n] for n in names if row.get(n) is not None}
        return out

    def scan_pages(self, prefix: str = "", limit: int | None = None) -> Iterator[Row]:
        # scanned in pages of rows, each page in one retried call, so an idle
        # disconnect or a scanner lease expiry between two pages costs nothing
        start = prefix.encode("utf-8")
        stop = _prefix_stop(start) if prefix else None
        left = limit
        page = 200  # rows per call: bodies (f:cnt) can make rows large
        while left is None or left > 0:
            n = page if left is None else min(page, left)

            def fetch(conn: Any, start: bytes = start, n: int = n) -> list[tuple[bytes, dict]]:
                table = conn.table(WEBTABLE)
                return list(table.scan(row_start=start, row_stop=stop, limit=n, batch_size=n))

            rows = self._call("scanning rows", fetch)
            for key, cells in rows:
                yield decode_row(key, cells)
            if len(rows) < n:
                return
            if left is not None:
                left -= len(rows)
            start = rows[-1][0] + b"\x00"

    def count_pages(self) -> int:
        """The rows counted as they were first written: one row read, no scan (its
        columns are the stores' totals; family ``c``, as ``c:`` is an empty qualifier)."""
        row, column = ROWS_COUNTER
        cells = self._call(
            "reading the page count", lambda conn: conn.table(COUNTERS).row(row, columns=[b"c"])
        )
        return sum(
            _LONG.unpack(v)[0] for c, v in cells.items() if c.startswith(column) and len(v) == 8
        )

    # -- the failpaths table ------------------------------------------------------------

    def failpath_row(self, site: str) -> dict[str, int]:
        cells = self._call(
            f"reading failpaths of {site}", lambda conn: conn.table(FAILPATHS).row(site.encode())
        )
        return _counts(cells)

    def failpath_rows(self, prefix: str = "") -> Iterator[tuple[str, dict[str, int]]]:
        start = prefix.encode()
        stop = _prefix_stop(start) if prefix else None
        rows = self._call(
            "scanning failpaths",
            lambda conn: list(conn.table(FAILPATHS).scan(row_start=start, row_stop=stop)),
        )
        for key, cells in rows:
            counts = _counts(cells)
            if counts:
                yield key.decode(), counts

    def failpath_add(self, site: str, column: str, delta: int) -> int:
        """An increment; one that takes the count to 0 or below is followed by a second
        increment that puts back what of ``delta`` went below 0 (see ``_subtract``).
        Increments commute, so a failure another worker counts meanwhile is kept."""
        row, col = site.encode(), b"c:" + column.encode()
        if delta < 0:
            return self._subtract(site, row, col, -int(delta))
        what = f"counting a failure of {site} {column}"
        return max(self._increment(what, FAILPATHS, row, col, int(delta)), 0)

    def _increment(self, what: str, table: str, row: bytes, col: bytes, delta: int) -> int:
        return int(
            self._call(
                what,
                lambda conn: conn.table(table).counter_inc(row, col, delta),
                idempotent=False,  # a lost reply may hide a done increment: never retried
            )
        )

    def _subtract(self, site: str, row: bytes, col: bytes, amount: int) -> int:
        """Subtract ``amount`` (> 0) from a count, which ends at 0 when it would go below.

        The counter may pass below 0 for a moment; the worker whose subtraction took it
        there adds back ``min(-value, amount)``: what of its own subtraction went below
        0.  Whatever the interleaving of increments, subtractions and their corrections,
        the counter ends as some order of them, each clamped at 0, would leave it (a
        correction bounded by its own amount never undoes another worker's; with
        ``-value`` alone, two subtractions that both see the other's would add back
        twice).  Meanwhile a count below 0 reads as absent."""
        what = f"subtracting {amount} from the failpath {site} {col[2:].decode()}"
        value = self._increment(what, FAILPATHS, row, col, -amount)
        if value < 0:
            self._increment(what, FAILPATHS, row, col, min(-value, amount))
        return max(value, 0)

    def failpath_delete(self, site: str, columns: Sequence[str] | None = None) -> None:
        """Columns are taken back to 0 by increments (a subtraction of the count read),
        not deleted: a delete marker would hide an increment made by another worker in
        the same millisecond (HBASE-2256); a count at 0 or below reads as absent.
        ``columns=None`` (an operator's clear) deletes the row."""
        row = site.encode()
        if columns is None:
            self._call(
                f"deleting failpaths of {site}", lambda conn: conn.table(FAILPATHS).delete(row)
            )
            return
        cols = [b"c:" + c.encode() for c in columns]
        if not cols:
            return
        current = self._call(
            f"reading failpaths of {site}",
            lambda conn: conn.table(FAILPATHS).row(row, columns=cols),
        )
        for level, value in _counts(current).items():
            self._subtract(site, row, b"c:" + level.encode(), value)

    def frontier_put(self, entries: Sequence[tuple[str, bytes]]) -> None:
        """Puts at :data:`FRONTIER_TIME`: a copy that lands after the row's delete stays
        deleted."""

        def write(conn: Any) -> None:
            table = conn.table(FRONTIER)
            size = self.options["batch_size"]
            with table.batch(batch_size=size, timestamp=FRONTIER_TIME) as batch:
                for key, entry in entries:
                    batch.put(key.encode(), {ENTRY: bytes(entry)})

        self._call(f"writing {len(entries)} frontier entries", write)  # puts: idempotent

    def frontier_scan(self, prefix: str, limit: int) -> list[tuple[str, bytes]]:
        start = prefix.encode()
        stop = _prefix_stop(start) if prefix else None
        n = int(limit)
        if n <= 0:
            return []

        def scan(conn: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
            table = conn.table(FRONTIER)
            return list(
                table.scan(
                    row_start=start,
                    row_stop=stop,
                    limit=n,
                    batch_size=min(n, 1000),
                    columns=[ENTRY],
                )
            )

        rows = self._call(f"scanning the frontier at {prefix!r}", scan)
        # (a key that is no UTF-8, which no worker writes, keeps its bytes as surrogates:
        # the frontier drops it as unreadable, and frontier_delete writes the same bytes)
        return [
            (key.decode(errors="surrogateescape"), cells[ENTRY])
            for key, cells in rows
            if ENTRY in cells
        ]

    def frontier_delete(self, keys: Sequence[str]) -> None:
        """Row deletes.  A delete marker hides every put of the row at or before its
        time (HBASE-2256), frontier puts (:data:`FRONTIER_TIME`) included, even one that
        lands later; frontier keys are never written again once moved up, so none is
        lost that way."""

        def delete(conn: Any) -> None:
            with conn.table(FRONTIER).batch(batch_size=self.options["batch_size"]) as batch:
                for key in keys:
                    batch.delete(key.encode(errors="surrogateescape"))

        self._call(f"deleting {len(keys)} frontier entries", delete)

    def identity(self) -> str:
        """Row ``/store-id`` of the frontier table: read; if absent, put only if still
        absent (``checkAndPut``, atomic on the server), so the first writer's id wins,
        and read back.  Both are safe to retry."""
        if self._identity is not None:
            return self._identity
        row, column = STORE_ID

        def read(conn: Any) -> bytes | None:
            return conn.table(FRONTIER).row(row, columns=[column]).get(column)

        found = self._call("reading the store's id", read)
        if found is None:
            from Hbase_thrift import Mutation

            mine = Mutation(column=column, value=uuid.uuid4().hex.encode())
            self._call(
                "recording the store's id",
                lambda conn: conn.client.checkAndPut(
                    conn.table(FRONTIER).name, row, column, None, mine, {}
                ),
            )
            found = self._call("reading the store's id", read)
            if found is None:
                raise StoreError(f"{self.url}: the store's id was recorded but reads as absent")
        self._identity = found.decode()
        return self._identity

    def check_writable(self) -> None:
        """Both tables exist and are enabled (one cheap call each on the server)."""

        def check(conn: Any) -> list[str]:
            return [name for name, _ in TABLES if not conn.is_table_enabled(name)]

        disabled = self._call("checking the tables", check)
        if disabled:
            raise StoreError(
                f"{self.url}: table(s) {', '.join(disabled)} disabled: no writes possible"
            )

    def close(self) -> None:
        if self._unsettled and self._pool is not None:
            self._count_new([])  # the markers still unsettled, read back once more
            if self._unsettled:
                logger.warning(
                    "The page count may be %d short: the markers of %s could not be settled",
                    len(self._unsettled),
                    list(self._unsettled)[:5],
                )
        with self._lock:
            pool, self._pool, self._ready = self._pool, None, False
            self._closed = True
        if pool is not None:
            _close_pool(pool)


def _close_pool(pool: Any) -> None:
    """Close the pooled connections (none is in use when closing)."""
    while True:
        try:
            conn = pool._queue.get_nowait()
        except Exception:  # queue.Empty
            break
        conn.close()


def _counts(cells: dict[bytes, bytes]) -> dict[str, int]:
    """Level -> count of a failpaths row; a counter at 0 or below is a cleared one (absent)."""
    counts = {
        col[2:].decode(): _LONG.unpack(v)[0]
        for col, v in cells.items()
        if col.startswith(b"c:") and len(v) == 8
    }
    return {level: n for level, n in counts.items() if n > 0}


def _prefix_stop(prefix: bytes) -> bytes | None:
    """The first key after every key starting with ``prefix`` (happybase's rule)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _describe(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    if isinstance(exc, socket.timeout):
        message = "timed out"
    return f"{type(exc).__name__}: {message.splitlines()[0] if message else ''}"
