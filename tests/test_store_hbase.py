"""The HBase store's own behaviour: its cells, its page count, how it reaches the
server, and what it does when the server misbehaves.

On the real thing wherever it can show it: the session's standalone HBase 2.6
(conftest's ``hbase``), through its shared gateways and through gateways of this
file's own (``idle``: closes client sockets idle over 1 s; ``own``: stopped,
killed and started again here, never the shared ones), each test in tables of a
fresh prefix, dropped after.  Faults the real server cannot be made to produce on
demand go through a proxy in front of it (``support.thrift_proxy``): a connection
reset, a stalled call, a reply lost after the server applied the call, an IOError
or internal-error reply, every write within one millisecond.  The contract every
backend meets is in test_store_contract.py.
"""

from __future__ import annotations

import base64
import gc
import logging
import socketserver
import struct
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress

import happybase
import pytest
from support.thrift_proxy import ThriftProxy

from webcrawl.frontier.cold import clear_cold
from webcrawl.localhbase.launcher import free_port
from webcrawl.store import StoreError, open_store
from webcrawl.store.hbase import decode_row, encode_row, parse_hbase_url
from webcrawl.urls.urlkey import url_to_key

pytestmark = pytest.mark.e2e  # the session's real HBase (a few tests need no server)

URL = "http://www.example.com/about/"
IDLE = "idle"  # a gateway whose server closes client sockets idle over 1 s
OWN = "own"  # a gateway of this file's own, to stop and kill
OPTIONS = {IDLE: {"read_timeout": 1.0}}  # how each gateway of this file's own starts
LONG = struct.Struct(">q")


def page(url=URL, **fields):
    return {
        "key": url_to_key(url),
        "url": url,
        "status": 200,
        "fetched_at": 1763877600.125,
        **fields,
    }


def with_options(url: str, **extra: object) -> str:
    query = "&".join(f"{k}={v}" for k, v in extra.items())
    return url + ("&" if "?" in url else "?") + query if query else url


@contextmanager
def happybase_connection(url: str) -> Iterator[happybase.Connection]:
    """Plain happybase on the tables of ``url`` (bypassing the store)."""
    o = parse_hbase_url(url)
    conn = happybase.Connection(
        o["host"],
        o["port"],
        table_prefix=o["table_prefix"],
        transport=o["transport"],
        protocol=o["protocol"],
    )
    try:
        yield conn
    finally:
        conn.close()


def counted(conn: happybase.Connection) -> int:
    """The page count as kept in HBase: the 8-byte counts in row ``webpage`` of
    table ``counters``, columns ``c:rows...``."""
    cells = conn.table("counters").row(b"webpage")
    assert cells and all(c.startswith(b"c:rows") and len(v) == 8 for c, v in cells.items())
    return sum(LONG.unpack(v)[0] for v in cells.values())


# -- the real HBase ---------------------------------------------------------------------


class Real:
    """Store URLs on the session's HBase, each in tables of a fresh prefix."""

    def __init__(self, hbase) -> None:
        self.hbase = hbase
        self.prefixes: list[str] = []

    def url(self, gateway: str = "thrift", **extra: object) -> str:
        prefix = f"t{uuid.uuid4().hex[:10]}"
        self.prefixes.append(prefix)
        return with_options(gateway_of(self.hbase, gateway).store_url(prefix), **extra)

    def drop(self) -> None:
        """Drop every table made here, through the shared gateway (a test's own may
        be down)."""
        port = self.hbase.gateway("thrift").port
        for prefix in self.prefixes:
            conn = happybase.Connection("127.0.0.1", port, table_prefix=prefix)
            try:
                for name in conn.tables():
                    conn.delete_table(name, disable=True)
            finally:
                conn.close()


@pytest.fixture
def real(hbase) -> Iterator[Real]:
    r = Real(hbase)
    yield r
    r.drop()


def gateway_of(hbase, name: str):
    """The gateway ``name``, started on first use (a gateway of this file's own with
    its options)."""
    return hbase.gateway(name, **OPTIONS.get(name, {}))


