"""Sitemaps read in a real crawl of the demo web (webcrawl/demo/web.py, sitemaps on): the
pages only sitemaps name are crawled, what a sitemap may not list is dropped unless
cross-submitted, and the gzip bomb and the loop end with bounded memory and a record."""

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from test_crawl import stored_rows

from webcrawl.demo import demo_server

pytestmark = pytest.mark.e2e


def _peak_rss(pid: int) -> int:
    """A running process's peak resident set (bytes; 0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match.group(1)) * 1024 if match else 0


def _stat(log: str, name: str) -> int:
    match = re.search(rf"'{re.escape(name)}': (\d+)", log)
    return int(match.group(1)) if match else 0


def test_sitemaps_bring_the_pages_no_link_reaches_and_only_those_they_may_list(
    sitemap_demo, tmp_path, crawls
):
    demo = sitemap_demo
    worker = crawls.start(demo.seeds, tmp_path / "data")
    peak = 0  # the worker's peak RSS (VmHWM: its own, unlike ru_maxrss, which a child
    while worker.poll() is None:  # started by a large pytest inherits across exec)
        peak = max(peak, _peak_rss(worker.pid))
        time.sleep(0.05)
    log = worker.log_text()
    assert worker.returncode == 0, log[-3000:]
    stored = {r["url"] for r in stored_rows(tmp_path / "data")}
    expected = set(demo.web.reachable(sitemaps=True))
    only = demo.web.sitemap_only()
    assert {"sitemap", "cross-submitted", "bomb"} == set(only.values())
    assert stored == expected, (sorted(expected - stored), sorted(stored - expected))
    # what a sitemap may not list: never fetched, unless a link reaches it
    dropped = set(demo.web.sitemap_dropped())
    assert dropped - set(demo.web.reachable()) <= dropped - stored
    assert _stat(log, "sitemap/out_of_scope") >= len(dropped)
    # each sitemap read once; the loop ended at its repeat, the bomb at 50 MiB
    reads = [
        f"http://{r['host']}{r['path']}"
        for r in demo.requests()
        if f"http://{r['host']}{r['path']}" in demo.sitemap_files
    ]
    assert len(reads) == len(set(reads)), sorted(reads)
    assert set(demo.web.sitemap_urls()) <= set(reads)
    assert _stat(log, "sitemap/loops") >= 1
    assert _stat(log, "sitemap/too_large") == 1
    assert "is over 52428800 bytes" in log
    # a gigabyte inflated, at most 50 MiB read: the worker stays small (about 120 MB)
    assert 0 < peak < 300 * 2**20, peak
    # the lying host's "now" made no claim on a first crawl: nothing was known yet
    assert _stat(log, "sitemap/claims") == 0


def test_a_sitemap_over_the_byte_bound_stops_downloading_and_keeps_what_came(
    sitemap_demo, tmp_path, crawls
):
    demo = sitemap_demo
    result = crawls.run(demo.seeds, tmp_path / "data", "SITEMAP_MAX_BYTES=300000")
    assert result.returncode == 0, result.stderr[-3000:]
    stored = {r["url"] for r in stored_rows(tmp_path / "data")}
    bomb = {u for u, how in demo.web.sitemap_only().items() if how == "bomb"}
    assert bomb and bomb <= stored  # its first entries came before the cut
    assert _stat(result.stderr, "sitemap/too_large") == 1


def test_sitemaps_can_be_turned_off(sitemap_demo, tmp_path, crawls):
    demo = sitemap_demo
    result = crawls.run(demo.seeds, tmp_path / "data", "SITEMAP_ENABLED=False")
    assert result.returncode == 0, result.stderr[-3000:]
    stored = {r["url"] for r in stored_rows(tmp_path / "data")}
    assert stored == set(demo.web.reachable())
    assert not any(f"http://{r['host']}{r['path']}" in demo.sitemap_files for r in demo.requests())


def test_a_sitemap_that_is_also_a_page_is_still_read_as_a_sitemap(sitemap_demo, tmp_path, crawls):
    demo = sitemap_demo
    text = f"http://{demo.web.hosts[2]}/sitemap.txt"  # listed by its host's robots.txt
    result = crawls.run([*demo.seeds, text], tmp_path / "data")  # ...and a seed, as a page
    assert result.returncode == 0, result.stderr[-3000:]
    stored = {r["url"] for r in stored_rows(tmp_path / "data")}
    only = {u for u, how in demo.web.sitemap_only().items() if how == "sitemap"}
    assert only and only <= stored and text in stored


PLAIN_SCRAPY = (
    "SCHEDULER=scrapy.core.scheduler.Scheduler",
    "DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter",
)


@pytest.mark.parametrize("scheduler", [(), PLAIN_SCRAPY], ids=["frontier", "scrapy"])
def test_one_sitemap_at_a_time_still_reads_them_all(sitemap_demo, tmp_path, crawls, scheduler):
    """With the frontier a sitemap that waits goes back to it; with Scrapy's own
    scheduler it is crawled again after a while (not held in the downloader)."""
    demo = sitemap_demo
    result = crawls.run(demo.seeds, tmp_path / "data", "SITEMAP_MAX_MEMORY=1", *scheduler)
    assert result.returncode == 0, result.stderr[-3000:]
    stored = {r["url"] for r in stored_rows(tmp_path / "data")}
    expected = set(demo.web.reachable(sitemaps=True))
    assert stored == expected, (sorted(expected - stored), sorted(stored - expected))
    # the others waited in the frontier while one was read (no slot leaked: all read)
    assert _stat(result.stderr, "sitemap/deferred") >= 1
    reads = {
        f"http://{r['host']}{r['path']}"
        for r in demo.requests()
        if f"http://{r['host']}{r['path']}" in demo.sitemap_files
    }
    assert set(demo.web.sitemap_urls()) <= reads


def test_a_hosts_sitemap_files_are_bounded(sitemap_demo, tmp_path, crawls):
    demo = sitemap_demo
    result = crawls.run(demo.seeds, tmp_path / "data", "SITEMAP_MAX_FILES_PER_HOST=2")
    assert result.returncode == 0, result.stderr[-3000:]
    stored = {r["url"] for r in stored_rows(tmp_path / "data")}
    # the hostile host's index and loop took its two: its bomb is not fetched
    bomb = f"http://{demo.web.hosts[3]}/bomb.xml.gz"
    assert bomb not in {f"http://{r['host']}{r['path']}" for r in demo.requests()}
    only = {u for u, how in demo.web.sitemap_only().items() if how == "bomb"}
    assert only and not only & stored
    assert _stat(result.stderr, "sitemap/over_file_budget") >= 1
    assert "over SITEMAP_MAX_FILES_PER_HOST (2)" in result.stderr
    # the host whose robots.txt lists a file pays for it, not the host it is on: host 2
    # lists host 0's cross.xml, which host 0's own three files do not crowd out
    crossed = {u for u, how in demo.web.sitemap_only().items() if how == "cross-submitted"}
    assert crossed and crossed <= stored


def test_a_host_whose_files_fill_its_budget_has_each_read_again_every_refresh(tmp_path, crawls):
    """A file is charged to SITEMAP_MAX_FILES_PER_HOST once a read, in the refresh window
    it is read in: host 0's index and its two children (three files, its budget) are
    read again at every refresh, none refused as a second charge in the same window."""
    log = tmp_path / "requests.jsonl"
    settings = [
        "WEBCRAWL_CONTINUOUS=True",
        "SITEMAP_REFRESH=2",
        "SITEMAP_MAX_FILES_PER_HOST=3",
        "FRONTIER_HOST_DELAY=0",
        "LOG_LEVEL=INFO",
    ]
    with demo_server(4, 12, log, sitemaps=True) as info:
        host = info["hosts"][0]
        worker = crawls.run_for(14, info["seeds"], tmp_path / "data", *settings)
    text = worker.log_text()
    reads = Counter(
        r["path"]
        for r in map(json.loads, log.read_text().splitlines())
        if r["host"] == host and r["path"].startswith(("/sitemap_index.xml", "/sitemaps/"))
    )
    files = ("/sitemap_index.xml", "/sitemaps/pages.xml", "/sitemaps/more.xml.gz")
    assert all(reads[f] >= 3 for f in files), reads  # read at 0 s, then about every 2 s
    assert f"Sitemaps of http://{host}: over SITEMAP_MAX_FILES_PER_HOST" not in text
