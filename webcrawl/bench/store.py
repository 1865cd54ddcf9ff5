"""``webcrawl bench store``: rows/s written and read by each store backend.

SQLite (a file in a temporary directory) and a real HBase 2.6 through happybase:
the standalone HBase of ``webcrawl hbase`` (master in local mode, Thrift1
gateways buffered+binary and framed+compact), started in a temporary directory
for the run, or the Thrift server given with ``--hbase URL``.  Rows are
page-like (``--row-bytes`` of text, title, outlinks, change fields); writes go in
batches of ``--batch`` rows as the store pipeline sends them, first as new rows
(each counted once, see :mod:`webcrawl.store.hbase`), then again as rewrites;
reads are batched ``get_pages`` of 64 keys (the change pipeline's), single
``get_page`` calls, and a full scan.  One machine's HBase measures the client
and one RegionServer, not a cluster.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from webcrawl.store import open_store
from webcrawl.urls.urlkey import url_to_key


def rows(n: int, size: int) -> list[dict[str, Any]]:
    rng = random.Random(1)
    words = "crawl page store row hbase thrift batch site link change visit text".split()
    out = []
    for i in range(n):
        url = f"http://site{i % 50}.example/section-{i % 97}/page-{i}.html"
        text = " ".join(rng.choice(words) for _ in range(size // 6))[:size]
        out.append(
            {
                "key": url_to_key(url),
                "url": url,
                "final_url": url,
                "status": 200,
                "fetched_at": 1763877600.0 + i,
                "depth": 2,
                "kind": "html",
                "content_type": "text/html",
                "title": f"Page {i}",
                "text": text,
                "outlinks": [f"{url}?l={j}" for j in range(16)],
                "etag": f'"{i}"',
                "content_length": size,
                "simhash": f"{rng.getrandbits(64):016x}",
                "changed": None,
                "visits": [[1763877600.0 + i, None, None]],
                "revisit_interval": 86400.0,
                "next_visit": 1763964000.0 + i,
                "revisit_method": "prior",
            }
        )
    return out


@contextmanager
def local_hbase(workdir: Path) -> Iterator[dict[str, str]]:
    """A standalone HBase for the run: kind -> store URL (empty when it cannot start)."""
    from webcrawl.localhbase import LocalHBase, LocalHBaseError

    hbase = LocalHBase(workdir / "hbase")
    try:
        began = time.monotonic()
        hbase.start_master()
        hbase.start_gateway("thrift")
        hbase.start_gateway("framed", transport="framed", protocol="compact")
        hbase.wait_ready("thrift")
        hbase.wait_ready("framed")
        memory = hbase.memory()
        print(
            f"  HBase 2.6 up in {time.monotonic() - began:.1f} s; resident memory: "
            + ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in memory.items()),
            flush=True,
        )
        yield {
            kind: hbase.gateway(name).store_url(f"bench_{name}")  # tables of its own each
            for kind, name in (("buffered+binary", "thrift"), ("framed+compact", "framed"))
        }
        sizes = hbase.memory().items()
        print(
            "  HBase resident memory after the runs: "
            + ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in sizes),
            flush=True,
        )
    except LocalHBaseError as exc:
        print(f"  HBase could not start ({exc}): measuring SQLite only", flush=True)
        yield {}
    finally:
        hbase.stop()


def timed(func: Callable[[], Any]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def run(args: argparse.Namespace) -> int:
    n, batch = args.rows, args.batch
    data = rows(n, args.row_bytes)
    keys = [r["key"] for r in data]
    random.Random(2).shuffle(keys)
    single = keys[: min(n, 2000)]
    table = []
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-store-"))
    try:
        with _servers(args, workdir) as urls:
            for kind, url in urls.items():
                with open_store(url) as store:
                    table.append((kind, _measure(store, data, keys, single, batch)))
                print(f"  done: {kind}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{n} rows of ~{args.row_bytes} bytes of text; writes in batches of {batch} rows\n")
    heads = ("write rows/s", "rewrite rows/s", "read rows/s", "get rows/s", "scan rows/s")
    subs = ("(new rows)", "(same keys)", "(64 a call)", "(1 a call)", "")
    widths = [max(len(h), 12) for h in heads]
    print(f"{'store':<22} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True)))
    print(f"{'':<22} " + " ".join(f"{h:>{w}}" for h, w in zip(subs, widths, strict=True)))
    for kind, rates in table:
        name = "sqlite" if kind == "sqlite" else f"hbase {kind}"
        print(f"{name:<22} " + " ".join(f"{r:>{w}.0f}" for r, w in zip(rates, widths, strict=True)))
    return 0


@contextmanager
def _servers(args: argparse.Namespace, workdir: Path) -> Iterator[dict[str, str]]:
    urls = {"sqlite": f"sqlite:///{workdir / 'bench.sqlite3'}"}
    if args.hbase:
        urls[args.hbase.split("://", 1)[1].split("?")[0]] = args.hbase
        yield urls
        return
    with local_hbase(workdir) as hbase_urls:
        yield urls | hbase_urls


def _measure(
    store: Any, data: list[dict[str, Any]], keys: list[str], single: list[str], batch: int
) -> list[float]:
    n = len(data)
    store.connect(wait=60)  # connect, create the tables
    if store.count_pages():
        raise SystemExit(f"{store.url}: the tables are not empty; use a fresh table_prefix")

    def write(store: Any = store) -> None:
        for i in range(0, n, batch):
            store.put_pages(data[i : i + batch])

    def read_batched(store: Any = store) -> None:
        for i in range(0, n, 64):
            assert len(store.get_pages(keys[i : i + 64])) == len(keys[i : i + 64])

    def read_single(store: Any = store) -> None:
        for key in single:
            assert store.get_page(key) is not None

    def scan(store: Any = store) -> None:
        assert sum(1 for _ in store.scan_pages()) == n

    times = [timed(write), timed(write), timed(read_batched), timed(read_single), timed(scan)]
    assert store.count_pages() == n, store.count_pages()
    counts = [n, n, n, len(single), n]
    return [c / t for c, t in zip(counts, times, strict=True)]
