"""HBase's Thrift1 semantics, through the real happybase client over 127.0.0.1.

One contract, two servers: every semantic test runs against the emulator
(``support.hbase_emulator``) and against the session's real HBase 2.6.1 (conftest's
``hbase``), through its ``thrift`` (buffered+binary), ``framed`` (framed+compact) and
``idle`` (1 s read timeout) gateways.  Where they differ, the real server is right and
the emulator follows it (see the emulator's docstring and /work/shared/HBASE_NOTES.md,
section 2.3).

Tests of what only the emulator can do (fault injection, call counts, a fake clock,
restarts, the subprocess) are named ``test_emulator_*`` and run against it alone.  On the
real server, tables get names unique to this run and are dropped at the end of the module.
"""

from __future__ import annotations

import itertools
import struct
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import happybase
import pytest
from support.hbase_emulator import (
    EmulatorServer,
    Hbase_thrift,
    hbase_emulator,
)
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

IOError_ = Hbase_thrift.IOError
IllegalArgument = Hbase_thrift.IllegalArgument
AlreadyExists = Hbase_thrift.AlreadyExists
Mutation = Hbase_thrift.Mutation
BatchMutation = Hbase_thrift.BatchMutation
TScan = Hbase_thrift.TScan

SERVERS = ["emulator", "hbase"]
RUN = uuid.uuid4().hex[:8]  # table names are unique to this run on the shared real server
_names = itertools.count()


def unique(prefix: str = "t") -> str:
    return f"{prefix}_{RUN}_{next(_names)}"


@dataclass
class RealHBase:
    """The real HBase through one Thrift1 gateway: what these tests need of a server."""

    gateway: Any  # webcrawl.localhbase.launcher.Gateway
    host: str = "127.0.0.1"

    @property
    def port(self) -> int:
        return self.gateway.port

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def connection_kwargs(self) -> dict[str, Any]:
        return self.gateway.connection_kwargs()


class StepClock:
    """A server clock (ms) that advances ``step`` at every read: deterministic timestamps."""

    def __init__(self, step: int = 1) -> None:
        self.now = 1_700_000_000_000
        self.step = step
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self.now += self.step
            return self.now


def connect(server, **kwargs) -> happybase.Connection:
    # generous: an HBase just started, on a busy machine, may take seconds to create a table
    return happybase.Connection(**server.connection_kwargs(), timeout=30_000, **kwargs)


def drop(server, names: list[str]) -> None:
    """Disable (if enabled) and delete the tables, on a fresh connection (the gateway drops
    connections idle for 60 s)."""
    with closing(connect(server)) as c:
        existing = set(c.tables())
        for name in names:
            if name.encode() not in existing:
                continue
            with suppress(IOError_):
                c.disable_table(name)
            c.delete_table(name)


class Tables:
    """Tables created on one server, dropped together when the module is done with it."""

    def __init__(self, server) -> None:
        self.server = server
        self.names: list[str] = []

    def create(self, conn: happybase.Connection, families=None) -> str:
        name = unique()
        conn.create_table(name, families or {"cf": {}, "other": {}})
        self.names.append(name)
        return name

    def drop_all(self) -> None:
        drop(self.server, self.names)


def _server(request, kind: str, gateway: str = "thrift", **emulator_options):
    if kind == "emulator":
        return EmulatorServer(**emulator_options).start()
    return RealHBase(request.getfixturevalue("hbase").gateway(gateway))


@pytest.fixture(scope="module", params=SERVERS)
def server(request) -> Iterator[EmulatorServer | RealHBase]:
    """The emulator, or the real HBase through its buffered+binary gateway."""
    s = _server(request, request.param)
    yield s
    if isinstance(s, EmulatorServer):
        s.stop()


@pytest.fixture(scope="module")
def tables(server) -> Iterator[Tables]:
    t = Tables(server)
    yield t
    t.drop_all()


@pytest.fixture
def conn(server) -> Iterator[happybase.Connection]:
    c = connect(server)
    yield c
    c.close()


@pytest.fixture
def make_table(conn, tables):
    def make(families=None) -> happybase.Table:
        return conn.table(tables.create(conn, families))

    return make


@pytest.fixture
def table(make_table) -> happybase.Table:
    return make_table()


@contextmanager
def raises(exc_type: type[BaseException], text: str) -> Iterator[pytest.ExceptionInfo]:
    """``pytest.raises`` for Thrift exceptions, whose messages are bytes (``match`` needs str)."""
    with pytest.raises(exc_type) as info:
        yield info
    message = info.value.message
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    assert text in message, message


def app_error(call: str) -> str:
    """What a real server answers when a RuntimeException escapes the handler."""
    return f"Internal error processing {call}"


# -- admin


def test_tables_lifecycle_and_admin_errors(conn):
    name, name2 = unique("life"), unique("life")
    conn.create_table(name, {"cf": {}})
    assert name.encode() in conn.tables()
    assert conn.is_table_enabled(name)
    with pytest.raises(AlreadyExists) as e:
        conn.create_table(name, {"cf": {}})
    assert e.value.message == b"table name already in use"

    with pytest.raises(IOError_) as e:
        conn.delete_table(name)  # HBase: tables must be disabled first
    assert b"TableNotDisabledException" in e.value.message
    with raises(IOError_, "TableNotDisabledException"):
        conn.enable_table(name)
    regions = conn.table(name).regions()
    assert len(regions) == 1 and regions[0]["start_key"] == regions[0]["end_key"] == b""
    assert regions[0]["name"].startswith(name.encode() + b",,")

    conn.disable_table(name)
    assert not conn.is_table_enabled(name)
    with raises(IOError_, "TableNotEnabledException"):
        conn.disable_table(name)
    conn.delete_table(name)
    assert name.encode() not in conn.tables()

    with pytest.raises(IOError_) as e:
        conn.delete_table(name)
    assert e.value.message.startswith(b"java.io.IOException: table does not exist")
    with raises(IOError_, "TableNotFoundException"):
        conn.is_table_enabled(name)
    with raises(IOError_, "TableNotFoundException"):
        conn.table(name).families()
    with raises(IOError_, "TableNotFoundException"):
        conn.compact_table(name)
    assert conn.table(name).regions() == []

    conn.create_table(name2, {"cf": {}})
    conn.delete_table(name2, disable=True)
    assert name2.encode() not in conn.tables()