def own_port_down(hbase) -> int:
    """A port where nothing answers: the gateway ``own``'s, stopped (or, if it was
    never started, a free port, where it will start when first needed)."""
    known = hbase.local.state().gateways.get(OWN)
    if known is None:
        return free_port()
    hbase.local.stop_gateway(OWN)
    return known.port


def test_cells_are_nutch_style_big_endian_under_the_reversed_url(real):
    url = real.url()
    body = bytes(range(256)) * 4
    with open_store(url) as store:
        store.put_pages(
            [
                page(
                    title="About",
                    simhash="00000000000000ff",
                    content_length=123,
                    outlinks=["http://x/"],
                    changed=False,
                    content=base64.b64encode(body).decode("ascii"),
                )
            ]
        )
        store.failpath_add("com.example.www:http", "/bbb/", 2)
    with happybase_connection(url) as conn:
        assert sorted(conn.tables()) == [b"counters", b"failpaths", b"frontier", b"webpage"]
        assert {f: d["max_versions"] for f, d in conn.table("frontier").families().items()} == {
            b"e": 1
        }
        assert {f: d["max_versions"] for f, d in conn.table("webpage").families().items()} == {
            b"f": 1,
            b"p": 1,
            b"h": 1,
        }
        assert [key for key, _ in conn.table("webpage").scan()] == [b"com.example.www:http/about/"]
        cells = conn.table("webpage").row(b"com.example.www:http/about/")
        assert cells[b"f:url"] == URL.encode()
        assert cells[b"f:st"] == struct.pack(">i", 200)
        assert cells[b"f:ts"] == struct.pack(">d", 1763877600.125)
        assert cells[b"p:t"] == b"About"
        assert cells[b"p:sig"] == bytes(7) + b"\xff"
        assert cells[b"h:Content-Length"] == LONG.pack(123)
        assert cells[b"p:chg"] == b"\x00"
        assert cells[b"f:cnt"] == body  # the raw body, as Nutch stores it
        assert cells[b"f:x"] == b'{"outlinks":["http://x/"]}'
        assert cells[b"f:xf"] == b'["outlinks"]'  # (what get_fields reads f:x for)
        assert cells[b"f:n"] == LONG.pack(1)  # the row is counted
        assert conn.table("failpaths").row(b"com.example.www:http") == {b"c:/bbb/": LONG.pack(2)}
        assert counted(conn) == 1


# -- reaching the server: connect() ----------------------------------------------------


def mismatched(gateway, transport: str, protocol: str) -> str:
    return (
        f"hbase://127.0.0.1:{gateway.port}?table_prefix=t{uuid.uuid4().hex[:10]}"
        f"&transport={transport}&protocol={protocol}"
    )


@pytest.mark.parametrize(
    ("gateway", "client", "spoken"),
    [
        ("framed", "buffered+binary", "framed+compact"),
        ("thrift", "framed+compact", "buffered+binary"),
    ],
)
def test_connect_names_the_transport_the_server_speaks(hbase, gateway, client, spoken):
    url = mismatched(hbase.gateway(gateway), *client.split("+"))
    began = time.monotonic()
    with open_store(url) as store, pytest.raises(StoreError) as failed:
        store.connect(wait=60)  # a mismatch is not waited for
    assert time.monotonic() - began < 15  # the probes time out in 5 s (the default: 30)
    message = str(failed.value)
    assert message.startswith(f"STORE_URL={url}: ")
    assert f"speaks {spoken}, not {client}" in message
    transport, protocol = spoken.split("+")
    assert f"add transport={transport}&protocol={protocol} to the URL" in message


def test_connect_reports_a_namespace_hbase_does_not_have(hbase):
    url = hbase.gateway("thrift").store_url("nosuchns:crawl")
    began = time.monotonic()
    with open_store(url) as store, pytest.raises(StoreError) as failed:
        store.connect(wait=60)
    assert time.monotonic() - began < 15
    message = str(failed.value)
    assert message.startswith("STORE_URL=") and "refused" in message
    assert "NamespaceNotFoundException" in message and "nosuchns" in message
    assert unclosed_sockets() == []  # the connection that tried to make the tables


