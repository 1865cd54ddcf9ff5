"""One contract for every store backend: SQLite, and HBase over the wire.

HBase is the real thing: the session's standalone HBase 2.6 (conftest's ``hbase``),
through its buffered+binary and its framed+compact Thrift1 gateways, each test in
tables of its own (a fresh ``table_prefix``), dropped after.
"""

from __future__ import annotations

import multiprocessing
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from webcrawl.failpath import SITE, FailPathParams, FailPathPolicy
from webcrawl.frontier.cold import cold_key, host_prefix, parse_cold_key
from webcrawl.store import StoreError, open_store
from webcrawl.urls.urlkey import url_to_key


@dataclass
class Backend:
    """A store URL, and how to restart the server behind it (None: reopen suffices)."""

    url: str
    restart_server: Any = None

    def open(self):
        return open_store(self.url)

    def restart(self) -> None:
        if self.restart_server is not None:
            self.restart_server()


def drop_tables(url: str) -> None:
    """Drop the tables of ``url``'s prefix (a test's own) from the real HBase."""
    from test_store_hbase import happybase_connection

    with happybase_connection(url) as conn:
        for name in conn.tables():
            conn.delete_table(name, disable=True)


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("hbase", marks=pytest.mark.e2e),  # the session's real HBase
        pytest.param("hbase-framed-compact", marks=pytest.mark.e2e),
    ]
)
def backend(request, tmp_path):
    kind = request.param
    if kind == "sqlite":
        yield Backend(f"sqlite:///{tmp_path}/w.db")
    else:
        hbase = request.getfixturevalue("hbase")
        name = "framed" if "framed" in kind else "thrift"
        url = hbase.url(name)

        def restart() -> None:  # the Thrift gateway, a JVM of its own, stops and starts
            hbase.local.stop_gateway(name)
            hbase.gateway(name)

        yield Backend(url, restart)
        drop_tables(url)


def row(url: str, **fields: Any) -> dict[str, Any]:
    return {"key": url_to_key(url), "url": url, "status": 200, "fetched_at": 1.5, **fields}


def full_row(url: str) -> dict[str, Any]:
    """A row with every field a Page has, of every type, plus one no backend knows."""
    return row(
        url,
        final_url=url + "?r",
        depth=3,
        kind="html",
        content_type="text/html",
        title="Tête",
        text="visible text " * 10,
        outlinks=[url + "a", url + "b"],
        etag='"v1"',
        last_modified="Mon, 23 Nov 2026 06:00:00 GMT",
        content_length=5_000_000_000,
        redirects=[url + "old"],
        error="",
        simhash="ffee00112233abcd",
        previous_simhash="0000000000000001",
        distance=7,
        changed=True,
        visits=[[1.5, 1, None], [2.25, 0, 1763877600.0]],
        revisit_interval=3600.5,
        next_visit=1763881200.25,
        revisit_method="poisson",
        custom={"nested": [1, "two"]},
    )


def without_none(r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if v is not None}


def test_rows_round_trip_with_every_field_and_type(backend):
    with backend.open() as store:
        rows = [full_row("http://a.example/x"), row("http://a.example/", title=None, etag=None)]
        store.put_pages(rows)
        for r in rows:
            assert without_none(store.get_page(r["key"])) == without_none(r)


def test_replace_drops_fields_the_new_version_has_not(backend):
    with backend.open() as store:
        url = "http://a.example/p"
        store.put_pages([full_row(url)])
        store.put_pages([row(url, status=404, title="gone")])
        assert store.get_page(url_to_key(url)) == row(url, status=404, title="gone")
        assert store.count_pages() == 1


def test_missing_rows(backend):
    with backend.open() as store:
        assert store.get_page("example.nowhere:http/") is None
        assert store.get_pages(["example.nowhere:http/"]) == {}
        assert store.get_pages([]) == {}
        assert list(store.scan_pages("example.nowhere:")) == []
        assert store.count_pages() == 0
        assert store.failpath_row("example.nowhere:http") == {}


def test_get_pages_reads_many_at_once(backend):
    with backend.open() as store:
        urls = [f"http://b.example/{i}" for i in range(600)]
        store.put_pages([row(u, title=u) for u in urls[::2]])
        got = store.get_pages([url_to_key(u) for u in urls] + [url_to_key(urls[0])])
        assert sorted(got) == sorted(url_to_key(u) for u in urls[::2])
        assert all(got[url_to_key(u)]["title"] == u for u in urls[::2])