def test_create_table_errors(conn):
    names = [unique("bad") for _ in range(6)]
    with raises(IllegalArgument, "Column Family name can not be empty"):
        conn.create_table(names[0], {"": {}})  # happybase sends b":"
    with pytest.raises(IllegalArgument) as e:
        conn.client.createTable(names[1].encode(), [Hbase_thrift.ColumnDescriptor(name=b"")])
    assert e.value.message == b"column name is empty"
    with raises(IllegalArgument, "Maximum versions must be positive"):
        conn.create_table(names[2], {"cf": {"max_versions": 0}})
    with raises(IllegalArgument, "Unsupported compression algorithm name: zip"):
        conn.create_table(names[3], {"cf": {"compression": "zip"}})
    with raises(IllegalArgument, "Family 'cf' already exists so cannot be added"):
        conn.create_table(names[4], {"cf": {}, "cf:": {}})
    with raises(IOError_, "Table should have at least one column family"):
        conn.client.createTable(names[5].encode(), [])
    with raises(IOError_, "NamespaceNotFoundException"):
        conn.create_table(f"nons{RUN}:t", {"cf": {}})
    with raises(TApplicationException, app_error("createTable")):
        conn.create_table("bad name", {"cf": {}})  # TableName.valueOf, outside the try
    assert not {n.encode() for n in names} & set(conn.tables())


def test_families_descriptors(make_table):
    t = make_table({"cf": {}, "one": {"max_versions": 1, "time_to_live": 3600}})
    families = t.families()
    assert families[b"cf"] == {
        "name": b"cf:",
        "max_versions": 3,
        "compression": b"NONE",
        "in_memory": False,
        "bloom_filter_type": b"NONE",
        "bloom_filter_vector_size": 0,
        "bloom_filter_nb_hashes": 0,
        "block_cache_enabled": False,
        "time_to_live": 2147483647,  # not -1: ttl > 0 ? ttl : Integer.MAX_VALUE
    }
    assert families[b"one"]["max_versions"] == 1
    assert families[b"one"]["time_to_live"] == 3600


def test_disabled_table(conn, table):
    table.put(b"r", {b"cf:a": b"1"})
    conn.disable_table(table.name)
    with raises(IOError_, "TableNotEnabledException"):
        table.row(b"r")
    with raises(IOError_, "TableNotEnabledException"):
        list(table.scan())
    assert b"cf" in table.families()  # the descriptors come from the master
    assert len(table.regions()) == 1
    conn.compact_table(table.name)
    conn.enable_table(table.name)
    assert table.row(b"r") == {b"cf:a": b"1"}


def test_emulator_put_to_a_disabled_table():
    # A real server answers the same, but only after the client's retries (~150 s).
    with EmulatorServer() as s, closing(connect(s)) as c:
        c.create_table("t", {"cf": {}})
        c.disable_table("t")
        with raises(IOError_, "RetriesExhaustedWithDetailsException: Failed 1 action: "):
            c.table("t").put(b"r", {b"cf:a": b"1", b"cf:b": b"1"})  # one Put per row
        with (
            raises(IOError_, "Failed 2 actions: NotServingRegionException: 2 times"),
            c.table("t").batch() as b,
        ):
            b.delete(b"r1", columns=[b"cf:a"])
            b.delete(b"r2", columns=[b"cf:a"])


# -- cells, versions, timestamps


def test_versions_timestamps_exclusive_upper_bound(conn, make_table):
    t = make_table({"cf": {"max_versions": 3}})
    for ts in (10, 20, 30, 40):
        t.put(b"r", {b"cf:a": b"v%d" % ts}, timestamp=ts)
    # newest first, at most maxVersions
    assert t.cells(b"r", b"cf:a", include_timestamp=True) == [
        (b"v40", 40),
        (b"v30", 30),
        (b"v20", 20),
    ]
    assert t.cells(b"r", b"cf:a", versions=2) == [b"v40", b"v30"]
    assert t.cells(b"r", b"cf:a", versions=10) == [b"v40", b"v30", b"v20"]
    # the timestamp argument is an exclusive upper bound: setTimeRange(0, ts)
    assert t.row(b"r", timestamp=30) == {b"cf:a": b"v20"}
    assert t.row(b"r", timestamp=31, include_timestamp=True) == {b"cf:a": (b"v30", 30)}
    assert t.rows([b"r"], timestamp=35) == [(b"r", {b"cf:a": b"v30"})]
    assert list(t.scan(timestamp=40)) == [(b"r", {b"cf:a": b"v30"})]
    # maxVersions counts within the time range: the 4th version waits in the memstore
    # until a flush, and a bounded read still finds it
    assert t.cells(b"r", b"cf:a", timestamp=40) == [b"v30", b"v20", b"v10"]
    assert t.row(b"r", timestamp=20) == {b"cf:a": b"v10"}
    # the same (row, column, ts) is overwritten
    t.put(b"r", {b"cf:a": b"again"}, timestamp=40)
    assert t.cells(b"r", b"cf:a", include_timestamp=True)[0] == (b"again", 40)
    assert len(t.cells(b"r", b"cf:a")) == 3
    # disabling closes the region, which flushes it: the excess versions are gone
    conn.disable_table(t.name)
    conn.enable_table(t.name)
    assert t.cells(b"r", b"cf:a", timestamp=40) == [b"v30", b"v20"]
    assert t.row(b"r", timestamp=20) == {}
    # a put without timestamp gets the server's now
    before = int(time.time() * 1000)
    t.put(b"r", {b"cf:b": b"now"})
    ts = t.row(b"r", include_timestamp=True)[b"cf:b"][1]
    assert before - 5000 <= ts <= int(time.time() * 1000) + 5000


def test_ttl_hides_expired_cells(make_table):
    t = make_table({"cf": {"time_to_live": 10}})
    now = int(time.time() * 1000)
    t.put(b"r", {b"cf:old": b"x"}, timestamp=now - 60_000)
    t.put(b"r", {b"cf:new": b"y"}, timestamp=now)
    assert t.row(b"r") == {b"cf:new": b"y"}


