"""The SQLite webtable through the store interface (the HBase issue adds a contract suite)."""

import multiprocessing

import pytest

from webcrawl.store import StoreError, open_store
from webcrawl.store.sqlite import SQLiteStore
from webcrawl.urlkey import url_to_key


def row(url, **fields):
    return {"key": url_to_key(url), "url": url, "status": 200, "fetched_at": 1.0, **fields}


def test_put_get_replace_scan_count(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/w.db") as store:
        store.put_pages([row("http://b.example/"), row("http://a.example/x", title="é")])
        assert store.count_pages() == 2
        assert store.get_page(url_to_key("http://a.example/x"))["title"] == "é"
        store.put_pages([row("http://a.example/x", title="new", status=404)])
        assert store.count_pages() == 2
        got = store.get_page("example.a:http/x")
        assert (got["title"], got["status"]) == ("new", 404)
        assert store.get_page("example.zzz:http/") is None
        store.put_pages([row("http://www.a.example/"), row("http://a.example/y")])
        assert [r["url"] for r in store.scan_pages("example.a:")] == [
            "http://a.example/x", "http://a.example/y",
        ]  # fmt: skip
        assert len(list(store.scan_pages(limit=2))) == 2


def test_get_pages_reads_many_keys_at_once(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/w.db") as store:
        urls = [f"http://a.example/{i}" for i in range(1200)]  # over one statement's keys
        store.put_pages([row(u, title=u) for u in urls[::2]])
        keys = [url_to_key(u) for u in urls] + [url_to_key(urls[0])]  # a repeat
        got = store.get_pages(keys)
        assert sorted(got) == sorted(url_to_key(u) for u in urls[::2])
        assert all(got[url_to_key(u)]["title"] == u for u in urls[::2])
        assert store.get_pages([]) == {}


def test_rows_survive_reopen(tmp_path):
    url = f"sqlite:///{tmp_path}/w.db"
    with open_store(url) as store:
        store.put_pages([row("http://a.example/", text="x" * 1_000_000)])
    with open_store(url) as store:
        assert len(store.get_page("example.a:http/")["text"]) == 1_000_000


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


def test_bad_urls(tmp_path):
    with pytest.raises(ValueError, match="WEBCRAWL_STORE_URL: unsupported store"):
        open_store("mysql://x/")
    with pytest.raises(ValueError, match="expected sqlite:///PATH"):
        open_store("sqlite://")


def test_write_error_is_a_store_error(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/w.db") as store, pytest.raises(StoreError):
        store.put_pages([{"key": "k", "url": None}])  # url NOT NULL


def test_failpaths_rows_add_and_delete(tmp_path):
    with SQLiteStore(tmp_path / "s.db") as store:
        assert store.failpath_row("com.a:http") == {}
        assert store.failpath_add("com.a:http", "/x/", 1) == 1
        assert store.failpath_add("com.a:http", "/x/", 1) == 2
        assert store.failpath_add("com.a:http", "/x/", -3) == -1
        store.failpath_add("com.a:http", "*", 5)
        store.failpath_add("com.b:http", "/", 1)
        store.failpath_add("org.c:https", "/", 1)
        assert store.failpath_row("com.a:http") == {"/x/": -1, "*": 5}
        assert [s for s, _ in store.failpath_rows()] == ["com.a:http", "com.b:http", "org.c:https"]
        assert dict(store.failpath_rows("com.")) == {"com.a:http": {"*": 5, "/x/": -1},
                                                     "com.b:http": {"/": 1}}  # fmt: skip
        store.failpath_delete("com.a:http", ["/x/", "/nothing/"])
        assert store.failpath_row("com.a:http") == {"*": 5}
        store.failpath_delete("com.b:http")
        assert dict(store.failpath_rows()) == {"com.a:http": {"*": 5}, "org.c:https": {"/": 1}}


def _add_many(path, n):
    with SQLiteStore(path) as store:
        return [store.failpath_add("com.a:http", "/x/", 1) for _ in range(n)]


def test_failpath_counts_are_atomic_across_threads_and_processes(tmp_path):
    """Every increment counts and every returned value is unique (so exactly one worker
    sees a count reach the threshold)."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "s.db"
    SQLiteStore(path).failpath_row("warm-up")  # create the file first
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        procs = pool.starmap_async(_add_many, [(path, 100)] * 3)
        with ThreadPoolExecutor(4) as threads:
            local = [v for vs in threads.map(lambda _: _add_many(path, 100), range(4)) for v in vs]
        values = local + [v for vs in procs.get(120) for v in vs]
    assert sorted(values) == list(range(1, 701))