def unclosed_sockets() -> list[str]:
    """The sockets left to the garbage collector to close."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


class _HTTPGarbage(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(2)
        with suppress(OSError):  # read the request, if any
            self.request.recv(4096)
        self.request.sendall(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n"
            b"Connection: close\r\n\r\nBad Request"
        )


def test_connect_tells_a_listener_that_is_not_thrift():
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _HTTPGarbage) as http:
        http.daemon_threads = True
        thread = threading.Thread(target=http.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"hbase://127.0.0.1:{http.server_address[1]}?table_prefix=crawl"
            began = time.monotonic()
            with open_store(url) as store, pytest.raises(StoreError) as failed:
                store.connect(wait=60)
            assert time.monotonic() - began < 15
        finally:
            http.shutdown()
            thread.join()
    message = str(failed.value)
    assert message.startswith(f"STORE_URL={url}: ")
    assert "does not answer as a Thrift1 server" in message


def test_connect_waits_for_a_gateway_that_comes_up(hbase, real, caplog):
    port = own_port_down(hbase)
    prefix = f"t{uuid.uuid4().hex[:10]}"
    real.prefixes.append(prefix)
    url = f"hbase://127.0.0.1:{port}?table_prefix={prefix}"

    def start_later():
        time.sleep(2)
        return hbase.gateway(OWN, port=port)

    with ThreadPoolExecutor(1) as pool, open_store(url) as store:
        started = pool.submit(start_later)
        began = time.monotonic()
        with caplog.at_level(logging.INFO, logger="webcrawl.store.hbase"):
            store.connect(wait=120)
        waited = time.monotonic() - began
        assert started.result().port == port
        store.put_pages([page()])
        assert store.count_pages() == 1
    assert 2 <= waited < 120
    waiting = [r for r in caplog.records if "waiting for it" in r.getMessage()]
    assert len(waiting) == 1, caplog.text
    assert f"127.0.0.1:{port} does not answer" in waiting[0].getMessage()
    assert "answers, after" in caplog.text


def test_connect_gives_up_after_the_wait():
    url = f"hbase://127.0.0.1:{free_port()}?table_prefix=crawl"  # nothing listens
    began = time.monotonic()
    with open_store(url) as store, pytest.raises(StoreError) as failed:
        store.connect(wait=3)
    assert 3 <= time.monotonic() - began < 15
    message = str(failed.value)
    assert message.startswith(f"STORE_URL={url}: ")
    assert "did not answer within 3 s (STORE_CONNECT_WAIT)" in message


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("hbase://127.0.0.1:99999?table_prefix=crawl", "not a port number"),
        ("hbase://127.0.0.1:9090?table_prefix=my%20crawl", "table_prefix 'my crawl'"),
        ("hbase://127.0.0.1:9090?table_prefix=my crawl", "table_prefix 'my crawl'"),
        ("hbase://127.0.0.1:9090?table_prefix=-crawl", "table_prefix '-crawl'"),
        ("hbase://127.0.0.1:9090?table_prefix=.crawl", "table_prefix '.crawl'"),
    ],
)
def test_bad_urls_are_refused_before_any_connection(url, complaint):
    for parse in (parse_hbase_url, open_store):
        with pytest.raises(ValueError, match="STORE_URL") as failed:
            parse(url)
        assert complaint in str(failed.value)


# -- the page count ---------------------------------------------------------------------


def test_the_page_count_is_the_number_of_distinct_rows(real):
    url = real.url()
    with open_store(url) as store:
        assert store.count_pages() == 0
        store.put_pages([page(f"http://h/{i}") for i in range(5)])
        assert store.count_pages() == 5
        store.put_pages([page(f"http://h/{i}", title="again") for i in range(3, 8)])
        assert store.count_pages() == 8
        store.put_pages([page("http://h/1"), page("http://h/9"), page("http://h/9", status=404)])
        store.put_pages([page(f"http://h/{i}", title="thrice") for i in range(10)])
        assert store.count_pages() == 10
    with open_store(url) as store:  # another writer: the same rows are not new to it
        store.put_pages([page(f"http://h/{i}") for i in range(10)])
        assert store.count_pages() == 10
    with happybase_connection(url) as conn:
        assert counted(conn) == 10


def test_concurrent_writers_of_the_same_new_rows_count_each_once(real):
    url = real.url()

    def batches(writer):  # 5 rows both write, at the same time, and 5 of its own
        return [
            [page(f"http://both/{j:03}", title=writer) for j in range(i, i + 5)]
            + [page(f"http://{writer}/{j:03}") for j in range(i, i + 5)]
            for i in range(0, 120, 5)
        ]

    with open_store(url) as a, open_store(url) as b:
        a.connect(), b.connect()
        barrier = threading.Barrier(2)

        def write(store, writer):
            barrier.wait()
            for batch in batches(writer):
                store.put_pages(batch)

        with ThreadPoolExecutor(2) as pool:
            for done in [pool.submit(write, a, "a"), pool.submit(write, b, "b")]:
                done.result()
        assert a.count_pages() == b.count_pages() == 360
    with happybase_connection(url) as conn:
        assert counted(conn) == 360
        markers = {
            key: LONG.unpack(cells[b"f:n"])[0]
            for key, cells in conn.table("webpage").scan(columns=[b"f:n"])
        }
    assert len(markers) == 360 and set(markers.values()) <= {1, 2}
    # both marked these rows (both saw them unmarked), and counted them once
    raced = {key for key, n in markers.items() if n == 2}
    assert raced and all(key.startswith(b"both:http") for key in raced)


def test_the_page_count_is_read_not_scanned(real):
    url = real.url()
    with open_store(url) as store:
        store.put_pages([page()])
        with happybase_connection(url) as conn:  # a row the store did not write
            conn.table("webpage").put(url_to_key("http://h/direct").encode(), {b"f:st": b"x"})
            assert len(list(conn.table("webpage").scan())) == 2
        assert store.count_pages() == 1  # the counter cell, not the rows
        store.put_pages([page("http://h/direct")])  # its first write by a store: counted
        assert store.count_pages() == 2


# -- faults the real server produces ----------------------------------------------------


def test_idle_disconnect_is_retried_on_a_fresh_connection(real, caplog):
    with open_store(real.url(IDLE)) as store:
        store.put_pages([page()])
        time.sleep(2)  # the gateway closes the idle socket: the next call reads 0 bytes
        with caplog.at_level(logging.WARNING):
            assert store.get_page(url_to_key(URL))["status"] == 200
        assert "retry 1/4" in caplog.text


def test_a_counter_after_an_idle_disconnect_is_sent_once(real, caplog):
    with open_store(real.url(IDLE, pool_size=1)) as store:
        assert store.failpath_add("com.a:http", "/a/", 1) == 1
        time.sleep(2)  # the gateway closed the socket: noticed before sending
        with caplog.at_level(logging.WARNING):
            assert store.failpath_add("com.a:http", "/a/", 1) == 2
        assert store.failpath_row("com.a:http") == {"/a/": 2}  # not 3: sent once
        assert "retry" not in caplog.text  # not even a first try lost


def test_a_killed_and_restarted_gateway_costs_no_write(hbase, real):
    with open_store(real.url(OWN)) as store:
        store.put_pages([page()])
        hbase.local.stop_gateway(OWN, kill=True)  # SIGKILL: the pooled sockets die with it
        hbase.gateway(OWN)
        store.put_pages([page("http://www.example.com/after")])
        assert store.count_pages() == 2
        assert store.get_page(url_to_key(URL)) == page()
        assert store.get_page(url_to_key("http://www.example.com/after")) is not None


def test_writes_are_split_under_the_framed_transports_frame_limit(real):
    url = real.url("framed", retries=0)
    assert "transport=framed&protocol=compact" in url
    with open_store(url) as store:
        # 3 MB of rows: one mutateRows call would exceed HBase's 2 MB frames
        store.put_pages([page(f"http://h/{i}", text="x" * 1_000_000) for i in range(3)])
        assert store.count_pages() == 3
        with pytest.raises(StoreError, match="writing 1 rows failed"):  # one 3 MB row
            store.put_pages([page(text="x" * 3_000_000)])
        assert store.get_page(url_to_key(URL)) is None
    with open_store(url + "&batch_bytes=100000000") as store, pytest.raises(StoreError):
        store.put_pages([page(f"http://h/{i}", text="x" * 1_000_000) for i in range(3, 6)])
    with open_store(url) as store:
        assert store.count_pages() == 3
        assert store.get_pages([url_to_key(f"http://h/{i}") for i in range(6)]).keys() == {
            url_to_key(f"http://h/{i}") for i in range(3)
        }


def test_a_counter_put_to_zero_counts_from_zero(real):
    """On HBase, after a Put of an 8-byte 0 (happybase's counter_set) an increment
    returns 1; a count the store took below 0 and reset reads and counts the same way."""
    url = real.url()
    with open_store(url) as store, happybase_connection(url) as conn:
        store.connect()
        table = conn.table("failpaths")
        table.counter_set(b"com.a:http", b"c:/x/", 0)
        table.counter_set(b"com.a:http", b"c:/z/", 0)
        assert store.failpath_row("com.a:http") == {}  # a zero counter reads as absent
        assert table.counter_inc(b"com.a:http", b"c:/x/", 1) == 1
        assert store.failpath_row("com.a:http") == {"/x/": 1}
        assert store.failpath_add("com.a:http", "/y/", -3) == 0  # a success on no record
        assert table.row(b"com.a:http")[b"c:/y/"] == LONG.pack(0)  # put back to 0
        assert store.failpath_add("com.a:http", "/y/", 1) == 1
        assert store.failpath_add("com.a:http", "/z/", 2) == 2


def test_the_store_id_is_a_frontier_row_no_scan_or_reset_sees(real):
    """Row ``/store-id`` of the frontier table: no cold key starts with ``/``, and no
    frontier scan reads column ``e:id``; a crawl's reset leaves it."""
    url = real.url()
    with open_store(url) as store:
        ident = store.identity()
        store.frontier_put([("web/0000/a.example/1", b"entry")])
        assert store.frontier_scan("", 10) == [("web/0000/a.example/1", b"entry")]
        assert clear_cold(store, "web") == 1
    with happybase_connection(url) as conn:
        assert conn.table("frontier").row(b"/store-id") == {b"e:id": ident.encode()}
    with open_store(url) as store:
        assert store.identity() == ident
    with open_store(real.url()) as other:  # tables of another prefix: another store
        assert other.identity() != ident


def test_check_writable_needs_a_server_and_enabled_tables(hbase, real):
    url = real.url(OWN, retries=0, timeout=2)
    with open_store(url) as store:
        store.check_writable()
        shared = hbase.gateway("thrift").store_url(parse_hbase_url(url)["table_prefix"])
        with happybase_connection(shared) as conn:
            conn.disable_table("failpaths")
            with pytest.raises(StoreError, match="failpaths"):
                store.check_writable()
            conn.enable_table("failpaths")
        store.check_writable()
        hbase.local.stop_gateway(OWN)
        with pytest.raises(StoreError, match="checking the tables"):
            store.check_writable()


def test_a_server_that_stays_down_is_a_store_error(hbase):
    url = f"hbase://127.0.0.1:{own_port_down(hbase)}?table_prefix=crawl&retries=2&timeout=1"
    with open_store(url) as store:
        with pytest.raises(StoreError, match="reading"):
            store.get_page("k")
        with pytest.raises(StoreError, match="writing 1 rows failed"):
            store.put_pages([page()])


def test_a_frontier_row_written_again_after_its_delete_stays_deleted(real):
    """Found by a review: a put retried on a fresh connection whose first attempt the
    gateway applies late, after the row was moved up and deleted, brought the row back
    (at the server's time, newer than the delete marker) and it was queued twice.
    Frontier rows are written at a fixed old time: the marker hides the late copy."""
    with open_store(real.url()) as store:
        store.frontier_put([("web/0000/a.example/1", b"one"), ("web/0000/a.example/2", b"two")])
        store.frontier_put([("web/0000/a.example/1", b"one")])  # a retry: harmless
        assert len(store.frontier_scan("web/", 10)) == 2
        store.frontier_delete(["web/0000/a.example/1"])
        store.frontier_put([("web/0000/a.example/1", b"one")])  # the late first attempt
        assert store.frontier_scan("web/", 10) == [("web/0000/a.example/2", b"two")]


@pytest.mark.parametrize("clock", ["real", "frozen"])
def test_rewrites_and_resets_within_one_millisecond_lose_nothing(clock, real, proxy):
    """A delete marker takes the server's time and hides any put of the same
    millisecond (HBASE-2256): the store must not rely on deletes.  The real server
    cannot be made to write twice in one millisecond; through the proxy, every write
    happens in one."""
    if clock == "real":
        url = real.url()
    else:
        proxy.freeze_clock(int(time.time() * 1000))
        url = proxied(real, proxy)
    with open_store(url) as store:
        _rewrite_and_reset(store)


def _rewrite_and_reset(store) -> None:
    store.put_pages([page()])
    store.put_pages([page(title="Hello", etag='"1"')])
    assert store.get_page(url_to_key(URL)) == page(title="Hello", etag='"1"')
    store.put_pages([page(status=404)])  # title and etag gone from this version
    assert store.get_page(url_to_key(URL)) == page(status=404)
    store.put_pages([page(title="Back")])
    assert store.get_page(url_to_key(URL)) == page(title="Back")
    # a key twice in one batch: the last version, whole
    store.put_pages([page(etag='"e"'), page(title="T2")])
    assert store.get_page(url_to_key(URL)) == page(title="T2")
    assert store.count_pages() == 1
    # a level cleared and counted again at once
    store.failpath_add("com.a:http", "/a/", 3)
    store.failpath_delete("com.a:http", ["/a/"])
    assert store.failpath_row("com.a:http") == {}
    assert store.failpath_add("com.a:http", "/a/", 1) == 1
    assert store.failpath_row("com.a:http") == {"/a/": 1}


# -- faults through a proxy in front of the real server ----------------------------------


@pytest.fixture
def proxy(hbase) -> Iterator[ThriftProxy]:
    """A fault-injecting proxy in front of the session's buffered+binary gateway."""
    with ThriftProxy(("127.0.0.1", hbase.gateway("thrift").port)) as p:
        yield p


def proxied(real: Real, proxy: ThriftProxy, **extra: object) -> str:
    """A store URL through the proxy, in tables of a fresh prefix (dropped after)."""
    prefix = f"t{uuid.uuid4().hex[:10]}"
    real.prefixes.append(prefix)
    return proxy.url(prefix, **extra)


def test_the_proxy_passes_calls_through_unchanged(real, proxy):
    with open_store(proxied(real, proxy)) as store:
        store.put_pages([page()])
        assert store.get_page(url_to_key(URL)) == page()
        assert store.failpath_add("com.a:http", "/x/", 2) == 2
        assert store.count_pages() == 1
    assert {"mutateRows", "getRowWithColumns", "atomicIncrement"} <= set(proxy.calls)


def test_the_frozen_clock_makes_a_delete_hide_a_later_put(real, proxy):
    """The fault is real: through the frozen proxy, HBase itself hides a put behind a
    delete of the same millisecond (what the store must not rely on deletes for)."""
    proxy.freeze_clock(int(time.time() * 1000))
    url = proxied(real, proxy)
    with open_store(url) as store:
        store.connect()  # the tables
    with happybase_connection(url) as conn:
        table = conn.table("failpaths")
        table.put(b"r", {b"c:a": b"1"})
        table.delete(b"r")
        table.put(b"r", {b"c:a": b"2"})
        assert table.row(b"r") == {}  # hidden by the marker of its own millisecond
    proxy.freeze_clock(None)
    with happybase_connection(url) as conn:
        conn.table("failpaths").put(b"r", {b"c:a": b"3"})
        assert conn.table("failpaths").row(b"r") == {b"c:a": b"3"}


def test_errors_that_would_repeat_are_not_retried(real, proxy, caplog):
    with open_store(proxied(real, proxy)) as store:
        store.failpath_row("warm-up")
        proxy.fail("getRowWithColumns", "internal")
        with caplog.at_level(logging.WARNING), pytest.raises(StoreError, match="reading"):
            store.get_page("k")
        assert "retry" not in caplog.text
    with pytest.raises(StoreError, match="closed"):
        store.get_page("k")


def test_io_error_replies_are_retried_then_reported(real, proxy, caplog):
    with open_store(proxied(real, proxy)) as store:
        store.failpath_row("warm-up")
        proxy.fail("mutateRows", "ioerror", count=2)
        with caplog.at_level(logging.WARNING):
            store.put_pages([page()])
        assert "IOError" in caplog.text and "retry 2/4" in caplog.text
        assert store.get_page(url_to_key(URL)) is not None
    with open_store(proxied(real, proxy, retries=1)) as store:
        proxy.fail("mutateRows", "ioerror", count=2)
        with pytest.raises(StoreError, match="writing 1 rows failed"):
            store.put_pages([page()])


def test_a_reset_connection_is_retried_on_a_fresh_one(real, proxy, caplog):
    with open_store(proxied(real, proxy)) as store:
        store.failpath_row("warm-up")
        proxy.fail("mutateRows", "reset")
        with caplog.at_level(logging.WARNING):
            store.put_pages([page()])
        assert "retry 1/4" in caplog.text and proxy.pending() == 0
        assert store.get_page(url_to_key(URL)) == page()
        assert store.count_pages() == 1


def test_a_stalled_call_times_out_and_is_retried(real, proxy, caplog):
    with open_store(proxied(real, proxy, timeout=1)) as store:
        store.put_pages([page()])
        proxy.fail("getRowWithColumns", "stall", seconds=3)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING):
            assert store.get_page(url_to_key(URL)) == page()
        assert "retry 1/4" in caplog.text
        assert time.monotonic() - started < 3  # the stalled call was not waited for


