"""Failed-path filtering in real crawls: a dead directory is dropped, a recovered one returns."""

import asyncio
import json
import re
import sqlite3
import time
from collections import Counter
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler
from test_cli import webcrawl

from webcrawl.demo import demo_server
from webcrawl.demo.web import DemoWeb
from webcrawl.failpath import FAIL, SITE, site_of
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.lock import RedisLock
from webcrawl.middlewares.failpath import FailPathMiddleware, ProbeTurns
from webcrawl.store import open_store

FAST = ("FAILPATH_MIN_DELAY=0.5", "FAILPATH_MAX_DELAY=1", "FRONTIER_RETRY_BACKOFF=0.2")


@pytest.mark.e2e
def test_dead_directory_is_dropped_and_recovered_host_comes_back(tmp_path, crawls):
    # a dead directory; a host dead for 8 s (one request to a host is in flight at a time:
    # a guessed sitemap.xml hanging for DOWNLOAD_TIMEOUT would hold its turn past that)
    faults = ["0:/s2/a:hang", "1:/:hang@8"]
    # a link counts one failure, after its retry; a directory is dead after HEIGHTEN + 1
    settings = (
        "FAILPATH_HEIGHTEN=2",
        "RETRY_TIMES=1",
        "FAILPATH_PROBE_INTERVAL=2",
        "FRONTIER_HOST_DELAY=0.2",
        "SITEMAP_GUESS=False",
    )
    log = tmp_path / "requests.jsonl"
    with demo_server(4, 40, log, faults=faults) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        data = tmp_path / "data"
        result = crawls.run(info["seeds"], data, *FAST, *settings, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]
        failpaths = webcrawl("failpaths", "--json", "-s", settings[0], data_dir=data, check=False)
    stats = result.stderr
    dead_host, back_host = info["hosts"][0], info["hosts"][1]
    prefix = f"http://{dead_host}/s2/a"
    dead = [u for u in web.reachable(dead=(prefix,)) if u.startswith(prefix)]
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    tried = Counter(
        r["path"] for r in requests if r["host"] == dead_host and r["path"].startswith("/s2/a")
    )
    # without the filter every dead URL is tried 1 + RETRY_TIMES times (re-probes,
    # a few sampled links every 2 s, come on top)
    probes = stat(stats, "failpath/probes")
    assert len(dead) >= 6 and sum(tried.values()) - probes < 2 * len(dead), (tried, dead)
    assert "'failpath/filtered'" in stats and "Dropping URLs under" in stats
    # the dead levels are listed, as the paper's filter list
    listed = json.loads(failpaths.stdout)
    assert {e["url"] for e in listed} >= {f"http://{dead_host}/s2/"}
    assert all(e["failures"] > 2 for e in listed)
    # the host that came back was given up, then crawled completely through the re-probe
    with open_store(f"sqlite:///{data}/webtable.sqlite3") as store:
        rows = {r["url"]: r for r in store.scan_pages()}
    back = [
        u
        for u in web.reachable()
        if u.startswith(f"http://{back_host}/") and web.pages.get(u) and web.pages[u].kind == "html"
    ]
    assert back and all(rows[u]["status"] == 200 for u in back), [
        (u, rows.get(u, {}).get("status")) for u in back
    ]
    assert "Giving up" in stats and "'failpath/recovered'" in stats
    # everything else is stored as in a crawl without faults
    reachable = web.reachable(dead=(prefix,))  # dead pages hide links
    healthy = [u for u in reachable if u not in dead]
    assert [u for u in healthy if u not in rows] == []


@pytest.fixture
def middleware(tmp_path):
    from webcrawl.settings import base

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
        process(
            mw, Request("http://dead.example/a/x.html", dont_filter=True, meta={"retry_times": 1})
        )
    # a whole site given up
    mw.cache.put(site, {SITE: 5})
    with pytest.raises(IgnoreRequest):
        process(mw, Request("http://dead.example/"))
    assert mw.stats.get_value("failpath/filtered") == 3
    assert urlsplit("http://dead.example/").netloc  # the site row is the reversed origin