def test_get_fields_reads_only_the_fields_asked(backend):
    with backend.open() as store:
        full = full_row("http://f.example/")
        odd = row("http://f.example/odd", depth="three", etag=None, changed=False)
        store.put_pages([full, odd, *(row(f"http://f.example/{i}") for i in range(600))])
        fields = ["final_url", "depth", "etag", "content_length", "changed", "custom", "nope"]
        keys = [full["key"], odd["key"], url_to_key("http://f.example/missing")]
        keys += [url_to_key(f"http://f.example/{i}") for i in range(600)]
        got = store.get_fields(keys, fields)
        assert len(got) == 602
        assert got[full["key"]] == {f: full[f] for f in fields if f in full}
        # a field of another type than its column's, a false and a None one, as written
        assert got[odd["key"]] == {"depth": "three", "changed": False}
        assert got[url_to_key("http://f.example/7")] == {}
        assert store.get_fields([], fields) == {}
        assert store.get_fields(keys[:1], []) == {full["key"]: {}}


def test_scans_by_site_prefix_in_key_order_with_limit(backend):
    with backend.open() as store:
        urls = [
            "http://a.example/x",
            "http://a.example/y",
            "http://www.a.example/",
            "https://a.example/z",
            "http://b.example/",
            "http://a.example:8080/",
        ]
        urls += [f"http://c.example/{i:04d}" for i in range(2500)]  # over one scan page
        store.put_pages([row(u) for u in urls])
        assert [r["url"] for r in store.scan_pages("example.a:http/")] == [
            "http://a.example/x",
            "http://a.example/y",
        ]
        assert [r["url"] for r in store.scan_pages("example.a:")] == [
            "http://a.example/x",
            "http://a.example/y",
            "http://a.example:8080/",
            "https://a.example/z",
        ]
        site_c = [r["url"] for r in store.scan_pages("example.c:")]
        assert site_c == [f"http://c.example/{i:04d}" for i in range(2500)]
        assert len(list(store.scan_pages(limit=1001))) == 1001
        assert len(list(store.scan_pages())) == len(urls) == store.count_pages()


def test_large_rows(backend):
    with backend.open() as store:
        big = row("http://a.example/big", text="é" * 600_000, outlinks=["http://x/"] * 5000)
        store.put_pages([big])
        assert store.get_page(big["key"]) == big


def test_rows_and_counts_survive_a_restart(backend):
    with backend.open() as store:
        store.put_pages([full_row("http://a.example/kept")])
        store.failpath_add("com.a:http", "/x/", 3)
    backend.restart()
    with backend.open() as store:
        assert without_none(store.get_page(url_to_key("http://a.example/kept"))) == without_none(
            full_row("http://a.example/kept")
        )
        assert store.failpath_row("com.a:http") == {"/x/": 3}


def test_failpaths_rows_add_and_delete(backend):
    with backend.open() as store:
        assert store.failpath_add("com.a:http", "/x/", 1) == 1
        assert store.failpath_add("com.a:http", "/x/", 1) == 2
        assert store.failpath_add("com.a:http", "/x/", 2) == 4
        store.failpath_add("com.a:http", "*", 5)
        store.failpath_add("com.b:http", "/", 1)
        store.failpath_add("org.c:https", "/", 1)
        assert store.failpath_row("com.a:http") == {"/x/": 4, "*": 5}
        assert [s for s, _ in store.failpath_rows()] == ["com.a:http", "com.b:http", "org.c:https"]
        assert dict(store.failpath_rows("com.")) == {
            "com.a:http": {"*": 5, "/x/": 4},
            "com.b:http": {"/": 1},
        }
        store.failpath_delete("com.a:http", ["/x/", "/nothing/"])
        assert store.failpath_row("com.a:http") == {"*": 5}
        store.failpath_delete("com.b:http")
        assert dict(store.failpath_rows()) == {"com.a:http": {"*": 5}, "org.c:https": {"/": 1}}
        assert store.failpath_add("com.a:http", "/x/", 1) == 1  # counted afresh