def test_counters_are_never_retried_blindly(real, proxy):
    with open_store(proxied(real, proxy)) as store:
        store.failpath_row("warm-up")
        # the increment is done, but its reply is lost
        proxy.fail("atomicIncrement", "lose_reply")
        with pytest.raises(StoreError, match="counting a failure"):
            store.failpath_add("com.a:http", "/x/", 1)
        assert store.failpath_row("com.a:http") == {"/x/": 1}  # counted once, not twice
        assert store.failpath_add("com.a:http", "/x/", 1) == 2


def test_a_store_id_whose_reply_was_lost_is_read_back_not_made_twice(real, proxy):
    url = proxied(real, proxy)
    with open_store(url) as store:
        store.failpath_row("warm-up")
        # the id is put, but the reply is lost: the retry finds one there and puts nothing
        proxy.fail("checkAndPut", "lose_reply")
        ident = store.identity()
    with open_store(url) as store:
        assert store.identity() == ident


# -- the cells, without a server ---------------------------------------------------------


def test_content_is_stored_raw_in_nutchs_column():
    body = bytes(range(256)) * 4
    row = page(content=base64.b64encode(body).decode("ascii"))
    cells = encode_row(row)
    assert cells[b"f:cnt"] == body
    assert decode_row(row["key"].encode(), cells) == row
    odd = page(content="not base64!")  # not what the spider writes: kept as it is
    cells = encode_row(odd)
    assert b"f:cnt" not in cells and decode_row(odd["key"].encode(), cells) == odd


def test_fields_of_unexpected_types_keep_their_values():
    row = page(
        status="200",
        simhash="not hex at all!!",
        distance=2**40,
        depth=True,
        previous_simhash="00000000000000FF",
        text="lone \ud800 surrogate",
    )
    cells = encode_row(row)
    assert b"f:st" not in cells and b"p:psig" not in cells
    assert decode_row(row["key"].encode(), cells) == row
