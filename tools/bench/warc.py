"""WARC bytes per page, and what revisit records save on a second crawl of a changing web.

Three crawls of one demo web: a first crawl, then (``--gap`` seconds later) a second
crawl with revisit records against the first's webtable, and a second crawl of the same
webtable with ``WARC_DEDUP=False`` (every response in full).  Twice: on the demo web
whose pages change on an accelerated clock (and whose HTML carries noise, a timestamp
and an advert, on every answer: a full capture each time, as it should be), and on the
demo web without changes.  Each table gives the crawls' records and WARC bytes per page;
the saving is the second crawl's bytes against those of the full one.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from webcrawl.bench.common import COMMON
from webcrawl.demo import crawl_command, demo_server


def _records(directory: Path) -> tuple[Counter, int]:
    kinds: Counter = Counter()
    for path in directory.glob("*.warc.gz"):
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                kinds[record.rec_type] += 1
    return kinds, sum(p.stat().st_size for p in directory.glob("*.warc.gz"))


def _crawl(seeds: list[str], data: Path, *settings: str) -> None:
    cmd = crawl_command(seeds, data, *COMMON, "WARC_ENABLED=True", *settings)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])


def _scenario(args: argparse.Namespace, work: Path, speed: float) -> list[tuple[str, Path]]:
    with demo_server(args.hosts, args.pages, change_speed=speed) as info:
        seeds = info["seeds"]
        first = work / "first"
        _crawl(seeds, first, "WEBCRAWL_CRAWL=first")
        time.sleep(args.gap)
        copies = {}
        for name in ("second", "full"):  # the first crawl's webtable, no WARC, no Redis
            copies[name] = work / name
            shutil.copytree(first, copies[name], ignore=shutil.ignore_patterns("warc", "redis*"))
        _crawl(seeds, copies["second"], "WEBCRAWL_CRAWL=second")
        _crawl(seeds, copies["full"], "WEBCRAWL_CRAWL=second", "WARC_DEDUP=False")
    return [
        ("first crawl", first / "warc"),
        ("second crawl, revisits", copies["second"] / "warc"),
        ("second crawl, WARC_DEDUP=False", copies["full"] / "warc"),
    ]


def run(args: argparse.Namespace) -> int:
    print(
        f"demo web: {args.hosts} hosts x {args.pages} pages; second crawls {args.gap:g} s "
        "after the first, of the first's webtable"
    )
    for title, speed in (
        (f"changing at {args.speed:g}x, noise on every HTML answer", args.speed),
        ("not changing (no clock, no noise)", 0.0),
    ):
        work = Path(tempfile.mkdtemp(prefix="webcrawl-bench-warc-"))
        try:
            rows = _scenario(args, work, speed)
            print(
                f"\n{title}\n{'crawl':<32} {'pages':>6} {'responses':>10} {'revisits':>9} "
                f"{'WARC bytes':>11} {'bytes/page':>11}"
            )
            sizes = {}
            for name, directory in rows:
                kinds, size = _records(directory)
                pages = kinds["response"] + kinds["revisit"]
                sizes[name] = size
                print(
                    f"{name:<32} {pages:>6} {kinds['response']:>10} {kinds['revisit']:>9} "
                    f"{size:>11} {size / max(pages, 1):>11.0f}"
                )
            saved = 1 - sizes["second crawl, revisits"] / sizes["second crawl, WARC_DEDUP=False"]
            print(f"revisit records save {saved:.1%} of the second crawl's WARC bytes")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return 0
