"""robots.txt holds for every request, even those waiting for the host's robots.txt."""

import pytest

STOCK = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"


def seeds_with_private_pages(demo):
    home = demo.seeds[0]
    private = sorted(u for u in demo.web.pages if u.startswith(home + "private/"))
    articles = sorted(u for u in demo.web.pages if u.startswith(home + "s0/"))[:6]
    return [home, *articles[:2], *private, *articles[2:]], private


@pytest.mark.e2e
@pytest.mark.parametrize("middleware", ["ours", "stock"])
def test_requests_waiting_for_robots_txt_are_checked(slow_demo, tmp_path, middleware, crawls):
    demo = slow_demo  # robots.txt takes 20 ms: the seeds queue up behind it
    seeds, private = seeds_with_private_pages(demo)
    settings = ["CONCURRENT_REQUESTS_PER_DOMAIN=16"]
    if middleware == "stock":  # the control run: Scrapy 2.19's own middleware
        settings.append(
            'DOWNLOADER_MIDDLEWARES={"webcrawl.middlewares.robotstxt.RobotsTxtMiddleware": null, '
            f'"{STOCK}": 100}}'
        )
    result = crawls.run(seeds, tmp_path / "data", *settings, "DEPTH_LIMIT=1")
    assert result.returncode == 0, result.stderr[-2000:]
    fetched_private = [u for u in demo.page_fetches() if u in private]
    if middleware == "ours":
        assert fetched_private == []
        assert f"'robotstxt/forbidden': {len(private)}" in result.stderr
    else:
        # Documents the upstream bug our middleware works around.  If this
        # starts failing, Scrapy fixed it: drop middlewares/robotstxt.py.
        assert fetched_private, "stock RobotsTxtMiddleware no longer leaks: remove our fix"


# -- RFC 9309 at a real server: the demo web's robots.txt faults ----------------------

import itertools  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

from webcrawl.demo import demo_server  # noqa: E402
from webcrawl.demo.web import DemoWeb  # noqa: E402
from webcrawl.store import open_store  # noqa: E402


def _stat(log: str, name: str) -> int:
    match = re.search(rf"'{re.escape(name)}': (\d+)", log)
    return int(match.group(1)) if match else 0


def _sent(log_path) -> list[dict]:
    return sorted(
        (json.loads(line) for line in log_path.read_text().splitlines()), key=lambda r: r["t"]
    )


@pytest.mark.e2e
def test_each_kind_of_robots_txt_is_read_as_rfc_9309_says(tmp_path, crawls):
    """100 MiB (first 500 KiB read: /private/ disallowed), 404, a redirect loop, a gzip
    bomb, an HTML error page in a 200: each host's robots.txt fetched once, no traceback."""
    cases = {0: "huge:0:100", 1: "404", 2: "loop", 3: "bomb:0:1", 4: "htmlerror"}
    log = tmp_path / "requests.jsonl"
    with demo_server(5, 20, log, faults=[f"{h}:/robots.txt:{k}" for h, k in cases.items()]) as info:
        result = crawls.run(info["seeds"], tmp_path / "data", "LOG_LEVEL=INFO")
    err = result.stderr
    assert result.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    sent = _sent(log)
    hosts = info["hosts"]
    for index, kind in cases.items():
        robots = [
            r["path"]
            for r in sent
            if r["host"] == hosts[index] and r["path"].split("?")[0] == "/robots.txt"
        ]
        # the loop: /robots.txt -> /robots.txt?loop -> /robots.txt, ended at the repeat
        loop = ["/robots.txt", "/robots.txt?loop"]
        assert robots == (loop if kind == "loop" else ["/robots.txt"]), (index, robots)
        private = [
            r for r in sent if r["host"] == hosts[index] and r["path"].startswith("/private/")
        ]
        if kind.startswith("huge"):  # its first line disallows /private/
            assert private == []
        else:  # unavailable or no rules: everything allowed
            assert private, index
    assert _stat(err, "robotstxt/truncated") == 1
    assert _stat(err, "robotstxt/forbidden") >= 1