def test_column_names_and_selection(table):
    table.put(
        b"r",
        {
            b"cf:a": b"1",
            b"cf:": b"empty qualifier",
            b"cf:a:b": b"colon in qualifier",
            b"other:x": b"2",
        },
    )
    assert table.row(b"r", columns=[b"cf"]) == {
        b"cf:a": b"1",
        b"cf:": b"empty qualifier",
        b"cf:a:b": b"colon in qualifier",
    }
    assert table.row(b"r", columns=[b"cf:"]) == {b"cf:": b"empty qualifier"}  # not the family
    assert table.row(b"r", columns=[b"cf:a:b"]) == {b"cf:a:b": b"colon in qualifier"}
    assert table.row(b"r", columns=[b"cf:a", b"other"]) == {b"cf:a": b"1", b"other:x": b"2"}
    # Get.addColumn after addFamily narrows the family; addFamily after addColumn widens it
    assert table.row(b"r", columns=[b"cf", b"cf:a"]) == {b"cf:a": b"1"}
    assert len(table.row(b"r", columns=[b"cf:a", b"cf"])) == 3
    assert table.row(b"r", columns=[b"cf:missing"]) == {}
    assert table.cells(b"r", b"cf") == [b"empty qualifier", b"1", b"colon in qualifier"]
    with raises(IOError_, "NoSuchColumnFamilyException"):
        table.row(b"r", columns=[b"nope"])
    with raises(IOError_, "NoSuchColumnFamilyException"):
        table.rows([b"r"], columns=[b"nope"])
    with raises(IOError_, "NoSuchColumnFamilyException"):
        list(table.scan(columns=[b"nope:x"]))


def test_row_and_rows(table):
    table.put(b"r1", {b"cf:a": b"1"})
    table.put(b"r2", {b"cf:a": b"2"})
    assert table.row(b"missing") == {}
    # missing rows are omitted, the others come in request order
    assert table.rows([b"r2", b"missing", b"r1"]) == [
        (b"r2", {b"cf:a": b"2"}),
        (b"r1", {b"cf:a": b"1"}),
    ]
    assert table.rows([]) == {}
    assert table.rows([b"r1"], columns=[b"other"]) == []
    with raises(TApplicationException, app_error("getRowWithColumns")):
        table.row(b"")  # new Get(row): IllegalArgumentException escapes the handler
    with raises(TApplicationException, app_error("getRowsWithColumns")):
        table.rows([b"r1", b""])


# -- writes


def test_put_errors(conn, table):
    with pytest.raises(IOError_) as e:
        table.put(b"r", {b"nope:a": b"1"})
    assert b"NoSuchColumnFamilyException" in e.value.message
    # other rows of the same mutateRows are written, not the failing row's other cells
    batch = table.batch()
    batch.put(b"good", {b"cf:a": b"1"})
    batch.put(b"bad", {b"nope:a": b"1", b"cf:a": b"1"})
    batch.put(b"bad2", {b"nope:a": b"1"})
    with raises(IOError_, "RetriesExhaustedWithDetailsException: Failed 2 actions: "):
        batch.send()
    assert table.row(b"good") == {b"cf:a": b"1"}
    assert table.row(b"bad") == {}

    # A family-only put: the IllegalArgumentException("Invalid famAndQf provided.") is thrown
    # outside the handler's try block, so a real server answers with a TApplicationException.
    with pytest.raises(TApplicationException) as e:
        table.put(b"r", {b"cf": b"1"})
    assert e.value.type == TApplicationException.INTERNAL_ERROR
    assert e.value.message == app_error("mutateRows").encode()
    assert table.row(b"r") == {}
    # mutateRow ignores it (with a server-side warning) and writes the rest
    conn.client.mutateRow(
        table.name,
        b"r",
        [Mutation(column=b"cf", value=b"1"), Mutation(column=b"cf:b", value=b"2")],
        {},
    )
    assert table.row(b"r") == {b"cf:b": b"2"}
    with raises(IOError_, "NoSuchColumnFamilyException"):
        conn.client.mutateRow(table.name, b"r", [Mutation(column=b"nope:x", value=b"1")], {})
    with raises(TApplicationException, app_error("mutateRows")):
        table.put(b"", {b"cf:a": b"1"})  # empty row key
    with raises(TApplicationException, app_error("mutateRowsTs")):
        table.put(b"r", {b"cf:a": b"1"}, timestamp=-5)

    # A missing table: mutateRows is an HTable.batch, which names the table per action;
    # single mutations (mutateRow) report a TableNotFoundException.
    missing = unique("missing")
    with pytest.raises(IOError_) as e:
        conn.table(missing).put(b"r", {b"cf:a": b"1"})
    assert e.value.message.startswith(
        b"org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException: "
        b"Failed 1 action: %s: 1 time, servers with issues: null" % missing.encode()
    )
    with raises(IOError_, f"Failed 1 action: {missing}: 1 time"):
        conn.table(missing).delete(b"r", columns=[b"cf:a"])
    with raises(IOError_, f"TableNotFoundException: {missing}"):
        conn.client.mutateRow(missing.encode(), b"r", [Mutation(column=b"cf:a", value=b"1")], {})
    with raises(IOError_, f"TableNotFoundException: {missing}"):
        conn.table(missing).row(b"r")
    with raises(IOError_, f"TableNotFoundException: {missing}"):
        conn.table(missing).counter_inc(b"r", b"cf:n")


def test_deletes(table):
    data = {b"cf:a": b"1", b"cf:b": b"2", b"cf:": b"3", b"other:x": b"4"}
    table.put(b"r", data)
    table.delete(b"r", columns=[b"cf:a"])
    assert set(table.row(b"r")) == {b"cf:b", b"cf:", b"other:x"}
    table.delete(b"r", columns=[b"cf:"])  # only the empty qualifier
    assert set(table.row(b"r")) == {b"cf:b", b"other:x"}
    table.delete(b"r", columns=[b"cf"])  # the whole family
    assert table.row(b"r") == {b"other:x": b"4"}
    table.put(b"r", data)
    table.delete(b"r")  # one family delete per family (from getColumnDescriptors)
    assert table.row(b"r") == {}
    with raises(IOError_, "NoSuchColumnFamilyException"):
        table.delete(b"r", columns=[b"nope"])
    with raises(IOError_, "NoSuchColumnFamilyException"):
        table.delete(b"r", columns=[b"nope:x"])


def test_delete_then_put_in_separate_calls_keeps_the_put(table):
    # A real server's write call takes milliseconds, so a put after a delete of the same
    # cell nearly always gets a later timestamp than the delete marker: on HBase 2.6.1, 13
    # pairs in 1000 still shared a millisecond (HBASE-2256: the put is masked).  The
    # emulator gives every write call a millisecond of its own; before, it lost most puts.
    rows = [b"r%d" % i for i in range(20)]
    for row in rows:
        table.put(row, {b"cf:a": b"old"})
        table.delete(row)
        table.put(row, {b"cf:a": b"new"})
    result = dict(table.scan())
    assert all(result.get(row, {b"cf:a": b"new"}) == {b"cf:a": b"new"} for row in rows)
    assert len(result) >= 15