def test_a_failure_while_redis_was_not_answering_is_not_the_sites(middleware, monkeypatch):
    """Every Redis call blocks the reactor, downloads included, until it times out: a
    download that failed while the frontier was out is not counted against its path."""
    from scrapy.exceptions import DownloadTimeoutError

    from webcrawl.frontier.redisconn import RoundTrips

    mw = middleware
    writes = []  # what would go to the store's failpaths table (its own thread: not here)
    monkeypatch.setattr(mw, "_write", lambda site, *args, **kwargs: writes.append(site))
    mw.cache.put(site_of("http://slow.example/"), {})  # a site with no failures yet
    during = process(mw, Request("http://slow.example/a/x.html"))
    monkeypatch.setattr(RoundTrips, "last_error", time.monotonic())  # a call timed out
    mw.process_exception(during, DownloadTimeoutError("took longer than 2 s"))
    assert mw.stats.get_value("failpath/excused") == 1
    assert mw.stats.get_value("failpath/failures") is None and writes == []
    after = process(mw, Request("http://slow.example/a/y.html"))  # sent after the outage
    mw.process_exception(after, DownloadTimeoutError("took longer than 2 s"))
    assert mw.stats.get_value("failpath/failures") == 1 and writes == [site_of(after.url)]


def test_robots_txt_gets_the_sites_wait_and_its_silence_makes_the_site_dead(
    middleware, monkeypatch
):
    """robots.txt fetches wait as the site level says and are never dropped, not even
    under a dead site (the re-probe fetches them); their own failures count nothing
    (the robots.txt middleware drops the site's requests): the first SiteUnanswered
    records the site dead, once, and every one is remembered for the re-probe."""
    from scrapy.exceptions import DownloadTimeoutError
    from twisted.internet import defer

    from webcrawl.failpath import ROBOTS
    from webcrawl.middlewares import failpath
    from webcrawl.middlewares.failpath import SiteUnanswered

    mw = middleware
    site = site_of("http://silent.example/")
    mw.cache.put(site, {"/a/": 3})
    robots = process(mw, Request("http://silent.example/robots.txt", meta={"robots_txt": True}))
    assert robots.meta["download_timeout"] == 2  # the site level has no record: the shortest
    mw.process_exception(robots, DownloadTimeoutError("took longer than 2 s"))
    assert mw.stats.get_value("failpath/failures") is None
    remembered = []
    monkeypatch.setattr(
        mw, "_remember_link", lambda site, request, dropped: remembered.append(request.url)
    )
    writes = []

    def in_thread(func, *args):  # the store write, here and now
        writes.append(func)
        return defer.succeed(func(*args))

    monkeypatch.setattr(failpath.threads, "deferToThread", in_thread)
    # two requests that passed the filter before the site was known to be dead
    requests = [process(mw, Request("http://silent.example" + p)) for p in ("/", "/a/x.html")]
    for request in requests:
        mw.process_exception(request, SiteUnanswered("no answer", since=1_800_000_000.5))
    assert remembered == ["http://silent.example/", "http://silent.example/a/x.html"]
    assert len(writes) == 1 and mw.stats.get_value("failpath/filtered") == 2
    row = mw.store.failpath_row(site)
    assert row[SITE] == 5 and row[ROBOTS] == 1_800_000_000 and row[FAIL] == 1
    with pytest.raises(IgnoreRequest):  # dead now: dropped before robots.txt is asked
        process(mw, Request("http://silent.example/b.html"))
    probe = Request(
        "http://silent.example/robots.txt", meta={"robots_txt": True, "failpath_probe": True}
    )
    assert process(mw, probe).meta["download_timeout"] == 4  # the re-probe's wait
    assert mw.stats.get_value("failpath/sites_given_up") == 1


def test_a_read_begun_before_a_recovery_does_not_put_its_dead_levels_back(middleware, monkeypatch):
    """A stale row is served while a fresh copy is read in a thread; if a re-probe deletes
    the site's dead levels meanwhile, that read (from before) must not bring them back
    into the cache: the site's links would be dropped after it recovered."""
    from twisted.internet import defer

    from webcrawl.middlewares import failpath

    mw = middleware
    reads: list[defer.Deferred] = []
    monkeypatch.setattr(
        failpath.threads,
        "deferToThread",
        lambda *a, **kw: reads.append(defer.Deferred()) or reads[-1],
    )
    site = site_of("http://back.example/")
    mw.cache.put(site, {SITE: 5})
    monkeypatch.setattr(mw.cache, "ttl", -1.0)  # stale: served, and read again
    with pytest.raises(IgnoreRequest):
        process(mw, Request("http://back.example/a.html"))
    assert len(reads) == 1  # the fresh read, still running
    mw._epoch[site] = mw._epoch.get(site, 0) + 2  # a re-probe deleted the levels
    mw.cache.drop(site)
    reads[0].callback({SITE: 5})  # what the store had when the read began
    assert mw.cache.get(site)[0] is None  # read again at the next request, not the old row