@pytest.mark.e2e
def test_a_robots_txt_answering_503_keeps_the_host_waiting_then_crawled(tmp_path, crawls):
    log = tmp_path / "requests.jsonl"
    with demo_server(2, 20, log, faults=["0:/robots.txt:503@2.5"]) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        items = tmp_path / "items.jsonl"
        result = crawls.run(
            info["seeds"],
            tmp_path / "data",
            "LOG_LEVEL=INFO",
            "ROBOTSTXT_UNREACHABLE_WAIT=1.5",
            items=items,
        )
    err = result.stderr
    assert result.returncode == 0, err[-3000:]
    host = info["hosts"][0]
    sent = [r for r in _sent(log) if r["host"] == host]
    robots = [r["status"] for r in sent if r["path"] == "/robots.txt"]
    assert robots[0] == 503 and robots[-1] == 200 and len(robots) >= 2, robots
    first_ok = next(
        i for i, r in enumerate(sent) if r["path"] == "/robots.txt" and r["status"] == 200
    )
    assert all(r["path"] == "/robots.txt" for r in sent[:first_ok])  # nothing before it
    stored = {json.loads(line)["url"] for line in items.read_text().splitlines()}
    assert stored == set(web.reachable())  # then the host was crawled, nothing lost
    assert _stat(err, "robotstxt/deferred") >= 1
    assert "unreachable (HTTP 503): nothing of the host is fetched" in err


@pytest.mark.e2e
def test_a_robots_txt_that_stays_unreachable_gives_the_host_up_recorded(tmp_path, crawls):
    log = tmp_path / "requests.jsonl"
    with demo_server(2, 20, log, faults=["0:/robots.txt:500"]) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        result = crawls.run(
            info["seeds"],
            tmp_path / "data",
            "LOG_LEVEL=INFO",
            "ROBOTSTXT_UNREACHABLE_WAIT=0.5",
            "ROBOTSTXT_UNREACHABLE_TRIES=2",
        )
    err = result.stderr
    assert result.returncode == 0, err[-3000:]
    dead, alive = info["hosts"][:2]
    sent = _sent(log)
    assert [r["path"] for r in sent if r["host"] == dead] == ["/robots.txt"] * 2
    with open_store(f"sqlite:///{tmp_path / 'data' / 'webtable.sqlite3'}") as store:
        rows = {r["url"]: r for r in store.scan_pages()}
    seed = f"http://{dead}/"
    assert rows[seed]["kind"] == "failed"
    assert rows[seed]["error"].startswith("RobotsTxtUnreachable: robots.txt of http://")
    assert {u for u in web.reachable() if alive in u} <= set(rows)  # the other host: all
    given_up = [r for u, r in rows.items() if u.startswith(f"http://{dead}/")]
    assert all(r["error"].startswith("RobotsTxtUnreachable") for r in given_up)
    assert _stat(err, "robotstxt/given_up") == len(given_up)  # the seed, and links to it


@pytest.mark.e2e
def test_two_workers_fetch_each_robots_txt_once_in_the_hosts_turn(
    slow_demo, redis_server, tmp_path, crawls
):
    """Once for the crawl, shared in Redis, and paced: the gap after it is the delay."""
    demo = slow_demo
    settings = (
        f"REDIS_URL={redis_server.url}",
        "FRONTIER_HOST_DELAY=0.4",
        "ADAPTIVE_DELAY_ENABLED=False",
        "DEPTH_LIMIT=2",
        "LOG_LEVEL=INFO",
    )
    workers = [
        crawls.start(demo.seeds, tmp_path / "data", *settings, items=tmp_path / f"{name}.jsonl")
        for name in ("a", "b")
    ]
    logs = [crawls.finish(w) for w in workers]
    sent = sorted(demo.requests(), key=lambda r: r["t"])
    for host in demo.info["hosts"][:4]:
        mine = [r for r in sent if r["host"] == host]
        assert [r["path"] for r in mine].count("/robots.txt") == 1, host
        assert mine[0]["path"] == "/robots.txt"
        gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(mine)]
        assert min(gaps) >= 0.4, (host, sorted(gaps)[:3])
    # a host both workers fetched pages of: one of them read the rules the other fetched
    # (a worker that starts late on a loaded machine may find the crawl done, or have no
    # host in common with the other)
    crawled = [
        {
            urlsplit(json.loads(line)["url"]).netloc
            for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()
        }
        for name in ("a", "b")
    ]
    if crawled[0] & crawled[1]:
        assert sum(_stat(log, "robotstxt/shared") for log in logs) >= 1


# -- the fetch lock (in process, a real Redis) -------------------------------------------

import asyncio  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from scrapy import Request  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from webcrawl.frontier.keys import CrawlKeys  # noqa: E402
from webcrawl.frontier.lock import RedisLock  # noqa: E402
from webcrawl.middlewares.robotstxt import RobotsTxtMiddleware  # noqa: E402
from webcrawl.safety import robots as rules  # noqa: E402

