"""An HBase Thrift1 server emulator, for testing HBase code over the wire with happybase.

The HBase code is tested against a real standalone HBase 2.6 (``webcrawl.localhbase``); this
server stays for what a real one cannot be made to do on demand: fault injection, a fake
clock, fast restarts.  It speaks the Thrift1 ``Hbase`` service (the IDL happybase ships,
loaded as ``Hbase_thrift``) and copies the semantics of HBase 2.x's
``ThriftHBaseServiceHandler`` on top of an in-memory model (see the project notes
``shared/HBASE_NOTES.md``, section 2.3).  ``tests/test_hbase_emulator.py`` runs the same
semantic tests against it and against the real server; where they differed, the real
server was right and this one was changed to follow it.

Emulated
    * Tables with column families and their descriptors (maxVersions, default 3; TTL stored
      as ``ttl > 0 ? ttl : 2147483647``; compression/bloom names validated), enable/disable,
      tables must be disabled before delete, and the admin errors of the real handler
      (``AlreadyExists("table name already in use")``, ``IOError("table does not exist")``,
      ``TableNotDisabledException``, ``TableNotFoundException``, ``TableNotEnabledException``,
      ``IllegalArgument`` for bad descriptors, ``getTableRegions`` on a missing table ``[]``).
    * Cells with millisecond timestamps and versions, newest first; per-family maxVersions,
      counted after the time range: excess versions stay (as in the memstore) until a
      "flush" (``disableTable``, a clean stop or restart, or every ``MEMSTORE_FLUSH_CELLS``
      written versions), so a read bounded by ``timestamp`` can still see them; a put at an
      existing (row, column, ts) overwrites; TTL hides expired cells.
    * Server timestamps: with the wall clock, every write call gets a millisecond of its own
      (the emulator waits for the clock to tick), since a real server's write calls take
      milliseconds: a ``delete`` then a ``put``, or a ``counter_set`` after a burst of
      ``counter_inc``, are not masked.  A ``clock`` given by the caller is used as it is.
    * Column names: ``cf`` is the whole family, ``cf:`` the empty qualifier, ``cf:a:b`` splits on
      the first colon; ``Get``/``Scan`` ``addFamily``/``addColumn`` order effects
      (``[b"cf", b"cf:a"]`` narrows to ``cf:a``).
    * Writes: puts before deletes in ``mutateRows(Ts)`` (a delete and a put of one row in one
      happybase ``Batch`` lose the put), deletes before puts in ``mutateRow(Ts)`` (two calls
      to the RegionServer, each with its own "now"); deletes remove versions <= ts (LATEST =
      server now) and leave delete markers that mask later puts with ts <= marker (so a put
      in the same millisecond as a delete is lost, HBASE-2256); ``compact``/``majorCompact``
      do not lift them (a real compaction is asynchronous and never touches the memstore);
      unknown families give an ``IOError`` naming ``NoSuchColumnFamilyException`` (other rows
      of the batch are still written); ``mutateRows`` on a missing or disabled table fails
      like ``HTable.batch`` (``RetriesExhaustedWithDetailsException`` naming the table, or
      ``NotServingRegionException``: at once, where a real server retries for ~150 s).
    * Reads: exclusive timestamp upper bounds, ``getRows`` omits missing rows, ``getVer``
      versions, ``atomicIncrement`` (missing = 0, 8-byte big-endian signed cells only, wraps
      like a Java long, atomic), ``append``, ``checkAndPut``, ``increment``.
    * Scanners: i32 ids from 0 per server, ``[]`` when exhausted, ``IllegalArgument("scanner ID
      is invalid")``, start inclusive / stop exclusive, reversed scans, ``caching``, ``batchSize``
      (partial rows), ``sortColumns``, columns, timestamp, filters that skip a version see the
      next one among the newest maxVersions, a consistent snapshot taken at open,
      and the client scanner timeout (``ScannerTimeoutException`` when more rows are needed
      after ``scanner_timeout`` seconds without a server round trip; 60 s, as in HBase).
    * Filter strings (HBase ``ParseFilter`` syntax, with ``AND``/``OR``/``SKIP``/``WHILE`` and
      parentheses): PrefixFilter, KeyOnlyFilter, FirstKeyOnlyFilter, ColumnPrefixFilter,
      MultipleColumnPrefixFilter, ColumnRangeFilter, ColumnPaginationFilter, PageFilter,
      InclusiveStopFilter, TimestampsFilter, RowFilter, FamilyFilter, QualifierFilter,
      ValueFilter, SingleColumnValueFilter, SingleColumnValueExcludeFilter, with the
      binary/binaryprefix/substring/regexstring comparators.
    * Errors the way the Java server reports them: declared exceptions carry a Java-like stack
      trace as message; a Java ``RuntimeException`` escaping the handler (a malformed filter, a
      family-only put in ``mutateRows``, an empty row key, an illegal table name...) becomes a
      ``TApplicationException(INTERNAL_ERROR, "Internal error processing <call>")``, as Thrift
      0.14's ``ProcessFunction`` does (both verified on HBase 2.6.1: a family-only put in
      ``mutateRows`` and a filter syntax error answer ``TApplicationException``).
    * Server: buffered transport + binary protocol by default, framed and/or compact on
      request (framed frames above ``max_frame_size``, 2 MiB as in HBase, drop the
      connection); the binary protocol does not require a version header (Java's
      ``TBinaryProtocol`` default), so a framed client of a buffered server hangs, as with
      HBase; one thread per connection; idle sockets closed after ``idle_timeout``
      seconds (60 s, as ``hbase.thrift.server.socket.read.timeout``) so the client's next
      call fails with ``TSocket read 0 bytes``.

Not emulated
    Regions, splits and region servers (one region per table, ``getRegionInfo`` and
    ``getRowOrBefore`` are not implemented); the filters ColumnCountGetFilter,
    DependentColumnFilter, FirstKeyValueMatchingQualifiersFilter, MultiRowRangeFilter and
    ColumnValueFilter; namespaces other than ``default``; table
    alteration; ``minVersions``/``KEEP_DELETED_CELLS``; single-version deletes
    (``Delete.addColumn``: Thrift1 never sends them); scanner leases on the server side; WAL
    durability options; security; attributes (accepted and ignored); the increment coalescer;
    HBase's size-based limits other than the 10 MB cell size and the framed max frame size.

Running it
    * In a thread: ``EmulatorServer(...)`` with ``start()``/``stop()``/``restart()`` (keeps the
      data: in memory, or reloaded from ``data`` when given) or as a context manager::

          with EmulatorServer(transport="framed", protocol="compact") as server:
              conn = happybase.Connection(*server.address, transport="framed",
                                          protocol="compact")

    * As a subprocess: ``python tests/support/hbase_emulator.py [--host 127.0.0.1] [--port 0]
      [--transport buffered|framed] [--protocol binary|compact] [--idle-timeout S]
      [--data FILE] [--control-port N] [--fail METHOD[:COUNT]] ...`` prints one JSON line
      (``{"host": ..., "port": ..., "control_port": ..., ...}``) to stdout and serves until
      SIGTERM/SIGINT.  ``hbase_emulator(...)`` wraps that in a context manager yielding an
      ``EmulatorProcess`` (which unpacks as ``host, port``); its ``restart()`` kills the
      process (SIGKILL, like a crash) and starts it again on the same port and data file.

Persistence (``data``/``--data FILE``)
    The model is loaded from ``FILE`` (a pickle snapshot) plus ``FILE.wal`` (an append-only
    log of applied mutations, flushed after every mutation, so even SIGKILL keeps acknowledged
    writes); on start and on a clean stop the log is folded into a new snapshot, written
    atomically.

Fault injection
    ``EmulatorServer.inject_errors(method, count, kind=..., apply=...)`` in-process, or the
    same through the control port (``EmulatorProcess.inject_errors(...)``, a JSON-lines TCP
    side channel on 127.0.0.1 whose port is in the JSON line) or ``--fail METHOD[:COUNT]`` at
    start.  ``method`` is a Thrift call name, a list of names, ``"mutating"`` (default: every
    call that changes data or tables) or ``"*"``.  ``kind`` is ``"ioerror"`` (an ``IOError``
    reply), ``"disconnect"`` (the server drops the connection without replying), or
    ``"internal"`` (a ``TApplicationException``); ``apply=True`` performs the call first and
    then fails it (a write that happened but whose reply was lost); ``delay`` sleeps before
    answering.  ``call_counts()`` reports how many calls of each name the server received.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import hashlib
import importlib
import json
import logging
import os
import pickle
import re
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import happybase
from thriftpy2.protocol import TCompactProtocol, TCyBinaryProtocol
from thriftpy2.thrift import TApplicationException, TProcessor
from thriftpy2.transport import TCyBufferedTransport, TSocket, TTransportException
from thriftpy2.transport.base import readall

logger = logging.getLogger(__name__)

#: The IDL happybase ships, registered as ``Hbase_thrift`` by ``import happybase``.
Hbase_thrift = importlib.import_module("Hbase_thrift")
Hbase = Hbase_thrift.Hbase

LATEST_TIMESTAMP = 2**63 - 1  # HConstants.LATEST_TIMESTAMP
FOREVER = 2**31 - 1  # HConstants.FOREVER (Integer.MAX_VALUE): no TTL
MAX_ROW_LENGTH = 32767  # HConstants.MAX_ROW_LENGTH (Short.MAX_VALUE)
MAX_KEYVALUE_SIZE = 10 * 1024 * 1024  # hbase.client.keyvalue.maxsize
DEFAULT_MAX_FRAME_SIZE = 2 * 1024 * 1024  # hbase.regionserver.thrift.framed.max_frame_size_in_mb
DEFAULT_IDLE_TIMEOUT = 60.0  # hbase.thrift.server.socket.read.timeout (s)
DEFAULT_SCANNER_TIMEOUT = 60.0  # hbase.client.scanner.timeout.period (s)
# A table's "memstore" is flushed after this many written versions (a stand-in for
# hbase.hregion.memstore.flush.size, 128 MB): it bounds the excess versions kept.
MEMSTORE_FLUSH_CELLS = 100_000
REGION_SERVER_PORT = 16020

MUTATING_CALLS = frozenset(
    {
        "createTable",
        "deleteTable",
        "enableTable",
        "disableTable",
        "compact",
        "majorCompact",
        "mutateRow",
        "mutateRowTs",
        "mutateRows",
        "mutateRowsTs",
        "atomicIncrement",
        "deleteAll",
        "deleteAllTs",
        "deleteAllRow",
        "deleteAllRowTs",
        "increment",
        "incrementRows",
        "append",
        "checkAndPut",
    }
)
FAULT_KINDS = ("ioerror", "disconnect", "internal")

_COMPRESSIONS = {"lzo", "gz", "none", "snappy", "lz4", "bzip2", "zstd"}
_BLOOM_TYPES = {"NONE", "ROW", "ROWCOL", "ROWPREFIX_FIXED_LENGTH"}

Cell = tuple[bytes, bytes, int, bytes]  # (family, qualifier, timestamp, value)
ColumnSpec = dict[bytes, "set[bytes] | None"]  # family -> qualifiers (None: whole family)


def _now_ms() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------------------
# Java exceptions raised inside the emulated server


class JavaException(Exception):
    """A Java exception thrown inside the emulated handler."""

    java_class = "java.lang.Exception"

    def __init__(self, message: str, java_class: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if java_class:
            self.java_class = java_class

    def stack_trace(self) -> str:
        """``Throwables.getStackTraceAsString(e)``, roughly: what the Java server sends."""
        return (
            f"{self.java_class}: {self.message}\n"
            "\tat org.apache.hadoop.hbase.thrift.ThriftHBaseServiceHandler"
            "(ThriftHBaseServiceHandler.java) [emulated by hbase_emulator]\n"
        )


class JavaIOException(JavaException):
    """An ``IOException``: every handler method turns it into an ``IOError`` reply."""

    java_class = "java.io.IOException"


class JavaRuntimeException(JavaException):
    """An unchecked exception: escapes the handler unless it catches it explicitly."""

    java_class = "java.lang.RuntimeException"


class JavaIllegalArgumentException(JavaRuntimeException):
    """``IllegalArgumentException``: some handler sections turn it into ``IllegalArgument``."""

    java_class = "java.lang.IllegalArgumentException"


def _table_not_found(name: bytes) -> JavaIOException:
    return JavaIOException(_show(name), "org.apache.hadoop.hbase.TableNotFoundException")


def _show(b: bytes) -> str:
    """``Bytes.toStringBinary``."""
    return "".join(chr(c) if 32 <= c < 127 and c != 92 else f"\\x{c:02X}" for c in b)


def _npe(what: str) -> JavaRuntimeException:
    return JavaRuntimeException(what, "java.lang.NullPointerException")


class _Disconnect(Exception):
    """Close the client connection without a reply (fault injection)."""


# --------------------------------------------------------------------------------------
# Helpers copying HBase's argument handling


def parse_column(column: bytes | None) -> tuple[bytes] | tuple[bytes, bytes]:
    """``CellUtil.parseColumn``: ``cf`` -> ``(cf,)``; ``cf:`` -> ``(cf, b"")``; first colon."""
    if column is None:
        raise _npe("column")
    family, sep, qualifier = bytes(column).partition(b":")
    return (family, qualifier) if sep else (family,)


def _check_row(row: bytes | None) -> bytes:
    """``Mutation.checkRow``, as done by the Get/Put/Delete/Increment constructors."""
    if row is None:
        raise JavaIllegalArgumentException("Row buffer is null")
    if not row:
        raise JavaIllegalArgumentException("Row length is 0")
    if len(row) > MAX_ROW_LENGTH:
        raise JavaIllegalArgumentException(f"Row length {len(row)} is > {MAX_ROW_LENGTH}")
    return bytes(row)


def _check_write_ts(ts: int | None) -> int:
    if ts is None:
        raise _npe("timestamp")
    if ts < 0:
        raise JavaIllegalArgumentException(f"Timestamp cannot be negative. ts={ts}")
    return ts


def _time_range_max(ts: int | None) -> int:
    """``setTimeRange(0, ts)``: the exclusive upper bound."""
    if ts is None:
        raise _npe("timestamp")
    if ts < 0:
        raise JavaIllegalArgumentException(
            f"Timestamp cannot be negative. minStamp:0, maxStamp:{ts}"
        )
    return ts


def _table_name(raw: bytes | None) -> bytes:
    """``TableName.valueOf``: validate, and drop the ``default:`` namespace."""
    if raw is None:
        raise _npe("tableName")
    name = bytes(raw)
    namespace, sep, qualifier = name.rpartition(b":")
    if sep and namespace == b"default":
        name = qualifier
    if not qualifier:
        raise JavaIllegalArgumentException("Table qualifier must not be empty")
    try:
        text = qualifier.decode("utf-8")
        ns_text = namespace.decode("utf-8")
    except UnicodeDecodeError:
        raise JavaIllegalArgumentException(f"Illegal table name {_show(name)}") from None
    if text[0] in ".-" or text in (".", ".."):
        raise JavaIllegalArgumentException(
            f"Illegal first character <{ord(text[0])}> at 0. User-space table qualifiers can "
            f"only start with 'alphanumeric characters' from any language: {text}"
        )
    for i, ch in enumerate(text):
        if not (ch.isalnum() or ch in "_-."):
            raise JavaIllegalArgumentException(
                f"Illegal character code:{ord(ch)}, <{ch}> at {i}. User-space table qualifiers "
                f"may only contain 'alphanumeric characters' and digits: {text}"
            )
    if sep and not all(ch.isalnum() or ch == "_" for ch in ns_text):
        raise JavaIllegalArgumentException(f"Illegal character in namespace name: {ns_text}")
    return name


def _column_spec(columns: Sequence[bytes] | None) -> ColumnSpec | None:
    """Columns as ``Get``/``Scan`` ``addFamily``/``addColumn`` leave them.

    ``addFamily`` makes the family whole; ``addColumn`` on a whole family narrows it to that
    qualifier (``familyMap.get(family)`` is null, so a new set replaces it), as in HBase.
    """
    if not columns:
        return None
    spec: ColumnSpec = {}
    for column in columns:
        parts = parse_column(column)
        if len(parts) == 1:
            spec[parts[0]] = None
        else:
            quals = spec.get(parts[0])
            if quals is None:
                quals = spec[parts[0]] = set()
            quals.add(parts[1])
    return spec


def _selected(spec: ColumnSpec | None, fam: bytes, qual: bytes) -> bool:
    """Whether a ``Get``/``Scan`` with these columns reads the column."""
    if spec is None:
        return True
    if fam not in spec:
        return False
    quals = spec[fam]
    return quals is None or qual in quals


def _int64(value: int) -> int:
    """Wrap like a Java ``long``."""
    return (value + 2**63) % 2**64 - 2**63


# --------------------------------------------------------------------------------------
# The in-memory model


@dataclass
class FamilyDescriptor:
    """A column family's settings, as ``getColumnDescriptors`` reports them."""

    name: bytes
    max_versions: int = 3
    compression: str = "NONE"
    in_memory: bool = False
    bloom_filter_type: str = "NONE"
    block_cache_enabled: bool = False
    time_to_live: int = FOREVER

    def to_thrift(self) -> Any:
        return Hbase_thrift.ColumnDescriptor(
            name=self.name + b":",
            maxVersions=self.max_versions,
            compression=self.compression,
            inMemory=self.in_memory,
            bloomFilterType=self.bloom_filter_type,
            bloomFilterVectorSize=0,
            bloomFilterNbHashes=0,
            blockCacheEnabled=self.block_cache_enabled,
            timeToLive=self.time_to_live,
        )

    def as_tuple(self) -> tuple:
        return (
            self.name,
            self.max_versions,
            self.compression,
            self.in_memory,
            self.bloom_filter_type,
            self.block_cache_enabled,
            self.time_to_live,
        )


