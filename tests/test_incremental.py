"""End to end: a continuous crawl of the changing demo web revisits what changes.

The demo web's pages change on a clock 7 200 times faster than real time
(a simulated hour is half a second); two continuous workers crawl it with
revisits bounded to 1 .. 40 real seconds.  Judged from the server's log
(which version each answer showed) and its ground truth.
"""

import itertools
import json
import signal
import sqlite3
import time
import urllib.request
from collections import defaultdict

import pytest

from tools.bench.incremental import judged_visits
from webcrawl.demo import demo_server
from webcrawl.demo.web import DemoWeb
from webcrawl.store import open_store
from webcrawl.urls.urlkey import url_to_key

pytestmark = pytest.mark.e2e

SPEED = 7200.0
# a continuous crawl whose revisits come every second or two, with the HEAD pre-check
PRECHECKED = (
    "WEBCRAWL_CONTINUOUS=True",
    "REVISIT_MIN_INTERVAL=1",
    "REVISIT_MAX_INTERVAL=2",
    "REVISIT_INITIAL_INTERVAL=1",
    "REVISIT_HEAD_PRECHECK=True",
)


def test_continuous_crawl_revisits_changed_pages_and_leaves_unchanged_ones_alone(
    tmp_path, redis_server, crawls
):
    log = tmp_path / "requests.jsonl"
    store_url = f"sqlite:///{tmp_path / 'webtable.sqlite3'}"
    settings = [
        "WEBCRAWL_CONTINUOUS=True",
        "REVISIT_MIN_INTERVAL=1",
        "REVISIT_MAX_INTERVAL=40",
        "REVISIT_INITIAL_INTERVAL=3",
        f"REDIS_URL={redis_server.url}",
        # revisits due in more than 5 s wait in the store, and move to Redis with
        # the heartbeats (every 0.5 s) as they come within 5 s
        "FRONTIER_REVISIT_HORIZON=5",
        f"STORE_URL={store_url}",
        "LOG_LEVEL=INFO",
        f"WEBCRAWL_CRAWL=incr-{time.monotonic_ns()}",
    ]
    with demo_server(2, 40, log, change_speed=SPEED) as info:
        procs = [
            crawls.start(
                info["seeds"],
                tmp_path / f"w{i}",
                *settings,
                f"LOG_FILE={tmp_path / f'w{i}.log'}",
                name=f"w{i}",
            )
            for i in range(2)
        ]
        try:
            time.sleep(30)
            truth = json.loads(
                urllib.request.urlopen(f"http://{info['hosts'][0]}/__truth__").read()
            )
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGINT)
            for proc in procs:
                proc.wait(60)
    fetches = defaultdict(list)  # url -> [(time, version, status)]
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if "v" in r and r["method"] == "GET":
            fetches[f"http://{r['host']}{r['path']}"].append((r["t"], r["v"], r["status"]))
    pages = truth["pages"]
    web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
    reachable = [u for u, _ in web.reachable().items() if u in pages]  # HTML, in scope
    crawled = [u for u in reachable if fetches.get(u)]
    assert len(crawled) == len(reachable), set(reachable) - set(crawled)
    with open_store(store_url) as store:
        rows = {u: store.get_page(url_to_key(u)) for u in crawled}

    # pages that changed were fetched again and their new versions seen
    caught = [u for u in crawled if len({v for _, v, s in fetches[u] if s == 200}) >= 2]
    assert len(caught) >= 10, len(caught)
    # fetches that saw a new version were recorded as changes (SimHash may miss the odd
    # small edit: a new version within 3 bits), and no fetch of an unchanged version
    # (noise only: a new timestamp and advert) was
    judged = [j for u in crawled for j in judged_visits(rows[u]["visits"], fetches[u])]
    real = [flag for changed, flag in judged if changed]
    assert len(real) >= 50 and sum(real) >= 0.98 * len(real), (sum(real), len(real))
    assert not [1 for changed, flag in judged if flag and not changed]
    # pages that never changed: revisited conditionally (304, no body) and seldom
    quiet = [u for u in crawled if not pages[u]["changes"]]
    assert quiet, "some pages must stay unchanged over the run"
    revisits = [f for u in quiet for f in fetches[u][1:]]
    assert revisits and all(status == 304 for _, _, status in revisits)
    busy = [u for u in crawled if len(pages[u]["changes"]) >= 10]
    if busy:
        quiet_mean = sum(len(fetches[u]) for u in quiet) / len(quiet)
        busy_mean = sum(len(fetches[u]) for u in busy) / len(busy)
        assert busy_mean > 2 * quiet_mean, (busy_mean, quiet_mean)
    # rows carry the revisit plan
    row = rows[crawled[0]]
    assert row["revisit_interval"] and row["next_visit"] and row["revisit_method"]
    stats = [
        (tmp_path / f"w{i}.log").read_text().split("Dumping Scrapy stats")[-1] for i in range(2)
    ]
    assert any("'revisit/beyond_horizon'" in s and "'revisit/within_horizon'" in s for s in stats)


