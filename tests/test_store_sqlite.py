"""What is SQLite's own: processes creating one file together, its errors (the
contract every backend meets is in test_store_contract.py)."""

import multiprocessing
import sqlite3

import pytest

from webcrawl.store import StoreError, open_store
from webcrawl.store.sqlite import SQLiteStore
from webcrawl.urls.urlkey import url_to_key


def row(url, **fields):
    return {"key": url_to_key(url), "url": url, "status": 200, "fetched_at": 1.0, **fields}


def _writer(path, start):
    with open_store(f"sqlite:///{path}") as store:
        for i in range(start, start + 500, 50):
            store.put_pages([row(f"http://h.example/{j}") for j in range(i, i + 50)])


def test_processes_write_one_new_file_together(tmp_path):
    """Several processes create and write one new file at once (workers starting together)."""
    path = tmp_path / "w.db"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, n * 500)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with open_store(f"sqlite:///{path}") as store:
        assert store.count_pages() == 2000


def test_write_error_is_a_store_error(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/w.db") as store, pytest.raises(StoreError):
        store.put_pages([{"key": "k", "url": None}])  # url NOT NULL


def _hold_exclusive(path, locked, release):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    locked.set()
    release.wait(60)
    conn.execute("ROLLBACK")
    conn.close()


def test_check_writable_fails_while_another_process_holds_the_write_lock(tmp_path):
    path = tmp_path / "w.db"
    with SQLiteStore.from_url(f"sqlite:///{path}?timeout=0.3") as store:
        store.check_writable()  # creates the file
        ctx = multiprocessing.get_context("spawn")
        locked, release = ctx.Event(), ctx.Event()
        holder = ctx.Process(target=_hold_exclusive, args=(str(path), locked, release))
        holder.start()
        try:
            assert locked.wait(30)
            with pytest.raises(StoreError, match="locked"):
                store.check_writable()
            assert store.failpath_row("com.a:http") == {}  # reads go on (WAL)
        finally:
            release.set()
            holder.join(30)
        store.check_writable()  # free again


def test_store_url_takes_a_busy_timeout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    relative = SQLiteStore.from_url("sqlite:///data/w.db")  # in the current directory
    assert (relative.path, relative.busy_timeout) == (tmp_path / "data/w.db", 60.0)
    assert relative.url == f"sqlite:///{tmp_path}/data/w.db"  # names the file wherever read
    absolute = SQLiteStore.from_url(f"sqlite:///{tmp_path}/w.db?timeout=0.5")
    assert (absolute.path, absolute.busy_timeout) == (tmp_path / "w.db", 0.5)
    assert str(absolute.path).startswith("/")  # sqlite:////abs: an absolute path
    assert SQLiteStore.from_url(absolute.url).busy_timeout == 0.5  # its URL reopens it
    assert SQLiteStore(tmp_path / "x.db", busy_timeout=2).busy_timeout == 2
    for bad in (
        "sqlite:///w.db?timeout=soon",
        "sqlite:///w.db?timeout=-1",
        "sqlite:///w.db?timeout=nan",
        "sqlite:///w.db?busy=1",
        "sqlite:///?timeout=1",
        "sqlite://w.db",
    ):
        with pytest.raises(ValueError, match="STORE_URL"):
            SQLiteStore.from_url(bad)


CALLS = {
    "put_pages": lambda store: store.put_pages([row("http://h.example/")]),
    "get_page": lambda store: store.get_page("k"),
    "get_pages": lambda store: store.get_pages(["k"]),
    "scan_pages": lambda store: list(store.scan_pages()),
    "count_pages": lambda store: store.count_pages(),
    "failpath_row": lambda store: store.failpath_row("com.a:http"),
    "failpath_rows": lambda store: list(store.failpath_rows()),
    "failpath_add": lambda store: store.failpath_add("com.a:http", "/", 1),
    "failpath_delete": lambda store: store.failpath_delete("com.a:http", ["/"]),
    "check_writable": lambda store: store.check_writable(),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path, call):
    path = tmp_path / "w.db"
    path.write_bytes(b"not a database, " * 1000)
    with open_store(f"sqlite:///{path}") as store, pytest.raises(StoreError, match=r"w\.db"):
        CALLS[call](store)


def test_a_broken_failpaths_table_is_a_store_error(tmp_path):
    path = tmp_path / "w.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE failpaths (x)")  # not ours: every failpaths query fails
    with open_store(f"sqlite:///{path}") as store:
        store.put_pages([row("http://h.example/")])  # the webtable works
        assert store.count_pages() == 1
        for call in (
            lambda: store.failpath_row("com.a:http"),
            lambda: list(store.failpath_rows()),
            lambda: store.failpath_add("com.a:http", "/", 1),
        ):
            with pytest.raises(StoreError, match="failpath"):
                call()


def test_get_fields_reads_a_row_holding_nan_as_get_pages_does(tmp_path):
    """Python's json writes NaN and Infinity, SQLite's JSON refuses them: a batch with such
    a row is read in Python, not failed (a sitemap would take its known pages as new)."""
    import math

    with open_store(f"sqlite:///{tmp_path}/w.db") as store:
        odd = row("http://h.example/odd", interval=float("nan"), score=float("inf"), etag="x")
        plain = row("http://h.example/plain", interval=5.0)
        store.put_pages([odd, plain])
        got = store.get_fields([odd["key"], plain["key"], "absent"], ["interval", "etag"])
    assert set(got) == {odd["key"], plain["key"]}
    assert math.isnan(got[odd["key"]]["interval"]) and got[odd["key"]]["etag"] == "x"
    assert got[plain["key"]] == {"interval": 5.0}