class _Table:
    """One table: rows -> {(family, qualifier): ((ts, value), ...) newest first}.

    Row dicts and version tuples are replaced, never changed in place, so a scanner can keep
    a snapshot by holding references.
    """

    def __init__(self, name: bytes, families: list[FamilyDescriptor], region_id: int) -> None:
        self.name = name
        self.families = {f.name: f for f in families}
        self.enabled = True
        self.region_id = region_id
        self.rows: dict[bytes, dict[tuple[bytes, bytes], tuple[tuple[int, bytes], ...]]] = {}
        self.keys: list[bytes] = []
        # Delete markers: row -> {(family, None) or (family, qualifier): max timestamp}
        self.markers: dict[bytes, dict[tuple[bytes, bytes | None], int]] = {}
        self.unflushed = 0  # versions written since the last flush (not persisted)

    @property
    def region_name(self) -> bytes:
        prefix = self.name + b",," + str(self.region_id).encode() + b"."
        return prefix + hashlib.md5(prefix).hexdigest().encode() + b"."

    def oldest_visible(self, family: bytes, now: int) -> int:
        ttl = self.families[family].time_to_live
        return -(2**63) if ttl >= FOREVER else now - ttl * 1000

    def check_families(self, families: Iterable[bytes]) -> None:
        for family in families:
            if family not in self.families:
                raise self.no_such_family(family)

    def no_such_family(self, family: bytes) -> JavaIOException:
        return JavaIOException(
            f"Column family {_show(family)} does not exist in region "
            f"{_show(self.region_name)} in table '{_show(self.name)}', "
            + ", ".join(f"{{NAME => '{_show(f)}'}}" for f in sorted(self.families)),
            "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException",
        )

    def state(self) -> dict:
        return {
            "name": self.name,
            "families": [f.as_tuple() for f in self.families.values()],
            "enabled": self.enabled,
            "region_id": self.region_id,
            "rows": self.rows,
            "markers": self.markers,
        }

    @classmethod
    def from_state(cls, state: dict) -> _Table:
        table = cls(
            state["name"], [FamilyDescriptor(*f) for f in state["families"]], state["region_id"]
        )
        table.enabled = state["enabled"]
        table.rows = state["rows"]
        table.keys = sorted(table.rows)
        table.markers = state["markers"]
        return table


class HBaseModel:
    """Tables and cells, with optional persistence to a snapshot file plus a write-ahead log.

    Every change goes through a primitive operation (``_apply``) that is appended to the log,
    so replaying the log rebuilds the same state.  All access holds ``lock``.
    """

    SNAPSHOT_FORMAT = "webcrawl.hbase_emulator/1"

    def __init__(
        self, data: str | os.PathLike | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        self.lock = threading.RLock()
        self.clock = clock or _now_ms
        # With the wall clock, every write call gets a millisecond of its own (see write_now)
        self._ticking = clock is None
        self._last_write = 0
        self.tables: dict[bytes, _Table] = {}
        self.data = Path(data) if data else None
        self._wal: Any = None
        if self.data:
            self._load()

    @property
    def closed(self) -> bool:
        """A persistent model after ``close()``: it no longer logs, reload it instead."""
        return self.data is not None and self._wal is None

    # -- persistence

    @property
    def _wal_path(self) -> Path:
        assert self.data
        return self.data.with_name(self.data.name + ".wal")

    def _load(self) -> None:
        assert self.data
        if self.data.exists():
            state = pickle.loads(self.data.read_bytes())
            if state.get("format") != self.SNAPSHOT_FORMAT:
                raise ValueError(f"{self.data}: not an hbase_emulator snapshot")
            for t in state["tables"]:
                table = _Table.from_state(t)
                self.tables[table.name] = table
        replayed = 0
        if self._wal_path.exists():
            with self._wal_path.open("rb") as f:
                while True:
                    try:
                        op = pickle.load(f)
                    except EOFError:
                        break
                    except Exception:  # a record torn by a crash: the end of the log
                        logger.warning("hbase_emulator: %s: ignoring a torn last record", f.name)
                        break
                    self._apply(op, log=False)
                    replayed += 1
        for table in self.tables.values():  # HBase flushes the edits replayed from the WAL
            self._flush(table)
        logger.info(
            "hbase_emulator: loaded %d tables from %s (%d logged mutations replayed)",
            len(self.tables),
            self.data,
            replayed,
        )
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write a snapshot atomically and start a new, empty log."""
        if not self.data:
            return
        with self.lock:
            state = {
                "format": self.SNAPSHOT_FORMAT,
                "tables": [t.state() for t in self.tables.values()],
            }
            tmp = self.data.with_name(self.data.name + ".tmp")
            tmp.write_bytes(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(tmp, self.data)
            if self._wal is not None:
                self._wal.close()
            self._wal = self._wal_path.open("wb")

    def close(self) -> None:
        """Flush every table (a clean HBase shutdown closes, so flushes, its regions), then
        checkpoint and close the log (if persistent)."""
        with self.lock:
            for table in self.tables.values():
                self._flush(table)
            if self._wal is not None:
                self.checkpoint()
                self._wal.close()
                self._wal = None

    # -- primitive operations (logged)

    def _apply(self, op: tuple, log: bool = True) -> None:
        kind = op[0]
        if kind == "row":
            self._op_row(*op[1:])
        elif kind == "create":
            name, families, region_id = op[1:]
            table = _Table(name, [FamilyDescriptor(*f) for f in families], region_id)
            self.tables[name] = table
        elif kind == "drop":
            del self.tables[op[1]]
        elif kind == "enable":
            self.tables[op[1]].enabled = op[2]
        elif kind == "flush":
            self._flush(self.tables[op[1]])
        elif kind == "purge":  # written by older versions of the emulator (majorCompact)
            self.tables[op[1]].markers.clear()
        else:  # pragma: no cover - a bug
            raise ValueError(f"unknown operation {kind!r}")
        if log and self._wal is not None:
            pickle.dump(op, self._wal, protocol=pickle.HIGHEST_PROTOCOL)
            self._wal.flush()

    def _op_row(self, name: bytes, row: bytes, ops: list[tuple]) -> None:
        """Apply cell operations to one row: ``("p", fam, qual, ts, value)`` puts,
        ``("dc", fam, qual, ts)`` column deletes, ``("df", fam, ts)`` family deletes."""
        table = self.tables[name]
        old = table.rows.get(row)
        cols = dict(old) if old else {}
        for op in ops:
            if op[0] == "p":
                self._put_cell(table, row, cols, op[1:])
            elif op[0] == "dc":
                self._delete_cells(table, row, cols, (op[1], op[2]), op[3])
            else:
                self._delete_cells(table, row, cols, (op[1], None), op[2])
        if cols:
            table.rows[row] = cols
            if old is None:
                bisect.insort(table.keys, row)
        elif old is not None:
            del table.rows[row]
            del table.keys[bisect.bisect_left(table.keys, row)]

    @staticmethod
    def _put_cell(table: _Table, row: bytes, cols: dict, cell: tuple) -> None:
        """Add a version.  Versions beyond the family's maxVersions stay, as in the memstore,
        until the next flush (``_flush``); reads never return more than maxVersions."""
        fam, qual, ts, value = cell
        markers = table.markers.get(row)
        if markers and max(markers.get((fam, None), -1), markers.get((fam, qual), -1)) >= ts:
            return  # masked by a delete marker
        versions = [v for v in cols.get((fam, qual), ()) if v[0] != ts]
        versions.append((ts, value))
        versions.sort(key=lambda v: -v[0])
        cols[(fam, qual)] = tuple(versions)
        table.unflushed += 1

    @staticmethod
    def _delete_cells(
        table: _Table, row: bytes, cols: dict, key: tuple[bytes, bytes | None], ts: int
    ) -> None:
        """Leave a marker at ``ts`` for the column (or the family: qualifier None) and drop
        the versions it masks."""
        markers = table.markers.setdefault(row, {})
        markers[key] = max(markers.get(key, -1), ts)
        fam, qual = key
        for target in [k for k in cols if k[0] == fam and (qual is None or k[1] == qual)]:
            kept = tuple(v for v in cols[target] if v[0] > ts)
            if kept:
                cols[target] = kept
            else:
                del cols[target]

    def _flush(self, table: _Table) -> None:
        """A memstore flush: the versions beyond each family's maxVersions are dropped
        (delete markers stay: only a major compaction of flushed files drops them)."""
        for row, cols in list(table.rows.items()):
            trimmed = {}
            for (fam, qual), versions in cols.items():
                trimmed[(fam, qual)] = versions[: table.families[fam].max_versions]
            table.rows[row] = trimmed
        table.unflushed = 0

    def flush(self, table: _Table) -> None:
        """Flush ``table`` (logged), as HBase does when its region closes (disable)."""
        self._apply(("flush", table.name))

    def write_now(self, table: _Table | None = None) -> int:
        """The server's "now" (ms) for one write call (``LATEST_TIMESTAMP`` cells, delete
        markers, increments), flushing ``table`` first if its memstore is "full".

        A real server's write call takes milliseconds (RPC from the gateway to the
        RegionServer, WAL sync), so two write calls never share a millisecond: a
        ``delete`` then a ``put`` of the same cell, or a ``counter_set`` after a burst of
        ``counter_inc``, are not masked.  With the wall clock, the emulator waits for the
        clock to tick instead; a ``clock`` given by the caller is used as it is (tests of
        same-millisecond masking, HBASE-2256).
        """
        if table is not None and table.unflushed >= MEMSTORE_FLUSH_CELLS:
            self.flush(table)
        now = self.clock()
        if self._ticking:
            while now <= self._last_write:
                time.sleep(0.0002)
                now = self.clock()
            self._last_write = now
        return now

    # -- queries used by the handler

    def table(self, raw_name: bytes | None, *, enabled: bool = True) -> _Table:
        """The table, or TableNotFound/TableNotEnabled as a client ``Table`` call raises."""
        name = _table_name(raw_name)
        table = self.tables.get(name)
        if table is None:
            raise _table_not_found(name)
        if enabled and not table.enabled:
            raise JavaIOException(
                f"{_show(name)} is disabled.", "org.apache.hadoop.hbase.TableNotEnabledException"
            )
        return table

    def read_row(
        self, table: _Table, row: bytes, spec: ColumnSpec | None, tmax: int, versions: int
    ) -> list[Cell]:
        """The cells a ``Get`` returns, sorted by family, qualifier, newest first: at most
        ``versions`` and the family's maxVersions, counted after the time range."""
        cols = table.rows.get(row)
        if not cols:
            return []
        now = self.clock()
        out: list[Cell] = []
        for fam, qual in sorted(cols):
            if not _selected(spec, fam, qual):
                continue
            oldest = table.oldest_visible(fam, now)
            limit = min(versions, table.families[fam].max_versions)
            n = 0
            for ts, value in cols[(fam, qual)]:
                if ts >= tmax or ts < oldest:
                    continue
                out.append((fam, qual, ts, value))
                n += 1
                if n >= limit:
                    break
        return out

    def latest(
        self, table: _Table, row: bytes, fam: bytes, qual: bytes
    ) -> tuple[int, bytes] | None:
        cells = self.read_row(table, row, {fam: {qual}}, LATEST_TIMESTAMP, 1)
        return (cells[0][2], cells[0][3]) if cells else None