ORIGIN = "http://lock.example:80"


# the robots.txt middleware's settings, as the defaults have them
ROBOTS = {
    "ROBOTSTXT_OBEY": True,
    "DOWNLOAD_TIMEOUT": 30,
    "ADAPTIVE_DELAY_MAX": 60.0,
    "ROBOTSTXT_UNREACHABLE_WAIT": 300.0,
    "ROBOTSTXT_UNREACHABLE_TRIES": 3,
}


def _worker(redis_client, monkeypatch, fetch):
    """A robots.txt middleware of worker ``a`` on ``redis_client``, fetching with ``fetch``."""
    crawler = get_crawler(settings_dict=ROBOTS)
    mw = RobotsTxtMiddleware(crawler)
    frontier = SimpleNamespace(server=redis_client, keys=CrawlKeys("web"), worker_id="worker-a")
    monkeypatch.setattr(mw, "_frontier", lambda: frontier)
    monkeypatch.setattr(mw, "_fetch", fetch)
    return mw


def test_the_robots_lock_is_held_during_the_fetch_and_let_go_by_its_holder(
    redis_client, monkeypatch
):
    lock = CrawlKeys("web").robots_lock(ORIGIN)
    seen = []

    async def fetch(origin, previous, request):
        seen.append(redis_client.get(lock).decode())
        return rules.unavailable("test", time.time())

    mw = _worker(redis_client, monkeypatch, fetch)
    asyncio.run(mw._fetch_once(ORIGIN, None, Request(ORIGIN + "/")))
    assert len(seen) == 1 and seen[0].startswith("worker-a:")  # <token>|<deadline>
    assert redis_client.get(lock) is None  # released
    assert rules.RobotsEntry.loads(redis_client.get(CrawlKeys("web").robots(ORIGIN)))


def test_a_robots_lock_that_expired_and_was_retaken_stays_the_new_holders(
    redis_client, monkeypatch
):
    """The fetch outlasted the lock: another worker took it.  Ending the fetch must not
    free that worker's lock (an unconditional DEL did: a third would fetch it too)."""
    lock = CrawlKeys("web").robots_lock(ORIGIN)
    other = RedisLock(redis_client, lock, ttl=60, owner="worker-b")

    async def fetch(origin, previous, request):
        redis_client.delete(lock)  # a's lock expires...
        assert other.acquire()  # ...and b takes it
        return rules.unavailable("test", time.time())

    mw = _worker(redis_client, monkeypatch, fetch)
    asyncio.run(mw._fetch_once(ORIGIN, None, Request(ORIGIN + "/")))
    assert other.owned()  # b's lock stays
    assert redis_client.get(lock).decode().startswith(other.token + "|")


def test_a_long_robots_fetch_renews_its_lock_and_says_once_when_it_was_lost(redis_client, caplog):
    lock = RedisLock(redis_client, "webcrawl:web:robots_lock:x", ttl=1, owner="worker-a")
    assert lock.acquire()
    first = lock.deadline
    RobotsTxtMiddleware._renew(lock, "x")
    assert lock.deadline > first and redis_client.pttl(lock.key) > 900
    redis_client.delete(lock.key)  # expired
    with caplog.at_level(logging.WARNING, logger="webcrawl.middlewares.robotstxt"):
        RobotsTxtMiddleware._renew(lock, "x")
        RobotsTxtMiddleware._renew(lock, "x")
    assert [r.message for r in caplog.records].count(
        "The robots.txt lock of x expired during its fetch: another worker may fetch it too"
    ) == 1
    assert not lock.held and redis_client.get(lock.key) is None  # nothing recreated


def test_no_answer_is_told_from_an_answer_and_from_our_own_outage(redis_client, monkeypatch):
    """A robots.txt that gets no answer at all (no connection, none in time) is
    ``unanswered``: the failed-path filter makes its site dead.  A 5xx is an answer
    (RFC 9309's wait), and so is a failure while Redis was not answering (every Redis
    call then blocks the reactor, the download with it: the failure may be ours)."""
    from scrapy.exceptions import DownloadConnectionRefusedError, DownloadTimeoutError

    from webcrawl.frontier.redisconn import RoundTrips

    mw = _worker(redis_client, monkeypatch, None)
    url = ORIGIN + "/robots.txt"
    monkeypatch.setattr(RoundTrips, "last_error", 0.0)
    sent = time.monotonic()
    for error in (
        DownloadTimeoutError("took longer than 15 s"),
        DownloadConnectionRefusedError("refused"),
    ):
        assert mw._failed(url, ORIGIN, error, None, sent).unanswered
    assert not mw._failed(url, ORIGIN, ValueError("not a download error"), None, sent).unanswered
    monkeypatch.setattr(RoundTrips, "last_error", time.monotonic())  # Redis timed out since
    entry = mw._failed(url, ORIGIN, DownloadTimeoutError("took longer than 15 s"), None, sent)
    assert entry.state == rules.UNREACHABLE and not entry.unanswered


