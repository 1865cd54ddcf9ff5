"""``python -m tools.bench sitemaps``: what sitemaps' lastmod does to a continuous crawl of
the changing demo web, per host, judged by the server; and what a worker's memory pays
for the largest and the most hostile sitemap files.

The demo web with sitemaps (webcrawl/demo/web.py): host 0's sitemaps tell each page's
true last change, host 1's say "now" for every page.  One worker crawls it continuously
for ``--duration`` real seconds, with sitemaps off and then on, revisit bounds and the
sitemaps' refresh scaled from the defaults by ``--speed`` (a sitemap read every
simulated hour).  Per host, from the server's log and its ground truth:

- refetches: fetches of a page after its first;
- wasted: refetches that found the version the last one had (304s included);
- changes caught: refetches that found a new version;
- versions seen: of the versions a page went through after its first fetch, the share
  some fetch saw (a version overwritten before any fetch is a change missed).

Then the peak memory (``ru_maxrss``, the body it holds included) of a fresh process that
reads, with the default bounds, a 50 000-URL sitemap (plain and gzip), and a gzip bomb
of 1 GiB.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from itertools import pairwise
from pathlib import Path

from webcrawl.bench.common import tcp_redis
from webcrawl.demo import crawl_command, demo_server, scrapy_env
from webcrawl.demo.web import DemoWeb

HOUR, DAY = 3600.0, 86400.0


def run(args: argparse.Namespace) -> int:
    rows = []
    for sitemaps in (False, True):
        rows.append(_crawl(args, sitemaps))
    print(
        f"changing demo web with sitemaps: {args.pages} pages a host, speed x{args.speed:g}, "
        f"{args.duration:g} s, one worker; sitemaps read every simulated hour "
        f"({HOUR / args.speed:g} s)\n"
    )
    print(
        f"{'setup':<18} {'host':<10} {'pages':>6} {'refetches':>10} {'wasted':>8} "
        f"{'changes caught':>15} {'versions seen':>14}"
    )
    for sitemaps, result in zip((False, True), rows, strict=True):
        for role in ("truthful", "lying"):
            r = result[role]
            print(
                f"{'sitemaps on' if sitemaps else 'sitemaps off':<18} {role:<10} "
                f"{r['pages']:>6} {r['refetches']:>10} {r['wasted']:>8} {r['caught']:>15} "
                f"{r['seen']:>7}/{r['versions']:<6}"
            )
    print(
        f"\n{'sitemap file, read with the default bounds':<44} {'seconds':>8} "
        f"{'RSS before MB':>14} {'peak RSS MB':>12} {'Python peak MB':>15} {'entries':>8} "
        f"{'too large':>10} {'malformed':>10}"
    )
    for name, (took, before, peak, traced, entries, large, malformed) in _memory():
        print(
            f"{name:<44} {float(took):>8.2f} {float(before):>14.0f} {float(peak):>12.0f} "
            f"{float(traced):>15.1f} {entries:>8} {large:>10} {malformed:>10}"
        )
    return 0


def _crawl(args: argparse.Namespace, sitemaps: bool) -> dict[str, dict[str, int]]:
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-sitemaps-"))
    log = workdir / "requests.jsonl"
    speed = args.speed
    settings = [
        "WEBCRAWL_CONTINUOUS=True",
        "FRONTIER_HOST_DELAY=0",
        f"REVISIT_MIN_INTERVAL={HOUR / speed}",
        f"REVISIT_MAX_INTERVAL={30 * DAY / speed}",
        f"REVISIT_INITIAL_INTERVAL={DAY / speed}",
        f"SITEMAP_ENABLED={sitemaps}",
        f"SITEMAP_REFRESH={HOUR / speed}",
        f"SITEMAP_LASTMOD_SLACK={60 / speed}",
        "LOG_LEVEL=INFO",
        f"STORE_URL=sqlite:///{workdir / 'webtable.sqlite3'}",
    ]
    try:
        with (
            demo_server(4, args.pages, log, change_speed=speed, sitemaps=True) as info,
            tcp_redis(workdir) as url,
        ):
            cmd = crawl_command(
                info["seeds"],
                workdir / "data",
                *settings,
                f"REDIS_URL={url}",
                f"LOG_FILE={workdir / 'crawl.log'}",
            )
            proc = subprocess.Popen(cmd, env=scrapy_env(), stdout=subprocess.DEVNULL)
            time.sleep(args.duration)
            end = time.time()
            truth = json.loads(
                urllib.request.urlopen(f"http://{info['hosts'][0]}/__truth__").read()
            )
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
            roles = {"truthful": info["hosts"][0], "lying": info["hosts"][1]}
            return {role: _judge(truth, log, end, host) for role, host in roles.items()}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _judge(truth: dict, log: Path, end: float, host: str) -> dict[str, int]:
    fetches: dict[str, list[tuple[float, int]]] = {}
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if r["host"] == host and "v" in r and r["method"] == "GET" and r["t"] <= end:
            fetches.setdefault(f"http://{host}{r['path']}", []).append((r["t"], r["v"]))
    out = {"pages": len(fetches), "refetches": 0, "wasted": 0, "caught": 0}
    out["seen"] = out["versions"] = 0
    for url, got in fetches.items():
        for (_, before), (_, after) in pairwise(got):
            out["refetches"] += 1
            out["wasted" if after == before else "caught"] += 1
        page = truth["pages"].get(url)
        if page is None:
            continue
        first_version = got[0][1]
        born = [t for t in page["changes"] if got[0][0] < t <= end]  # versions after the first
        out["versions"] += len(born)
        out["seen"] += len({v for _, v in got if v > first_version})
    return out


_READ = """
import resource, sys, time, tracemalloc
from webcrawl.sitemaps.parse import parse_sitemap
body = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
result = parse_sitemap(body)
took = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
del result
tracemalloc.start()  # (once more, traced: Python's allocations, not libxml2's)
result = parse_sitemap(body)
traced = tracemalloc.get_traced_memory()[1] / 2**20
print(took, before, peak, traced, len(result.entries), result.too_large, result.malformed or "-")
"""


def _memory() -> list[tuple[str, list[str]]]:
    """(file, [seconds, RSS before, peak RSS, Python peak, entries, too large, malformed])
    of a fresh process reading each file (MB)."""
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-sitemap-mem-"))
    try:
        urls = "".join(
            f"<url><loc>https://www.example.com/section-{i % 97}/page-{i}.html</loc>"
            f"<lastmod>2026-11-{1 + i % 28:02d}T10:00:00Z</lastmod></url>\n"
            for i in range(50_000)
        )
        plain = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{urls}</urlset>\n"
        ).encode()
        bomb = DemoWeb(
            ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1", "127.0.0.5:1", "x:1"], 12, sitemaps=True
        ).sitemap_file("http://127.0.0.5:1/bomb.xml.gz", time.time())
        assert bomb is not None
        files = {
            f"50 000 URLs, plain ({len(plain) / 2**20:.1f} MB)": plain,
            f"50 000 URLs, gzip ({len(gzip.compress(plain)) / 2**20:.1f} MB)": gzip.compress(plain),
            f"the demo's gzip bomb, 1 GiB ({len(bomb[0]) / 2**20:.1f} MB)": bomb[0],
        }
        return [(name, _read(workdir, body)) for name, body in files.items()]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _read(workdir: Path, body: bytes) -> list[str]:
    path = workdir / "sitemap"
    path.write_bytes(body)
    result = subprocess.run(
        [sys.executable, "-c", _READ, str(path)], capture_output=True, text=True, check=True
    )
    return result.stdout.split()