# --------------------------------------------------------------------------------------
# Filters (HBase ParseFilter language)

INCLUDE, SKIP, NEXT_COL, NEXT_ROW = range(4)


class Filter:
    """Base filter, with HBase's ``Filter`` hooks (row key, cell, row)."""

    has_filter_row = False
    reversed = False

    def set_reversed(self, flag: bool) -> None:
        self.reversed = flag

    def reset(self) -> None:
        pass

    def filter_all_remaining(self) -> bool:
        return False

    def filter_row_key(self, row: bytes) -> bool:
        return False

    def filter_cell(self, cell: Cell) -> int:
        return INCLUDE

    def transform_cell(self, cell: Cell) -> Cell:
        return cell

    def filter_row_cells(self, cells: list[Cell]) -> None:
        pass

    def filter_row(self) -> bool:
        return False


def _cmp(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


class _Comparator:
    def __init__(self, kind: str, value: bytes) -> None:
        self.kind = kind
        self.value = value
        if kind == "regexstring":
            try:
                self.regex = re.compile(value.decode("utf-8", "replace"))
            except re.error as e:
                raise JavaIllegalArgumentException(str(e)) from None

    def compare_to(self, data: bytes) -> int:
        if self.kind == "binary":
            return _cmp(self.value, data)
        if self.kind == "binaryprefix":
            return _cmp(self.value, data[: len(self.value)])
        text = data.decode("utf-8", "replace")
        if self.kind == "substring":
            return 0 if self.value.decode("utf-8", "replace").lower() in text.lower() else 1
        return 0 if self.regex.search(text) else 1


_OPS = {
    "<": "LESS",
    "<=": "LESS_OR_EQUAL",
    "=": "EQUAL",
    "!=": "NOT_EQUAL",
    ">=": "GREATER_OR_EQUAL",
    ">": "GREATER",
}


def _compare_filters_out(op: str, comparator: _Comparator, data: bytes) -> bool:
    """``CompareFilter.compare``: True if the value is filtered out."""
    r = comparator.compare_to(data)
    return {
        "LESS": r <= 0,
        "LESS_OR_EQUAL": r < 0,
        "EQUAL": r != 0,
        "NOT_EQUAL": r == 0,
        "GREATER_OR_EQUAL": r > 0,
        "GREATER": r >= 0,
    }[op]


class PrefixFilter(Filter):
    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.out = True
        self.passed = False

    def reset(self) -> None:
        self.out = True

    def filter_all_remaining(self) -> bool:
        return self.passed

    def filter_row_key(self, row: bytes) -> bool:
        if len(row) < len(self.prefix):
            return True
        c = _cmp(row[: len(self.prefix)], self.prefix)
        if (c > 0 and not self.reversed) or (c < 0 and self.reversed):
            self.passed = True
        self.out = c != 0
        return self.out

    def filter_cell(self, cell: Cell) -> int:
        return NEXT_ROW if self.out else INCLUDE

    def filter_row(self) -> bool:
        return self.out


class KeyOnlyFilter(Filter):
    def __init__(self, len_as_val: bool = False) -> None:
        self.len_as_val = len_as_val

    def transform_cell(self, cell: Cell) -> Cell:
        value = struct.pack(">i", len(cell[3])) if self.len_as_val else b""
        return (cell[0], cell[1], cell[2], value)


class FirstKeyOnlyFilter(Filter):
    def __init__(self) -> None:
        self.found = False

    def reset(self) -> None:
        self.found = False

    def filter_cell(self, cell: Cell) -> int:
        if self.found:
            return NEXT_ROW
        self.found = True
        return INCLUDE


class ColumnPrefixFilter(Filter):
    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix

    def filter_cell(self, cell: Cell) -> int:
        c = _cmp(cell[1][: len(self.prefix)], self.prefix)
        if c < 0 or (c == 0 and len(cell[1]) < len(self.prefix)):
            return NEXT_COL  # SEEK_NEXT_USING_HINT: on to the prefix
        return NEXT_ROW if c > 0 else INCLUDE


class MultipleColumnPrefixFilter(Filter):
    def __init__(self, *prefixes: bytes) -> None:
        self.prefixes = prefixes

    def filter_cell(self, cell: Cell) -> int:
        return INCLUDE if any(cell[1].startswith(p) for p in self.prefixes) else NEXT_COL


class ColumnRangeFilter(Filter):
    def __init__(self, lo: bytes, lo_incl: bool, hi: bytes, hi_incl: bool) -> None:
        self.lo, self.lo_incl, self.hi, self.hi_incl = lo, lo_incl, hi, hi_incl

    def filter_cell(self, cell: Cell) -> int:
        q = cell[1]
        if self.lo and (q < self.lo or (q == self.lo and not self.lo_incl)):
            return NEXT_COL
        if self.hi and (q > self.hi or (q == self.hi and not self.hi_incl)):
            return NEXT_ROW
        return INCLUDE


class ColumnPaginationFilter(Filter):
    def __init__(self, limit: int, offset: int) -> None:
        self.limit, self.offset, self.count = limit, offset, 0

    def reset(self) -> None:
        self.count = 0

    def filter_cell(self, cell: Cell) -> int:
        if self.count >= self.offset + self.limit:
            return NEXT_ROW
        code = NEXT_COL if self.count < self.offset else INCLUDE
        self.count += 1
        return code


class PageFilter(Filter):
    has_filter_row = True

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.accepted = 0

    def filter_all_remaining(self) -> bool:
        return self.accepted >= self.page_size

    def filter_row(self) -> bool:
        self.accepted += 1
        return self.accepted > self.page_size


class InclusiveStopFilter(Filter):
    def __init__(self, stop: bytes) -> None:
        self.stop = stop
        self.done = False

    def filter_all_remaining(self) -> bool:
        return self.done

    def filter_row_key(self, row: bytes) -> bool:
        c = _cmp(self.stop, row)
        self.done = c > 0 if self.reversed else c < 0
        return self.done

    def filter_cell(self, cell: Cell) -> int:
        return NEXT_ROW if self.done else INCLUDE


class TimestampsFilter(Filter):
    def __init__(self, *timestamps: int) -> None:
        self.timestamps = set(timestamps)

    def filter_cell(self, cell: Cell) -> int:
        return INCLUDE if cell[2] in self.timestamps else SKIP


class RowFilter(Filter):
    def __init__(self, op: str, comparator: _Comparator) -> None:
        self.op, self.comparator, self.out = op, comparator, False

    def reset(self) -> None:
        self.out = False

    def filter_row_key(self, row: bytes) -> bool:
        if _compare_filters_out(self.op, self.comparator, row):
            self.out = True
        return self.out

    def filter_cell(self, cell: Cell) -> int:
        return NEXT_ROW if self.out else INCLUDE

    def filter_row(self) -> bool:
        return self.out


class FamilyFilter(Filter):
    def __init__(self, op: str, comparator: _Comparator) -> None:
        self.op, self.comparator = op, comparator

    def filter_cell(self, cell: Cell) -> int:
        return NEXT_ROW if _compare_filters_out(self.op, self.comparator, cell[0]) else INCLUDE


class QualifierFilter(Filter):
    def __init__(self, op: str, comparator: _Comparator) -> None:
        self.op, self.comparator = op, comparator

    def filter_cell(self, cell: Cell) -> int:
        return SKIP if _compare_filters_out(self.op, self.comparator, cell[1]) else INCLUDE


class ValueFilter(Filter):
    def __init__(self, op: str, comparator: _Comparator) -> None:
        self.op, self.comparator = op, comparator

    def filter_cell(self, cell: Cell) -> int:
        return SKIP if _compare_filters_out(self.op, self.comparator, cell[3]) else INCLUDE


class SingleColumnValueFilter(Filter):
    has_filter_row = True

    def __init__(
        self,
        family: bytes,
        qualifier: bytes,
        op: str,
        comparator: _Comparator,
        *,
        filter_if_missing: bool = False,
        latest_version_only: bool = True,
    ) -> None:
        self.family, self.qualifier, self.op, self.comparator = family, qualifier, op, comparator
        self.filter_if_missing = filter_if_missing
        self.latest_version_only = latest_version_only
        self.found = self.matched = False

    def reset(self) -> None:
        self.found = self.matched = False

    def filter_cell(self, cell: Cell) -> int:
        if self.matched:
            return INCLUDE
        if self.latest_version_only and self.found:
            return NEXT_ROW
        if cell[0] != self.family or cell[1] != self.qualifier:
            return INCLUDE
        self.found = True
        if _compare_filters_out(self.op, self.comparator, cell[3]):
            return NEXT_ROW if self.latest_version_only else INCLUDE
        self.matched = True
        return INCLUDE

    def filter_row(self) -> bool:
        return not self.matched if self.found else self.filter_if_missing


class SingleColumnValueExcludeFilter(SingleColumnValueFilter):
    def filter_row_cells(self, cells: list[Cell]) -> None:
        cells[:] = [c for c in cells if c[0] != self.family or c[1] != self.qualifier]


class FilterList(Filter):
    """``A AND B`` (MUST_PASS_ALL) or ``A OR B`` (MUST_PASS_ONE)."""

    def __init__(self, must_pass_all: bool, filters: list[Filter]) -> None:
        self.all = must_pass_all
        self.filters = filters
        self.has_filter_row = any(f.has_filter_row for f in filters)
        self.included: list[Filter] = []

    def set_reversed(self, flag: bool) -> None:
        self.reversed = flag
        for f in self.filters:
            f.set_reversed(flag)

    def reset(self) -> None:
        for f in self.filters:
            f.reset()

    def filter_all_remaining(self) -> bool:
        check = all if not self.all else any
        return check(f.filter_all_remaining() for f in self.filters)

    def filter_row_key(self, row: bytes) -> bool:
        # Every sub-filter sees the row key (they keep per-row state), no short cut.
        outs = [f.filter_all_remaining() or f.filter_row_key(row) for f in self.filters]
        return any(outs) if self.all else all(outs)

    def filter_cell(self, cell: Cell) -> int:
        if self.all:
            for f in self.filters:
                if f.filter_all_remaining():
                    return NEXT_ROW
                rc = f.filter_cell(cell)
                if rc != INCLUDE:
                    return rc
            self.included = self.filters
            return INCLUDE
        best = None
        self.included = []
        for f in self.filters:
            if f.filter_all_remaining():
                continue
            rc = f.filter_cell(cell)
            if rc == INCLUDE:
                self.included.append(f)
            best = rc if best is None else min(best, rc)
        return NEXT_ROW if best is None else best

    def transform_cell(self, cell: Cell) -> Cell:
        for f in self.included:
            cell = f.transform_cell(cell)
        return cell

    def filter_row_cells(self, cells: list[Cell]) -> None:
        for f in self.filters:
            f.filter_row_cells(cells)

    def filter_row(self) -> bool:
        if self.all:
            return any(f.filter_row() for f in self.filters)
        return all(f.filter_row() for f in self.filters)


class _Wrapping(Filter):
    """A filter around another (``SKIP f``, ``WHILE f``): reversal and cell transforms
    pass through to it."""

    has_filter_row = True

    def __init__(self, inner: Filter) -> None:
        self.inner = inner

    def set_reversed(self, flag: bool) -> None:
        self.reversed = flag
        self.inner.set_reversed(flag)

    def transform_cell(self, cell: Cell) -> Cell:
        return self.inner.transform_cell(cell)


class SkipFilter(_Wrapping):
    """``SKIP f``: drop the whole row if ``f`` filters out any of its cells."""

    def __init__(self, inner: Filter) -> None:
        super().__init__(inner)
        self.out = False

    def reset(self) -> None:
        self.inner.reset()
        self.out = False

    def filter_all_remaining(self) -> bool:
        return self.inner.filter_all_remaining()

    def filter_cell(self, cell: Cell) -> int:
        rc = self.inner.filter_cell(cell)
        self.out = self.out or rc != INCLUDE
        return rc

    def filter_row(self) -> bool:
        return self.out


class WhileMatchFilter(_Wrapping):
    """``WHILE f``: end the scan at the first row or cell ``f`` filters out."""

    def __init__(self, inner: Filter) -> None:
        super().__init__(inner)
        self.done = False

    def reset(self) -> None:
        self.inner.reset()

    def filter_all_remaining(self) -> bool:
        return self.done or self.inner.filter_all_remaining()

    def filter_row_key(self, row: bytes) -> bool:
        if self.filter_all_remaining():
            return True
        out = self.inner.filter_row_key(row)
        self.done = self.done or out
        return out

    def filter_cell(self, cell: Cell) -> int:
        rc = self.inner.filter_cell(cell)
        self.done = self.done or rc != INCLUDE
        return rc

    def filter_row_cells(self, cells: list[Cell]) -> None:
        self.inner.filter_row_cells(cells)

    def filter_row(self) -> bool:
        out = self.inner.filter_row()
        self.done = self.done or out
        return out


# Filters ParseFilter knows but this emulator does not implement.
_UNIMPLEMENTED_FILTERS = {
    "ColumnCountGetFilter",
    "DependentColumnFilter",
    "FirstKeyValueMatchingQualifiersFilter",
    "MultiRowRangeFilter",
    "ColumnValueFilter",
}

_TOKEN = re.compile(
    r"\s*(?:(?P<quoted>'(?:[^']|'')*')|(?P<op><=|>=|!=|=|<|>)|(?P<punct>[(),])"
    r"|(?P<word>[^\s(),'<>=!]+)|(?P<bad>\S))"
)


class FilterParser:
    """A parser for HBase's filter language (``ParseFilter``), for the filters above.

    Errors raise ``JavaIllegalArgumentException``, which the Thrift handler does not catch:
    the client gets a ``TApplicationException``, as from a real server.
    """

    def __init__(self, text: bytes) -> None:
        self.tokens: list[tuple[str, str]] = []
        source = text.decode("latin-1")
        pos = 0
        while pos < len(source):
            m = _TOKEN.match(source, pos)
            if not m or m.end() == pos:
                break
            pos = m.end()
            kind = m.lastgroup
            if kind is None:
                break
            if kind == "bad":
                raise JavaIllegalArgumentException(f"Incorrect filter string {source}")
            self.tokens.append((kind, m.group(kind)))
        self.pos = 0

    def parse(self) -> Filter:
        if not self.tokens:
            raise JavaIllegalArgumentException("Incorrect Filter String")
        f = self._or()
        if self.pos != len(self.tokens):
            raise JavaIllegalArgumentException("Incorrect Filter String")
        return f

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        tok = self._peek()
        if tok is None:
            raise JavaIllegalArgumentException("Incorrect Filter String")
        self.pos += 1
        return tok

    def _or(self) -> Filter:
        filters = [self._and()]
        while self._peek() == ("word", "OR"):
            self.pos += 1
            filters.append(self._and())
        return filters[0] if len(filters) == 1 else FilterList(False, filters)

    def _and(self) -> Filter:
        filters = [self._unary()]
        while self._peek() == ("word", "AND"):
            self.pos += 1
            filters.append(self._unary())
        return filters[0] if len(filters) == 1 else FilterList(True, filters)

    def _unary(self) -> Filter:
        kind, text = self._take()
        if (kind, text) == ("word", "SKIP"):
            return SkipFilter(self._unary())
        if (kind, text) == ("word", "WHILE"):
            return WhileMatchFilter(self._unary())
        if (kind, text) == ("punct", "("):
            f = self._or()
            if self._take() != ("punct", ")"):
                raise JavaIllegalArgumentException("Mismatched parenthesis")
            return f
        if kind != "word" or text in ("AND", "OR"):
            raise JavaIllegalArgumentException("Incorrect Filter String")
        if self._take() != ("punct", "("):
            raise JavaIllegalArgumentException(f"Incorrect filter string {text}")
        args: list[tuple[str, str]] = []
        if self._peek() == ("punct", ")"):
            self.pos += 1
        else:
            while True:
                tok = self._take()
                if tok[0] == "punct":
                    raise JavaIllegalArgumentException(f"Incorrect arguments for {text}")
                args.append(tok)
                sep = self._take()
                if sep == ("punct", ")"):
                    break
                if sep != ("punct", ","):
                    raise JavaIllegalArgumentException(f"Incorrect arguments for {text}")
        return self._make(text, args)

    # -- argument conversion, as ParseFilter's helpers

    @staticmethod
    def _bytes(arg: tuple[str, str]) -> bytes:
        if arg[0] != "quoted":
            raise JavaIllegalArgumentException(
                "removeQuotesFromByteArray needs a quoted byte array"
            )
        return arg[1][1:-1].replace("''", "'").encode("latin-1")

    @staticmethod
    def _long(arg: tuple[str, str]) -> int:
        if arg[0] != "word" or not re.fullmatch(r"-?\d+", arg[1]):
            raise JavaIllegalArgumentException("Byte Array should only contain digits")
        value = int(arg[1])
        if not -(2**63) <= value < 2**63:
            raise JavaIllegalArgumentException("Long Argument too large")
        return value

    @staticmethod
    def _bool(arg: tuple[str, str]) -> bool:
        if arg[0] == "word" and arg[1].lower() in ("true", "false"):
            return arg[1].lower() == "true"
        raise JavaIllegalArgumentException("Incorrect Boolean Expression")

    @staticmethod
    def _op(arg: tuple[str, str]) -> str:
        if arg[0] != "op":
            raise JavaIllegalArgumentException("Invalid compare operator")
        return _OPS[arg[1]]

    def _comparator(self, arg: tuple[str, str], op: str) -> _Comparator:
        kind, sep, value = self._bytes(arg).partition(b":")
        name = kind.decode("latin-1")
        if not sep or name not in ("binary", "binaryprefix", "regexstring", "substring"):
            raise JavaIllegalArgumentException("Incorrect comparatorType")
        if name in ("regexstring", "substring") and op not in ("EQUAL", "NOT_EQUAL"):
            raise JavaIllegalArgumentException(
                "A regexstring comparator and substring comparator can only be used with "
                "EQUAL and NOT_EQUAL"
            )
        return _Comparator(name, value)

    @staticmethod
    def _count(name: str, args: list, *counts: int) -> None:
        if len(args) not in counts:
            raise JavaIllegalArgumentException(
                f"{name}: Expected {' or '.join(map(str, counts))} but got: {len(args)}"
            )

    def _make(self, name: str, args: list[tuple[str, str]]) -> Filter:  # noqa: PLR0911, PLR0912
        if name == "PrefixFilter":
            self._count(name, args, 1)
            return PrefixFilter(self._bytes(args[0]))
        if name == "KeyOnlyFilter":
            self._count(name, args, 0, 1)
            return KeyOnlyFilter(self._bool(args[0]) if args else False)
        if name == "FirstKeyOnlyFilter":
            self._count(name, args, 0)
            return FirstKeyOnlyFilter()
        if name == "ColumnPrefixFilter":
            self._count(name, args, 1)
            return ColumnPrefixFilter(self._bytes(args[0]))
        if name == "MultipleColumnPrefixFilter":
            return MultipleColumnPrefixFilter(*map(self._bytes, args))
        if name == "ColumnRangeFilter":
            self._count(name, args, 4)
            lo, lo_incl = self._bytes(args[0]), self._bool(args[1])
            return ColumnRangeFilter(lo, lo_incl, self._bytes(args[2]), self._bool(args[3]))
        if name == "ColumnPaginationFilter":
            self._count(name, args, 2)
            limit, offset = self._long(args[0]), self._long(args[1])
            if limit < 0 or offset < 0:
                raise JavaIllegalArgumentException("limit and offset must be >= 0")
            return ColumnPaginationFilter(limit, offset)
        if name == "PageFilter":
            self._count(name, args, 1)
            size = self._long(args[0])
            if size < 0:
                raise JavaIllegalArgumentException(f"must be positive {size}")
            return PageFilter(size)
        if name == "InclusiveStopFilter":
            self._count(name, args, 1)
            return InclusiveStopFilter(self._bytes(args[0]))
        if name == "TimestampsFilter":
            timestamps = [self._long(a) for a in args]
            if any(ts < 0 for ts in timestamps):
                raise JavaIllegalArgumentException("timestamps must be positive")
            return TimestampsFilter(*timestamps)
        compare_filters = {
            "RowFilter": RowFilter,
            "FamilyFilter": FamilyFilter,
            "QualifierFilter": QualifierFilter,
            "ValueFilter": ValueFilter,
        }
        if name in compare_filters:
            self._count(name, args, 2)
            op = self._op(args[0])
            return compare_filters[name](op, self._comparator(args[1], op))
        if name in ("SingleColumnValueFilter", "SingleColumnValueExcludeFilter"):
            self._count(name, args, 4, 6)
            op = self._op(args[2])
            flags = (self._bool(args[4]), self._bool(args[5])) if len(args) == 6 else (False, True)
            cls = SingleColumnValueFilter
            if name == "SingleColumnValueExcludeFilter":
                cls = SingleColumnValueExcludeFilter
            return cls(
                self._bytes(args[0]),
                self._bytes(args[1]),
                op,
                self._comparator(args[3], op),
                filter_if_missing=flags[0],
                latest_version_only=flags[1],
            )
        if name in _UNIMPLEMENTED_FILTERS:
            raise TApplicationException(
                TApplicationException.UNKNOWN,
                f"hbase_emulator does not implement the HBase filter {name}",
            )
        raise JavaIllegalArgumentException(f"Filter Name {name} not supported")


def parse_filter(text: bytes, reversed_scan: bool = False) -> Filter:
    """Parse an HBase filter string (``TScan.filterString``)."""
    f = FilterParser(bytes(text)).parse()
    f.set_reversed(reversed_scan)
    return f


# --------------------------------------------------------------------------------------
# Scanners


class _Scanner:
    """A client scanner over a snapshot of the rows taken when it was opened.

    Results are fetched ``caching`` rows per emulated round trip to the region server; a round
    trip more than ``timeout`` seconds after the previous one fails with
    ``ScannerTimeoutException``, as the HBase client does when the region server lease expired.
    """

    def __init__(self, results: Iterator[Any], caching: int, timeout: float | None) -> None:
        self._results = results
        self._caching = caching
        self._timeout = timeout
        self._cache: deque = deque()
        self._peeked: Any = None
        self._exhausted = False
        self._last_rpc = time.monotonic()
        self._lock = threading.Lock()
        self._rpc(check=False)

    def _rpc(self, check: bool = True) -> None:
        now = time.monotonic()
        if check and self._timeout and now - self._last_rpc > self._timeout:
            raise JavaIOException(
                f"{int((now - self._last_rpc) * 1000)}ms passed since the last invocation, "
                f"timeout is currently set to {int(self._timeout * 1000)}",
                "org.apache.hadoop.hbase.client.ScannerTimeoutException",
            )
        self._last_rpc = now
        for _ in range(self._caching):
            item, self._peeked = self._peeked, None
            if item is None:
                item = next(self._results, None)
            if item is None:
                self._exhausted = True
                return
            self._cache.append(item)
        self._peeked = next(self._results, None)
        if self._peeked is None:
            self._exhausted = True

    def next(self, n: int) -> list[Any]:
        with self._lock:
            out: list[Any] = []
            while len(out) < n:
                if self._cache:
                    out.append(self._cache.popleft())
                elif self._exhausted:
                    break
                else:
                    self._rpc()
            return out


@dataclass
class _RegionScan:
    """What a region scanner with these settings returns, as ``TRowResult``s."""

    table: _Table
    spec: ColumnSpec | None
    tmax: int
    filter: Filter | None
    batch: int | None
    sort_columns: bool
    now: int

    def results(self, rows: list[tuple[bytes, dict]]) -> Iterator[Any]:
        filt = self.filter
        for row, cols in rows:
            if filt is not None:
                if filt.filter_all_remaining():
                    return
                filt.reset()
                if filt.filter_row_key(row):
                    continue
            cells = self._row_cells(cols)
            if filt is not None:
                filt.filter_row_cells(cells)
                if cells and filt.filter_row():
                    continue
            if not cells:
                continue
            step = self.batch or len(cells)
            for i in range(0, len(cells), step):
                yield _row_result(row, cells[i : i + step], self.sort_columns)

    def _row_cells(self, cols: dict) -> list[Cell]:
        filt = self.filter
        cells: list[Cell] = []
        skip_family = None
        for fam, qual in sorted(cols):
            if fam == skip_family or not _selected(self.spec, fam, qual):
                continue
            oldest = self.table.oldest_visible(fam, self.now)
            # a filter's SKIP moves on to the next version, among maxVersions at most
            versions = [v for v in cols[(fam, qual)] if oldest <= v[0] < self.tmax]
            for ts, value in versions[: self.table.families[fam].max_versions]:
                cell = (fam, qual, ts, value)
                if filt is None:
                    cells.append(cell)
                    break
                rc = NEXT_ROW if filt.filter_all_remaining() else filt.filter_cell(cell)
                if rc == INCLUDE:
                    cells.append(filt.transform_cell(cell))
                    break  # a scan returns one version per column
                if rc == SKIP:
                    continue
                if rc == NEXT_ROW:
                    skip_family = fam  # the rest of this family's store, for this row
                break
        return cells


def _column_name(cell: Cell) -> bytes:
    return cell[0] + b":" + cell[1]


def _row_result(row: bytes, cells: list[Cell], sort_columns: bool) -> Any:
    """``ThriftUtilities.rowResultFromHBase``."""
    if sort_columns:
        return Hbase_thrift.TRowResult(
            row=row,
            sortedColumns=[
                Hbase_thrift.TColumn(
                    columnName=_column_name(c), cell=Hbase_thrift.TCell(value=c[3], timestamp=c[2])
                )
                for c in cells
            ],
        )
    return Hbase_thrift.TRowResult(
        row=row,
        columns={_column_name(c): Hbase_thrift.TCell(value=c[3], timestamp=c[2]) for c in cells},
    )


def _tcells(cells: list[Cell]) -> list[Any]:
    return [Hbase_thrift.TCell(value=c[3], timestamp=c[2]) for c in cells]


# --------------------------------------------------------------------------------------
# The Thrift handler


@contextlib.contextmanager
def _catching_illegal_argument() -> Iterator[None]:
    """``catch (IllegalArgumentException e) { throw new IllegalArgument(stackTrace) }``."""
    try:
        yield
    except JavaIllegalArgumentException as e:
        raise Hbase_thrift.IllegalArgument(message=e.stack_trace()) from None


class HbaseHandler:
    """The ``Hbase`` service, method by method as ``ThriftHBaseServiceHandler`` does it.

    Raised ``JavaIOException``s become ``IOError`` replies and other ``JavaRuntimeException``s
    ``TApplicationException``s (see ``EmulatorServer``); sections where the Java handler catches
    ``IllegalArgumentException`` use ``_catching_illegal_argument``.
    """

    def __init__(self, model: HBaseModel, scanner_timeout: float | None = DEFAULT_SCANNER_TIMEOUT):
        self.model = model
        self.scanner_timeout = scanner_timeout
        self._scanners: dict[int, _Scanner] = {}
        self._next_scanner_id = 0
        self._scanner_lock = threading.Lock()

    # -- admin

    def getTableNames(self) -> list[bytes]:
        with self.model.lock:
            return sorted(self.model.tables)

    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:
        name = _table_name(tableName)
        with _catching_illegal_argument(), self.model.lock:
            if name in self.model.tables:
                raise Hbase_thrift.AlreadyExists(message="table name already in use")
            if columnFamilies is None:
                raise _npe("columnFamilies")
            families: dict[bytes, FamilyDescriptor] = {}
            for cd in columnFamilies:
                fd = self._family_from_thrift(cd)
                if fd.name in families:
                    raise JavaIllegalArgumentException(
                        f"Family '{_show(fd.name)}' already exists so cannot be added"
                    )
                families[fd.name] = fd
            if b":" in name:
                raise JavaIOException(
                    _show(name.partition(b":")[0]),
                    "org.apache.hadoop.hbase.NamespaceNotFoundException",
                )
            if not families:
                raise JavaIOException(
                    "Table should have at least one column family. Set "
                    "hbase.table.sanity.checks to false at conf or table descriptor if you want "
                    "to bypass sanity checks",
                    "org.apache.hadoop.hbase.DoNotRetryIOException",
                )
            fams = [f.as_tuple() for f in families.values()]
            region_id = self.model.clock()
            self.model._apply(("create", name, fams, region_id))

    @staticmethod
    def _family_from_thrift(cd: Any) -> FamilyDescriptor:
        """``ThriftUtilities.colDescFromThrift`` plus the descriptor builder's checks."""
        compression = cd.compression if cd.compression is not None else "NONE"
        if compression.lower() not in _COMPRESSIONS:
            raise JavaIllegalArgumentException(
                f"Unsupported compression algorithm name: {compression.lower()}"
            )
        bloom = cd.bloomFilterType if cd.bloomFilterType is not None else "NONE"
        if bloom not in _BLOOM_TYPES:
            raise JavaIllegalArgumentException(
                f"No enum constant org.apache.hadoop.hbase.regionserver.BloomType.{bloom}"
            )
        if not cd.name:
            raise Hbase_thrift.IllegalArgument(message="column name is empty")
        family = parse_column(cd.name)[0]
        if not family:
            raise JavaIllegalArgumentException("Column Family name can not be empty")
        if family[0:1] == b".":
            raise JavaIllegalArgumentException(
                f"Column Family names cannot start with a period: {_show(family)}"
            )
        if any(c < 32 or c == 127 or c in b"\\/:" for c in family):
            raise JavaIllegalArgumentException(
                f"Column Family {_show(family)} contains an illegal character"
            )
        if family == b"recovered.edits":
            raise JavaIllegalArgumentException("Column Family name cannot be: recovered.edits")
        max_versions = cd.maxVersions if cd.maxVersions is not None else 3
        if max_versions <= 0:
            raise JavaIllegalArgumentException("Maximum versions must be positive")
        ttl = cd.timeToLive if cd.timeToLive is not None else -1
        return FamilyDescriptor(
            name=family,
            max_versions=max_versions,
            compression=compression.upper(),
            in_memory=bool(cd.inMemory),
            bloom_filter_type=bloom,
            block_cache_enabled=bool(cd.blockCacheEnabled),
            time_to_live=ttl if ttl > 0 else FOREVER,
        )

    def deleteTable(self, tableName: bytes) -> None:
        name = _table_name(tableName)
        with self.model.lock:
            table = self.model.tables.get(name)
            if table is None:
                raise JavaIOException("table does not exist")
            if table.enabled:
                raise JavaIOException(
                    f"Not DISABLED; tableName={_show(name)}, state=ENABLED",
                    "org.apache.hadoop.hbase.TableNotDisabledException",
                )
            self.model._apply(("drop", name))

    def enableTable(self, tableName: bytes) -> None:
        with self.model.lock:
            table = self.model.table(tableName, enabled=False)
            if table.enabled:
                raise JavaIOException(
                    _show(table.name), "org.apache.hadoop.hbase.TableNotDisabledException"
                )
            self.model._apply(("enable", table.name, True))

    def disableTable(self, tableName: bytes) -> None:
        with self.model.lock:
            table = self.model.table(tableName, enabled=False)
            if not table.enabled:
                raise JavaIOException(
                    _show(table.name), "org.apache.hadoop.hbase.TableNotEnabledException"
                )
            self.model.flush(table)  # its region closes
            self.model._apply(("enable", table.name, False))

    def isTableEnabled(self, tableName: bytes) -> bool:
        with self.model.lock:
            return self.model.table(tableName, enabled=False).enabled

    def _compact(self, name: bytes | None) -> None:
        """Only checks the table: a compaction is asynchronous and rewrites store files, never
        the memstore, where the emulator keeps everything (Thrift1 cannot flush).  So delete
        markers stay after ``majorCompact``, as a real server shows them (verified on HBase
        2.6.1, even after a flush by disable/enable and a minute of waiting)."""
        with self.model.lock:
            for table in self.model.tables.values():
                if name == table.region_name:
                    return
            self.model.table(name, enabled=False)

    def compact(self, tableNameOrRegionName: bytes) -> None:
        self._compact(tableNameOrRegionName)

    def majorCompact(self, tableNameOrRegionName: bytes) -> None:
        self._compact(tableNameOrRegionName)

    def getColumnDescriptors(self, tableName: bytes) -> dict[bytes, Any]:
        with self.model.lock:
            table = self.model.table(tableName, enabled=False)
            return {
                f.name + b":": f.to_thrift()
                for f in sorted(table.families.values(), key=lambda f: f.name)
            }

    def getTableRegions(self, tableName: bytes) -> list[Any]:
        name = _table_name(tableName)
        with self.model.lock:
            table = self.model.tables.get(name)
            if table is None:
                return []
            return [
                Hbase_thrift.TRegionInfo(
                    startKey=b"",
                    endKey=b"",
                    id=table.region_id,
                    name=table.region_name,
                    version=1,
                    serverName=b"localhost",
                    port=REGION_SERVER_PORT,
                )
            ]

    # -- reads

    def _get(
        self,
        tableName: bytes,
        rows: list[bytes],
        columns: list[bytes] | None,
        timestamp: int,
        versions: int = 1,
    ) -> list[tuple[bytes, list[Cell]]]:
        """``table.get(gets)``: (row, cells) per requested row, empty rows included."""
        name = _table_name(tableName)
        spec = _column_spec(columns)
        if rows is None:
            raise _npe("rows")
        keys = [_check_row(row) for row in rows]
        tmax = _time_range_max(timestamp)
        if versions <= 0:
            raise JavaIOException("versions must be positive")
        with self.model.lock:
            table = self.model.table(name)
            if spec is not None:
                table.check_families(spec)
            return [(k, self.model.read_row(table, k, spec, tmax, versions)) for k in keys]

    def getRowWithColumnsTs(
        self,
        tableName: bytes,
        row: bytes,
        columns: list[bytes] | None,
        timestamp: int,
        attributes: Any,
    ) -> list[Any]:
        results = self._get(tableName, [row], columns, timestamp)
        return [_row_result(r, cells, False) for r, cells in results if cells]

    def getRowWithColumns(
        self, tableName: bytes, row: bytes, columns: list[bytes] | None, attributes: Any
    ) -> list[Any]:
        return self.getRowWithColumnsTs(tableName, row, columns, LATEST_TIMESTAMP, attributes)

    def getRow(self, tableName: bytes, row: bytes, attributes: Any) -> list[Any]:
        return self.getRowWithColumnsTs(tableName, row, None, LATEST_TIMESTAMP, attributes)

    def getRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> list[Any]:
        return self.getRowWithColumnsTs(tableName, row, None, timestamp, attributes)

    def getRowsWithColumnsTs(
        self,
        tableName: bytes,
        rows: list[bytes],
        columns: list[bytes] | None,
        timestamp: int,
        attributes: Any,
    ) -> list[Any]:
        results = self._get(tableName, rows, columns, timestamp)
        return [_row_result(r, cells, False) for r, cells in results if cells]

    def getRowsWithColumns(
        self, tableName: bytes, rows: list[bytes], columns: list[bytes] | None, attributes: Any
    ) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, columns, LATEST_TIMESTAMP, attributes)

    def getRows(self, tableName: bytes, rows: list[bytes], attributes: Any) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, None, LATEST_TIMESTAMP, attributes)

    def getRowsTs(
        self, tableName: bytes, rows: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, None, timestamp, attributes)

    def getVerTs(  # noqa: PLR0917 - the IDL's signature
        self,
        tableName: bytes,
        row: bytes,
        column: bytes,
        timestamp: int,
        numVersions: int,
        attributes: Any,
    ) -> list[Any]:
        parse_column(column)
        if numVersions is None:
            raise _npe("numVersions")
        ((_, cells),) = self._get(tableName, [row], [column], timestamp, numVersions)
        return _tcells(cells)

    def getVer(
        self, tableName: bytes, row: bytes, column: bytes, numVersions: int, attributes: Any
    ) -> list[Any]:
        return self.getVerTs(tableName, row, column, LATEST_TIMESTAMP, numVersions, attributes)

    def get(self, tableName: bytes, row: bytes, column: bytes, attributes: Any) -> list[Any]:
        return self.getVerTs(tableName, row, column, LATEST_TIMESTAMP, 1, attributes)

    # -- writes

    def _put(self, table: _Table, puts: list[tuple[bytes, list[tuple]]]) -> None:
        """``table.put(puts)``: rows with unknown families fail, the others are written."""
        for _row, cells in puts:
            for cell in cells:
                if len(cell[4]) > MAX_KEYVALUE_SIZE:
                    raise JavaIllegalArgumentException("KeyValue size too large")
        now = self.model.write_now(table)
        failed: list[bytes] = []
        for row, cells in puts:
            bad = [c[1] for c in cells if c[1] not in table.families]
            if bad:
                failed.append(bad[0])
                continue
            ops = [(k, f, q, now if ts == LATEST_TIMESTAMP else ts, v) for k, f, q, ts, v in cells]
            self.model._apply(("row", table.name, row, ops))
        if failed:
            raise self._batch_failure(table, failed)

    def _delete(self, table: _Table, deletes: list[tuple[bytes, list[tuple]]]) -> None:
        """``table.delete(deletes)``; LATEST becomes the server's now."""
        now = self.model.write_now(table)
        failed: list[bytes] = []
        for row, ops in deletes:
            bad = [op[1] for op in ops if op[1] not in table.families]
            if bad:
                failed.append(bad[0])
                continue
            resolved = [(*op[:-1], now if op[-1] == LATEST_TIMESTAMP else op[-1]) for op in ops]
            self.model._apply(("row", table.name, row, resolved))
        if failed:
            raise self._batch_failure(table, failed)

    @staticmethod
    def _batch_failure(table: _Table, families: list[bytes]) -> JavaIOException:
        n = len(families)
        cause = table.no_such_family(families[0])
        return JavaIOException(
            f"Failed {n} action{'s' if n > 1 else ''}: {cause.java_class}: {cause.message}: "
            f"{n} time{'s' if n > 1 else ''}, servers with issues: "
            f"localhost,{REGION_SERVER_PORT},{table.region_id}",
            "org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException",
        )

    def mutateRowsTs(
        self, tableName: bytes, rowBatches: list[Any], timestamp: int, attributes: Any
    ) -> None:
        # Built outside the Java try block: IllegalArgumentExceptions escape the handler.
        puts: list[tuple[bytes, list[tuple]]] = []
        deletes: list[tuple[bytes, list[tuple]]] = []
        for batch in rowBatches or ():
            row = _check_row(batch.row)
            _check_write_ts(timestamp)
            put_cells: list[tuple] = []
            delete_ops: list[tuple] = []
            for m in batch.mutations or ():
                parts = parse_column(m.column)
                if m.isDelete:
                    if len(parts) == 1:
                        delete_ops.append(("df", parts[0], timestamp))
                    else:
                        delete_ops.append(("dc", parts[0], parts[1], timestamp))
                else:
                    if len(parts) == 1:
                        logger.warning(
                            "No column qualifier specified. Delete is the only mutation "
                            "supported over the whole column family."
                        )
                        raise JavaIllegalArgumentException("Invalid famAndQf provided.")
                    put_cells.append(("p", parts[0], parts[1], timestamp, m.value or b""))
            if delete_ops:
                deletes.append((row, delete_ops))
            if put_cells:
                puts.append((row, put_cells))
        with _catching_illegal_argument(), self.model.lock:
            name = _table_name(tableName)
            if puts:  # table.put(puts), then table.delete(deletes): two HTable.batch calls
                self._put(self._batch_table(name, len(puts)), puts)
            if deletes:
                self._delete(self._batch_table(name, len(deletes)), deletes)

    def _batch_table(self, name: bytes, actions: int) -> _Table:
        """The table of an ``HTable.batch`` call (``Table.put``/``delete`` of a list), which
        reports a missing or disabled table per action, in a RetriesExhaustedWithDetails.

        A real server gives up on a disabled table only after the client's retries (about
        150 s with HBase's defaults); the emulator answers at once.
        """
        table = self.model.tables.get(name)
        if table is not None and table.enabled:
            return table
        n, s = actions, "s" if actions > 1 else ""
        cause = _show(name) if table is None else "NotServingRegionException"
        servers = "null" if table is None else f"localhost,{REGION_SERVER_PORT},{table.region_id}"
        raise JavaIOException(
            f"Failed {n} action{s}: {cause}: {n} time{s}, servers with issues: {servers}",
            "org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException",
        )

    def mutateRows(self, tableName: bytes, rowBatches: list[Any], attributes: Any) -> None:
        self.mutateRowsTs(tableName, rowBatches, LATEST_TIMESTAMP, attributes)

    def mutateRowTs(
        self, tableName: bytes, row: bytes, mutations: list[Any], timestamp: int, attributes: Any
    ) -> None:
        with _catching_illegal_argument(), self.model.lock:
            name = _table_name(tableName)
            row = _check_row(row)
            _check_write_ts(timestamp)
            put_cells: list[tuple] = []
            delete_ops: list[tuple] = []
            for m in mutations or ():
                parts = parse_column(m.column)
                if m.isDelete:
                    if len(parts) == 1:
                        delete_ops.append(("df", parts[0], timestamp))
                    else:
                        delete_ops.append(("dc", parts[0], parts[1], timestamp))
                elif len(parts) == 1:
                    logger.warning(
                        "No column qualifier specified. Delete is the only mutation supported "
                        "over the whole column family."
                    )
                else:
                    put_cells.append(("p", parts[0], parts[1], timestamp, m.value or b""))
            if delete_ops:
                table = self.model.table(name)
                bad = [op[1] for op in delete_ops if op[1] not in table.families]
                if bad:
                    raise table.no_such_family(bad[0])
                self._delete(table, [(row, delete_ops)])
            if put_cells:
                table = self.model.table(name)
                bad = [c[1] for c in put_cells if c[1] not in table.families]
                if bad:
                    raise table.no_such_family(bad[0])
                self._put(table, [(row, put_cells)])

    def mutateRow(
        self, tableName: bytes, row: bytes, mutations: list[Any], attributes: Any
    ) -> None:
        self.mutateRowTs(tableName, row, mutations, LATEST_TIMESTAMP, attributes)

    def deleteAllTs(
        self, tableName: bytes, row: bytes, column: bytes, timestamp: int, attributes: Any
    ) -> None:
        name = _table_name(tableName)
        row = _check_row(row)
        parts = parse_column(column)
        _check_write_ts(timestamp)
        op = ("df", parts[0], timestamp) if len(parts) == 1 else ("dc", *parts, timestamp)
        with self.model.lock:
            table = self.model.table(name)
            if parts[0] not in table.families:
                raise table.no_such_family(parts[0])
            self._delete(table, [(row, [op])])

    def deleteAll(self, tableName: bytes, row: bytes, column: bytes, attributes: Any) -> None:
        self.deleteAllTs(tableName, row, column, LATEST_TIMESTAMP, attributes)

    def deleteAllRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> None:
        name = _table_name(tableName)
        row = _check_row(row)
        _check_write_ts(timestamp)
        with self.model.lock:
            table = self.model.table(name)
            self._delete(table, [(row, [("df", f, timestamp) for f in sorted(table.families)])])

    def deleteAllRow(self, tableName: bytes, row: bytes, attributes: Any) -> None:
        self.deleteAllRowTs(tableName, row, LATEST_TIMESTAMP, attributes)

    def _increment(self, tableName: bytes, row: bytes, fam: bytes, qual: bytes, amount: int) -> int:
        name = _table_name(tableName)
        with self.model.lock:
            table = self.model.table(name)
            row = _check_row(row)
            if fam not in table.families:
                raise table.no_such_family(fam)
            now = self.model.write_now(table)
            current = self.model.latest(table, row, fam, qual)
            old, ts = 0, now
            if current is not None:
                if len(current[1]) != 8:
                    raise JavaIOException(
                        f"Field is not a long, it's {len(current[1])} bytes wide",
                        "org.apache.hadoop.hbase.DoNotRetryIOException",
                    )
                (old,) = struct.unpack(">q", current[1])
                ts = max(now, current[0] + 1)
            value = _int64(old + amount)
            self.model._apply(
                ("row", table.name, row, [("p", fam, qual, ts, struct.pack(">q", value))])
            )
            return value

    def atomicIncrement(self, tableName: bytes, row: bytes, column: bytes, value: int) -> int:
        parts = parse_column(column)
        if value is None:
            raise _npe("value")
        return self._increment(
            tableName, row, parts[0], parts[1] if len(parts) == 2 else b"", value
        )

    def increment(self, increment: Any) -> None:
        if not increment.row or not increment.table:
            raise JavaRuntimeException(
                "Must supply a table and a row key; can't increment", "org.apache.thrift.TException"
            )
        parts = parse_column(increment.column)
        if len(parts) != 2:
            raise _npe("increment")  # incrementFromThrift returns null
        self._increment(increment.table, increment.row, parts[0], parts[1], increment.ammount or 0)

    def incrementRows(self, increments: list[Any]) -> None:
        for inc in increments or ():
            self.increment(inc)

    def append(self, append: Any) -> list[Any]:
        if not append.row or not append.table:
            raise JavaRuntimeException(
                "Must supply a table and a row key; can't append", "org.apache.thrift.TException"
            )
        columns, values = append.columns or [], append.values or []
        if len(columns) != len(values):
            raise JavaIllegalArgumentException(
                "Sizes of columns and values in tappend object are not matching"
            )
        deltas = []
        for column, value in zip(columns, values, strict=True):
            parts = parse_column(column)
            if len(parts) != 2:
                raise JavaRuntimeException("1", "java.lang.ArrayIndexOutOfBoundsException")
            deltas.append((parts[0], parts[1], value or b""))
        with self.model.lock:
            table = self.model.table(append.table)
            row = _check_row(append.row)
            for fam, _, _ in deltas:
                if fam not in table.families:
                    raise table.no_such_family(fam)
            now = self.model.write_now(table)
            ops, cells = [], []
            for fam, qual, delta in deltas:
                current = self.model.latest(table, row, fam, qual)
                ts = now if current is None else max(now, current[0] + 1)
                value = delta if current is None else current[1] + delta
                ops.append(("p", fam, qual, ts, value))
                cells.append((fam, qual, ts, value))
            self.model._apply(("row", table.name, row, ops))
            return _tcells(sorted(cells))

    def checkAndPut(  # noqa: PLR0917 - the IDL's signature
        self,
        tableName: bytes,
        row: bytes,
        column: bytes,
        value: bytes | None,
        mput: Any,
        attributes: Any,
    ) -> bool:
        with _catching_illegal_argument():
            row = _check_row(row)
        put_parts = parse_column(mput.column)
        if len(put_parts) != 2:
            raise JavaRuntimeException("1", "java.lang.ArrayIndexOutOfBoundsException")
        with _catching_illegal_argument(), self.model.lock:
            table = self.model.table(tableName)
            parts = parse_column(column)
            if len(parts) != 2:
                raise JavaRuntimeException("1", "java.lang.ArrayIndexOutOfBoundsException")
            for fam in (parts[0], put_parts[0]):
                if fam not in table.families:
                    raise table.no_such_family(fam)
            current = self.model.latest(table, row, parts[0], parts[1])
            if not value:  # null or empty: "does not exist (or is empty)"
                matches = current is None or not current[1]
            else:
                matches = current is not None and current[1] == value
            if matches:
                cell = ("p", put_parts[0], put_parts[1], LATEST_TIMESTAMP, mput.value or b"")
                self._put(table, [(row, [cell])])
            return matches

    # -- scanners

    def scannerOpenWithScan(self, tableName: bytes, scan: Any, attributes: Any) -> int:
        name = _table_name(tableName)
        reverse = bool(scan.reversed)
        return self._open_scanner(
            name,
            start=scan.startRow or b"",
            stop=scan.stopRow or b"",
            reverse=reverse,
            tmax=LATEST_TIMESTAMP if scan.timestamp is None else _time_range_max(scan.timestamp),
            caching=scan.caching if scan.caching and scan.caching > 0 else 2**31 - 1,
            batch=scan.batchSize if scan.batchSize and scan.batchSize > 0 else None,
            spec=_column_spec(scan.columns),
            filt=None if scan.filterString is None else parse_filter(scan.filterString, reverse),
            sort_columns=bool(scan.sortColumns),
        )

    def _open_scanner(
        self,
        name: bytes,
        *,
        start: bytes = b"",
        stop: bytes = b"",
        reverse: bool = False,
        spec: ColumnSpec | None = None,
        tmax: int = LATEST_TIMESTAMP,
        filt: Filter | None = None,
        batch: int | None = None,
        caching: int = 2**31 - 1,
        sort_columns: bool = False,
    ) -> int:
        """``table.getScanner(scan)``: snapshot the rows in range and register a scanner."""
        start, stop = bytes(start), bytes(stop)
        with self.model.lock:
            table = self.model.table(name)
            if spec is not None:
                table.check_families(spec)
            keys = table.keys
            if not reverse:
                lo = bisect.bisect_left(keys, start) if start else 0
                hi = bisect.bisect_left(keys, stop) if stop else len(keys)
                selected = keys[lo:hi]
            else:  # from start (inclusive) down to stop (exclusive)
                hi = bisect.bisect_right(keys, start) if start else len(keys)
                lo = bisect.bisect_right(keys, stop) if stop else 0
                selected = keys[lo:hi][::-1]
            snapshot = [(k, table.rows[k]) for k in selected]
            now = self.model.clock()
        region_scan = _RegionScan(table, spec, tmax, filt, batch, sort_columns, now)
        scanner = _Scanner(region_scan.results(snapshot), caching, self.scanner_timeout)
        with self._scanner_lock:
            scanner_id = self._next_scanner_id
            # a Java int: wraps around after 2**31 - 1
            self._next_scanner_id = scanner_id + 1 if scanner_id < 2**31 - 1 else -(2**31)
            self._scanners[scanner_id] = scanner
        return scanner_id

    def scannerOpen(self, tableName: bytes, startRow: bytes, columns: Any, attributes: Any) -> int:
        spec = _column_spec(columns)
        return self._open_scanner(_table_name(tableName), start=startRow or b"", spec=spec)

    def scannerOpenWithStop(
        self, tableName: bytes, startRow: bytes, stopRow: bytes, columns: Any, attributes: Any
    ) -> int:
        name, spec = _table_name(tableName), _column_spec(columns)
        return self._open_scanner(name, start=startRow or b"", stop=stopRow or b"", spec=spec)

    def scannerOpenWithPrefix(
        self, tableName: bytes, startAndPrefix: bytes, columns: Any, attributes: Any
    ) -> int:
        name, spec, prefix = _table_name(tableName), _column_spec(columns), startAndPrefix or b""
        filt = WhileMatchFilter(PrefixFilter(prefix))
        return self._open_scanner(name, start=prefix, spec=spec, filt=filt)

    def scannerOpenTs(
        self, tableName: bytes, startRow: bytes, columns: Any, timestamp: int, attributes: Any
    ) -> int:
        name, spec, tmax = _table_name(tableName), _column_spec(columns), _time_range_max(timestamp)
        return self._open_scanner(name, start=startRow or b"", spec=spec, tmax=tmax)

    def scannerOpenWithStopTs(  # noqa: PLR0917 - the IDL's signature
        self,
        tableName: bytes,
        startRow: bytes,
        stopRow: bytes,
        columns: Any,
        timestamp: int,
        attributes: Any,
    ) -> int:
        name, spec, tmax = _table_name(tableName), _column_spec(columns), _time_range_max(timestamp)
        start, stop = startRow or b"", stopRow or b""
        return self._open_scanner(name, start=start, stop=stop, spec=spec, tmax=tmax)

    def _scanner(self, scanner_id: int) -> _Scanner:
        with self._scanner_lock:
            scanner = self._scanners.get(scanner_id)
        if scanner is None:
            logger.warning("scanner ID is invalid")
            raise Hbase_thrift.IllegalArgument(message="scanner ID is invalid")
        return scanner

    def scannerGetList(self, id: int, nbRows: int) -> list[Any]:
        scanner = self._scanner(id)
        if nbRows is None:
            raise _npe("nbRows")
        if nbRows < 0:
            raise JavaIllegalArgumentException(f"Illegal Capacity: {nbRows}")
        return scanner.next(nbRows)

    def scannerGet(self, id: int) -> list[Any]:
        return self.scannerGetList(id, 1)

    def scannerClose(self, id: int) -> None:
        self._scanner(id)
        with self._scanner_lock:
            self._scanners.pop(id, None)


