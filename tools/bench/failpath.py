"""``python -m tools.bench failpath``: Zhan et al.'s failed-path experiment (their Tables 2, 3).

The same seeds are crawled to depth 3 on a demo web with dead paths and dead
hosts, for each of the paper's three parameter sets: once with the filter
off (a fixed timeout of the set's ``FAILPATH_MAX_DELAY``, as Nutch does) and
once with the set.

Time is scaled down so a run takes a minute, not hours: the waits by
``WAIT_SCALE`` (the demo web answers in milliseconds over loopback where the
paper's campus network took seconds), the re-probe interval by
``PROBE_SCALE`` (a run lasts about a minute where the paper's lasted about
20 hours).  The faults (see ``webcrawl serve-demo --help``):

- host 0: directories that hang (``/s1/sub*/``, ``/s3/sub*/``);
- host 1: directories that reset connections (``/s2/sub*/``);
- host 2: directories dead (hanging) for ``RECOVER_AFTER`` seconds from their first request,
  then back: the re-probe must bring them back into the crawl;
- host 3: slow, every answer after 0.1 s;
- host 4: dead (nothing listens: refused), its robots.txt too;
- host 5: robots.txt answers 503 for its first ``ROBOTS_503_FOR`` seconds (RFC 9309:
  the host waits, then is crawled; the filter must leave it alone);
- host 6 (not a seed, linked from the others): dead, every request hangs, robots.txt
  too.

A dead or hanging host's robots.txt gets no answer: with the filter on, the site is
dead at once (one wait); with it off, its links wait for robots.txt to be tried again
(``ROBOTSTXT_UNREACHABLE_WAIT``, scaled, up to ``ROBOTSTXT_UNREACHABLE_TRIES`` times).

The web is wider than the default demo (6 in-section links per article, 40
articles per host linking to other hosts) so that many links lead into
the dead paths, as on the real web.

With ``--real-waits`` the waits are the paper's own seconds, and robots.txt's
(``ROBOTSTXT_UNREACHABLE_WAIT``) the default 300 s, as a user's crawl gets them (the
re-probe interval is scaled by ``REAL_PROBE_SCALE``: 2 minutes for the paper's
2 hours); a run then takes about half an hour (``--sets`` picks the paper's sets).

The last row, *oracle*, crawls the same web with every dead path, dead host and
hanging host answering 404 at once: the time no filter can beat, so the
column "of possible" says which share of the savable time a setup saved.

Columns as in the paper: links known (URLs the crawl discovered: its seen
set), pages fetched (answered pages in the store), time (first worker start
to last end), pages/s; plus the pages of the recovering subtree fetched
after it recovered.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from webcrawl.bench.common import stat
from webcrawl.demo import crawl_command, demo_server, scrapy_env
from webcrawl.store import open_store

WAIT_SCALE = 50
PROBE_SCALE = 600
REAL_PROBE_SCALE = 60
RECOVER_AFTER = 12.0
ROBOTS_503_FOR = 8.0
PAPER_SETS = [  # min delay, max delay, heighten, probe interval, success scale
    (15, 80, 4, 7200, 3),
    (20, 100, 5, 3600, 3),
    (30, 120, 6, 1800, 3),
]
FAULTS = [
    "0:/s1/sub:hang",
    "0:/s3/sub:hang",
    "1:/s2/sub:reset",
    f"2:/s1/sub:hang@{RECOVER_AFTER:g}",
    "3:/:slow:0:0.1",
    f"5:/robots.txt:503@{ROBOTS_503_FOR:g}",
    "6:*:hang",
]
DEAD_HOSTS = [4]
# the oracle's web: what is dead answers 404 at once, the recovering subtree from the start
ORACLE_FAULTS = [
    "0:/s1/sub:404",
    "0:/s3/sub:404",
    "1:/s2/sub:404",
    "3:/:slow:0:0.1",
    f"5:/robots.txt:503@{ROBOTS_503_FOR:g}",
    "4:*:404",
    "6:*:404",
]
ORACLE = "oracle: dead answers 404"
# Few fetch slots, as the paper's fetcher threads: a wait on a dead link holds one
# (the demo web's hosts are loopback addresses: a broad crawl needs them allowed)
COMMON = [
    "WEBCRAWL_SCOPE=broad",
    "DEPTH_LIMIT=3",
    "FRONTIER_HOST_DELAY=0.05",
    "CONCURRENT_REQUESTS=4",
    "LOG_LEVEL=INFO",
    "ADDRESSES_ALLOWED_NETWORKS=127.0.0.0/8",
]


def setups(
    sets: list[int] | None = None, wait_scale: float = WAIT_SCALE, probe_scale: float = PROBE_SCALE
) -> list[tuple[str, list[str], str]]:
    """(name, settings, baseline name): for each of the paper's ``sets`` (1-based, default
    all), the filter off with a fixed timeout of the set's longest wait, then the set
    itself (scaled); then the oracle, compared with the first set's filter off."""
    # the dead host's robots.txt is unreachable: its links wait 300 s (scaled) per try
    robots = f"ROBOTSTXT_UNREACHABLE_WAIT={300 / wait_scale:g}"
    rows = []
    for i, (low, high, heighten, interval, scale) in enumerate(PAPER_SETS, 1):
        if sets and i not in sets:
            continue
        off = f"filter off, timeout {high} s"
        timeout = f"DOWNLOAD_TIMEOUT={high / wait_scale:g}"
        rows.append((off, [robots, "FAILPATH_ENABLED=False", timeout], off))
        rows.append(
            (
                f"set {i}: {low}/{high}/{heighten}/{interval}/{scale}",
                [
                    robots,
                    f"FAILPATH_MIN_DELAY={low / wait_scale:g}",
                    f"FAILPATH_MAX_DELAY={high / wait_scale:g}",
                    f"FAILPATH_HEIGHTEN={heighten}",
                    f"FAILPATH_SUCCESS_SCALE={scale}",
                    f"FAILPATH_PROBE_INTERVAL={interval / probe_scale:g}",
                ],
                off,
            )
        )
    rows.append((ORACLE, [robots, "FAILPATH_ENABLED=False", rows[0][1][2]], rows[0][0]))
    return rows