def test_delete_timestamp_and_markers(conn, make_table):
    t = make_table({"cf": {"max_versions": 5}})
    for ts in (10, 20, 30):
        t.put(b"r", {b"cf:a": b"v%d" % ts}, timestamp=ts)
    t.delete(b"r", columns=[b"cf:a"], timestamp=20)  # removes versions <= 20
    assert t.cells(b"r", b"cf:a") == [b"v30"]
    # the delete marker masks later puts at ts <= 20
    t.put(b"r", {b"cf:a": b"v15"}, timestamp=15)
    t.put(b"r", {b"cf:a": b"v25"}, timestamp=25)
    assert t.cells(b"r", b"cf:a") == [b"v30", b"v25"]
    conn.compact_table(t.name)
    t.put(b"r", {b"cf:a": b"v15"}, timestamp=15)
    assert t.cells(b"r", b"cf:a") == [b"v30", b"v25"]
    # nor does a major compaction lift it: it is asynchronous and only rewrites flushed
    # files, and Thrift1 cannot flush (on HBase 2.6.1 the marker still masked a minute
    # after a flush and a major compaction)
    conn.compact_table(t.name, major=True)
    t.put(b"r", {b"cf:a": b"v15"}, timestamp=15)
    assert t.cells(b"r", b"cf:a") == [b"v30", b"v25"]
    # a family delete masks every column of the family, present or future
    t.delete(b"r", columns=[b"cf"], timestamp=100)
    t.put(b"r", {b"cf:new": b"x"}, timestamp=99)
    t.put(b"r", {b"cf:later": b"y"}, timestamp=101)
    assert t.row(b"r") == {b"cf:later": b"y"}


def test_batch_delete_and_put_of_one_row_loses_the_put(table):
    table.put(b"r", {b"cf:a": b"old", b"cf:b": b"old"})
    with table.batch() as b:
        b.delete(b"r")
        b.put(b"r", {b"cf:a": b"new"})
    # mutateRows applies all puts, then all deletes (whose LATEST is the server's now)
    assert table.row(b"r") == {}
    with table.batch(timestamp=1000) as b:
        b.put(b"r2", {b"cf:a": b"new"})
        b.delete(b"r2", columns=[b"cf:a"])
    assert table.row(b"r2") == {}


def test_mutate_row_deletes_first(conn, table):
    muts = [Mutation(isDelete=True, column=b"cf"), Mutation(column=b"cf:a", value=b"new")]
    rows = [b"r%d" % i for i in range(20)]
    for row in rows:
        table.put(row, {b"cf:a": b"old", b"cf:b": b"old"})
        conn.client.mutateRow(table.name, row, muts, {})  # deletes, then puts
    # Two calls to the RegionServer, each at its own "now": the put survives, unless both
    # fell in one millisecond (HBASE-2256), which happened once in 200 tries on HBase, and
    # in CI for 3 rows out of 3 once (a fast run): 20 rows.
    results = [table.row(row) for row in rows]
    assert {b"cf:a": b"new"} in results
    assert all(r in ({b"cf:a": b"new"}, {}) for r in results)
    conn.client.mutateRows(table.name, [BatchMutation(row=b"r0", mutations=muts)], {})
    assert table.row(b"r0") == {}  # puts, then deletes


def test_emulator_same_millisecond_masking():
    clock = StepClock(step=0)
    with EmulatorServer(clock=clock) as s, closing(connect(s)) as c:
        c.create_table("t", {"cf": {}})
        t = c.table("t")
        # HBASE-2256: a put in the same millisecond as a delete is masked by its marker
        t.put(b"r", {b"cf:a": b"old", b"cf:b": b"old"})
        muts = [Mutation(isDelete=True, column=b"cf"), Mutation(column=b"cf:a", value=b"new")]
        c.client.mutateRow(b"t", b"r", muts, {})
        assert t.row(b"r") == {}
        t.put(b"r", {b"cf:a": b"x"})
        assert t.row(b"r") == {}
        clock.step = 1
        t.put(b"r", {b"cf:a": b"z"})
        assert t.row(b"r") == {b"cf:a": b"z"}


def test_append_check_and_put(conn, table):
    cells = conn.client.append(
        Hbase_thrift.TAppend(table=table.name, row=b"r", columns=[b"cf:a"], values=[b"ab"])
    )
    assert [c.value for c in cells] == [b"ab"]
    conn.client.append(
        Hbase_thrift.TAppend(table=table.name, row=b"r", columns=[b"cf:a"], values=[b"cd"])
    )
    assert table.row(b"r") == {b"cf:a": b"abcd"}
    put = Mutation(column=b"cf:b", value=b"1")
    assert conn.client.checkAndPut(table.name, b"r", b"cf:b", None, put, {}) is True
    assert conn.client.checkAndPut(table.name, b"r", b"cf:b", None, put, {}) is False
    put2 = Mutation(column=b"cf:b", value=b"2")
    assert conn.client.checkAndPut(table.name, b"r", b"cf:b", b"1", put2, {}) is True
    assert table.row(b"r", columns=[b"cf:b"]) == {b"cf:b": b"2"}
    # an empty expected value means "missing (or empty)"
    assert conn.client.checkAndPut(table.name, b"r", b"cf:zz", b"", put2, {}) is True


# -- counters


def test_counters(table):
    assert table.counter_get(b"r", b"cf:n") == 0  # creates the cell
    assert table.row(b"r") == {b"cf:n": struct.pack(">q", 0)}
    assert table.counter_inc(b"r", b"cf:n") == 1
    assert table.counter_inc(b"r", b"cf:n", 5) == 6
    assert table.counter_dec(b"r", b"cf:n", 2) == 4
    assert table.counter_inc(b"r", b"cf") == 1  # a family-only column: empty qualifier
    assert table.row(b"r", columns=[b"cf:"]) == {b"cf:": struct.pack(">q", 1)}
    table.counter_set(b"r", b"cf:max", 2**63 - 1)
    assert table.counter_inc(b"r", b"cf:max") == -(2**63)  # a Java long wraps
    table.put(b"r", {b"cf:text": b"abc"})
    with pytest.raises(IOError_) as e:
        table.counter_inc(b"r", b"cf:text")
    assert b"Field is not a long, it's 3 bytes wide" in e.value.message
    with raises(IOError_, "NoSuchColumnFamilyException"):
        table.counter_inc(b"r", b"nope:n")