def test_a_count_falling_to_zero_or_below_is_removed_at_once(backend):
    """A success subtracts and removes in one atomic step (seed 000: "at or below 0,
    delete the column"); a later failure counts from 0 again."""
    with backend.open() as store:
        store.failpath_add("com.a:http", "/x/", 3)
        assert store.failpath_add("com.a:http", "/x/", -3) == 0  # exactly 0
        assert store.failpath_row("com.a:http") == {}
        store.failpath_add("com.a:http", "/x/", 2)
        assert store.failpath_add("com.a:http", "/x/", -3) == 0  # below 0
        assert store.failpath_add("com.a:http", "/y/", -3) == 0  # never counted
        assert store.failpath_row("com.a:http") == {}
        assert list(store.failpath_rows()) == []
        assert store.failpath_add("com.a:http", "/x/", 1) == 1
        assert store.failpath_add("com.a:http", "/y/", 1) == 1
        assert store.failpath_add("com.a:http", "/x/", -1) == 0
        assert store.failpath_row("com.a:http") == {"/y/": 1}


SCALE = 3  # FAILPATH_SUCCESS_SCALE


def _race(url: str, role: str, rounds: int, barrier: Any) -> None:
    """One side of each round on the round's column: a success recorded as the failed-path
    middleware records it, or two failures."""
    policy = FailPathPolicy(FailPathParams(success_scale=SCALE))
    with open_store(url) as store:

        def add(column: str, delta: int) -> int:
            return store.failpath_add("com.race:http", column, delta)

        for i in range(rounds):
            column = f"/r{i}/"
            barrier.wait(60)
            if role == "success":
                policy.record_success([SITE, column], {column: SCALE}, add)
            else:
                add(column, 1)
                add(column, 1)


def together(target, args_list):
    """Run ``target(*args, barrier)`` in one process per args, started at one moment."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(args_list))
    procs = [ctx.Process(target=target, args=(*args, barrier)) for args in args_list]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0


def test_successes_and_failures_racing_lose_no_failure(backend):
    """Each round a column counts SCALE; one worker records a success while two others
    record two failures each.  In any order the success never takes the count below 0,
    so exactly the 4 failures must remain; a failure landing between the subtraction
    and a separate delete (the old success) was lost."""
    rounds = 300
    with backend.open() as store:
        for i in range(rounds):
            store.failpath_add("com.race:http", f"/r{i}/", SCALE)
    together(_race, [(backend.url, role, rounds) for role in ("success", "failures", "failures")])
    with backend.open() as store:
        counts = store.failpath_row("com.race:http")
    lost = {
        f"/r{i}/": counts.get(f"/r{i}/", 0) for i in range(rounds) if counts.get(f"/r{i}/", 0) != 4
    }
    assert not lost and len(counts) == rounds, lost


def test_concurrent_successes_on_a_low_count_leave_nothing_behind(backend):
    """Successes together on a count of 1 (HBase: counters that go below 0 and are put
    back by their own writers) end at no record, and the next failure counts 1."""
    with backend.open() as store:
        for i in range(20):
            store.failpath_add("com.race:http", f"/s{i}/", 1)
    together(_successes_all, [(backend.url, 20)] * 3)
    with backend.open() as store:
        assert store.failpath_row("com.race:http") == {}
        assert [store.failpath_add("com.race:http", f"/s{i}/", 1) for i in range(20)] == [1] * 20


def _successes_all(url: str, columns: int, barrier: Any) -> None:
    with open_store(url) as store:
        for i in range(columns):
            barrier.wait(60)
            store.failpath_add("com.race:http", f"/s{i}/", -SCALE)


def test_the_cold_frontier_scans_a_host_in_queue_order_and_deletes(backend):
    """Entries under a host's prefix come back as its queue would pop them (priority,
    then arrival), never another host's; a rewrite replaces; deletes are idempotent."""
    entries = [
        (cold_key("c", 3, host, prio, seq, claim="1"), b'%d|{"url":"x"}\xff' % seq)
        for seq, (host, prio) in enumerate(
            [
                ("a.example", 0),
                ("a.example", 5),
                ("ab.example", 9),
                ("a.example", -2),
                ("a.example", 5),
                ("a.example:8080", 1),
                ("a.example", 0),
            ]
        )
    ]
    with backend.open() as store:
        store.frontier_put(entries)
        host = [(k, e) for k, e in entries if k.startswith(host_prefix("c", 3, "a.example"))]
        order = sorted(host, key=lambda ke: (-parse_cold_key(ke[0])[3], parse_cold_key(ke[0])[4]))
        assert store.frontier_scan(host_prefix("c", 3, "a.example"), 100) == order
        assert store.frontier_scan(host_prefix("c", 3, "a.example"), 2) == order[:2]
        assert store.frontier_scan(host_prefix("c", 4, "a.example"), 100) == []
        assert store.frontier_scan(host_prefix("c", 3, "a.example"), 0) == []
        store.frontier_put([(order[0][0], b"again")])  # a retried write: replaced
        assert store.frontier_scan(host_prefix("c", 3, "a.example"), 1) == [(order[0][0], b"again")]
        gone = cold_key("c", 3, "gone.example", 0, 1, claim="1")
        store.frontier_delete([k for k, _ in order[:3]] + [gone])
        store.frontier_delete([order[0][0]])  # again: nothing happens
        assert store.frontier_scan(host_prefix("c", 3, "a.example"), 100) == order[3:]
        many = [(cold_key("c", 0, "big.example", 0, i, claim="1"), b"e%d" % i) for i in range(1500)]
        store.frontier_put(many)
        assert store.frontier_scan(host_prefix("c", 0, "big.example"), 2000) == many
    with backend.open() as store:  # stored, not held by the client
        assert len(store.frontier_scan(host_prefix("c", 0, "big.example"), 2000)) == 1500


