"""The HBase store's own behaviour: its cells, and what it does when the server misbehaves.

Against the Thrift1 emulator through the real happybase client (the contract
every backend meets is in test_store_contract.py).
"""

from __future__ import annotations

import base64
import logging
import struct
import time

import happybase
import pytest
from support.hbase_emulator import EmulatorServer

from webcrawl.store import StoreError, open_store
from webcrawl.store.hbase import decode_row, encode_row
from webcrawl.urls.urlkey import url_to_key

URL = "http://www.example.com/about/"


@pytest.fixture
def server(tmp_path):
    with EmulatorServer(idle_timeout=None, data=tmp_path / "hbase.data") as s:
        yield s


def store_url(server, **extra) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"table_prefix": "crawl", **extra}.items())
    return f"hbase://{server.host}:{server.port}?{query}"


def page(url=URL, **fields):
    return {"key": url_to_key(url), "url": url, "status": 200, "fetched_at": 1763877600.125,
            **fields}  # fmt: skip


def test_cells_are_nutch_style_big_endian_under_the_reversed_url(server):
    with open_store(store_url(server)) as store:
        store.put_pages([page(title="About", simhash="00000000000000ff", content_length=123,
                              outlinks=["http://x/"], changed=False)])  # fmt: skip
        store.failpath_add("com.example.www:http", "/bbb/", 2)
    conn = happybase.Connection(*server.address, table_prefix="crawl")
    try:
        assert sorted(conn.tables()) == [b"failpaths", b"webpage"]
        assert {f: d["max_versions"] for f, d in conn.table("webpage").families().items()} == {
            b"f": 1, b"p": 1, b"h": 1}  # fmt: skip
        cells = conn.table("webpage").row(b"com.example.www:http/about/")
        assert cells[b"f:st"] == struct.pack(">i", 200)
        assert cells[b"f:ts"] == struct.pack(">d", 1763877600.125)
        assert cells[b"p:t"] == b"About"
        assert cells[b"p:sig"] == bytes(7) + b"\xff"
        assert cells[b"h:Content-Length"] == struct.pack(">q", 123)
        assert cells[b"p:chg"] == b"\x00"
        assert cells[b"f:x"] == b'{"outlinks":["http://x/"]}'
        counter = conn.table("failpaths").row(b"com.example.www:http")
        assert counter == {b"c:/bbb/": struct.pack(">q", 2)}
    finally:
        conn.close()


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
    row = page(status="200", simhash="not hex at all!!", distance=2**40, depth=True,
               previous_simhash="00000000000000FF", text="lone \ud800 surrogate")  # fmt: skip
    cells = encode_row(row)
    assert b"f:st" not in cells and b"p:psig" not in cells
    assert decode_row(row["key"].encode(), cells) == row


def test_rewrites_and_resets_within_one_millisecond_lose_nothing(tmp_path):
    """A delete marker takes the server's time and hides any put of the same
    millisecond (HBASE-2256): the store must not rely on deletes."""
    clock = lambda: 1_763_877_600_000  # noqa: E731
    with (
        EmulatorServer(idle_timeout=None, clock=clock) as server,
        open_store(store_url(server)) as store,
    ):
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
        # a level cleared and counted again at once
        store.failpath_add("com.a:http", "/a/", 3)
        store.failpath_delete("com.a:http", ["/a/"])
        assert store.failpath_row("com.a:http") == {}
        assert store.failpath_add("com.a:http", "/a/", 1) == 1
        assert store.failpath_row("com.a:http") == {"/a/": 1}


def test_idle_disconnect_is_retried_on_a_fresh_connection(tmp_path, caplog):
    with EmulatorServer(idle_timeout=0.3) as server, open_store(store_url(server)) as store:
        store.put_pages([page()])
        time.sleep(0.6)  # the server closes the idle socket: next call reads 0 bytes
        with caplog.at_level(logging.WARNING):
            assert store.get_page(url_to_key(URL))["status"] == 200
        assert "retry 1/4" in caplog.text


def test_a_counter_after_an_idle_disconnect_is_sent_once(tmp_path):
    with EmulatorServer(idle_timeout=0.3) as server:
        with open_store(store_url(server, pool_size=1)) as store:
            assert store.failpath_add("com.a:http", "/a/", 1) == 1
            time.sleep(0.6)  # the server closed the socket: noticed before sending
            assert store.failpath_add("com.a:http", "/a/", 1) == 2
        assert server.call_counts()["atomicIncrement"] == 2