def test_counter_set_then_increment(table):
    # counter_set is a put of the 8-byte value; the next increment starts from it.  Each
    # set waits out the increments' timestamps (HBase writes an increment at max(now,
    # previous + 1 ms): quick increments run ahead of the clock, and a put at "now" is
    # then hidden, as the emulator test below shows; CI saw it once on the real HBase)
    for _ in range(3):
        table.counter_inc(b"r", b"cf:n")
    time.sleep(0.02)
    table.counter_set(b"r", b"cf:n", 0)
    assert table.counter_inc(b"r", b"cf:n") == 1
    time.sleep(0.02)
    table.counter_set(b"r", b"cf:n", 5)
    assert table.counter_inc(b"r", b"cf:n") == 6
    for _ in range(5):
        table.counter_inc(b"r", b"cf:n")
    time.sleep(0.02)
    table.counter_set(b"r", b"cf:n", 0)
    assert table.counter_get(b"r", b"cf:n") == 0
    assert table.counter_inc(b"r", b"cf:n", 2) == 2


def test_emulator_counter_set_hidden_by_increments_of_one_millisecond():
    # An increment writes at max(now, previous ts + 1) (HBase 2 HRegion.reckonDelta), a put
    # (counter_set) at now: after several increments within one millisecond, which a real
    # server does not manage, counter_set is hidden behind them.
    clock = StepClock(step=0)
    with EmulatorServer(clock=clock) as s, closing(connect(s)) as c:
        c.create_table("t", {"cf": {}})
        t = c.table("t")
        for _ in range(3):
            t.counter_inc(b"r", b"cf:n")
        t.counter_set(b"r", b"cf:n", 100)
        assert t.counter_get(b"r", b"cf:n") == 3
        clock.step = 1_000
        t.counter_set(b"r", b"cf:n", 100)
        assert t.counter_inc(b"r", b"cf:n") == 101


def test_counter_concurrency(server, table):
    threads_n, incs = 8, 25
    results: list[list[int]] = [[] for _ in range(threads_n)]
    errors: list[BaseException] = []
    start = threading.Barrier(threads_n)

    def work(i: int) -> None:
        try:
            with closing(connect(server)) as c:
                t = c.table(table.name)
                start.wait()
                for _ in range(incs):
                    results[i].append(t.counter_inc(b"r", b"cf:n"))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    values = [v for r in results for v in r]
    assert sorted(values) == list(range(1, threads_n * incs + 1))  # all distinct, none lost
    assert table.counter_get(b"r", b"cf:n") == threads_n * incs


def test_connection_pool(server, table):
    pool = happybase.ConnectionPool(size=3, **server.connection_kwargs(), timeout=10_000)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(10):
                with pool.connection() as c:
                    t = c.table(table.name)
                    t.put(b"r%d-%d" % (i, j), {b"cf:a": b"%d" % j})
                    assert t.row(b"r%d-%d" % (i, j)) == {b"cf:a": b"%d" % j}
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for c in list(pool._queue.queue):
        c.close()
    assert not errors
    assert len(list(table.scan())) == 60


# -- scans


@pytest.fixture
def rows_table(table) -> happybase.Table:
    with table.batch() as b:
        for i in range(10):
            b.put(b"r%02d" % i, {b"cf:a": b"%d" % i, b"cf:b": b"x", b"other:c": b"y"})
    return table


def keys(scan) -> list[bytes]:
    return [k for k, _ in scan]


def test_scan_ranges_and_limits(rows_table):
    t = rows_table
    assert keys(t.scan()) == [b"r%02d" % i for i in range(10)]
    assert keys(t.scan(row_start=b"r03", row_stop=b"r06")) == [b"r03", b"r04", b"r05"]
    assert keys(t.scan(row_start=b"r035")) == [b"r%02d" % i for i in range(4, 10)]
    assert keys(t.scan(row_prefix=b"r0")) == keys(t.scan())
    assert keys(t.scan(row_prefix=b"r05")) == [b"r05"]
    assert keys(t.scan(row_start=b"r05", row_stop=b"r02", reverse=True)) == [b"r05", b"r04", b"r03"]
    assert keys(t.scan(reverse=True))[:2] == [b"r09", b"r08"]
    assert list(t.scan(row_prefix=b"r01", columns=[b"cf:a"])) == [(b"r01", {b"cf:a": b"1"})]
    ((_, cols),) = t.scan(row_prefix=b"r01", columns=[b"other"], include_timestamp=True)
    assert list(cols) == [b"other:c"] and cols[b"other:c"][0] == b"y"
    assert keys(t.scan(limit=5, batch_size=2)) == [b"r%02d" % i for i in range(5)]
    assert keys(t.scan(row_start=b"r08", limit=5)) == [b"r08", b"r09"]


def test_emulator_scan_round_trips():
    with EmulatorServer() as s, closing(connect(s)) as c:
        c.create_table("t", {"cf": {}})
        t = c.table("t")
        for i in range(10):
            t.put(b"r%02d" % i, {b"cf:a": b"1"})
        s.reset_call_counts()
        assert keys(t.scan(limit=5, batch_size=2)) == [b"r%02d" % i for i in range(5)]
        calls = s.call_counts()
        assert calls["scannerGetList"] == 3 and calls["scannerClose"] == 1


def test_scan_batching_sorted_columns_timestamp(table):
    table.put(b"wide", {b"cf:%d" % i: b"%d" % i for i in range(5)}, timestamp=100)
    table.put(b"wide", {b"cf:9": b"late"}, timestamp=200)
    parts = list(table.scan(scan_batching=2))  # partial rows: Scan.setBatch
    assert [k for k, _ in parts] == [b"wide"] * 3
    assert [len(cols) for _, cols in parts] == [2, 2, 2]
    ((_, cols),) = table.scan(sorted_columns=True)
    assert isinstance(cols, OrderedDict)
    assert list(cols) == sorted(cols) == [b"cf:%d" % i for i in (0, 1, 2, 3, 4, 9)]
    assert list(table.scan(timestamp=200, columns=[b"cf:9", b"cf:0"])) == [
        (b"wide", {b"cf:0": b"0"})
    ]


def test_reverse_row_prefix_follows_happybase(rows_table):
    # happybase turns a reversed row_prefix into start=bytes_increment(prefix) (inclusive),
    # stop=prefix (exclusive): a row equal to the incremented prefix comes back too.
    rows_table.put(b"r1", {b"cf:a": b"boundary"})
    assert keys(rows_table.scan(row_prefix=b"r0", reverse=True))[:2] == [b"r1", b"r09"]


@pytest.fixture(scope="module")
def filter_table(server, tables) -> str:
    """One table for the filter cases (read only)."""
    with closing(connect(server)) as c:
        name = tables.create(c)
        t = c.table(name)
        t.put(b"r1", {b"cf:a": b"1", b"cf:b": b"2", b"cf:pre1": b"p"})
        t.put(b"r2", {b"cf:a": b"3", b"other:c": b"4"})
        t.put(b"r3", {b"cf:b": b"5"}, timestamp=5)
    return name