def test_head_precheck_skips_the_get_of_unchanged_pages(tmp_path, redis_server, crawls):
    log = tmp_path / "requests.jsonl"
    settings = [
        *PRECHECKED,
        f"REDIS_URL={redis_server.url}",
        "LOG_LEVEL=INFO",
        "DEPTH_LIMIT=1",
        f"WEBCRAWL_CRAWL=head-{time.monotonic_ns()}",
    ]
    with demo_server(2, 20, log) as info:
        crawls.run_for(
            10, info["seeds"], tmp_path / "w", *settings, f"LOG_FILE={tmp_path / 'w.log'}"
        )
    by_url = defaultdict(list)
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if r["path"] != "/robots.txt" and r["status"] == 200:
            by_url[r["path"], r["host"]].append(r["method"])
    html = [methods for (path, _), methods in by_url.items() if path.endswith(("/", ".html"))]
    assert html
    # one GET each; every revisit was a HEAD whose answer matched the stored version
    assert all(methods.count("GET") == 1 for methods in html), html
    assert sum(methods.count("HEAD") for methods in html) >= len(html)
    stats = (tmp_path / "w.log").read_text()
    assert "'revisit/head_skipped'" in stats


def test_a_304_for_a_page_the_store_lost_fetches_it_again_and_never_blanks_it(
    tmp_path, redis_server, crawls
):
    """The store loses its pages while Redis still holds the revisit schedule: every
    revisit is conditional (If-None-Match), the server answers 304, and there is no
    content to keep.  No empty row may be written (its kept ETag would get a 304 forever): the page
    is fetched again without conditions."""
    log = tmp_path / "requests.jsonl"
    crawl = f"lost-{time.monotonic_ns()}"
    common = [
        f"REDIS_URL={redis_server.url}",
        f"WEBCRAWL_CRAWL={crawl}",
        "DEPTH_LIMIT=1",
        "LOG_LEVEL=INFO",
    ]
    with demo_server(2, 20, log) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        first = crawls.run(
            info["seeds"],
            tmp_path / "w",
            *common,
            "REVISIT_MIN_INTERVAL=1",
            "REVISIT_INITIAL_INTERVAL=1",
        )
        assert first.returncode == 0, first.stderr[-2000:]
        store_file = tmp_path / "w" / "webtable.sqlite3"
        with open_store(f"sqlite:///{store_file}") as store:
            before = {r["url"]: r for r in store.scan_pages()}
        db = sqlite3.connect(store_file)  # the pages are lost; the revisit schedule is
        with db:  # still in Redis (a new store would not be the crawl's: refused)
            db.execute("DELETE FROM webtable")
        db.close()
        time.sleep(1.5)  # every revisit is due
        fetched_before = len(log.read_text().splitlines())
        second = crawls.run(
            None,
            tmp_path / "w",
            *common,
            "REVISIT_MIN_INTERVAL=3600",
            "REVISIT_INITIAL_INTERVAL=3600",
        )
        assert second.returncode == 0, second.stderr[-2000:]
    html = [u for u, row in before.items() if row["kind"] == "html" and row["status"] == 200]
    assert len(html) >= 6 and all(before[u]["text"] for u in html)
    with open_store(f"sqlite:///{store_file}") as store:
        after = {r["url"]: r for r in store.scan_pages()}
    # every page is back in the store with its content, none as an empty 304 row
    assert [u for u in html if u not in after] == []
    blank = [u for u in html if not after[u]["text"] or not after[u]["simhash"]]
    assert blank == [], blank
    assert all(after[u]["text"] == before[u]["text"] for u in html if web.pages.get(u))
    # the server saw a conditional GET (304) and then an unconditional one (200) for each
    answers = defaultdict(list)
    for line in log.read_text().splitlines()[fetched_before:]:
        r = json.loads(line)
        if r["method"] == "GET" and r["path"] != "/robots.txt":
            answers[f"http://{r['host']}{r['path']}"].append(r["status"])
    assert all(answers[u] == [304, 200] for u in html), {u: answers[u] for u in html}
    assert "'change/refetched'" in second.stderr


def test_a_head_precheck_takes_the_hosts_turn_and_the_get_the_next(tmp_path, redis_server, crawls):
    """With REVISIT_HEAD_PRECHECK the HEAD is a request to the host like any other: it
    waits for the host's turn, and the GET that follows it waits for the next one."""
    log = tmp_path / "requests.jsonl"
    settings = [
        *PRECHECKED,
        "FRONTIER_HOST_DELAY=0.3",
        "ADAPTIVE_DELAY_ENABLED=False",
        f"REDIS_URL={redis_server.url}",
        "LOG_LEVEL=INFO",
        "DEPTH_LIMIT=1",
        f"WEBCRAWL_CRAWL=headturn-{time.monotonic_ns()}",
    ]
    # Every page changes within the run: all of them periodic (an hour, a day or a week of
    # simulated time), and a simulated week is 8.4 s here. (With the Poisson pages of the
    # default model the 4 pages of this crawl sometimes did not change in 15 s at all.)
    with demo_server(1, 12, log, change_speed=10 * SPEED, periodic_share=1.0) as info:
        crawls.run_for(
            15, info["seeds"], tmp_path / "w", *settings, f"LOG_FILE={tmp_path / 'w.log'}"
        )
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    sent = sorted((r for r in sent if r["path"] != "/robots.txt"), key=lambda r: r["t"])
    # a HEAD that found a change is followed by the GET of its page, before the page's next HEAD
    fetched_after_head = set()
    for i, r in enumerate(sent):
        if r["method"] == "HEAD":
            for later in sent[i + 1 :]:
                if later["path"] == r["path"]:
                    if later["method"] == "GET":
                        fetched_after_head.add(r["path"])
                    break
    assert fetched_after_head, "a revisit found a change and was fetched after its HEAD"
    gaps = [(b["t"] - a["t"], a["method"], b["method"]) for a, b in itertools.pairwise(sent)]
    assert min(gap for gap, _, _ in gaps) >= 0.3, sorted(gaps)[:5]
