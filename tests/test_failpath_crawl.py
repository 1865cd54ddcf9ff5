"""Failed-path filtering in real crawls: a dead directory is dropped, a recovered one returns."""

import asyncio
import json
import re
import subprocess
import sys
from collections import Counter
from urllib.parse import urlsplit

import pytest
from conftest import ROOT, crawl_env, run_crawl
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler

from middlewares.failpath import FailPathMiddleware
from webcrawl.demo import demo_server
from webcrawl.demoweb import DemoWeb
from webcrawl.failpath import SITE, site_of
from webcrawl.store import open_store

FAST = ("FAILPATH_MIN_DELAY=0.5", "FAILPATH_MAX_DELAY=1", "FRONTIER_RETRY_BACKOFF=0.2")


def test_dead_directory_is_dropped_and_recovered_host_comes_back(tmp_path):
    faults = ["0:/s1/sub:hang", "1:/:hang@6"]  # a dead directory; a host dead for 6 s
    log = tmp_path / "requests.jsonl"
    with demo_server(4, 40, log, faults=faults) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        data = tmp_path / "data"
        result = run_crawl(info["seeds"], data, *FAST, "FAILPATH_PROBE_INTERVAL=2",
                           "FRONTIER_HOST_DELAY=0.2", timeout=180)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        failpaths = subprocess.run(
            [sys.executable, "-m", "webcrawl", "failpaths", "--json", "-s",
             f"WEBCRAWL_DATA_DIR={data}"],
            cwd=ROOT, env=crawl_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    stats = result.stderr
    dead_host, back_host = info["hosts"][0], info["hosts"][1]
    dead = [u for u in web.reachable() if u.startswith(f"http://{dead_host}/s1/sub")]
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    tried = Counter(r["path"] for r in requests if r["host"] == dead_host
                    and r["path"].startswith("/s1/sub"))  # fmt: skip
    # without the filter every dead URL is tried 1 + FRONTIER_RETRY_TIMES times (re-probes,
    # a few sampled links every 2 s, come on top)
    probes = int(re.search(r"'failpath/probes': (\d+)", stats).group(1))
    assert len(dead) >= 6 and sum(tried.values()) - probes < 4 * len(dead), (tried, dead)
    assert "'failpath/filtered'" in stats and "Dropping URLs under" in stats
    # the dead levels are listed, as the paper's filter list
    listed = json.loads(failpaths.stdout)
    assert {e["url"] for e in listed} >= {f"http://{dead_host}/s1/sub0/"}
    assert all(e["failures"] > 4 for e in listed)
    # the host that came back was given up, then crawled completely through the re-probe
    with open_store(f"sqlite:///{data}/webtable.sqlite3") as store:
        rows = {r["url"]: r for r in store.scan_pages()}
    back = [u for u in web.reachable() if u.startswith(f"http://{back_host}/")
            and web.pages.get(u) and web.pages[u].kind == "html"]  # fmt: skip
    assert back and all(rows[u]["status"] == 200 for u in back), [
        (u, rows.get(u, {}).get("status")) for u in back]  # fmt: skip
    assert "Giving up" in stats and "'failpath/recovered'" in stats
    # everything else is stored as in a crawl without faults
    reachable = web.reachable(dead=(f"http://{dead_host}/s1/sub",))  # dead pages hide links
    healthy = [u for u in reachable if u not in dead]
    assert [u for u in healthy if u not in rows] == []


@pytest.fixture
def middleware(tmp_path):
    from settings import base

    settings = {k: getattr(base, k) for k in dir(base) if k.isupper()}
    settings.update(WEBCRAWL_DATA_DIR=str(tmp_path), FAILPATH_MIN_DELAY=2, FAILPATH_MAX_DELAY=10)
    crawler = get_crawler(settings_dict=settings)
    mw = FailPathMiddleware(crawler)
    yield mw
    mw.store.close()


def process(mw, request):
    asyncio.run(mw.process_request(request))
    return request


def test_filter_opt_outs_and_timeouts(middleware):
    mw = middleware
    site = site_of("http://dead.example/")
    mw.cache.put(site, {"/a/": 9, "/b/": 2})
    with pytest.raises(IgnoreRequest, match=r"/a/ \(9 failures\)"):
        process(mw, Request("http://dead.example/a/x.html"))
    assert mw.stats.get_value("failpath/filtered") == 1
    # dont_filter is never dropped, but waits as its path deserves (the longest here)
    r = process(mw, Request("http://dead.example/a/y.html", dont_filter=True))
    assert r.meta["download_timeout"] == 10
    # a healthy path of the same site: the shortest wait; one failure recorded: a step more
    assert process(mw, Request("http://dead.example/c/z.html")).meta["download_timeout"] == 2
    assert process(mw, Request("http://dead.example/b/z.html")).meta["download_timeout"] == 6
    # opted out entirely: no drop, the timeout untouched
    r = process(mw, Request("http://dead.example/a/z.html", meta={"failpath": False}))
    assert "download_timeout" not in r.meta
    # a timeout the spider chose is kept
    r = process(mw, Request("http://dead.example/c/w.html", meta={"download_timeout": 33}))
    assert r.meta["download_timeout"] == 33
    # a retry carries our last wait in its meta: it gets a fresh one
    r = Request("http://dead.example/b/q.html", meta={"download_timeout": 2, "failpath_wait": 2})
    assert process(mw, r).meta["download_timeout"] == 6
    # Scrapy marks its retries dont_filter: they are filtered all the same
    with pytest.raises(IgnoreRequest):
        process(mw, Request("http://dead.example/a/x.html", dont_filter=True,
                            meta={"retry_times": 1}))  # fmt: skip
    # a whole site given up
    mw.cache.put(site, {SITE: 5})
    with pytest.raises(IgnoreRequest):
        process(mw, Request("http://dead.example/"))
    assert mw.stats.get_value("failpath/filtered") == 3
    assert urlsplit("http://dead.example/").netloc  # the site row is the reversed origin