R1 = {b"cf:a", b"cf:b", b"cf:pre1"}
R2 = {b"cf:a", b"other:c"}
FILTER_CASES = [
    ("PrefixFilter('r2')", {b"r2": R2}),
    ("KeyOnlyFilter() AND PrefixFilter('r1')", {b"r1": R1}),
    ("FirstKeyOnlyFilter()", {b"r1": {b"cf:a"}, b"r2": {b"cf:a"}, b"r3": {b"cf:b"}}),
    ("ColumnPrefixFilter('pre')", {b"r1": {b"cf:pre1"}}),
    ("PageFilter(2)", {b"r1": R1, b"r2": R2}),
    # filterIfMissing defaults to false: r3 lacks cf:a and passes
    ("SingleColumnValueFilter('cf', 'a', =, 'binary:3')", {b"r2": R2, b"r3": {b"cf:b"}}),
    ("SingleColumnValueFilter('cf', 'a', =, 'binary:3', true, true)", {b"r2": R2}),
    (
        "SingleColumnValueExcludeFilter('cf', 'a', =, 'binary:3')",
        {b"r2": {b"other:c"}, b"r3": {b"cf:b"}},
    ),
    ("PrefixFilter('r1') OR PrefixFilter('r3')", {b"r1": R1, b"r3": {b"cf:b"}}),
    ("ValueFilter(=, 'binary:2')", {b"r1": {b"cf:b"}}),
    ("ValueFilter(=, 'substring:P')", {b"r1": {b"cf:pre1"}}),
    (
        "QualifierFilter(>=, 'binary:b') AND FamilyFilter(=, 'binary:cf')",
        {b"r1": {b"cf:b", b"cf:pre1"}, b"r3": {b"cf:b"}},
    ),
    (
        "FamilyFilter(=, 'binary:other') OR QualifierFilter(=, 'binary:b')",
        {b"r1": {b"cf:b"}, b"r2": {b"other:c"}, b"r3": {b"cf:b"}},
    ),
    ("SKIP ValueFilter(!=, 'binary:3')", {b"r1": R1, b"r3": {b"cf:b"}}),
    ("SKIP ColumnPrefixFilter('a')", {}),
    ("WHILE RowFilter(!=, 'binary:r2')", {b"r1": R1}),
    ("RowFilter(<, 'binaryprefix:r2')", {b"r1": R1}),
    (
        "RowFilter(=, 'regexstring:r[13]') AND ColumnPrefixFilter('b')",
        {b"r1": {b"cf:b"}, b"r3": {b"cf:b"}},
    ),
    ("(ColumnPrefixFilter('a') OR ColumnPrefixFilter('c')) AND PageFilter(1)", {b"r1": {b"cf:a"}}),
    ("MultipleColumnPrefixFilter('a', 'p')", {b"r1": {b"cf:a", b"cf:pre1"}, b"r2": {b"cf:a"}}),
    ("ColumnRangeFilter('a', true, 'b', false)", {b"r1": {b"cf:a"}, b"r2": {b"cf:a"}}),
    ("ColumnPaginationFilter(1, 1)", {b"r1": {b"cf:b"}, b"r2": {b"other:c"}}),
    ("InclusiveStopFilter('r2')", {b"r1": R1, b"r2": R2}),
    ("TimestampsFilter(5)", {b"r3": {b"cf:b"}}),
]


@pytest.mark.parametrize(("filter_string", "expected"), FILTER_CASES)
def test_scan_filters(conn, filter_table, filter_string, expected):
    result = list(conn.table(filter_table).scan(filter=filter_string.encode()))
    assert {k: set(cols) for k, cols in result} == expected
    if filter_string.startswith("KeyOnlyFilter"):
        assert all(v == b"" for _, cols in result for v in cols.values())


def test_scan_filter_length_as_value(conn, filter_table):
    ((_, cols),) = conn.table(filter_table).scan(
        filter=b"KeyOnlyFilter(true) AND PrefixFilter('r3')"
    )
    assert cols == {b"cf:b": struct.pack(">i", 1)}


def test_scan_filters_see_only_max_versions(make_table):
    t = make_table({"cf": {"max_versions": 3}})
    for i in range(1, 6):
        t.put(b"r", {b"cf:a": b"v%d" % i}, timestamp=i)
    # a filter that skips a version moves on to the next one, among the newest maxVersions
    assert list(t.scan(filter=b"ValueFilter(=, 'binary:v4')")) == [(b"r", {b"cf:a": b"v4"})]
    assert list(t.scan(filter=b"TimestampsFilter(3)")) == [(b"r", {b"cf:a": b"v3"})]
    assert list(t.scan(filter=b"ValueFilter(=, 'binary:v1')")) == []
    assert list(t.scan(filter=b"TimestampsFilter(1)")) == []


@pytest.mark.parametrize(
    "filter_string",
    [
        "PrefixFilter(r1)",  # byte arguments must be quoted
        "NoSuchFilter('x')",
        "PrefixFilter('a'",
        "PrefixFilter('a'))",
        "PrefixFilter()",
        "ValueFilter(<, 'substring:x')",
        "ValueFilter(=, 'nope:x')",
        "RowFilter(=, 'regexstring:[')",
        "PageFilter('2')",
        "PageFilter(-1)",
        "PrefixFilter('a') and PrefixFilter('b')",
        "PrefixFilter('a') PrefixFilter('b')",
        "PrefixFilter('a') AND",
        "",
    ],
)
def test_scan_filter_errors(conn, filter_table, filter_string):
    # ParseFilter throws IllegalArgumentException, which the handler does not catch
    with pytest.raises(TApplicationException) as e:
        list(conn.table(filter_table).scan(filter=filter_string.encode()))
    assert e.value.type == TApplicationException.INTERNAL_ERROR
    assert e.value.message == app_error("scannerOpenWithScan").encode()


def test_scanner_ids_and_errors(conn, filter_table):
    name = filter_table.encode()
    first = conn.client.scannerOpenWithScan(name, TScan(startRow=b""), {})
    second = conn.client.scannerOpenWithScan(name, TScan(startRow=b"", caching=1), {})
    assert first >= 0 and second == first + 1  # i32 ids, from 0 per gateway
    assert [r.row for r in conn.client.scannerGetList(first, 10)] == [b"r1", b"r2", b"r3"]
    assert conn.client.scannerGetList(first, 10) == []  # exhausted
    assert conn.client.scannerGetList(first, 10) == []
    conn.client.scannerClose(first)
    with pytest.raises(IllegalArgument) as e:
        conn.client.scannerClose(first)
    assert e.value.message == b"scanner ID is invalid"
    with raises(IllegalArgument, "scanner ID is invalid"):
        conn.client.scannerGetList(first, 1)
    with raises(IllegalArgument, "scanner ID is invalid"):
        conn.client.scannerGetList(2**31 - 1, 1)
    assert [r.row for r in conn.client.scannerGetList(second, 2)] == [b"r1", b"r2"]
    conn.client.scannerClose(second)