def test_sites_are_dropped_for_no_answer_only_where_the_failed_path_filter_records_them():
    from scrapy.settings import Settings
    from scrapy.utils.project import get_project_settings

    from webcrawl.addon import apply
    from webcrawl.middlewares.robotstxt import _failpath_on

    project = get_project_settings()
    assert apply(project)  # as a crawler does: the add-on's components and defaults
    assert _failpath_on(project)
    off = Settings(project.copy_to_dict())
    off.set("FAILPATH_ENABLED", False)
    assert not _failpath_on(off)
    removed = Settings(project.copy_to_dict())  # enabled, but its middleware taken out
    middlewares = project.getdict("DOWNLOADER_MIDDLEWARES")
    middlewares["webcrawl.middlewares.failpath.FailPathMiddleware"] = None
    removed.set("DOWNLOADER_MIDDLEWARES", middlewares)
    assert not _failpath_on(removed)
    # a disabled middleware is not imported (it may not be installed), as Scrapy does
    other = Settings(project.copy_to_dict())
    other.set(
        "DOWNLOADER_MIDDLEWARES",
        {"not_installed.Middleware": None, **project.getdict("DOWNLOADER_MIDDLEWARES")},
    )
    assert _failpath_on(other)


def test_a_silent_sites_requests_are_dropped_but_an_opted_out_one_waits(redis_client, monkeypatch):
    """With the failed-path filter on, a request to a site whose robots.txt got no
    answer is dropped (SiteUnanswered: the filter remembers it); one opted out of the
    filter (``meta["failpath"] = False``) is not the filter's to remember: it waits for
    the file, as RFC 9309 says (found by a review: it was dropped and lost)."""
    from webcrawl.middlewares.failpath import SiteUnanswered
    from webcrawl.middlewares.robotstxt import RobotsTxtWait

    crawler = get_crawler(
        settings_dict={
            **ROBOTS,
            "FAILPATH_ENABLED": True,
            "DOWNLOADER_MIDDLEWARES": {"webcrawl.middlewares.failpath.FailPathMiddleware": 95},
        }
    )
    mw = RobotsTxtMiddleware(crawler)
    requeued = []

    def requeue(request, wait, why):
        requeued.append(request.url)
        return True

    frontier = SimpleNamespace(
        server=redis_client, keys=CrawlKeys("web"), worker_id="a", requeue=requeue
    )
    monkeypatch.setattr(mw, "_frontier", lambda: frontier)
    silent = rules.unreachable("DNSLookupError: x", time.time(), None, 300.0, unanswered=True)
    redis_client.set(CrawlKeys("web").robots(ORIGIN), silent.dumps())
    with pytest.raises(SiteUnanswered):
        asyncio.run(mw.process_request(Request(ORIGIN + "/a")))
    with pytest.raises(RobotsTxtWait):
        asyncio.run(mw.process_request(Request(ORIGIN + "/b", meta={"failpath": False})))
    assert requeued == [ORIGIN + "/b"]


def test_a_refusal_says_whether_the_rules_were_fetched_for_the_request(redis_client, monkeypatch):
    """A failed-path re-probe counts a sample robots.txt forbids as an answer only when
    the rules were fetched for it: a copy (up to a day old) says nothing of the host now."""
    from webcrawl.middlewares.robotstxt import ForbiddenByRobotsTxt

    async def fetch(origin, previous, request):
        return rules.from_response(
            200, b"User-agent: *\nDisallow: /private/\n", time.time(), "webcrawl", None, 300.0
        )

    mw = _worker(redis_client, monkeypatch, fetch)
    outcomes = []
    for _ in range(2):
        with pytest.raises(ForbiddenByRobotsTxt) as refused:
            asyncio.run(mw.process_request(Request(ORIGIN + "/private/a")))
        outcomes.append(refused.value.fresh)
    assert outcomes == [True, False]  # fetched for the first; the second read the copy