# --------------------------------------------------------------------------------------
# Fault injection


@dataclass
class _Fault:
    methods: frozenset[str] | None  # None: every call
    remaining: int
    kind: str
    message: str
    apply: bool
    delay: float


class FaultInjector:
    """Pending injected failures, consumed by matching calls in order of injection."""

    def __init__(self) -> None:
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()

    def add(
        self,
        method: str | Iterable[str] | None = None,
        count: int = 1,
        *,
        kind: str = "ioerror",
        message: str | None = None,
        apply: bool = False,
        delay: float = 0.0,
    ) -> None:
        """Make the next ``count`` calls of ``method`` fail (see the module docstring)."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"kind must be one of {FAULT_KINDS}, not {kind!r}")
        methods: frozenset[str] | None
        if method is None or method == "mutating":
            methods = MUTATING_CALLS
        elif method == "*":
            methods = None
        else:
            methods = frozenset([method] if isinstance(method, str) else method)
            unknown = methods - set(Hbase.thrift_services)
            if unknown:
                raise ValueError(f"unknown Hbase calls: {sorted(unknown)}")
        if count > 0:
            fault = _Fault(
                methods, count, kind, message or "injected by hbase_emulator", apply, delay
            )
            with self._lock:
                self._faults.append(fault)

    def take(self, api: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.methods is None or api in fault.methods:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def pending(self) -> int:
        with self._lock:
            return sum(f.remaining for f in self._faults)


def _fire(fault: _Fault, api: str) -> None:
    if fault.kind == "disconnect":
        raise _Disconnect(api)
    if fault.kind == "internal":
        raise TApplicationException(
            TApplicationException.INTERNAL_ERROR, f"Internal error processing {api}"
        )
    raise Hbase_thrift.IOError(message=JavaIOException(fault.message).stack_trace())


# --------------------------------------------------------------------------------------
# Transports and the server


class _FramedServerTransport:
    """Server side of ``TFramedTransport``, refusing frames above ``max_frame_size``."""

    def __init__(self, trans: TSocket, max_frame_size: int) -> None:
        self._trans = trans
        self._max = max_frame_size
        self._rbuf = b""
        self._rpos = 0
        self._wbuf: list[bytes] = []

    def is_open(self) -> bool:
        return self._trans.is_open()

    def open(self) -> None:
        self._trans.open()

    def close(self) -> None:
        self._trans.close()

    def read(self, sz: int) -> bytes:
        if self._rpos >= len(self._rbuf):
            (size,) = struct.unpack("!i", readall(self._trans.read, 4))
            if size < 0:
                raise TTransportException(
                    TTransportException.UNKNOWN, f"Read a negative frame size ({size})!"
                )
            if size > self._max:
                raise TTransportException(
                    TTransportException.UNKNOWN,
                    f"Frame size ({size}) larger than max length ({self._max})!",
                )
            self._rbuf, self._rpos = readall(self._trans.read, size), 0
        chunk = self._rbuf[self._rpos : self._rpos + sz]
        self._rpos += len(chunk)
        return chunk

    def write(self, buf: bytes) -> None:
        self._wbuf.append(buf)

    def flush(self) -> None:
        data = b"".join(self._wbuf)
        self._wbuf = []
        self._trans.write(struct.pack("!i", len(data)) + data)


class _Processor(TProcessor):
    """thriftpy2's processor, with the emulator's error mapping and fault injection."""

    def __init__(self, server: EmulatorServer, handler: HbaseHandler) -> None:
        super().__init__(Hbase, handler)
        self._server = server

    def process(self, iprot: Any, oprot: Any) -> None:
        api, seqid, result, call = self.process_in(iprot)
        if isinstance(result, TApplicationException):
            self.send_exception(oprot, api, result, seqid)
            return
        assert call is not None
        try:
            result.success = self._server._dispatch(api, call)
        except TApplicationException as e:
            self.send_exception(oprot, api, e, seqid)
            return
        except _Disconnect:
            raise
        except Exception as e:
            if not self.handle_exception(e, result):
                logger.exception("hbase_emulator: internal error processing %s", api)
                exc = TApplicationException(
                    TApplicationException.INTERNAL_ERROR,
                    f"Internal error processing {api} (hbase_emulator bug: {e!r})",
                )
                self.send_exception(oprot, api, exc, seqid)
                return
        if not result.oneway:
            self.send_result(oprot, api, result, seqid)


class EmulatorServer:
    """The emulator on a background thread, serving ``127.0.0.1``.

    ``idle_timeout`` (s, None: never) closes connections idle that long; ``data`` persists the
    tables (see the module docstring); ``clock`` (ms) replaces the wall clock used for write
    timestamps and TTLs; ``scanner_timeout`` (s, None: never) expires idle scanners.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        transport: str = "buffered",
        protocol: str = "binary",
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        data: str | os.PathLike | None = None,
        scanner_timeout: float | None = DEFAULT_SCANNER_TIMEOUT,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        clock: Callable[[], int] | None = None,
    ) -> None:
        if transport not in ("buffered", "framed"):
            raise ValueError(f"transport must be 'buffered' or 'framed', not {transport!r}")
        if protocol not in ("binary", "compact"):
            raise ValueError(f"protocol must be 'binary' or 'compact', not {protocol!r}")
        self.host = host
        self.port = port
        self.transport = transport
        self.protocol = protocol
        self.idle_timeout = idle_timeout or None
        self.data = data
        self.scanner_timeout = scanner_timeout
        self.max_frame_size = max_frame_size
        self.clock = clock
        self.faults = FaultInjector()
        self.model = HBaseModel(data, clock)
        self.handler = HbaseHandler(self.model, scanner_timeout)
        self._calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._clients: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)``, for ``happybase.Connection(*server.address, ...)``."""
        return self.host, self.port

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``happybase.Connection``/``ConnectionPool``."""
        return {
            "host": self.host,
            "port": self.port,
            "transport": self.transport,
            "protocol": self.protocol,
        }

    # -- lifecycle

    def start(self) -> EmulatorServer:
        """Bind (SO_REUSEADDR) and serve on a daemon thread."""
        if self._acceptor is not None:
            raise RuntimeError("already started")
        if self.model.closed:  # stopped: reload from disk, as a restarted HBase would
            self.model = HBaseModel(self.data, self.clock)
            self.handler = HbaseHandler(self.model, self.scanner_timeout)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(128)
            listener.settimeout(0.2)
        except OSError:
            listener.close()
            raise
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._stopping.clear()
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"hbase-emulator-{self.port}", daemon=True
        )
        self._acceptor.start()
        logger.info(
            "hbase_emulator serving on %s:%d (%s, %s)",
            self.host,
            self.port,
            self.transport,
            self.protocol,
        )
        return self

    def stop(self) -> None:
        """Close the listener and every connection; checkpoint the data (if persistent)."""
        if self._acceptor is None:
            return
        self._stopping.set()
        self._acceptor.join()
        self._acceptor = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            clients = list(self._clients)
            threads = list(self._threads)
        for sock in clients:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout=5)
        self.model.close()

    def restart(self) -> None:
        """Stop and start again on the same port, keeping the tables (scanners are lost).

        With ``data``, the model is reloaded from disk, as a restarted HBase would.
        """
        self.stop()
        self.handler = HbaseHandler(self.model, self.scanner_timeout)
        self.start()

    def __enter__(self) -> EmulatorServer:
        return self.start() if self._acceptor is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- test helpers

    def inject_errors(
        self,
        method: str | Iterable[str] | None = None,
        count: int = 1,
        *,
        kind: str = "ioerror",
        message: str | None = None,
        apply: bool = False,
        delay: float = 0.0,
    ) -> None:
        """Fail the next ``count`` calls of ``method`` (default: any mutating call)."""
        self.faults.add(method, count, kind=kind, message=message, apply=apply, delay=delay)

    def clear_faults(self) -> None:
        self.faults.clear()

    def call_counts(self) -> dict[str, int]:
        """How many calls of each Thrift method the server has received."""
        with self._lock:
            return dict(self._calls)

    def reset_call_counts(self) -> None:
        with self._lock:
            self._calls.clear()

    # -- internals

    def _dispatch(self, api: str, call: Callable[[], Any]) -> Any:
        with self._lock:
            self._calls[api] += 1
        if not hasattr(self.handler, api):
            raise TApplicationException(
                TApplicationException.UNKNOWN_METHOD, f"hbase_emulator does not implement {api}"
            )
        fault = self.faults.take(api)
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if not fault.apply:
                _fire(fault, api)
        try:
            result = call()
        except JavaIOException as e:
            logger.debug("%s: %s: %s", api, e.java_class, e.message)
            raise Hbase_thrift.IOError(message=e.stack_trace()) from None
        except JavaRuntimeException as e:
            logger.warning("Internal error processing %s: %s: %s", api, e.java_class, e.message)
            raise TApplicationException(
                TApplicationException.INTERNAL_ERROR, f"Internal error processing {api}"
            ) from None
        if fault is not None and fault.apply:
            _fire(fault, api)
        return result

    def _make_protocol(self, sock: socket.socket) -> Any:
        tsock = TSocket(sock=sock)
        inner: Any = tsock
        if self.transport == "framed":
            inner = _FramedServerTransport(tsock, self.max_frame_size)
        trans = TCyBufferedTransport(inner)
        if self.protocol == "compact":
            return TCompactProtocol(trans, decode_response=True)
        # Java's TBinaryProtocol.Factory() does not require a version header (strictRead
        # false): a framed client's frame size is taken as a method name length, and the
        # server waits for the rest, so the client hangs, as with HBase.
        return TCyBinaryProtocol(trans, strict_read=False, decode_response=True)

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._stopping.is_set():
                    logger.exception("hbase_emulator: accept failed")
                break
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self.idle_timeout)
            thread = threading.Thread(
                target=self._serve_client, args=(sock,), name="hbase-emulator-conn", daemon=True
            )
            with self._lock:
                self._clients.add(sock)
                self._threads.add(thread)
            thread.start()

    def _serve_client(self, sock: socket.socket) -> None:
        processor = _Processor(self, self.handler)
        prot = self._make_protocol(sock)
        try:
            while not self._stopping.is_set():
                processor.process(prot, prot)
        except TimeoutError:
            logger.info("hbase_emulator: closing a connection idle for %ss", self.idle_timeout)
        except TTransportException as e:
            if e.type != TTransportException.END_OF_FILE:
                logger.warning("hbase_emulator: closing a connection: %s", e.message)
        except _Disconnect as e:
            logger.info("hbase_emulator: injected disconnect in %s", e)
        except OSError:
            pass  # reset by the client, or shut down by stop()
        except Exception as e:
            logger.warning("Error occurred during processing of message: %r", e)
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            with self._lock:
                self._clients.discard(sock)
                self._threads.discard(threading.current_thread())