def test_emulator_scanner_ids_start_at_zero():
    # as on a fresh HBase gateway (verified on HBase 2.6.1)
    with EmulatorServer() as s, closing(connect(s)) as c:
        c.create_table("t", {"cf": {}})
        assert c.client.scannerOpenWithScan(b"t", TScan(startRow=b""), {}) == 0
        assert c.client.scannerOpenWithScan(b"t", TScan(startRow=b""), {}) == 1


def test_emulator_scanner_timeout():
    with EmulatorServer(scanner_timeout=0.5) as s, closing(connect(s)) as c:
        c.create_table("t", {"cf": {}})
        t = c.table("t")
        for i in range(5):
            t.put(b"r%d" % i, {b"cf:a": b"1"})
        scan = t.scan(batch_size=1)  # caching=1: a round trip per row
        assert next(scan)[0] == b"r0"
        time.sleep(0.8)
        with raises(IOError_, "ScannerTimeoutException"):
            next(scan)
        scan = t.scan(batch_size=10)  # every row cached by the first round trip
        assert next(scan)[0] == b"r0"
        time.sleep(0.8)
        assert len(list(scan)) == 4


# -- transports, connections


@pytest.fixture(scope="module", params=SERVERS)
def framed_server(request) -> Iterator[EmulatorServer | RealHBase]:
    """Framed transport and compact protocol: the emulator, or the real ``framed`` gateway."""
    s = _server(request, request.param, "framed", transport="framed", protocol="compact")
    yield s
    if isinstance(s, EmulatorServer):
        s.stop()


def test_framed_compact(framed_server):
    name = unique()
    c = connect(framed_server)
    c.create_table(name, {"cf": {"max_versions": 2}})
    try:
        t = c.table(name)
        t.put(b"r", {b"cf:a": b"\x00\xff binary"}, timestamp=5)
        assert t.row(b"r", include_timestamp=True) == {b"cf:a": (b"\x00\xff binary", 5)}
        assert t.counter_inc(b"r", b"cf:n", 3) == 3
        assert list(t.scan(filter=b"ColumnPrefixFilter('n')", sorted_columns=True)) == [
            (b"r", OrderedDict([(b"cf:n", struct.pack(">q", 3))]))
        ]
        with raises(IOError_, "NoSuchColumnFamilyException"):
            t.put(b"r", {b"x:a": b"1"})
        assert t.families()[b"cf"]["max_versions"] == 2
        # frames are limited to 2 MB: the server drops the connection (while the client
        # still writes, or before it reads: a broken pipe or "TSocket read 0 bytes")
        t.put(b"big", {b"cf:a": b"x" * 1_500_000})
        with pytest.raises((TTransportException, ConnectionError)):
            t.put(b"big", {b"cf:a": b"x" * 3_000_000})
        c.close()
        c = connect(framed_server)
        assert len(c.table(name).row(b"big")[b"cf:a"]) == 1_500_000
    finally:
        c.close()
        drop(framed_server, [name])
    # a client with the default transport and protocol sees the server close the connection
    for kwargs in ({}, {"transport": "framed"}, {"protocol": "compact"}):
        wrong = happybase.Connection(*framed_server.address, timeout=5000, **kwargs)
        with closing(wrong), raises(TTransportException, "TSocket read 0 bytes"):
            wrong.tables()


def test_framed_client_on_a_buffered_server_hangs(server):
    # the frame size reads as the length of a method name: the server waits for the rest
    wrong = happybase.Connection(
        *server.address, transport="framed", protocol="compact", timeout=1000
    )
    with closing(wrong), pytest.raises(TimeoutError):
        wrong.tables()
    wrong = happybase.Connection(*server.address, protocol="compact", timeout=5000)
    with closing(wrong), raises(TTransportException, "TSocket read 0 bytes"):
        wrong.tables()


@pytest.mark.parametrize(("transport", "protocol"), [("framed", "binary"), ("buffered", "compact")])
def test_emulator_other_transports_and_protocols(transport, protocol):
    with (
        EmulatorServer(transport=transport, protocol=protocol) as s,
        closing(connect(s)) as c,
    ):
        c.create_table("t", {"cf": {"max_versions": 2}})
        t = c.table("t")
        t.put(b"r", {b"cf:a": b"\x00\xff binary"}, timestamp=5)
        assert t.row(b"r", include_timestamp=True) == {b"cf:a": (b"\x00\xff binary", 5)}
        assert t.counter_inc(b"r", b"cf:n", 3) == 3
        with raises(IOError_, "NoSuchColumnFamilyException"):
            t.put(b"r", {b"x:a": b"1"})
        # a client with the default transport and protocol sees the server close the connection
        wrong = happybase.Connection(*s.address, timeout=5000)
        with closing(wrong), raises(TTransportException, "TSocket read 0 bytes"):
            wrong.tables()


def test_emulator_framed_max_frame_size():
    with EmulatorServer(transport="framed", max_frame_size=64 * 1024) as s:
        c = connect(s)
        c.create_table("t", {"cf": {}})
        with pytest.raises((TTransportException, ConnectionError)):
            c.table("t").put(b"r", {b"cf:a": b"x" * 100_000})
        c.close()
        with closing(connect(s)) as c2:
            c2.table("t").put(b"r", {b"cf:a": b"small"})
            assert c2.table("t").row(b"r") == {b"cf:a": b"small"}


@pytest.fixture(params=SERVERS)
def idle_server(request) -> Iterator[tuple[EmulatorServer | RealHBase, float]]:
    """A server that closes connections idle for a second, and that second."""
    if request.param == "emulator":
        with EmulatorServer(idle_timeout=1.0) as s:
            yield s, 1.0
    else:
        gateway = request.getfixturevalue("hbase").gateway("idle", read_timeout=1.0)
        assert gateway.read_timeout is not None
        yield RealHBase(gateway), gateway.read_timeout


