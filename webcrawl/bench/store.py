"""``webcrawl bench store``: rows/s written and read by each store backend.

SQLite (a file in a temporary directory) and HBase through happybase against
the Thrift1 emulator of the test suite (``tests/support/hbase_emulator.py``,
in a process of its own as a real server would be), buffered+binary and
framed+compact.  The emulator is test equipment, not part of the installed
package: this benchmark loads it from a source checkout, and without one
measures SQLite only.  Rows are
page-like (``--row-bytes`` of text, title, outlinks, change fields); writes
go in batches of ``--batch`` rows as the store pipeline sends them; reads are
batched ``get_pages`` of 64 keys (the change pipeline's), single
``get_page`` calls, and a full scan.  The emulator is Python: its numbers
bound the client's cost from below, not a real HBase cluster's speed.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import shutil
import sys
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
        out.append({"key": url_to_key(url), "url": url, "final_url": url, "status": 200,
                    "fetched_at": 1763877600.0 + i, "depth": 2, "kind": "html",
                    "content_type": "text/html", "title": f"Page {i}", "text": text,
                    "outlinks": [f"{url}?l={j}" for j in range(16)], "etag": f'"{i}"',
                    "content_length": size, "simhash": f"{rng.getrandbits(64):016x}",
                    "changed": None, "visits": [[1763877600.0 + i, None, None]],
                    "revisit_interval": 86400.0, "next_visit": 1763964000.0 + i,
                    "revisit_method": "prior"})  # fmt: skip
    return out


def emulator() -> Any | None:
    """The test suite's HBase emulator module, from this source checkout (or None)."""
    path = Path(__file__).resolve().parents[2] / "tests" / "support" / "hbase_emulator.py"
    spec = importlib.util.spec_from_file_location("hbase_emulator", path)
    if not path.exists() or spec is None or spec.loader is None:
        return None
    module = sys.modules.setdefault("hbase_emulator", importlib.util.module_from_spec(spec))
    if not hasattr(module, "hbase_emulator"):
        spec.loader.exec_module(module)
    return module


@contextmanager
def backend(kind: str, workdir: Path) -> Iterator[str]:
    """A store URL for ``kind``, its server running."""
    if kind == "sqlite":
        yield f"sqlite:///{workdir / 'bench.sqlite3'}"
        return
    transport, protocol = kind.split("+")
    with emulator().hbase_emulator(transport=transport, protocol=protocol, idle_timeout=None,
                        data=workdir / f"{transport}.data") as hbase:  # fmt: skip
        yield (f"hbase://{hbase.host}:{hbase.port}?table_prefix=bench"
               f"&transport={transport}&protocol={protocol}")  # fmt: skip


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
        kinds = ["sqlite"]
        if emulator() is not None:
            kinds += ["buffered+binary", "framed+compact"]
        else:
            print("  HBase: the emulator comes with a source checkout (tests/support/): "
                  "measuring SQLite only", flush=True)  # fmt: skip
        for kind in kinds:
            with backend(kind, workdir) as url, open_store(url) as store:
                store.failpath_row("warm-up")  # connect, create the tables

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

                times = [timed(write), timed(read_batched), timed(read_single), timed(scan)]
                counts = [n, n, len(single), n]
                table.append((kind, [c / t for c, t in zip(counts, times, strict=True)]))
                print(f"  done: {kind}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{n} rows of ~{args.row_bytes} bytes of text; writes in batches of {batch} rows\n")
    print(f"{'store':<22} {'write rows/s':>13} {'read rows/s':>12} {'get rows/s':>11} "
          f"{'scan rows/s':>12}")  # fmt: skip
    print(f"{'':<22} {'(batched)':>13} {'(64 a call)':>12} {'(1 a call)':>11} {'':>12}")
    for kind, rates in table:
        name = "sqlite" if kind == "sqlite" else f"hbase {kind}"
        print(f"{name:<22} " + " ".join(f"{r:>{w}.0f}" for r, w in zip(rates, (13, 12, 11, 12),
                                                                        strict=True)))  # fmt: skip
    return 0