def test_errors_that_would_repeat_are_not_retried(server, caplog):
    with open_store(store_url(server)) as store:
        store.failpath_row("warm-up")
        server.inject_errors("getRowWithColumns", count=1, kind="internal")
        with caplog.at_level(logging.WARNING), pytest.raises(StoreError, match="reading"):
            store.get_page("k")
        assert "retry" not in caplog.text
    with pytest.raises(StoreError, match="closed"):
        store.get_page("k")


def test_a_restarted_server_costs_no_write(server):
    with open_store(store_url(server)) as store:
        store.put_pages([page()])
        server.restart()
        store.put_pages([page("http://www.example.com/after")])
        assert store.count_pages() == 2


def test_injected_io_errors_are_retried_then_reported(server, caplog):
    with open_store(store_url(server)) as store:
        store.failpath_row("warm-up")
        server.inject_errors("mutateRows", count=2)
        with caplog.at_level(logging.WARNING):
            store.put_pages([page()])
        assert "IOError" in caplog.text and "retry 2/4" in caplog.text
        assert store.get_page(url_to_key(URL)) is not None
    with open_store(store_url(server, retries=1)) as store:
        server.inject_errors("mutateRows", count=2)
        with pytest.raises(StoreError, match="writing 1 rows failed"):
            store.put_pages([page()])


def test_counters_are_never_retried_blindly(server):
    with open_store(store_url(server)) as store:
        store.failpath_row("warm-up")
        # the increment is done, but its reply is lost
        server.inject_errors("atomicIncrement", count=1, kind="disconnect", apply=True)
        with pytest.raises(StoreError, match="counting a failure"):
            store.failpath_add("com.a:http", "/x/", 1)
        assert store.failpath_row("com.a:http") == {"/x/": 1}  # counted once, not twice
        assert store.failpath_add("com.a:http", "/x/", 1) == 2


def test_a_server_that_stays_down_is_a_store_error(tmp_path):
    server = EmulatorServer(idle_timeout=None).start()
    url = store_url(server, retries=2, timeout=1)
    server.stop()
    with open_store(url) as store, pytest.raises(StoreError, match="reading"):
        store.get_page("k")


def test_writes_are_split_under_the_framed_transports_frame_limit(tmp_path):
    with EmulatorServer(transport="framed", protocol="compact", idle_timeout=None) as server:
        url = store_url(server, transport="framed", protocol="compact", retries=0)
        with open_store(url) as store:
            # 3 MB of rows: one mutateRows call would exceed HBase's 2 MB frames
            store.put_pages([page(f"http://h/{i}", text="x" * 1_000_000) for i in range(3)])
            assert store.count_pages() == 3
            with pytest.raises(StoreError, match="writing 1 rows failed"):  # one 3 MB row
                store.put_pages([page(text="x" * 3_000_000)])
        with open_store(url + "&batch_bytes=100000000") as store, pytest.raises(StoreError):
            store.put_pages([page(f"http://h/{i}", text="x" * 1_000_000) for i in range(3)])


def test_a_counter_put_to_zero_counts_from_zero(server):
    """As on HBase: after a Put of an 8-byte 0 (happybase's counter_set) an increment
    returns 1; a count the store took below 0 and reset reads and counts the same way."""
    with open_store(store_url(server)) as store:
        store.failpath_row("warm-up")
        table = happybase.Connection(*server.address, table_prefix="crawl").table("failpaths")
        table.counter_set(b"com.a:http", b"c:/x/", 0)
        table.counter_set(b"com.a:http", b"c:/z/", 0)
        assert store.failpath_row("com.a:http") == {}  # a zero counter reads as absent
        assert table.counter_inc(b"com.a:http", b"c:/x/", 1) == 1
        assert store.failpath_row("com.a:http") == {"/x/": 1}
        assert store.failpath_add("com.a:http", "/y/", -3) == 0  # a success on no record
        assert table.row(b"com.a:http")[b"c:/y/"] == struct.pack(">q", 0)  # put back to 0
        assert store.failpath_add("com.a:http", "/y/", 1) == 1
        table.connection.close()


def test_check_writable_needs_a_server_and_enabled_tables(server):
    with open_store(store_url(server, retries=0, timeout=2)) as store:
        store.check_writable()
        conn = happybase.Connection(*server.address, table_prefix="crawl")
        conn.disable_table("failpaths")
        with pytest.raises(StoreError, match="failpaths"):
            store.check_writable()
        conn.enable_table("failpaths")
        store.check_writable()
        conn.close()
        server.stop()
        with pytest.raises(StoreError):
            store.check_writable()