# --------------------------------------------------------------------------------------
# Control channel (JSON lines over TCP) and the subprocess API


class _ControlServer:
    """Answers ``{"cmd": ...}`` lines: inject, clear_faults, calls, reset_calls, ping."""

    def __init__(self, server: EmulatorServer, host: str, port: int) -> None:
        self.server = server
        self.sock = socket.create_server((host, port))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="hbase-emulator-control", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError), conn.makefile("rwb") as f:
                    line = f.readline()
                    try:
                        reply = {"ok": True, "result": self._handle(json.loads(line))}
                    except Exception as e:
                        reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                    f.write(json.dumps(reply).encode() + b"\n")
                    f.flush()

    def _handle(self, request: dict) -> Any:
        cmd = request.pop("cmd")
        if cmd == "inject":
            self.server.inject_errors(**request)
            return None
        if cmd == "clear_faults":
            self.server.clear_faults()
            return None
        if cmd == "calls":
            return self.server.call_counts()
        if cmd == "reset_calls":
            self.server.reset_call_counts()
            return None
        if cmd == "ping":
            return "pong"
        raise ValueError(f"unknown command {cmd!r}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def control_request(host: str, port: int, cmd: str, **kwargs: Any) -> Any:
    """Send one command to an emulator's control port and return its result."""
    with socket.create_connection((host, port), timeout=10) as sock, sock.makefile("rwb") as f:
        f.write(json.dumps({"cmd": cmd, **kwargs}).encode() + b"\n")
        f.flush()
        reply = json.loads(f.readline())
    if not reply["ok"]:
        raise RuntimeError(f"hbase_emulator control {cmd}: {reply['error']}")
    return reply["result"]


class EmulatorProcess:
    """The emulator in a subprocess (``python tests/support/hbase_emulator.py``).

    Unpacks as ``host, port``.  ``restart()`` keeps the port and the data file.
    """

    def __init__(
        self,
        *,
        transport: str = "buffered",
        protocol: str = "binary",
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        data: str | os.PathLike | None = None,
        port: int = 0,
        scanner_timeout: float | None = DEFAULT_SCANNER_TIMEOUT,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port
        self.control_port = 0
        self.transport = transport
        self.protocol = protocol
        self.idle_timeout = idle_timeout
        self.data = data
        self.scanner_timeout = scanner_timeout
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.host, self.port))

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``happybase.Connection``/``ConnectionPool``."""
        return {
            "host": self.host,
            "port": self.port,
            "transport": self.transport,
            "protocol": self.protocol,
        }

    def command(self) -> list[str]:
        args = [
            sys.executable,
            __file__,
            "--host",
            self.host,  # run as a script: no package needed
            "--port",
            str(self.port),
            "--transport",
            self.transport,
            "--protocol",
            self.protocol,
            "--idle-timeout",
            str(self.idle_timeout or 0),
            "--scanner-timeout",
            str(self.scanner_timeout or 0),
            "--control-port",
            str(self.control_port),
        ]
        if self.data:
            args += ["--data", str(self.data)]
        return args + self.extra_args

    def start(self, timeout: float = 30.0) -> None:
        """Start the process and wait for its JSON address line."""
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                if not sel.select(timeout):
                    raise RuntimeError(f"hbase_emulator did not start within {timeout}s")
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"hbase_emulator exited with status {proc.wait()}")
            info = json.loads(line)
        except BaseException:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            raise
        self.proc = proc
        self.host, self.port, self.control_port = info["host"], info["port"], info["control_port"]

    def stop(self, kill: bool = False) -> None:
        """SIGTERM (clean: checkpoint) or SIGKILL (a crash: the log is replayed at start)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def restart(self, kill: bool = True) -> None:
        """Stop (SIGKILL by default) and start again on the same port and data file."""
        self.stop(kill=kill)
        self.start()

    def control(self, cmd: str, **kwargs: Any) -> Any:
        return control_request(self.host, self.control_port, cmd, **kwargs)

    def inject_errors(
        self,
        method: str | Sequence[str] | None = None,
        count: int = 1,
        *,
        kind: str = "ioerror",
        message: str | None = None,
        apply: bool = False,
        delay: float = 0.0,
    ) -> None:
        """As ``EmulatorServer.inject_errors``, through the control port."""
        if method is not None and not isinstance(method, str):
            method = list(method)
        self.control(
            "inject",
            method=method,
            count=count,
            kind=kind,
            message=message,
            apply=apply,
            delay=delay,
        )

    def clear_faults(self) -> None:
        self.control("clear_faults")

    def call_counts(self) -> dict[str, int]:
        return self.control("calls")