def test_check_writable_on_a_healthy_store(backend):
    with backend.open() as store:
        store.check_writable()
        store.put_pages([row("http://a.example/")])
        store.check_writable()


def _add_many(url: str, n: int) -> list[int]:
    with open_store(url) as store:
        return [store.failpath_add("com.a:http", "/x/", 1) for _ in range(n)]


def test_failure_counts_are_atomic_across_threads_and_processes(backend):
    """Every increment counts and every returned value is unique (so exactly one worker
    sees a count reach the threshold)."""
    with backend.open() as store:
        store.failpath_row("warm-up")  # create the file or the tables first
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        procs = pool.starmap_async(_add_many, [(backend.url, 60)] * 3)
        with ThreadPoolExecutor(4) as threads:
            local = [
                v for vs in threads.map(lambda _: _add_many(backend.url, 60), range(4)) for v in vs
            ]
        values = local + [v for vs in procs.get(120) for v in vs]
    assert sorted(values) == list(range(1, 421))


def another_store(url: str) -> str:
    """A store of the same backend beside ``url``'s: another file, or another table prefix."""
    if url.startswith("sqlite:"):
        return url.replace("/w.db", "/other.db")
    return re.sub(r"table_prefix=\w+", f"table_prefix=t{uuid.uuid4().hex[:8]}", url)


def _identity(url: str, barrier: Any) -> str:
    with open_store(url) as store:
        barrier.wait(60)
        return store.identity()


def test_a_store_keeps_its_id_and_another_store_has_another(backend):
    """A crawl knows its store by this id: made on the first call, the same for every
    client of the store and after a restart, never another store's."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(3) as pool:
        barrier = manager.Barrier(3)  # three clients of a new store, at one moment
        ids = pool.starmap(_identity, [(backend.url, barrier)] * 3)
    assert len(set(ids)) == 1 and len(ids[0]) >= 16, ids
    with backend.open() as store:
        assert store.identity() == store.identity() == ids[0]
        store.frontier_put([("c/0000/a.example/1", b"e")])  # (no scan sees the id)
        assert store.frontier_scan("", 10) == [("c/0000/a.example/1", b"e")]
        store.frontier_delete(["c/0000/a.example/1"])
    backend.restart()
    with backend.open() as store:
        assert store.identity() == ids[0]
    other = another_store(backend.url)
    try:
        with open_store(other) as store:
            assert store.identity() != ids[0]
    finally:
        if other.startswith("hbase:"):
            drop_tables(other)


def test_bad_urls():
    with pytest.raises(ValueError, match="STORE_URL: unsupported store"):
        open_store("mysql://x/")
    with pytest.raises(ValueError, match="expected sqlite:///PATH"):
        open_store("sqlite://")
    with pytest.raises(ValueError, match="transport must be buffered or framed"):
        open_store("hbase://h:9090?transport=http")
    with pytest.raises(ValueError, match="unknown hbase option"):
        open_store("hbase://h:9090?tableprefix=x")
    with pytest.raises(ValueError, match="pool_size must be a number"):
        open_store("hbase://h?pool_size=many")
    assert open_store("hbase://h").options["port"] == 9090  # no I/O until first use


def test_store_errors_name_the_store(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/w.db") as store, pytest.raises(StoreError):
        store.put_pages([{"key": "k", "url": None}])  # url NOT NULL
    nothing_listens = "hbase://127.0.0.1:9?timeout=1&retries=0"
    with open_store(nothing_listens) as store, pytest.raises(StoreError, match=r"127\.0\.0\.1:9"):
        store.get_page("k")