def test_idle_connections_are_closed(idle_server):
    s, idle = idle_server
    c = connect(s)
    assert isinstance(c.tables(), list)
    time.sleep(idle / 2)
    assert isinstance(c.tables(), list)  # not idle long enough
    time.sleep(idle * 2)
    with pytest.raises(TTransportException) as e:
        c.tables()
    assert e.value.message == "TSocket read 0 bytes"
    with pytest.raises((OSError, TTransportException)):
        c.tables()  # the socket is closed: BrokenPipeError
    c.close()
    with closing(connect(s)) as fresh:
        assert isinstance(fresh.tables(), list)
    # the pool replaces the broken connection, but re-raises: the next call works
    pool = happybase.ConnectionPool(size=1, **s.connection_kwargs(), timeout=5000)
    with pool.connection() as pc:
        broken = pc.transport  # the pool replaces it without closing it
    time.sleep(idle * 2)
    with pytest.raises(TTransportException), pool.connection() as pc:
        pc.tables()
    broken.close()
    with pool.connection() as pc:
        assert isinstance(pc.tables(), list)
    for pc in list(pool._queue.queue):
        pc.close()


# -- what only the emulator does: faults, restarts, the subprocess


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer() as s:
        yield s


def test_emulator_injected_faults(emulator):
    emulator.clear_faults()
    conn = connect(emulator)
    name = unique()
    conn.create_table(name, {"cf": {}})
    table = conn.table(name)
    emulator.inject_errors("mutateRows", 2)
    for _ in range(2):
        with raises(IOError_, "injected by hbase_emulator"):
            table.put(b"r", {b"cf:a": b"1"})
    assert table.row(b"r") == {}
    table.put(b"r", {b"cf:a": b"1"})
    assert table.row(b"r") == {b"cf:a": b"1"}

    emulator.inject_errors(count=1, message="disk full")  # any mutating call
    assert table.row(b"r") == {b"cf:a": b"1"}  # reads are not affected
    with raises(IOError_, "disk full"):
        table.counter_inc(b"r", b"cf:n")

    emulator.inject_errors("atomicIncrement", apply=True)  # the write happens, the reply fails
    with pytest.raises(IOError_):
        table.counter_inc(b"r", b"cf:n")
    assert table.counter_get(b"r", b"cf:n") == 1

    emulator.inject_errors("*", kind="internal")
    with raises(TApplicationException, app_error("getTableNames")):
        conn.tables()

    emulator.inject_errors(["getRowWithColumns"], kind="disconnect")
    with raises(TTransportException, "TSocket read 0 bytes"):
        table.row(b"r")
    conn.close()
    with closing(connect(emulator)) as c2:
        assert c2.table(table.name).row(b"r", columns=[b"cf:a"]) == {b"cf:a": b"1"}
    with pytest.raises(ValueError, match="unknown Hbase calls"):
        emulator.inject_errors("mutateRowz")
    emulator.clear_faults()


def test_emulator_unimplemented_calls(emulator):
    with closing(connect(emulator)) as conn:
        with raises(TApplicationException, "does not implement getRowOrBefore"):
            conn.client.getRowOrBefore(b"t", b"r", b"cf")
        name = unique()
        conn.create_table(name, {"cf": {}})
        with raises(TApplicationException, "does not implement the HBase filter"):
            list(conn.table(name).scan(filter=b"ColumnCountGetFilter(1)"))


def test_emulator_restart_in_thread_keeps_data(tmp_path):
    # in memory
    with EmulatorServer() as s:
        with closing(connect(s)) as c:
            c.create_table("t", {"cf": {"max_versions": 1}})
            c.table("t").put(b"r", {b"cf:a": b"0"}, timestamp=1)
            c.table("t").put(b"r", {b"cf:a": b"1"}, timestamp=2)
            assert c.table("t").row(b"r", timestamp=2) == {b"cf:a": b"0"}  # not flushed yet
            assert c.client.scannerOpenWithScan(b"t", TScan(startRow=b""), {}) == 0
        port = s.port
        s.restart()
        assert s.port == port
        with closing(connect(s)) as c:
            assert c.table("t").row(b"r") == {b"cf:a": b"1"}
            assert c.table("t").row(b"r", timestamp=2) == {}  # a clean stop flushes
            assert c.client.scannerOpenWithScan(b"t", TScan(startRow=b""), {}) == 0
    # on disk: snapshot + log, reloaded by a new server
    data = tmp_path / "hbase.pickle"
    with EmulatorServer(data=data) as s, closing(connect(s)) as c:
        c.create_table("t", {"cf": {"max_versions": 1}})
        t = c.table("t")
        t.put(b"r", {b"cf:a": b"1"})
        t.delete(b"r", columns=[b"cf:b"], timestamp=50)
        t.counter_inc(b"r", b"cf:n", 7)
        c.create_table("gone", {"cf": {}})
        c.delete_table("gone", disable=True)
        s.restart()
    with EmulatorServer(data=data) as s, closing(connect(s)) as c:
        t = c.table("t")
        assert c.tables() == [b"t"]
        assert t.row(b"r") == {b"cf:a": b"1", b"cf:n": struct.pack(">q", 7)}
        assert t.families()[b"cf"]["max_versions"] == 1
        t.put(b"r", {b"cf:b": b"masked"}, timestamp=40)  # the delete marker survived
        assert t.row(b"r", columns=[b"cf:b"]) == {}


def test_emulator_subprocess_restart_and_control(tmp_path):
    data = tmp_path / "hb.pickle"
    extra = ["--fail", "createTable:1"]
    with hbase_emulator(transport="framed", protocol="compact", data=data, extra_args=extra) as emu:
        host, port = emu
        assert host == "127.0.0.1" and port > 0 and emu.control_port > 0
        c = happybase.Connection(**emu.connection_kwargs(), timeout=10_000)
        with raises(IOError_, "injected"):
            c.create_table("t", {"cf": {}})
        c.create_table("t", {"cf": {}})
        t = c.table("t")
        t.put(b"r1", {b"cf:a": b"1"})
        emu.inject_errors("mutateRows", 1)
        with raises(IOError_, "injected"):
            t.put(b"r2", {b"cf:a": b"2"})
        assert emu.call_counts()["mutateRows"] == 2
        t.put(b"r2", {b"cf:a": b"2"})
        c.close()

        emu.restart()  # SIGKILL, then the same port and data file
        assert tuple(emu) == (host, port)
        with closing(happybase.Connection(**emu.connection_kwargs(), timeout=10_000)) as c:
            assert c.tables() == [b"t"]
            assert list(c.table("t").scan()) == [(b"r1", {b"cf:a": b"1"}), (b"r2", {b"cf:a": b"2"})]
    assert data.exists()