def crawl(info: dict[str, Any], workdir: Path, settings: list[str]) -> dict[str, float]:
    """One crawl; its links known, pages fetched, seconds and recovered pages."""
    data = Path(tempfile.mkdtemp(dir=workdir))
    log = data / "crawl.log"
    started = time.time()
    cmd = crawl_command(info["seeds"], data, *COMMON, *settings, f"LOG_FILE={log}")
    code = subprocess.run(cmd, check=False, env=scrapy_env(), stdout=subprocess.DEVNULL).returncode
    seconds = time.time() - started
    text = log.read_text()
    if code:
        raise RuntimeError(f"crawl failed (exit {code}):\n{text[-2000:]}")
    with open_store(f"sqlite:///{data / 'webtable.sqlite3'}") as store:
        rows = list(store.scan_pages())
    fetched = [r for r in rows if r.get("kind") != "failed" and r.get("status")]
    recovering = f"http://{info['hosts'][2]}/s1/sub"
    recovered = [
        r
        for r in fetched
        if r["url"].startswith(recovering) and r["fetched_at"] >= info["started"] + RECOVER_AFTER
    ]
    # each URL is enqueued once when found; retries and links sent back again
    links = int(
        stat(text, "scheduler/enqueued/redis", 0)
        - stat(text, "retry/count", 0)
        - stat(text, "failpath/sent_back", 0)
    )
    shutil.rmtree(data, ignore_errors=True)
    return {"links": links, "pages": len(fetched), "seconds": seconds, "recovered": len(recovered)}


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-"))
    results: dict[str, list[dict[str, float]]] = {}
    wait_scale, probe_scale = (
        (1, REAL_PROBE_SCALE) if args.real_waits else (WAIT_SCALE, PROBE_SCALE)
    )
    rows = setups(args.sets, wait_scale, probe_scale)
    try:
        for i in range(args.runs):
            for name, settings, _ in rows:
                oracle = name == ORACLE
                # a fresh demo web per crawl, so the recovering subtree's clock starts with it
                with demo_server(
                    6,
                    120,
                    faults=ORACLE_FAULTS if oracle else FAULTS,
                    dead_hosts=[] if oracle else DEAD_HOSTS,
                    fanout=6,
                    cross_links=40,
                ) as info:
                    info["started"] = time.time()
                    results.setdefault(name, []).append(crawl(info, workdir, settings))
                print(f"  run {i + 1}: {name} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\nwaits scaled 1/{wait_scale:g}, probe interval 1/{probe_scale:g}; depth 3; "
        f"median of {args.runs} runs"
    )
    print(
        f"{'setup (paper time units)':<30} {'links known':>11} {'pages':>6} {'time s':>7} "
        f"{'pages/s':>8} {'recovered':>10} {'pages vs off':>13} {'time vs off':>12} "
        f"{'of possible':>12}"
    )
    medians = {
        name: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for name, runs in results.items()
    }
    floor = medians[ORACLE]["seconds"]
    for name, _, off in rows:
        row, base = medians[name], medians[off]
        possible = base["seconds"] - floor
        share = (base["seconds"] - row["seconds"]) / possible if possible > 0 else float("nan")
        print(
            f"{name:<30} {row['links']:>11.0f} {row['pages']:>6.0f} {row['seconds']:>7.1f} "
            f"{row['pages'] / row['seconds']:>8.2f} {row['recovered']:>10.0f} "
            f"{row['pages'] / base['pages'] - 1:>+13.1%} "
            f"{row['seconds'] / base['seconds'] - 1:>+12.1%} {share:>12.0%}"
        )
    print(
        "(oracle: the same web where everything dead answers 404 at once; its pages count "
        "those 404s; 'of possible': the share of the time the oracle saves that a setup saved)"
    )
    return 0