def stat(log: str, name: str) -> int:
    found = re.search(rf"'{re.escape(name)}': (\d+)", log)
    return int(found.group(1)) if found else 0


@pytest.mark.e2e
def test_a_site_with_over_a_quarter_of_its_links_working_is_not_given_up(tmp_path, crawls):
    """A dead link counts one failure, after its retries (seed 000 counts per link): 37 %
    of host 0's links work, more than the share 1/(1+FAILPATH_SUCCESS_SCALE) = 25 % under
    which a site is given up.  Counted per attempt (1 + RETRY_TIMES failures
    against one success) it was given up.  No directory has more than FAILPATH_HEIGHTEN
    dead links, so none is dropped: every link is tried and the share rule decides."""
    prefixes = ("/s0/sub", "/s1/sub", "/s2/sub", "/s0/a", "/s2/a", "/old/")
    with demo_server(4, 40, faults=[f"0:{p}:reset" for p in prefixes]) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        host = info["hosts"][0]
        dead = tuple(f"http://{host}{p}" for p in prefixes)
        links = [u for u in web.reachable(dead=dead) if urlsplit(u).netloc == host]
        failing = [u for u in links if u.startswith(dead)]
        assert 0.3 < 1 - len(failing) / len(links) < 0.45
        assert max(Counter(u.rsplit("/", 1)[0] for u in failing).values()) <= 4
        data = tmp_path / "data"
        result = crawls.run(info["seeds"], data, *FAST, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Giving up" not in result.stderr
    with open_store(f"sqlite:///{data}/webtable.sqlite3") as store:
        counts = store.failpath_row(site_of(f"http://{host}/"))
        rows = {r["url"]: r for r in store.scan_pages()}
    assert counts[FAIL] == len(failing), counts  # one per dead link, not one per attempt
    assert counts.get(SITE, 0) <= 4  # raised by directories at the threshold, not given up
    assert stat(result.stderr, "failpath/failures") == len(failing)
    assert [u for u in links if u not in failing and not rows.get(u, {}).get("status")] == []


@pytest.mark.e2e
def test_a_failpaths_table_that_cannot_be_read_loses_no_page(demo, tmp_path, crawls):
    """The filter list is an aid: when it cannot be read every URL is fetched (the error
    is logged and counted), none fails because of it."""
    data = tmp_path / "data"
    data.mkdir()
    with sqlite3.connect(data / "webtable.sqlite3") as conn:
        conn.execute("CREATE TABLE failpaths (x)")  # not ours: every failpaths query fails
    result = crawls.run(demo.seeds, data, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert stat(result.stderr, "failpath/store_errors") > 0
    assert "Could not read the failpaths" in result.stderr
    with open_store(f"sqlite:///{data}/webtable.sqlite3") as store:
        rows = {r["url"]: r for r in store.scan_pages()}
    reachable = demo.web.reachable()
    assert [u for u in reachable if not rows.get(u, {}).get("status")] == []
    assert max(demo.page_fetches().values()) == 1


@pytest.mark.e2e
def test_a_re_probe_waits_for_the_one_running(redis_server, redis_client, tmp_path, crawls):
    """Another worker's re-probe is running (it holds the crawl's re-probe lock) when this
    worker runs out of work: its final re-probe waits for that one to end instead of
    sampling (and sending back) the same links at the same time, then runs once."""
    lock = CrawlKeys("web").failpath_probe + ":running"
    other = RedisLock(redis_client, lock, ttl=120, owner="other-worker")
    assert other.acquire()
    log = tmp_path / "requests.jsonl"
    with demo_server(4, 40, log, faults=["0:/s2/a:reset@10"]) as info:
        host = info["hosts"][0]
        started = time.monotonic()
        worker = crawls.start(
            info["seeds"],
            tmp_path / "data",
            f"REDIS_URL={redis_server.url}",
            *FAST,
            "FAILPATH_PROBE_INTERVAL=3600",
            "RETRY_TIMES=1",  # dead links fail for good sooner
            name="worker",
        )
        idle = re.compile(r"re-probing its dead paths once more|waiting for the failed-path")
        while not idle.search(worker.log_text()):
            assert worker.poll() is None and time.monotonic() - started < 90
            time.sleep(0.05)
        time.sleep(1)  # a re-probe (of a path that resets at once) would have run by now
        assert "Re-probe of" not in worker.log_text()
        # the path is back 10 s after the fault first answered (the server's log)
        first = min(
            r["t"]
            for r in map(json.loads, log.read_text().splitlines())
            if r["host"] == host and r["path"].startswith("/s2/a")
        )
        time.sleep(max(0.0, first + 10.5 - time.time()))
        assert other.release()
        text = crawls.finish(worker, timeout=60)
    dead = {
        f"http://{host}{r['path']}"
        for r in map(json.loads, log.read_text().splitlines())
        if r["host"] == host and r["path"].startswith("/s2/a")
    }
    assert re.findall(r"Re-probe of \S+ /s2/: \d+ of \d+ answered: recovered", text)
    assert stat(text, "failpath/sent_back") == len(dead)  # every remembered link, once
    assert redis_client.get(lock) is None  # released by its owner


def test_one_re_probe_at_a_time_in_the_crawl(redis_client):
    """The periodic and the final re-probe, on two workers: never two at once; a final
    one attempted while another runs waits for it (BUSY) and runs after; each turn once."""
    key = CrawlKeys("web").failpath_probe
    a = ProbeTurns(redis_client, key, "worker-a", interval=60)
    b = ProbeTurns(redis_client, key, "worker-b", interval=60)
    assert a.take() == ProbeTurns.STARTED  # a's periodic re-probe runs
    assert b.take(final=True) == ProbeTurns.BUSY  # b ran out of work: it waits
    assert b.take() == ProbeTurns.TAKEN  # this interval's turn is a's
    b.release()  # holds nothing: a's lock stays
    assert a.renew() and not b.renew()
    assert a.take(final=True) == ProbeTurns.BUSY  # one worker: one at a time too
    a.release()
    assert b.take(final=True) == ProbeTurns.STARTED  # then b's final one runs
    b.release()
    assert a.take(final=True) == ProbeTurns.TAKEN  # once per crawl
    assert a.take() == ProbeTurns.TAKEN  # and once per interval
    assert redis_client.get(key + ":running") is None  # nothing left held


def test_a_dead_re_probers_lock_expires(redis_client):
    key = CrawlKeys("web").failpath_probe
    a = ProbeTurns(redis_client, key, "worker-a", interval=60, lease=0.2)
    b = ProbeTurns(redis_client, key, "worker-b", interval=60, lease=0.2)
    assert a.take() == ProbeTurns.STARTED  # and the worker dies
    assert b.take(final=True) == ProbeTurns.BUSY
    deadline = time.monotonic() + 10
    while (turn := b.take(final=True)) == ProbeTurns.BUSY:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert turn == ProbeTurns.STARTED
    assert not a.release()  # too late: not a's any more, and b's lock stays
    assert b.renew() and b.release()


@pytest.mark.e2e
def test_hosts_that_do_not_answer_cost_one_wait_and_a_revived_one_comes_back(tmp_path, crawls):
    """Issue 29: host 2 is dead (nothing listens), host 3 takes connections and never
    answers, robots.txt included, and host 1's robots.txt does not answer its first two
    requests.  Their robots.txt gets no answer, twice: each site is dead, its URLs
    dropped and remembered (not sent back to wait ROBOTSTXT_UNREACHABLE_WAIT, 300 s,
    three times), so the crawl ends within a minute with every page of the live host;
    the re-probe fetches host 1's robots.txt again, it answers, and the host is
    crawled.  Host 0's robots.txt misses its first answer only: tried again at once,
    the host is not taken for dead."""
    faults = ["3:*:hang", "1:/robots.txt:hang:2", "0:/robots.txt:hang:1"]
    settings = (
        "FAILPATH_MIN_DELAY=2",
        "FAILPATH_MAX_DELAY=4",
        "FAILPATH_PROBE_INTERVAL=3",
        "FRONTIER_HOST_DELAY=0.1",
    )
    log = tmp_path / "requests.jsonl"
    with demo_server(4, 20, log, faults=faults, dead_hosts=[2]) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        data = tmp_path / "data"
        started = time.monotonic()
        result = crawls.run(info["seeds"], data, *settings, timeout=180)
        seconds = time.monotonic() - started
        assert result.returncode == 0, result.stderr[-3000:]
        failpaths = webcrawl("failpaths", "--json", data_dir=data, check=False)
    stats = result.stderr
    assert seconds < 60, seconds
    revived, dead, hanging = info["hosts"][1], info["hosts"][2], info["hosts"][3]
    with open_store(f"sqlite:///{data}/webtable.sqlite3") as store:
        rows = {r["url"]: r for r in store.scan_pages()}
    # every page of the live host and of the revived one, as in a crawl without faults
    for host in (info["hosts"][0], revived):
        want = [
            u for u in web.reachable(seeds=[f"http://{host}/"]) if u.startswith(f"http://{host}/")
        ]
        assert want and [u for u in want if u not in rows] == [], host
    # the dead sites are listed, with the reason; their seeds were dropped, not failed
    listed = {e["url"]: e for e in json.loads(failpaths.stdout)}
    for host in (dead, hanging):
        entry = listed[f"http://{host}/ (whole site)"]
        assert entry["reason"].startswith("robots.txt unanswered since "), entry
        assert f"http://{host}/" not in rows  # dropped (remembered), not recorded as failed
    assert f"http://{revived}/ (whole site)" not in listed  # recovered: its counts cleared
    live_site = site_of(f"http://{info['hosts'][0]}/")
    assert f"Giving up {live_site}" not in stats and stat(stats, "robotstxt/unanswered_retries")
    assert stat(stats, "failpath/filtered") >= 3 and stat(stats, "failpath/recovered") >= 1
    assert stat(stats, "robotstxt/deferred") == 0  # nothing waited for a robots.txt
    assert stat(stats, "failpath/failures") == 0  # no page of theirs was tried
    # nothing but robots.txt was asked of the hanging host: once, then by the re-probes
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    asked = [r["path"] for r in requests if r["host"] == hanging]
    assert asked and set(asked) == {"/robots.txt"}, asked


def test_dropped_links_that_nothing_blocks_go_back_and_a_forbidden_sample_answers(
    middleware, redis_client, monkeypatch
):
    """Found by a review: a link dropped while its site's death was being recorded (the
    store write failed, or its worker died first) waited for the re-probe of a site the
    store does not hold dead: never.  Each re-probe ends with a sweep that sends back
    every dropped link no dead level blocks (failed ones stay: they are samples).  And a
    sample that robots.txt forbids answered if the file was fetched for it (a copy read
    from Redis proves nothing: a later review saw a dead host "recovered" that way)."""
    from twisted.internet import defer

    from webcrawl.middlewares import failpath
    from webcrawl.middlewares.failpath import Remembered
    from webcrawl.middlewares.robotstxt import ForbiddenByRobotsTxt

    mw = middleware
    monkeypatch.setattr(
        failpath.threads, "deferToThread", lambda func, *args: defer.succeed(func(*args))
    )
    keys = CrawlKeys("web")
    frontier = SimpleNamespace(server=redis_client, keys=keys)
    crawled = []
    engine = SimpleNamespace(crawl=lambda request: crawled.append(request.url))
    monkeypatch.setattr(mw, "crawler", SimpleNamespace(engine=engine, spider=None))
    lost, dead = site_of("http://lost.example/"), site_of("http://dead.example/")
    mw.store.failpath_add(dead, SITE, 5)  # dead in the store: its links stay
    for site, host in ((lost, "lost.example"), (dead, "dead.example")):
        links = [
            Remembered(1, f"http://{host}/a.html", True),
            Remembered(2, f"http://{host}/b.html", False),
        ]
        redis_client.zadd(keys.failpath_links_prefix + site, {x.member: 1 for x in links})
    asyncio.run(mw._sweep(frontier))
    assert crawled == ["http://lost.example/a.html"]
    assert redis_client.zrange(keys.failpath_links_prefix + lost, 0, -1) == [
        b"2 http://lost.example/b.html"
    ]
    assert redis_client.zcard(keys.failpath_links_prefix + dead) == 2

    for fresh in (True, False):  # rules fetched for the probe: the host answered; a copy: no

        async def forbidden(request, fresh=fresh):
            raise ForbiddenByRobotsTxt("Forbidden by robots.txt", fresh=fresh)

        engine.download_async = forbidden
        assert asyncio.run(mw._probe_one("http://dead.example/private/x.html")) == int(fresh)