@contextlib.contextmanager
def hbase_emulator(
    transport: str = "buffered",
    protocol: str = "binary",
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    data: str | os.PathLike | None = None,
    *,
    port: int = 0,
    scanner_timeout: float | None = DEFAULT_SCANNER_TIMEOUT,
    extra_args: Sequence[str] = (),
) -> Iterator[EmulatorProcess]:
    """Run the emulator as a subprocess; yields an ``EmulatorProcess`` (``host, port = ...``).

    Without ``data``, the tables persist in a temporary file, so ``restart()`` keeps them.
    """
    with tempfile.TemporaryDirectory(prefix="hbase-emulator-") as tmp:
        emulator = EmulatorProcess(
            transport=transport,
            protocol=protocol,
            idle_timeout=idle_timeout,
            data=data or Path(tmp, "hbase.pickle"),
            port=port,
            scanner_timeout=scanner_timeout,
            extra_args=extra_args,
        )
        emulator.start()
        try:
            yield emulator
        finally:
            emulator.stop()


# --------------------------------------------------------------------------------------
# Command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python tests/support/hbase_emulator.py``: serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(
        prog="python tests/support/hbase_emulator.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--transport", choices=["buffered", "framed"], default="buffered")
    parser.add_argument("--protocol", choices=["binary", "compact"], default="binary")
    parser.add_argument(
        "--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT, help="seconds; 0: never"
    )
    parser.add_argument(
        "--scanner-timeout", type=float, default=DEFAULT_SCANNER_TIMEOUT, help="seconds; 0: never"
    )
    parser.add_argument("--max-frame-size", type=int, default=DEFAULT_MAX_FRAME_SIZE)
    parser.add_argument("--data", help="persist the tables to this file (and FILE.wal)")
    parser.add_argument(
        "--control-port", type=int, default=0, help="JSON-lines control port; 0: any, -1: none"
    )
    parser.add_argument(
        "--fail",
        action="append",
        default=[],
        metavar="METHOD[:COUNT]",
        help="fail the next COUNT calls of METHOD ('mutating', '*' or a Thrift call name)",
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")

    server = EmulatorServer(
        args.host,
        args.port,
        transport=args.transport,
        protocol=args.protocol,
        idle_timeout=args.idle_timeout or None,
        data=args.data,
        scanner_timeout=args.scanner_timeout or None,
        max_frame_size=args.max_frame_size,
    )
    for spec in args.fail:
        method, _, count = spec.partition(":")
        server.inject_errors(method, int(count or 1))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    control = None
    if args.control_port >= 0:
        control = _ControlServer(server, args.host, args.control_port)
    info = {
        "host": server.host,
        "port": server.port,
        "control_port": control.port if control else None,
        "transport": server.transport,
        "protocol": server.protocol,
        "pid": os.getpid(),
        "happybase": happybase.__version__,
    }
    print(json.dumps(info), flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        if control is not None:
            control.close()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
